# The training encoding where new data meets it: `like = `, saved files, a fit's
# own, image folders, and validation data given to gpu_fit().

# The encoding of `like`: a gpu_dataset(), a gpukeras_fit, a model from
# gpu_load(), or an encoding.
encoding_of <- function(like, arg = "like", call = caller_env()) {
  encoding <- if (inherits(like, "gpukeras_encoding")) {
    like
  } else if (inherits(like, "gpukeras_dataset")) {
    attr(like, "gpukeras")$encoding
  } else if (inherits(like, c("gpukeras_fit", "gpukeras_model"))) {
    like$encoding
  } else if (is.list(like) && identical(names(like), c("train", "validation")) &&
    inherits(like$train, "gpukeras_dataset")) {
    attr(like$train, "gpukeras")$encoding
  } else {
    abort_bad_argument(
      sprintf("`%s` must be a gpu_dataset(), a gpu_fit() result or a gpu_load() model, not %s.", arg, describe(like)),
      call = call
    )
  }
  if (is.null(encoding)) {
    abort_bad_argument(c(
      sprintf("`%s` has no record of how its data was encoded.", arg),
      paste0(
        "Only R data given to gpu_dataset() or gpu_fit() (matrices, arrays, data.frames) is recorded; files and ",
        "NumPy arrays are not."
      )
    ), call = call)
  }
  encoding
}

# The encoding as JSON-ready lists: vectors that must stay arrays (levels, shapes, names)
# as lists, so that one level is not written as a string, and the order of the inputs
# and of a data.frame's columns (JSON objects have none).
encoding_to_plain <- function(encoding) {
  listed <- function(x) {
    if (!is.list(x)) return(x)
    x[] <- lapply(x, listed)
    arrays <- intersect(names(x), c("levels", "shape", "names", "image_size"))
    x[arrays] <- lapply(x[arrays], function(values) if (!is.null(values)) as.list(values))
    if (is.list(x$columns)) x$column_order <- as.list(names(x$columns))
    x
  }
  plain <- listed(unclass(encoding))
  plain$input_order <- as.list(names(plain$inputs))
  plain
}

# The plain form as reticulate reads it back: from JSON (encoding_to_plain()'s lists) or
# from the core that made it (made_encoding()).
encoding_from_plain <- function(plain) {
  strings <- function(x) as.character(unlist(x))
  part_from_plain <- function(part) {
    if (identical(part$type, "data.frame")) {
      columns <- lapply(part$columns, function(column) {
        if (!is.null(column$levels)) column$levels <- strings(column$levels)
        if (identical(column$type, "factor")) column$encoding <- column$encoding %||% "codes" # before one-hot: codes
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
      image_size = as.integer(unlist(plain$images$image_size)), color_mode = plain$images$color_mode,
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
        if (identical(column$type, "factor")) {
          rule <- if (column$encoding == "one_hot") "one-hot" else "codes"
          if (isTRUE(column$character)) sprintf("character, %d values, %s", length(column$levels), rule) else
            sprintf("factor(%d), %s", length(column$levels), rule)
        } else {
          column$type
        }
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
print.gpukeras_encoding <- function(x, ...) print_formatted(x, ...)

# The encoding of gpu_fit()'s training data (as fit_data() read it): R data's,
# recorded from it (once: kept as `data$recorded`); a gpu_dataset()'s own; NULL for NumPy
# arrays and other datasets.
fit_encoding <- function(data, call = caller_env()) {
  if (!is.null(data$recorded)) return(data$recorded)
  if (data$kind == "python") return(attr(data$dataset, "gpukeras")$encoding)
  parts <- if (is.list(data$x) && !is.data.frame(data$x)) data$x else list(data$x)
  # NumPy arrays alone are the model's inputs and outputs as they are: nothing to record
  if (is_numpy_part(data$y) || is.null(data$y) && any(vapply(parts, is_numpy_part, logical(1)))) return(NULL)
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
  if (is.null(encoding$images)) return(NULL)
  c(encoding$images, list(class_names = encoding$y$levels))
}

# A folder of new images may hold only classes the training folder had.
check_image_classes <- function(path, classes, call = caller_env()) {
  folders <- basename(list.dirs(path, recursive = FALSE))
  new <- setdiff(folders[!startsWith(folders, ".")], classes)
  if (length(new)) {
    gpukeras_abort(c(
      sprintf(
        "The image folder '%s' has class folders the training data did not have: %s.", path, quoted(new, Inf)
      ),
      sprintf("The model knows %s.", quoted(classes))
    ), "gpukeras_error_new_levels", column = "class", levels = new, call = call)
  }
}

# The fit report's line on the encoding new data will get: the factors' levels
# and the classes, or nothing when none was recorded.
format_fit_encoding <- function(encoding) {
  if (is.null(encoding)) return(NULL)
  vocabulary <- encoding_vocabulary(encoding)
  classes <- vocabulary$y
  vocabulary$y <- NULL
  shown <- utils::head(classes, 10)
  tables <- encoding_columns_lines(encoding)
  parts <- c(
    if (length(tables)) paste(tables, collapse = "; ") else
      if (length(vocabulary))
        sprintf("levels of %s", paste(sprintf("%s (%d)", names(vocabulary), lengths(vocabulary)), collapse = ", ")),
    if (length(classes)) {
      sprintf(
        "classes %s%s", paste(shown, collapse = ", "),
        if (length(classes) > 10) sprintf(", and %d more", length(classes) - 10) else ""
      )
    }
  )
  sprintf(
    "Encoding:       %s; predict(fit, newdata) and gpu_save() encode new data the same way",
    if (length(parts)) paste(parts, collapse = "; ") else "numbers, by column"
  )
}

# What each data.frame input becomes, "5 columns: income, region (4 levels,
# one-hot)" (its name first when there are several), each after `prefix`; none
# without a data.frame input.
encoding_columns_lines <- function(encoding, prefix = "") {
  frames <- Filter(function(part) identical(part$type, "data.frame"), encoding$inputs)
  if (!length(frames)) return(NULL)
  named <- if (isTRUE(encoding$several)) paste0(names(frames), ": ") else ""
  paste0(prefix, named, vapply(frames, describe_columns, character(1)))
}

# A model whose input takes another number of columns than a data.frame gives it: an
# error saying both, and where the data's come from (the factors' indicator columns).
# Only where both are known: an input of rank 2 with a known width, matched by name
# when there are several.
check_input_width <- function(model, encoding, call = caller_env()) {
  frames <- Filter(function(part) identical(part$type, "data.frame"), encoding$inputs)
  widths <- if (length(frames)) model_input_widths(model)
  if (!length(widths)) return(invisible())
  if (!isTRUE(encoding$several)) {
    if (length(widths) != 1L) return(invisible())
    names(widths) <- "x"
  }
  for (name in intersect(names(frames), names(widths))) {
    given <- part_width(frames[[name]])
    wanted <- widths[[name]]
    if (!is.na(wanted) && given != wanted) {
      one_hot <- any(vapply(
        frames[[name]]$columns,
        function(column) identical(column$encoding, "one_hot"), logical(1)
      ))
      abort_bad_data(c(
        sprintf(
          "The model's input%s takes rows of %d column(s), but `%s` gives %s.",
          if (isTRUE(encoding$several)) sprintf(" `%s`", name) else "", wanted, name, describe_columns(frames[[name]])
        ),
        sprintf("Build the model for them: keras$Input(shape = list(%dL)).", as.integer(given)),
        if (one_hot)
          "Or keep one integer code per factor (for an Embedding layer): gpu_dataset(x, y, factors = \"codes\")."
      ), call = call)
    }
  }
  invisible()
}

# A model with one output of rank 2 whose width is not the labels' number of `levels` (one
# unit for two levels is a sigmoid's): an error saying both, before training. `levels`
# NULL (labels that are not classes) or an output of another shape: nothing to check.
check_output_width <- function(model, levels, call = caller_env()) {
  if (length(levels) < 2L) return(invisible())
  outputs <- model_io(model)$outputs
  if (length(outputs) != 1L || length(outputs[[1]]$shape) != 2L) return(invisible())
  width <- outputs[[1]]$shape[[2]]
  n <- length(levels)
  if (is.na(width) || width == n || width == 1L && n == 2L) return(invisible())
  abort_bad_data(c(
    sprintf("The model's output has %d unit(s), but the labels `y` have %d levels: %s.", width, n, quoted(levels)),
    sprintf(
      "Build `model`'s output with one unit per level: keras$layers$Dense(%dL, activation = \"softmax\")%s.", n,
      if (n == 2L) " (or one unit, activation = \"sigmoid\")" else ""
    ),
    if (width < n) "A level no row has counts too: drop such levels first, y <- droplevels(y)."
  ), call = call)
}

# The widths of a model's inputs of rank 2 (NA where not known), named by input; none
# where the model has no symbolic inputs (a subclassed model not built): model_io().
model_input_widths <- function(model) {
  inputs <- Filter(function(input) length(input$shape) == 2L, model_io(model)$inputs)
  widths <- vapply(inputs, function(input) as.numeric(input$shape[[2]]), numeric(1))
  if (length(widths)) stats::setNames(widths, vapply(inputs, `[[`, character(1), "name"))
}

# A gpu_dataset() of other data made without `like = ` codes factors by its own
# levels: refused when its encoding is not the training data's (the core compares them:
# data/encoding.py same_encoding).
check_dataset_encoding <- function(dataset, encoding, arg, call = caller_env()) {
  given <- attr(dataset, "gpukeras")$encoding
  if (is.null(given) || is.null(encoding)) return(invisible())
  same <- core_call(
    "same_encoding", given = encoding_to_plain(given), wanted = encoding_to_plain(encoding), error_call = call
  )
  if (!same) {
    abort_bad_data(c(
      sprintf(paste0(
        "`%s` is a gpu_dataset() encoded otherwise than the training data (other columns, factor levels or image ",
        "settings)."
      ), arg),
      "Make it with gpu_dataset(..., like = <the training dataset or fit>), or give the R data itself."
    ), call = call)
  }
}

# gpu_fit()'s validation data (as fit_data() read it) encoded as its training
# data (`data`) is: R data gets the training encoding, a gpu_dataset() of other
# levels is refused.
with_training_encoding <- function(validation, data, call = caller_env()) {
  if (is.null(validation)) return(NULL)
  encoding <- fit_encoding(data, call)
  if (validation$kind == "python") {
    check_dataset_encoding(validation$dataset, encoding, "validation_data", call)
  } else {
    validation$encoding <- encoding
  }
  validation
}

# One row of the input a model was trained on, as the JSON records a client sends
# (gpu_serve()'s messages show it): each column by name with a value of its kind (a
# factor's first level, TRUE, 0), named columns of an array as 0, else a row of zeros.
example_request <- function(part) {
  record <- if (identical(part$type, "data.frame")) {
    lapply(part$columns, function(column) switch(column$type, factor = column$levels[[1]], logical = TRUE, 0))
  } else if (length(part$names)) {
    stats::setNames(as.list(rep(0, length(part$names))), part$names)
  }
  if (is.null(record)) return(as.character(jsonlite::toJSON(list(rep(0, prod(part$shape %||% 1L))))))
  as.character(jsonlite::toJSON(list(record), auto_unbox = TRUE))
}
