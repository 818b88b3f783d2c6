# How R data becomes numbers: the encoding, one object of the core (data/encoding.py: its
# plain form, the rules, levels matched by name), made once from R's account of the training
# data (made_encoding()), kept on the gpu_dataset() and the fit, saved by gpu_save(), and
# applied to new data, which R hands over column by column (frame_handover(), labels_handover()).

# The encoding of training data `x` (a part, or a named list of them) and `y`; `factors`
# as gpu_dataset() takes it (its form checked).
data_encoding <- function(x, y = NULL, na = "error", call = caller_env(), factors = "one_hot") {
  several <- is.list(x) && !is.data.frame(x)
  parts <- if (several) x else list(x = x)
  accounts <- Map(function(part, name) part_spec(part, name, call), parts, names(parts))
  made_encoding(accounts, several, if (!is.null(y)) label_spec(y), na, factors, call)
}

# The encoding the core makes (data/encoding.py data_encoding) from R's account of the
# training data: each input's part_spec(), the labels' label_spec(). The core decides each
# factor's rule by `factors`, refusing names of columns that are not factors.
made_encoding <- function(accounts, several, y, na, factors, call) {
  encoding_from_plain(core_call(
    "data_encoding",
    inputs = accounts, y = y, several = several, na = na,
    factors = if (is.null(names(factors))) factors[[1]] else as.list(factors), error_call = call
  ))
}

# What the core makes an input's spec from: a data.frame's columns by type ("numeric",
# "logical", "factor" or "character", else its class, which the core refuses) with a
# factor's levels (a character column's sorted values), an array's shape after the rows
# and column names.
part_spec <- function(part, name, call = caller_env()) {
  if (is_numpy_part(part)) return(numpy_part(part, name, NULL, call)$spec)
  if (is.data.frame(part)) {
    check_columns(part, name, call)
    return(list(type = "data.frame", columns = lapply(part, function(values) {
      type <- if (is.character(values)) "character" else if (is.factor(values)) "factor" else
        if (is.logical(values)) "logical" else if (is.numeric(values)) "numeric" else class(values)[1]
      list(type = type, levels = if (is.character(values)) levels(factor(values)) else levels(values))
    })))
  }
  dims <- dim(part)
  if (length(dims) == 2L) check_column_names(colnames(part), name, call)
  list(
    type = "array", shape = if (is.null(dims)) 1L else as.integer(dims[-1]),
    names = if (length(dims) == 2L) colnames(part)
  )
}

# A factor's levels as R gives them, those no row has too (warn_empty_levels() says so);
# a character vector's sorted values.
label_spec <- function(y) {
  if (is.factor(y)) return(list(type = "factor", levels = levels(y)))
  if (is.character(y) && is.null(dim(y))) return(list(type = "factor", levels = levels(factor(y))))
  list(type = "numeric")
}

# Training labels `y` (a factor) with levels no row has: a warning naming them, for they
# are kept (a unit of the model's output each, a column of predict()'s).
warn_empty_levels <- function(y) {
  if (!is.factor(y)) return(invisible())
  empty <- levels(y)[tabulate(y, nlevels(y)) == 0L]
  if (!length(empty)) return(invisible())
  gpukeras_warn(c(
    sprintf("The labels `y` have %d level(s) no row has: %s.", length(empty), quoted(empty)),
    sprintf(paste0(
      "They are kept, as R's factor has them: the model needs an output of %d units, one per level, and predict() ",
      "gives each level a column. Drop them first to train without them: y <- droplevels(y)."
    ), nlevels(y))
  ), "gpukeras_warning_empty_levels")
}

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

# The inputs of `x` as a named list, checked against what the encoding
# expects (one input or the same named inputs).
encoded_inputs <- function(x, encoding, call = caller_env()) {
  several <- is.list(x) && !is.data.frame(x)
  if (several && (length(x) == 0L || is.null(names(x)) || any(!nzchar(names(x))))) {
    abort_bad_data(
      "A list `x` (several model inputs) must be a named list of matrices, arrays or data.frames.",
      call = call
    )
  }
  parts <- if (several) x else list(x = x)
  if (is.null(encoding)) return(parts)
  wanted <- names(encoding$inputs)
  if (several != encoding$several || several && !setequal(names(parts), wanted)) {
    inputs <- function(parts, several) {
      if (several) sprintf("the inputs %s", paste0("`", names(parts), "`", collapse = ", ")) else "one input"
    }
    abort_bad_data(c(
      sprintf(
        "The new data has %s; the model was trained on %s.", inputs(parts, several),
        inputs(encoding$inputs, encoding$several)
      ),
      "Give the new data in the form the training data had."
    ), call = call)
  }
  parts[wanted]
}

# One input as R hands it over and its spec (derived from the part when `spec` is NULL,
# training data, else applied to it): an array as numbers (rows first), a data.frame as its
# training columns, which the core encodes (frame_handover()). `own`: `spec` was recorded
# from this part, so a NumPy array's shape is not asked again.
encode_part <- function(part, name, spec = NULL, call = caller_env(), own = FALSE) {
  if (is_numpy_part(part) && !identical(spec$type, "data.frame")) {
    return(if (own) list(x = part, spec = spec) else numpy_part(part, name, spec, call))
  }
  spec <- spec %||% part_spec(part, name, call)
  if (identical(spec$type, "data.frame")) {
    if (!is.data.frame(part)) {
      abort_bad_data(c(
        sprintf("`%s` must be a data.frame, as in training, not %s.", name, describe(part)),
        sprintf("Give the columns %s.", paste(names(spec$columns), collapse = ", "))
      ), call = call)
    }
    check_columns(part, name, call)
    return(list(x = select_columns(part, names(spec$columns), name, call), spec = spec))
  }
  if (is.data.frame(part) && length(spec$names)) {
    part <- as.matrix(select_columns(part, spec$names, name, call)) # a matrix with column names in training
  }
  array <- check_feature_array(part, name, call = call)
  if (length(dim(array)) == 2L) check_column_names(colnames(array), name, call)
  shape <- if (is.null(dim(array))) 1L else dim(array)[-1]
  if (length(spec$names) && length(colnames(array)) && !identical(colnames(array), spec$names)) {
    array <- array[, select_names(colnames(array), spec$names, name, call), drop = FALSE]
  } else {
    check_row_shape(shape, spec, name, call)
  }
  list(x = array, spec = spec)
}

# A part of R data that is a NumPy array already (gpu_as_numpy()), handed over as it is:
# the core checks that it holds numbers and gives its shape, which must be the training's.
numpy_part <- function(part, name, spec, call) {
  dims <- as.integer(unlist(core_call("numpy_shape", array = part, name = name, error_call = call)))
  shape <- if (length(dims) < 2L) 1L else dims[-1]
  spec <- spec %||% list(type = "array", shape = shape)
  check_row_shape(shape, spec, name, call)
  list(x = part, spec = spec)
}

check_row_shape <- function(shape, spec, name, call) {
  if (identical(as.integer(shape), as.integer(spec$shape))) return(invisible())
  abort_bad_data(c(
    sprintf(
      "Each row of `%s` has shape (%s); the model was trained on rows of shape (%s).", name,
      paste(shape, collapse = ", "), paste(spec$shape, collapse = ", ")
    ),
    "Give the new data with the training data's columns (and image size)."
  ), call = call)
}

select_columns <- function(df, wanted, name, call) df[select_names(names(df), wanted, name, call)]

select_names <- function(have, wanted, name, call) {
  missing <- setdiff(wanted, have)
  if (length(missing)) {
    abort_bad_data(c(
      sprintf("`%s` lacks column(s) the model was trained on: %s.", name, paste(missing, collapse = ", ")),
      "Give every training column, by name (their order and any other columns do not matter)."
    ), call = call)
  }
  wanted
}

# A data.frame part (its training columns) as the core's encoder takes it (data/encoding.py,
# which makes the model's float32 matrix and raises for unseen levels, wrong types and NA):
# each column once, a number column as doubles, a factor (a character column as the factor
# of its values) as its integer codes and levels.
frame_handover <- function(df, name, spec, unknown = "error") {
  columns <- lapply(df[names(spec$columns)], function(values) {
    given <- list(class = class(values)[1], typeof = typeof(values), appearance = is.character(values))
    if (is.character(values)) values <- factor(values)
    number <- is.numeric(values) || is.logical(values) # else of a type the core refuses
    if (!is.factor(values)) return(c(list(values = if (number) array(as.double(values))), given))
    c(list(values = array(as.integer(values)), levels = as.list(levels(values))), given)
  })
  list(gpukeras_frame = list(name = name, spec = spec$columns, unknown = unknown, columns = columns))
}

# Factor (or character) labels as the core takes them (data/encoding.py label_codes): R's
# codes and levels, and the training `levels` the core matches them to by name.
labels_handover <- function(y, levels) {
  appearance <- is.character(y)
  if (appearance) y <- factor(y)
  list(gpukeras_labels = list(
    values = array(as.integer(y)), levels = as.list(levels(y)), training = as.list(levels), appearance = appearance
  ))
}

# Labels checked against their spec (the encoding's, when given) and the spec: numbers, or
# a factor or character vector whose values the core matches to the levels by name
# (labels_handover()).
encode_labels <- function(y, spec = NULL, call = caller_env()) {
  if (is.data.frame(y)) y <- as.matrix(y)
  if (is.character(y) && is.null(dim(y)) && is.null(spec)) y <- factor(y)
  spec <- spec %||% label_spec(y)
  if (identical(spec$type, "factor")) {
    if (!(is.factor(y) || is.character(y) && is.null(dim(y)))) {
      abort_bad_data(
        sprintf("`y` must be a factor or character vector, as in training, not %s.", describe(y)),
        call = call
      )
    }
    return(list(y = y, spec = spec))
  }
  if (!(is.numeric(y) || is.logical(y))) {
    abort_bad_data(
      sprintf("`y` must be a numeric, logical, factor or character vector (or a numeric matrix), not %s.", describe(y)),
      call = call
    )
  }
  if (is.logical(y)) storage.mode(y) <- "double"
  list(y = y, spec = spec)
}
