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

# The encoding of `like`: a gpu_dataset(), a gpukeras_fit, a model from
# gpu_load(), or an encoding.
encoding_of <- function(like, arg = "like", call = caller_env()) {
  encoding <- if (inherits(like, "gpukeras_encoding")) {
    like
  } else if (inherits(like, "gpukeras_dataset")) {
    attr(like, "gpukeras")$encoding
  } else if (inherits(like, c("gpukeras_fit", "gpukeras_model"))) {
    like$encoding
  } else if (is.list(like) && identical(names(like), c("train", "validation")) && inherits(like$train, "gpukeras_dataset")) {
    attr(like$train, "gpukeras")$encoding
  } else {
    gpukeras_abort(
      sprintf("`%s` must be a gpu_dataset(), a gpu_fit() result or a gpu_load() model, not %s.", arg, describe(like)),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
  if (is.null(encoding)) {
    gpukeras_abort(
      c(
        sprintf("`%s` has no record of how its data was encoded.", arg),
        "Only R data given to gpu_dataset() or gpu_fit() (matrices, arrays, data.frames) is recorded; files and NumPy arrays are not."
      ),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
  encoding
}

# The encoding as JSON-ready lists: vectors that must stay arrays (levels,
# shapes, names) as lists, so that one level is not written as a string.
encoding_to_plain <- function(encoding) {
  plain_part <- function(part) {
    if (identical(part$type, "data.frame")) {
      part$columns <- lapply(part$columns, function(column) {
        if (!is.null(column$levels)) column$levels <- as.list(column$levels)
        column
      })
      part$column_order <- as.list(names(part$columns))
    } else {
      part$shape <- as.list(part$shape)
      if (!is.null(part$names)) part$names <- as.list(part$names)
    }
    part
  }
  plain <- unclass(encoding)
  plain$inputs <- lapply(plain$inputs, plain_part)
  plain$input_order <- as.list(names(plain$inputs))
  if (!is.null(plain$y$levels)) plain$y$levels <- as.list(plain$y$levels)
  if (!is.null(plain$images)) plain$images$image_size <- as.list(plain$images$image_size)
  plain
}

# encoding_to_plain()'s lists as reticulate reads them back from JSON.
encoding_from_plain <- function(plain) {
  strings <- function(x) as.character(unlist(x))
  part_from_plain <- function(part) {
    if (identical(part$type, "data.frame")) {
      columns <- lapply(part$columns, function(column) {
        if (!is.null(column$levels)) column$levels <- strings(column$levels)
        column
      })
      return(list(type = "data.frame", columns = columns[strings(part$column_order)]))
    }
    list(type = "array", shape = as.integer(unlist(part$shape)), names = if (length(part$names)) strings(part$names))
  }
  inputs <- lapply(plain$inputs, part_from_plain)[strings(plain$input_order)]
  y <- plain$y
  if (!is.null(y$levels)) y$levels <- strings(y$levels)
  encoding <- new_encoding(inputs, isTRUE(plain$several), y, plain$na %||% "error")
  if (!is.null(plain$images)) {
    encoding$images <- list(
      image_size = as.integer(unlist(plain$images$image_size)),
      color_mode = plain$images$color_mode,
      rescale = if (!is.null(plain$images$rescale)) as.double(plain$images$rescale)
    )
  }
  encoding
}

#' @export
format.gpukeras_encoding <- function(x, ...) {
  part_line <- function(part, name) {
    if (identical(part$type, "data.frame")) {
      types <- vapply(part$columns, function(column) {
        if (identical(column$type, "factor")) sprintf("factor(%d)", length(column$levels)) else column$type
      }, character(1))
      return(sprintf("  %s: data.frame, %s", name, paste(sprintf("%s <%s>", names(types), types), collapse = ", ")))
    }
    sprintf("  %s: array, rows of shape (%s)", name, paste(part$shape, collapse = ", "))
  }
  c(
    "<gpukeras_encoding>",
    unlist(Map(part_line, x$inputs, names(x$inputs))),
    if (identical(x$y$type, "factor")) sprintf("  y: factor, levels %s", paste(x$y$levels, collapse = ", ")),
    if (identical(x$y$type, "numeric")) "  y: numeric",
    if (!is.null(x$images)) {
      sprintf(
        "  images: %d x %d, %s, pixels in [0, %s]", x$images$image_size[1], x$images$image_size[2],
        x$images$color_mode, format(255 * (x$images$rescale %||% 1), digits = 4)
      )
    },
    sprintf("  NA rule in training: %s", x$na)
  )
}

#' @export
print.gpukeras_encoding <- function(x, ...) {
  writeLines(format(x, ...))
  invisible(x)
}

# The encoding of gpu_fit()'s training data (as fit_data() read it): R data's,
# recorded from it; a gpu_dataset()'s own; NULL for NumPy arrays and other datasets.
fit_encoding <- function(data, call = caller_env()) {
  if (data$kind == "python") {
    return(attr(data$dataset, "gpukeras")$encoding)
  }
  parts <- if (is.list(data$x) && !is.data.frame(data$x)) data$x else list(data$x)
  if (any(vapply(parts, inherits, logical(1), "python.builtin.object"))) {
    return(NULL)
  }
  data_encoding(data$x, data$y, "error", call)
}

# An image folder's encoding: the images' shape, the class names as the label
# levels, and how the pixels were read (image_size, color_mode, rescale), so
# that a folder of new images is read and labelled the same way.
image_info <- function(info) {
  classes <- as.character(unlist(info$class_names))
  info$class_names <- classes
  info$vocabulary <- list(y = classes)
  size <- as.integer(unlist(info$image_size))
  encoding <- new_encoding(
    list(x = list(type = "array", shape = c(size, as.integer(info$channels)), names = NULL)),
    FALSE, list(type = "factor", levels = classes), "error"
  )
  encoding$images <- list(image_size = size, color_mode = info$color_mode, rescale = info$rescale)
  info$encoding <- encoding
  info
}

# The image settings and classes of an encoding, or NULL for R data.
like_images <- function(encoding) {
  if (is.null(encoding$images)) {
    return(NULL)
  }
  c(encoding$images, list(class_names = encoding$y$levels))
}

# A folder of new images may hold only classes the training folder had.
check_image_classes <- function(path, classes, call = caller_env()) {
  folders <- basename(list.dirs(path, recursive = FALSE))
  new <- setdiff(folders[!startsWith(folders, ".")], classes)
  if (length(new)) {
    gpukeras_abort(
      c(
        sprintf("The image folder '%s' has class folders the training data did not have: %s.", path, paste0("\"", new, "\"", collapse = ", ")),
        sprintf("The model knows %s.", paste0("\"", utils::head(classes, 10), "\"", collapse = ", "))
      ),
      "gpukeras_error_new_levels",
      column = "class",
      levels = new,
      call = call
    )
  }
}

# The fit report's line on the encoding new data will get: the factors' levels
# and the classes, or nothing when none was recorded.
format_fit_encoding <- function(encoding) {
  if (is.null(encoding)) {
    return(NULL)
  }
  vocabulary <- encoding_vocabulary(encoding)
  classes <- vocabulary$y
  vocabulary$y <- NULL
  shown <- utils::head(classes, 10)
  parts <- c(
    if (length(vocabulary)) sprintf("levels of %s", paste(sprintf("%s (%d)", names(vocabulary), lengths(vocabulary)), collapse = ", ")),
    if (length(classes)) {
      sprintf("classes %s%s", paste(shown, collapse = ", "), if (length(classes) > 10) sprintf(", and %d more", length(classes) - 10) else "")
    }
  )
  sprintf(
    "Encoding:       %s; predict(fit, newdata) and gpu_save() encode new data the same way",
    if (length(parts)) paste(parts, collapse = "; ") else "numbers, by column"
  )
}

# A gpu_dataset() of other data made without `like = ` codes factors by its own
# levels: refused when its encoding is not the training data's.
check_dataset_encoding <- function(dataset, encoding, arg, call = caller_env()) {
  given <- attr(dataset, "gpukeras")$encoding
  if (is.null(given) || is.null(encoding)) {
    return(invisible())
  }
  vocabulary <- encoding_vocabulary(given)
  same <- length(given$inputs) == length(encoding$inputs) &&
    all(names(given$inputs) == names(encoding$inputs)) &&
    all(mapply(same_part, given$inputs, encoding$inputs)) &&
    identical(vocabulary, encoding_vocabulary(encoding)[names(vocabulary)]) &&
    identical(given$images, encoding$images)
  if (!same) {
    gpukeras_abort(
      c(
        sprintf("`%s` is a gpu_dataset() encoded otherwise than the training data (other columns, factor levels or image settings).", arg),
        "Make it with gpu_dataset(..., like = <the training dataset or fit>), or give the R data itself."
      ),
      "gpukeras_error_bad_data",
      call = call
    )
  }
}

# Whether two inputs' specs encode alike: column names count only where both have them.
same_part <- function(a, b) {
  if (!identical(a$type, b$type)) {
    return(FALSE)
  }
  if (identical(a$type, "data.frame")) {
    return(identical(a$columns, b$columns))
  }
  identical(as.integer(a$shape), as.integer(b$shape)) &&
    (is.null(a$names) || is.null(b$names) || identical(a$names, b$names))
}

# gpu_fit()'s validation data (as fit_data() read it) encoded as its training
# data (`data`) is: R data gets the training encoding, a gpu_dataset() of other
# levels is refused.
with_training_encoding <- function(validation, data, call = caller_env()) {
  if (is.null(validation)) {
    return(NULL)
  }
  encoding <- fit_encoding(data, call)
  if (validation$kind == "python") {
    check_dataset_encoding(validation$dataset, encoding, "validation_data", call)
  } else {
    validation$encoding <- encoding
  }
  validation
}
