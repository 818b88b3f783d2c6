#' Convert R data to a NumPy array Keras accepts
#'
#' An R vector crosses reticulate as a Python list, which Keras 3's `fit()`
#' rejects ("Unrecognized data type"); an R matrix or array is column-major.
#' `gpu_as_numpy()` makes one C-contiguous NumPy array of the given dtype,
#' keeping R's dimensions (so `x[i, j, k]` in R is `x[i - 1, j - 1, k - 1]` in
#' Python). It copies once.
#'
#' @param x A numeric or logical vector, matrix or array, or a factor (its
#'   integer codes minus one, so classes start at 0 as Keras expects).
#' @param dtype `"float32"` (default for numeric data), `"int32"` (default for
#'   factors and integers), or another NumPy dtype name.
#' @return A NumPy array (a reticulate Python object).
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   gpu_as_numpy(matrix(1:6, nrow = 2))
#' }
gpu_as_numpy <- function(x, dtype = NULL) {
  if (is.factor(x)) {
    x <- as.integer(x) - 1L
  }
  if (!(is.numeric(x) || is.logical(x)) || is.data.frame(x) || is.list(x)) {
    gpukeras_abort(
      c(
        sprintf("`x` must be a numeric vector, matrix or array, not %s.", describe(x)),
        "Convert character data to numbers (e.g. factor codes) first."
      ),
      "gpukeras_error_bad_data"
    )
  }
  if (length(x) == 0L) {
    gpukeras_abort("`x` is empty: there is nothing to convert.", "gpukeras_error_bad_data")
  }
  if (anyNA(x)) {
    first <- which(is.na(x))[1]
    gpukeras_abort(
      sprintf(
        "`x` has %d NA/NaN value(s), the first at position %d. Remove or impute them first.",
        sum(is.na(x)), first
      ),
      "gpukeras_error_bad_data"
    )
  }
  dtype <- dtype %||% if (is.integer(x)) "int32" else "float32"
  check_string(dtype)
  core()
  tryCatch(
    reticulate::np_array(x, dtype = dtype, order = "C"),
    error = function(e) {
      gpukeras_abort(
        c(
          sprintf("`x` could not be converted to NumPy dtype '%s': %s", dtype, trimws(conditionMessage(e))),
          "Use a NumPy dtype name such as \"float32\", \"int32\" or \"float16\"."
        ),
        "gpukeras_error_bad_argument"
      )
    }
  )
}
