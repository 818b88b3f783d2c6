# How R data became numbers: recorded once, when training data is converted,
# kept on the gpu_dataset() and the gpukeras_fit, saved beside the model by
# gpu_save(), and applied to new data (predict(), evaluate(), gpu_dataset(like
# = )), so that new data is encoded exactly as the training data was:
#
#   inputs  a named list, one entry per model input ("x" for a single one):
#           list(type = "data.frame", columns = list(<name> = list(type =
#           "numeric" | "logical" | "factor", levels = <for factors>))), or
#           list(type = "array", shape = <dims after the rows>, names = <colnames>)
#   several whether x was a named list of inputs
#   y       NULL (no labels), list(type = "factor", levels =) or list(type = "numeric")
#   na      the NA rule training used ("error" or "drop")
#   x_dtype the features' dtype in the core ("float32")
#   images  for an image folder: image_size, color_mode, rescale (see image_info())
#
# Factor levels are matched by name, never by code: a level's code is its
# position among the training levels. Character columns are factors whose
# levels are their sorted values in training.

new_encoding <- function(inputs, several, y, na) {
  structure(
    list(inputs = inputs, several = several, y = y, na = na, x_dtype = "float32"),
    class = "gpukeras_encoding"
  )
}

# The encoding of training data `x` (a part, or a named list of them) and `y`.
data_encoding <- function(x, y = NULL, na = "error", call = caller_env()) {
  several <- is.list(x) && !is.data.frame(x)
  parts <- if (several) x else list(x = x)
  inputs <- Map(function(part, name) part_spec(part, name, call), parts, names(parts))
  new_encoding(inputs, several, if (!is.null(y)) label_spec(y), na)
}

part_spec <- function(part, name, call = caller_env()) {
  if (is.data.frame(part)) {
    check_columns(part, name, call)
    return(list(type = "data.frame", columns = lapply(part, function(values) {
      if (is.character(values)) values <- factor(values)
      if (is.factor(values)) list(type = "factor", levels = levels(values)) else
        list(type = if (is.logical(values)) "logical" else "numeric")
    })))
  }
  dims <- dim(part)
  list(
    type = "array",
    shape = if (is.null(dims)) 1L else as.integer(dims[-1]),
    names = if (length(dims) == 2L) colnames(part)
  )
}

label_spec <- function(y) {
  if (is.factor(y) || is.character(y) && is.null(dim(y))) {
    return(list(type = "factor", levels = levels(factor(y))))
  }
  list(type = "numeric")
}

# The levels of each factor column (and of the labels, as `y`): what
# gpu_dataset() and gpu_fit() show as the vocabulary.
encoding_vocabulary <- function(encoding) {
  vocabulary <- list()
  for (part in encoding$inputs) {
    if (identical(part$type, "data.frame")) {
      factors <- Filter(function(column) identical(column$type, "factor"), part$columns)
      vocabulary[names(factors)] <- lapply(factors, `[[`, "levels")
    }
  }
  if (identical(encoding$y$type, "factor")) vocabulary$y <- encoding$y$levels
  vocabulary
}

check_columns <- function(df, name, call = caller_env()) {
  if (ncol(df) == 0L) {
    gpukeras_abort(sprintf("The data.frame `%s` has no columns.", name), "gpukeras_error_bad_data", call = call)
  }
  ok <- vapply(df, function(column) is.numeric(column) || is.logical(column) || is.factor(column) || is.character(column), logical(1))
  if (!all(ok)) {
    bad <- names(df)[!ok]
    types <- vapply(df[!ok], function(column) class(column)[1], character(1))
    gpukeras_abort(
      c(
        sprintf("Column(s) of unsupported type in `%s`: %s.", name, paste(sprintf("%s (%s)", bad, types), collapse = ", ")),
        "Use numeric, logical, factor or character columns (convert dates with as.numeric(), drop list columns)."
      ),
      "gpukeras_error_bad_data",
      call = call
    )
  }
}

# The inputs of `x` as a named list, checked against what the encoding
# expects (one input or the same named inputs).
encoded_inputs <- function(x, encoding, call = caller_env()) {
  several <- is.list(x) && !is.data.frame(x)
  if (several && (length(x) == 0L || is.null(names(x)) || any(!nzchar(names(x))))) {
    gpukeras_abort(
      "A list `x` (several model inputs) must be a named list of matrices, arrays or data.frames.",
      "gpukeras_error_bad_data",
      call = call
    )
  }
  parts <- if (several) x else list(x = x)
  if (is.null(encoding)) {
    return(parts)
  }
  wanted <- names(encoding$inputs)
  if (several != encoding$several || several && !setequal(names(parts), wanted)) {
    gpukeras_abort(
      c(
        sprintf("The new data has %s; the model was trained on %s.", describe_inputs(parts, several), describe_inputs(encoding$inputs, encoding$several)),
        "Give the new data in the form the training data had."
      ),
      "gpukeras_error_bad_data",
      call = call
    )
  }
  parts[wanted]
}

describe_inputs <- function(parts, several) {
  if (several) sprintf("the inputs %s", paste0("`", names(parts), "`", collapse = ", ")) else "one input"
}

# One input as numbers (a matrix or array, rows first) and its spec: derived
# from the part when `spec` is NULL (training data), else applied to it.
encode_part <- function(part, name, spec = NULL, unknown = "error", call = caller_env()) {
  spec <- spec %||% part_spec(part, name, call)
  if (identical(spec$type, "data.frame")) {
    if (!is.data.frame(part)) {
      gpukeras_abort(
        c(
          sprintf("`%s` must be a data.frame, as in training, not %s.", name, describe(part)),
          sprintf("Give the columns %s.", paste(names(spec$columns), collapse = ", "))
        ),
        "gpukeras_error_bad_data",
        call = call
      )
    }
    return(list(x = encode_data_frame(part, name, spec, unknown, call), spec = spec))
  }
  if (is.data.frame(part) && length(spec$names)) {
    part <- as.matrix(select_columns(part, spec$names, name, call)) # a matrix with column names in training
  }
  array <- check_feature_array(part, name, call = call)
  shape <- if (is.null(dim(array))) 1L else dim(array)[-1]
  if (length(spec$names) && length(colnames(array)) && !identical(colnames(array), spec$names)) {
    array <- array[, select_names(colnames(array), spec$names, name, call), drop = FALSE]
  } else if (!identical(as.integer(shape), as.integer(spec$shape))) {
    gpukeras_abort(
      c(
        sprintf("Each row of `%s` has shape (%s); the model was trained on rows of shape (%s).", name, paste(shape, collapse = ", "), paste(spec$shape, collapse = ", ")),
        "Give the new data with the training data's columns (and image size)."
      ),
      "gpukeras_error_bad_data",
      call = call
    )
  }
  list(x = array, spec = spec)
}

select_columns <- function(df, wanted, name, call) {
  df[select_names(names(df), wanted, name, call)]
}

select_names <- function(have, wanted, name, call) {
  missing <- setdiff(wanted, have)
  if (length(missing)) {
    gpukeras_abort(
      c(
        sprintf("`%s` lacks column(s) the model was trained on: %s.", name, paste(missing, collapse = ", ")),
        "Give every training column, by name (their order and any other columns do not matter)."
      ),
      "gpukeras_error_bad_data",
      call = call
    )
  }
  wanted
}

# A data.frame as a double matrix: the columns `spec` names, in its order,
# factor and character columns as the codes of its levels.
encode_data_frame <- function(df, name, spec, unknown = "error", call = caller_env()) {
  check_columns(df, name, call)
  df <- select_columns(df, names(spec$columns), name, call)
  for (column in names(spec$columns)) {
    df[[column]] <- encode_column(df[[column]], spec$columns[[column]], sprintf("%s$%s", name, column), unknown, call)
  }
  as.matrix(df)
}

encode_column <- function(values, spec, where, unknown, call) {
  if (!identical(spec$type, "factor")) {
    if (!(is.numeric(values) || is.logical(values))) {
      gpukeras_abort(
        c(
          sprintf("`%s` is %s; in training it was %s.", where, describe_type(values), spec$type),
          "Give it as numbers, as in training."
        ),
        "gpukeras_error_bad_data",
        call = call
      )
    }
    return(as.double(values))
  }
  if (!(is.factor(values) || is.character(values))) {
    gpukeras_abort(
      c(
        sprintf("`%s` is %s; in training it was a factor.", where, describe_type(values)),
        "Give it as a factor or character vector: its values are matched to the training levels by name."
      ),
      "gpukeras_error_bad_data",
      call = call
    )
  }
  as.double(level_codes(values, spec$levels, where, unknown, call))
}

describe_type <- function(values) {
  if (is.factor(values)) "a factor" else sprintf("%s (%s)", if (is.numeric(values)) "numeric" else "not numeric", class(values)[1])
}

# The 0-based codes of `values` among `levels`, matched by name; NA stays NA.
# A value not among them is an error naming it, or (unknown = "code") the
# reserved code length(levels).
level_codes <- function(values, levels, where, unknown = "error", call = caller_env()) {
  if (is.factor(values) && identical(levels(values), levels)) {
    return(as.integer(values) - 1L)
  }
  if (is.factor(values)) {
    # Matching the levels, then indexing, reads each value once.
    codes <- match(levels(values), levels)[as.integer(values)] - 1L
    new <- setdiff(levels(values)[tabulate(as.integer(values), nlevels(values)) > 0], levels)
  } else {
    codes <- match(values, levels) - 1L
    new <- unique(values[is.na(codes) & !is.na(values)])
  }
  if (length(new)) {
    if (unknown != "code") {
      gpukeras_abort(
        c(
          sprintf("`%s` has level(s) not seen in training: %s.", where, paste0("\"", utils::head(new, 10), "\"", collapse = ", ")),
          sprintf("The model knows %s.", paste0("\"", utils::head(levels, 10), "\"", collapse = ", ")),
          "Remove those rows, or give unknown = \"code\" to score them with the reserved code length(levels)."
        ),
        "gpukeras_error_new_levels",
        column = where,
        levels = new,
        call = call
      )
    }
    codes[!is.na(values) & is.na(codes)] <- length(levels)
  }
  codes
}

# Labels as numbers (factor levels as 0-based codes, in the encoding's levels
# when given) and their spec.
encode_labels <- function(y, spec = NULL, call = caller_env()) {
  if (is.data.frame(y)) y <- as.matrix(y)
  if (is.character(y) && is.null(dim(y)) && is.null(spec)) y <- factor(y)
  spec <- spec %||% label_spec(y)
  if (identical(spec$type, "factor")) {
    if (!(is.factor(y) || is.character(y) && is.null(dim(y)))) {
      gpukeras_abort(
        sprintf("`y` must be a factor or character vector, as in training, not %s.", describe(y)),
        "gpukeras_error_bad_data",
        call = call
      )
    }
    return(list(y = level_codes(y, spec$levels, "y", "error", call), spec = spec))
  }
  if (!(is.numeric(y) || is.logical(y))) {
    gpukeras_abort(
      sprintf("`y` must be a numeric, logical, factor or character vector (or a numeric matrix), not %s.", describe(y)),
      "gpukeras_error_bad_data",
      call = call
    )
  }
  if (is.logical(y)) storage.mode(y) <- "double"
  list(y = y, spec = spec)
}
