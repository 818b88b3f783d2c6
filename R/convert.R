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
#' @param ... Not used: an argument gpu_as_numpy() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return A NumPy array (a reticulate Python object).
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   gpu_as_numpy(matrix(1:6, nrow = 2))
#' }
gpu_as_numpy <- function(x, dtype = NULL, ...) {
  check_unknown_args("gpu_as_numpy")
  if (is.factor(x)) x <- as.integer(x) - 1L
  if (!(is.numeric(x) || is.logical(x)) || is.data.frame(x) || is.list(x)) {
    abort_bad_data(
      c(
        sprintf("`x` must be a numeric vector, matrix or array, not %s.", describe(x)),
        "Convert character data to numbers (e.g. factor codes) first."
      )
    )
  }
  if (length(x) == 0L) abort_bad_data("`x` is empty: there is nothing to convert.")
  if (anyNA(x)) {
    first <- which(is.na(x))[1]
    abort_bad_data(
      sprintf(
        "`x` has %d NA/NaN value(s), the first at position %d. Remove or impute them first.",
        sum(is.na(x)), first
      )
    )
  }
  dtype <- dtype %||% if (is.integer(x)) "int32" else "float32"
  check_string(dtype)
  core()
  call <- current_env()
  tryCatch(
    reticulate::np_array(x, dtype = dtype, order = "C"),
    error = function(e) {
      abort_bad_argument(c(
        sprintf("`x` could not be converted to NumPy dtype '%s': %s", dtype, trimws(conditionMessage(e))),
        "Use a NumPy dtype name such as \"float32\", \"int32\" or \"float16\"."
      ), call = call)
    }
  )
}

# R data for gpu_dataset() and the verbs that train: features (an array, or a
# named list of them) and labels, checked and NA rows handled, still as R arrays
# (a vector with a dim, which reticulate hands over as a NumPy view, not a list).
# The core makes the one copy (float32 features, `y_dtype` labels): to_numpy(),
# or the pipeline's own copy (arrays_pipeline()). With na = "error", the core
# checks double parts for NA in that copy (`check_missing`, see handover_call()):
# anyNA() here would read each once more (0.03-0.07 s for 60,000 x 784). Not
# before Python runs, though: bad data must not start it (gpu_setup() would
# then come too late), so R checks those parts itself until then. Factor and
# character columns are encoded as `encoding` says (the training data's, for
# new data; `unknown` for levels it lacks), or as recorded from `x` and `y`
# themselves by the core (factors by `factors`, see gpu_dataset()): the value's
# `encoding` (see encoding.R); by the core, a data.frame being handed over as its columns
# (frame_handover()), factor labels as their codes and levels (labels_handover()).
# `sample_weight`, one number per row, goes with the rows (an NA in it is an NA row).
# `recorded`: the encoding recorded from `x` and `y` themselves (gpu_fit()'s
# fit_encoding()), applied without checking them against it once more.
as_pipeline_data <- function(x, y, na, call = caller_env(), encoding = NULL, unknown = "error", na_fix = NULL,
                             sample_weight = NULL, factors = "one_hot", recorded = NULL) {
  own <- is.null(encoding) && !is.null(recorded)
  encoding <- encoding %||% recorded
  inputs <- encoded_inputs(x, encoding, call)
  encoded <- Map(
    function(part, name) encode_part(part, name, encoding$inputs[[name]], call, own), inputs, names(inputs)
  )
  features <- lapply(encoded, `[[`, "x")
  labels <- if (!is.null(y)) encode_labels(y, encoding$y, call = call)
  specs <- lapply(encoded, `[[`, "spec")
  several <- is.list(x) && !is.data.frame(x)
  # training data's encoding is the core's to make, from R's account of it (specs), once R's
  # own checks below have passed: bad data must not start Python
  make_encoding <- is.null(encoding)
  if (!make_encoding) encoding["y"] <- list(labels$spec) # new data: its labels, if any, as the training's
  weights <- check_sample_weight(sample_weight, labels, call = call)
  parts <- c(features, if (!is.null(labels)) list(y = labels$y), if (!is.null(weights)) list(sample_weight = weights))
  rows <- vapply(parts, count_rows, numeric(1))
  if (length(unique(rows)) != 1L) {
    abort_bad_data(c(
      sprintf(
        "%s must have the same number of rows, not %s.", if (is.null(weights)) "x and y" else "x, y and sample_weight",
        paste(sprintf("%s: %d", names(rows), rows), collapse = ", ")
      ),
      if (is.null(weights)) "Give one label per row of x." else "Give one label and one weight per row of x."
    ), call = call)
  }
  if (rows[[1]] == 0) abort_bad_data("The data has no rows: there is nothing to train on.", call = call)
  # A NumPy part (gpu_as_numpy()) is the core's to check, in its copy, whatever `na` says.
  numpy <- vapply(parts, is_numpy_part, logical(1))
  core_checks <- numpy | na == "error" & reticulate::py_available(initialize = FALSE) &
    vapply(parts, is.double, logical(1))
  # Infinite values cannot be dropped as NA are: refused whatever `na` says. The core checks
  # them in its copy; before Python runs, R does (see above).
  if (!reticulate::py_available(initialize = FALSE)) abort_not_finite(parts, call = call)
  dropped <- 0L
  if (any(vapply(parts[!core_checks], anyNA, logical(1)))) {
    missing <- missing_rows(parts[!numpy])
    if (na == "error") abort_missing(parts[!numpy], missing, fix = na_fix, call = call)
    dropped <- sum(missing)
    if (dropped == length(missing)) {
      abort_bad_data("Every row has an NA: nothing is left after na = \"drop\".", call = call)
    }
    if (any(numpy)) {
      abort_bad_data(c(
        sprintf("na = \"drop\" cannot drop rows of %s, a NumPy array.", paste0("`", names(parts)[numpy], "`")),
        "Drop those rows before gpu_as_numpy(), or give R data."
      ), call = call)
    }
    parts <- lapply(parts, take_rows, which(!missing))
  }
  factor_labels <- identical(labels$spec$type, "factor")
  if (factor_labels) parts$y <- labels_handover(parts$y, labels$spec$levels)
  parts <- lapply(parts, function(part) {
    if (is.null(dim(part)) && is.atomic(part)) dim(part) <- length(part)
    part
  })
  if (make_encoding) encoding <- made_encoding(specs, several, labels$spec, na, factors, call)
  frames <- names(features)[vapply(parts[names(features)], is.data.frame, logical(1))]
  parts[frames] <- Map(frame_handover, parts[frames], frames, encoding$inputs[frames], unknown)
  list(
    x = if (is.list(x) && !is.data.frame(x)) parts[names(features)] else parts$x, y = parts$y,
    sample_weight = parts$sample_weight,
    y_dtype = if (!is.null(labels)) if (factor_labels || is.integer(parts$y)) "int32" else "float32",
    check_missing = any(core_checks),
    encoding = encoding, dropped = dropped,
    kept = if (dropped > 0) which(!missing)
  )
}

# Which rows of `parts` have an NA in any part. anyNA() stops at the first NA
# and allocates nothing; the row-by-row scan (0.3 s against anyNA's 0.03 s on a
# 60,000 x 784 matrix) runs only on the parts that have one.
missing_rows <- function(parts) {
  parts <- column_parts(parts)
  has_na <- vapply(parts, anyNA, logical(1))
  Reduce(`|`, lapply(parts[has_na], row_has_na), rep(FALSE, count_rows(parts[[1]])))
}

# The error for NA in `parts` (rows from missing_rows()), naming the first rows
# and the columns; nothing when there is none. `fix` says what to do, for a
# function without an `na` argument (gpu_fit()). Its fields: `column`, the
# columns with NA as the message names them (x$region: a factor's indicator
# columns once), `rows`, the first 100 rows with one, and `n_rows`, how many.
abort_missing <- function(parts, missing = missing_rows(parts), fix = NULL, call = caller_env()) {
  if (!any(missing)) return(invisible())
  parts <- column_parts(parts)
  where <- unlist(Map(na_columns, parts, names(parts)), use.names = FALSE)
  abort_rows(
    "NA/NaN", missing, where, fix %||% "Impute or remove them, or pass na = \"drop\" to drop those rows.",
    "gpukeras_error_missing_values", call
  )
}

# The error for bad values (`what`) in the rows flagged in `rows`, in the columns `where`,
# with the fields `column`, `rows` (the first 100) and `n_rows`.
abort_rows <- function(what, rows, where, fix, class, call) {
  rows <- which(rows)
  gpukeras_abort(
    c(
      sprintf(
        "The data has %s in %d row(s) (first: %s), in %s.", what, length(rows),
        paste(utils::head(rows, 5), collapse = ", "), paste(utils::head(where, 10), collapse = ", ")
      ),
      fix
    ),
    c(class, "gpukeras_error_bad_data"),
    column = unname(where), rows = utils::head(rows, 100), n_rows = length(rows), call = call
  )
}

# Call `target` in the core with `data` (from as_pipeline_data(), or NumPy
# arrays) as x, y, y_dtype and check_missing (and sample_weight, where there are
# weights), and the arguments in `args`. When the core finds NA in a copy it
# checks, the error names the rows and columns as R's own check does (`na_fix`:
# see abort_missing()).
handover_call <- function(target, data, args = list(), na_fix = NULL, call = caller_env()) {
  force(data) # its own errors are not the core's (the handler below reads it)
  withCallingHandlers(
    do.call(core_call, c(list(target), handover_fields(data), args, list(error_call = call))),
    gpukeras_error_bad_data = function(e) abort_handover_missing(handover_arg(data, na_fix), call = call)
  )
}

# What the core's handover takes of `data` (array_source.handover()).
handover_fields <- function(data) {
  c(
    list(x = data$x, y = data$y, y_dtype = data$y_dtype, check_missing = isTRUE(data$check_missing)),
    if (!is.null(data$sample_weight)) list(sample_weight = data$sample_weight)
  )
}

# The R parts of handed-over `data` by name, as abort_missing() names them: a NumPy part's
# NA or Inf is named by the core's own error, which then stands.
data_parts <- function(data) {
  parts <- c(
    if (is.list(data$x) && !is_frame(data$x)) data$x else list(x = data$x), if (!is.null(data$y)) list(y = data$y),
    if (!is.null(data$sample_weight)) list(sample_weight = data$sample_weight)
  )
  Filter(Negate(is_numpy_part), parts)
}

# Whether a part of R data is a NumPy array already (gpu_as_numpy()): handed over as it is.
is_numpy_part <- function(part) inherits(part, "numpy.ndarray")

# `data` from as_pipeline_data() as an argument of any core verb: the core makes its one
# copy in that same call (array_source.received), so a verb that trains calls the core
# once. core_call() names the rows of NA the core finds in it (`na_fix`: see abort_missing()).
handover_arg <- function(data, na_fix = NULL) {
  structure(list(gpukeras_handover = handover_fields(data)), class = "gpukeras_handover", na_fix = na_fix)
}

# The error for NA the core found in a handover_arg(), as R's own check words it; nothing
# when the core checked none.
abort_handover_missing <- function(arg, call = caller_env()) {
  data <- arg$gpukeras_handover
  if (data$check_missing) abort_missing(data_parts(data), fix = attr(arg, "na_fix"), call = call)
  abort_not_finite(data_parts(data), call = call)
}

# The largest float32: a double beyond it becomes infinite in the float32 copy Keras reads.
float32_max <- 3.4028234663852886e38

# The error for Inf, -Inf or doubles beyond float32's range in `parts`, naming the first
# rows and the columns, with the fields of abort_missing()'s for NA; nothing when there is none.
# range() finds out without allocating; only data that has some is searched cell by cell.
abort_not_finite <- function(parts, call = caller_env()) {
  parts <- column_parts(parts)
  doubles <- Filter(function(part) {
    is.double(part) && length(part) && any(abs(suppressWarnings(range(part, na.rm = TRUE))) > float32_max) &&
      !all(is.na(part)) # range() of NA alone is c(Inf, -Inf)
  }, parts)
  if (!length(doubles)) return(invisible())
  bad <- lapply(doubles, function(part) !is.na(part) & abs(part) > float32_max)
  rows <- Reduce(`|`, Map(row_has, bad, doubles))
  abort_rows(
    "Inf, -Inf or values beyond float32's range (about 3.4e+38)", rows,
    unlist(Map(flagged_columns, bad, doubles, names(doubles))),
    "Training on them gives a NaN loss every epoch: replace or remove them, or rescale those columns.",
    "gpukeras_error_not_finite", call
  )
}

# `data` from as_pipeline_data() as the NumPy arrays the verbs that train take:
# list(x, y, sample_weight), made by the core in one copy each (array_source.handover).
to_numpy <- function(data, na_fix = NULL, call = caller_env()) {
  kept_arrays(handover_call("handover", data, na_fix = na_fix, call = call))
}

# The NumPy arrays in the core's HostArrays (array_source.py) as R keeps them:
# Python objects, which reticulate::py_get_attr() does not convert (the bridge
# would have turned them into R arrays, a copy back into R), and which stay
# unconverted on access, as gpu_as_numpy()'s do. A dict of inputs becomes a
# named list of arrays.
kept_arrays <- function(held) {
  get <- function(from, name, item = FALSE) {
    value <- if (item) reticulate::py_get_item(from, name) else reticulate::py_get_attr(from, name)
    reticulate::r_to_py(value, convert = FALSE)
  }
  x <- get(held, "x")
  inputs <- reticulate::py_to_r(get(held, "inputs"))
  if (length(inputs)) x <- stats::setNames(lapply(inputs, function(name) get(x, name, item = TRUE)), inputs)
  given <- function(name) {
    value <- get(held, name)
    if (!inherits(value, "python.builtin.NoneType")) value
  }
  list(x = x, y = given("y"), sample_weight = given("sample_weight"))
}

check_feature_array <- function(x, name, call = caller_env()) {
  if (is.character(x)) {
    abort_bad_data(c(
      sprintf("`%s` is a character %s: features must be numbers.", name, if (is.null(dim(x))) "vector" else "matrix"),
      paste0(
        "Pass a data.frame (as.data.frame(x)): its character columns become one-hot columns, one per value (integer ",
        "codes with gpu_dataset(factors = \"codes\")). Or convert numbers held as text with as.numeric()."
      )
    ), call = call)
  }
  if (!(is.numeric(x) || is.logical(x)) || is.object(x) && !is.matrix(x) && !is.array(x)) {
    abort_bad_data(
      sprintf("`%s` must be a numeric matrix, array, vector or data.frame, not %s.", name, describe(x)),
      call = call
    )
  }
  if (is.null(dim(x))) matrix(x, ncol = 1L) else x
}

# The rows of a part: a Python object's length (a NumPy array's first dimension).
count_rows <- function(x) if (inherits(x, "python.builtin.object")) reticulate::py_len(x) else NROW(x)

row_has_na <- function(x) row_has(is.na(x), x)

na_columns <- function(x, name) flagged_columns(is.na(x), x, name)

# Which rows of `x` have a cell flagged in `cells` (a logical array of x's shape).
row_has <- function(cells, x) if (length(dim(x)) < 2L) as.vector(cells) else rowSums(cells, dims = 1L) > 0

# The columns of `x` (named `name`) with a cell flagged in `cells`, as name$column: a
# data.frame's column once, though it became several (a factor's indicator columns).
flagged_columns <- function(cells, x, name) {
  if (is.null(dim(x)) || length(dim(x)) != 2L) return(if (any(cells)) name else character())
  columns <- colnames(x) %||% paste0("column ", seq_len(ncol(x)))
  flagged <- colSums(cells) > 0
  if (!any(flagged)) character() else unique(sprintf("%s$%s", name, columns[flagged]))
}

take_rows <- function(x, rows) {
  if (is.null(dim(x))) return(x[rows])
  blanks <- rep(list(rlang::missing_arg()), length(dim(x)) - 1L)
  do.call(`[`, c(list(x, rows), blanks, list(drop = FALSE)))
}
