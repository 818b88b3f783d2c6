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
  codes <- is.factor(x)
  if (codes) x <- as.integer(x)
  if (!(is.numeric(x) || is.logical(x)) || is.data.frame(x) || is.list(x)) {
    abort_bad_data(
      c(
        sprintf("`x` must be a numeric vector, matrix or array, not %s.", describe(x)),
        "Convert character data to numbers (e.g. factor codes) first."
      )
    )
  }
  if (length(x) == 0L) abort_bad_data("`x` is empty: there is nothing to convert.")
  dtype <- dtype %||% if (is.integer(x)) "int32" else "float32"
  check_string(dtype)
  # checked and copied by the core (data/bad_rows.py as_numpy): a logical as integers (R's NA, which a
  # NumPy bool would lose), a vector with a dim
  if (is.logical(x)) storage.mode(x) <- "integer"
  if (is.null(dim(x))) dim(x) <- length(x)
  core_call_python("as_numpy", values = x, dtype = dtype, codes = codes)
}

# R data for gpu_dataset() and the verbs that train: features (an array, or a
# named list of them) and labels, checked for their shapes, still as R arrays
# (a vector with a dim, which reticulate hands over as a NumPy view, not a list).
# The core makes the one copy (float32 features, `y_dtype` labels): to_numpy(),
# or the pipeline's own copy (arrays_pipeline()), and checks the rows in it (NA
# and non-finite values, its one check: data/bad_rows.py; `check_missing` says
# how to name them, `na_fix` what to advise). Factor and character columns are
# encoded as `encoding` says (the training data's, for new data; `unknown` for
# levels it lacks), or as recorded from `x` and `y` themselves by the core
# (factors by `factors`, see gpu_dataset()): the value's `encoding` (see
# encoding.R); by the core, a data.frame being handed over as its columns
# (frame_handover()), factor labels as their codes and levels (labels_handover()).
# `sample_weight`, one number per row, goes with the rows (an NA in it is an NA
# row). With na = "drop", the core drops the rows with NA as it takes them
# (bad_rows.dropped: a dataset's info counts them, predict() gives them as NA
# rows). `recorded`: the encoding recorded from `x` and `y`
# themselves (gpu_fit()'s fit_encoding()), applied without checking them
# against it once more.
as_pipeline_data <- function(x, y, na, call = caller_env(), encoding = NULL, unknown = "error", na_fix = NULL,
                             sample_weight = NULL, factors = "one_hot", recorded = NULL) {
  features <- data_parts(x, call)
  labels <- if (!is.null(y)) check_labels(y, call)
  weights <- check_sample_weight(sample_weight, labels, call = call)
  parts <- c(features, if (!is.null(labels)) list(y = labels), if (!is.null(weights)) list(sample_weight = weights))
  rows <- vapply(parts, count_rows, numeric(1))
  if (length(unique(rows)) != 1L) {
    given <- if (is.null(weights)) c("x and y", "") else c("x, y and sample_weight", " and one weight")
    counts <- paste(sprintf("%s: %d", names(rows), rows), collapse = ", ")
    abort_bad_data(c(
      sprintf("%s must have the same number of rows, not %s.", given[1], counts),
      sprintf("Give one label%s per row of x.", given[2])
    ), call = call)
  }
  if (rows[[1]] == 0) abort_bad_data("The data has no rows: there is nothing to train on.", call = call)
  own <- is.null(encoding) && !is.null(recorded)
  encoding <- if (own) recorded else data_encoding(x, labels, na, call, factors, encoding, features)
  # each part as the core takes it: a data.frame as its columns, factor labels as codes, a logical as integers
  # (R's NA a NumPy bool would lose), a vector with a dim
  if (identical(encoding$y$type, "factor")) parts$y <- labels_handover(parts$y, encoding$y$levels)
  frames <- names(features)[vapply(parts[names(features)], is.data.frame, logical(1))]
  parts[frames] <- Map(frame_handover, parts[frames], frames, encoding$inputs[frames], unknown)
  parts <- lapply(parts, function(part) {
    if (is.logical(part)) storage.mode(part) <- "integer"
    if (is.null(dim(part)) && is.atomic(part)) dim(part) <- length(part)
    part
  })
  # how the core names a matrix's columns (and puts them in training's `order`), what it advises for NA, and
  # whether it drops their rows (not those of NumPy arrays, which it refuses to drop)
  checks <- list(
    columns = Filter(length, lapply(parts, function(p) if (is.matrix(p)) colnames(p))), fix = na_fix, na = na,
    numpy = as.list(names(Filter(is_numpy_part, parts))), order = lapply(encoding$inputs, `[[`, "names")
  )
  # the labels copied as int32 where they are codes (factor labels, integers), else float32: the core's choice
  list(
    x = if (isTRUE(encoding$several)) parts[names(encoding$inputs)] else parts$x, y = parts$y,
    sample_weight = parts$sample_weight, check_missing = checks, encoding = encoding
  )
}

# Call `target` in the core with `data` (from as_pipeline_data(), or NumPy
# arrays) as x, y, y_dtype and check_missing (and sample_weight, where there are
# weights), and the arguments in `args`. The core names rows of NA or Inf in its copy.
handover_call <- function(target, data, args = list(), call = caller_env()) {
  do.call(core_call, c(list(target), handover_fields(data), args, list(error_call = call)))
}

# What the core's handover takes of `data` (array_source.handover()).
handover_fields <- function(data) {
  c(
    list(x = data$x, y = data$y, y_dtype = data$y_dtype, check_missing = data$check_missing %||% FALSE),
    if (!is.null(data$sample_weight)) list(sample_weight = data$sample_weight)
  )
}

# Whether a part of R data is a NumPy array already (gpu_as_numpy()): handed over as it is.
is_numpy_part <- function(part) inherits(part, "numpy.ndarray")

# `data` from as_pipeline_data() as an argument of any core verb: the core makes its one
# copy in that same call (array_source.received), so a verb that trains calls the core
# once.
handover_arg <- function(data) structure(list(gpukeras_handover = handover_fields(data)), class = "gpukeras_handover")

# `data` from as_pipeline_data() as the NumPy arrays the verbs that train take:
# list(x, y, sample_weight), made by the core in one copy each (array_source.handover).
to_numpy <- function(data, call = caller_env()) {
  kept_arrays(handover_call("handover", data, call = call))
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

# The inputs of `x` as a named list, each checked for what needs no Python: a data.frame's
# columns and their names, an array's type and column names (a NumPy array the core checks).
data_parts <- function(x, call = caller_env()) {
  several <- is.list(x) && !is.data.frame(x)
  if (several && (length(x) == 0L || is.null(names(x)) || any(!nzchar(names(x))))) {
    abort_bad_data(
      "A list `x` (several model inputs) must be a named list of matrices, arrays or data.frames.",
      call = call
    )
  }
  parts <- if (several) x else list(x = x)
  for (name in names(parts)) {
    part <- parts[[name]]
    if (is.data.frame(part)) check_columns(part, name, call)
    if (is.data.frame(part) || is_numpy_part(part)) next
    check_feature_array(part, name, call)
    if (length(dim(part)) == 2L) check_column_names(colnames(part), name, call)
  }
  parts
}

# Labels `y` checked for what needs no Python (the core checks them against training's):
# numbers (a logical as doubles), or a factor or character vector, a data.frame as a matrix.
check_labels <- function(y, call = caller_env()) {
  if (is.data.frame(y)) y <- as.matrix(y)
  if (!(is.numeric(y) || is.logical(y) || is.factor(y) || is.character(y) && is.null(dim(y)))) {
    abort_bad_data(
      sprintf("`y` must be a numeric, logical, factor or character vector (or a numeric matrix), not %s.", describe(y)),
      call = call
    )
  }
  if (is.logical(y)) storage.mode(y) <- "double"
  y
}

# A data.frame input: columns, each of its own, with distinct names (check_column_names()).
check_columns <- function(df, name, call = caller_env()) {
  if (ncol(df) == 0L) abort_bad_data(sprintf("The data.frame `%s` has no columns.", name), call = call)
  check_column_names(names(df), name, call)
  nested <- names(df)[vapply(df, function(column) !is.null(dim(column)), logical(1))]
  if (length(nested)) {
    abort_bad_data(c(
      sprintf("`%s` has matrix or data.frame column(s) inside it: %s.", name, paste(nested, collapse = ", ")),
      sprintf(paste0(
        "Give each as columns of their own (e.g. cbind(%1$s[setdiff(names(%1$s), \"%2$s\")], %1$s$%2$s)), or as a ",
        "named list of inputs."
      ), name, nested[1])
    ), call = call)
  }
}

# Columns are matched by name when new data comes (predict(), evaluate()): a name that
# two columns share, or an empty one, would train by position and predict by name.
check_column_names <- function(names, name, call = caller_env()) {
  if (is.null(names)) return(invisible())
  empty <- which(is.na(names) | !nzchar(names))
  shared <- unique(names[duplicated(names) & !is.na(names) & nzchar(names)])
  if (!length(empty) && !length(shared)) return(invisible())
  problems <- c(
    if (length(shared)) {
      sprintf("the name(s) %s are given to several columns (%s)", paste0("`", shared, "`", collapse = ", "),
              paste(vapply(shared, function(n) paste(which(names == n), collapse = " and "), ""), collapse = "; "))
    },
    if (length(empty)) sprintf("column(s) %s have no name", paste(empty, collapse = ", "))
  )
  abort_bad_data(c(
    sprintf("The columns of `%s` must have distinct names: %s.", name, paste(problems, collapse = "; ")),
    paste0(
      "New data is matched to them by name. Rename them, e.g. colnames(x) <- make.unique(colnames(x)) (cbind() of ",
      "two tables keeps both names)."
    )
  ), call = call)
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
