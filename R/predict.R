#' Predictions and scores for new data, encoded as the training data was
#'
#' `predict()` runs the trained model on new data; `evaluate()` computes its
#' compiled loss and metrics there. Both encode the new data exactly as
#' [gpu_fit()] encoded the training data (its recorded encoding, see
#' [gpu_dataset()]'s "Scoring new data"): the same columns, matched by name
#' (their order and any other columns do not matter), factor and character
#' values coded by the training levels matched by name (a level that is code
#' 2 in training is code 2 here, whatever levels the new data has), float32
#' features, and the training data's NA rule. The model then runs batch by
#' batch on the device it lives on (the GPU when there is one), as Keras'
#' `predict()` and `evaluate()` do.
#'
#' A model trained on NumPy arrays, or on a dataset not made by
#' [gpu_dataset()] from R data, has no recorded encoding: new data is then
#' converted as it is (numbers only).
#'
#' @param object A [gpu_fit()] result (its model is the trained one), or a
#'   model from [gpu_load()].
#' @param newdata New data in the training data's form: a data.frame, matrix
#'   or array (rows first), or a named list of them for several inputs; or a
#'   [gpu_dataset()] made `like = ` the training data (its batches as they are,
#'   made with `shuffle = FALSE` for `predict()`; labels in it are used by
#'   `evaluate()`), or NumPy arrays. For a model trained on an image folder,
#'   also: a folder of class sub-folders, read with `gpu_dataset(newdata, like
#'   = object, shuffle = FALSE)` (labelled, for `evaluate()`); a folder of
#'   images without labels, or a character vector of image paths, each read at
#'   the training image size, color mode and rescale, one row per file, named
#'   by its path (sorted by name for a folder, in the order given for paths);
#'   or an R array of images, scored as it is: its
#'   pixels must be in the training range, 0-255 times the folder's `rescale`
#'   (a `gpukeras_warning_pixel_range` warning says when they plainly are not).
#'   For a model fit on [gpu_text_data()]: a character vector of texts.
#' @param y For `evaluate()`: the labels of `newdata` (a factor is matched to
#'   the training labels' levels by name); `NULL` when `newdata` is a dataset
#'   that holds them.
#' @param batch_size Rows per batch.
#' @param type For `predict()`: `"raw"`, the model's outputs (a matrix with a
#'   row per row of `newdata`, columns named by the training labels' levels
#'   when there is one per level), or `"class"`, the most likely class per row
#'   (the largest output, or output > 0.5 for a single sigmoid output): a
#'   factor with the training labels' levels, or 0-based integer codes when
#'   the labels were numbers.
#' @param unknown What a factor level the training data did not have
#'   becomes: `"error"` stops with a `gpukeras_error_new_levels` error naming
#'   the column and the levels (its fields `column` and `levels` too);
#'   `"zero"`, for a one-hot factor (the default encoding), gives the row 0 in
#'   every indicator column of that factor; `"code"`, for a factor of integer
#'   codes (`gpu_dataset(factors = "codes")`), gives it the reserved code
#'   `length(levels)` (one past the training codes; a model then needs room
#'   for it, e.g. an embedding with `input_dim = length(levels) + 1`). A label
#'   level training did not have is always an error: the model has no class
#'   for it.
#' @param na Rows with NA: `"error"` names them; `"drop"` leaves them out
#'   (`predict()` gives them `NA`, so its rows still match `newdata`'s).
#'   `NULL` (the default) follows the training data's rule.
#' @param verbose Keras' progress display: `0` silent, `1` a progress bar.
#' @param file For `predict()`: `NULL` (the default) returns the predictions;
#'   a path writes them to that CSV file instead, batch by batch, so that
#'   they need never fit in memory (Keras' own `predict()` keeps them all).
#'   With a [gpu_dataset()] of CSV files or images as `newdata`, neither the
#'   data nor the predictions are ever held whole: such a dataset made with
#'   `cache = TRUE` (its default, in memory) is made again without its cache,
#'   which one pass does not need and which would hold every row (its files
#'   are then scanned once more: make it with `cache = FALSE` to skip that).
#'   Measured with the README's model on a CSV file of 1e5 and of 1e6 rows:
#'   the same peak memory (`bench/predict_file.R`). The file has a header and one line per row of
#'   `newdata`, in its order: a first column `row` with its row names (a
#'   data.frame's own) or `path` (image files scored without labels) where
#'   `predict()` would name the rows; then one column per output column,
#'   named by the training labels' levels for a classifier with one per level,
#'   else `prediction` (`prediction_1`, `prediction_2`, ... for several), each
#'   prefixed by the output's name for a model with several outputs; with
#'   `type = "class"` also a last column `class`. Numbers are written with 9
#'   significant digits (read back as the same float32); rows left out with
#'   `na = "drop"` are `NA`. The file is written under a temporary name in the
#'   same folder (`.<name>.tmp-<pid>-...`) and renamed to `file` only once
#'   every row is written: an error part way (a value that cannot be read in
#'   a later row, a batch the model refuses, an interrupt) removes it and
#'   leaves nothing under `file`.
#' @param overwrite With `file`: whether an existing file may be replaced. It
#'   is refused by default; with `TRUE` it is replaced in one rename at the
#'   end, so that a failed `predict()` leaves it as it was.
#' @param ... Not used: an argument these methods do not have (a misspelt
#'   `batchsize`) is an error that says which one was meant, never ignored.
#' @return `predict()`: a numeric matrix (or array; a list of them for a
#'   model with several outputs), or with `type = "class"` a factor or integer
#'   vector. With `file`: invisibly, a `gpukeras_predictions_file`, a list of
#'   `path` (the file's absolute path), `rows`, `columns` and `seconds` (spent
#'   reading the data, in the model, writing, which runs beside them, and
#'   waiting for the writer), which prints as a summary;
#'   `read.csv(result$path)` reads the predictions back. `evaluate()`: a named numeric vector, the loss and each metric.
#' @seealso [gpu_save()] and [gpu_load()] to score in a later R session.
#' @name predict.gpukeras_fit
#' @importFrom stats predict
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   cars <- data.frame(
#'     speed = c(4, 7, 8, 9, 10, 11, 12, 13, 14, 15),
#'     colour = c("red", "blue", "green", "red", "blue", "green", "red", "blue", "green", "red")
#'   )
#'   fast <- factor(cars$speed > 10)
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)), # speed, and colour's 3 indicator columns
#'     keras$layers$Dense(2L, activation = "softmax")
#'   ))
#'   model$compile(
#'     optimizer = "adam", loss = "sparse_categorical_crossentropy",
#'     metrics = list("accuracy")
#'   )
#'   fit <- gpu_fit(model, list(x = cars, y = fast), epochs = 2, verbose = 0, monitor = FALSE)
#'   # "red" is encoded as in training although the new data lacks "blue" and "green"
#'   new_cars <- data.frame(colour = c("red", "red"), speed = c(5, 20))
#'   print(predict(fit, new_cars))
#'   print(predict(fit, new_cars, type = "class"))
#'   print(evaluate(fit, new_cars, factor(c(FALSE, TRUE))))
#'   # Written to a file batch by batch, for data larger than memory
#'   written <- predict(fit, new_cars, type = "class", file = tempfile(fileext = ".csv"))
#'   print(written)
#'   print(read.csv(written$path, check.names = FALSE))
#' }
predict.gpukeras_fit <- function(object, newdata, batch_size = 32, type = c("raw", "class"),
                                 unknown = c("error", "zero", "code"), na = NULL, verbose = 0,
                                 file = NULL, overwrite = FALSE, ...) {
  call <- current_env()
  if (...length() > 0L) {
    abort_unused_args(
      rlang::names2(match.call(expand.dots = FALSE)$...), predict.gpukeras_fit, "predict.gpukeras_fit", "predict()",
      call = call
    )
  }
  if (missing(newdata)) abort_no_newdata(call)
  type <- check_choice(type[[1]], c("raw", "class"), "type", call = call)
  path <- check_predictions_file(file, overwrite, call)
  scoring <- scoring_data(object, newdata, NULL, batch_size, unknown, na, verbose, call)
  if (isTRUE(scoring$shuffled)) {
    abort_bad_argument(c(
      "`newdata` is a gpu_dataset() that shuffles its rows: the predictions would come in another order each time.",
      "Make it with shuffle = FALSE, or give the R data itself."
    ), call = call)
  }
  if (!is.null(path)) return(invisible(predict_to_file(scoring, path, overwrite, type, call)))
  predicted <- handover_call("predict", scoring$data, scoring$args, call = call)
  outputs <- if (is.list(predicted)) lapply(predicted, as_output, scoring) else as_output(predicted, scoring)
  if (type == "raw") return(outputs)
  if (is.list(outputs)) {
    abort_bad_argument("type = \"class\" is for a model with one output; this one has several.", call = call)
  }
  output_classes(outputs, object$encoding$y$levels, call)
}

#' @rdname predict.gpukeras_fit
#' @export
predict.gpukeras_model <- predict.gpukeras_fit

#' @rdname predict.gpukeras_fit
#' @details `evaluate` is gpukeras' own generic, as keras3 has one: when keras3
#'   is attached after gpukeras, its `evaluate()` masks this one, so gpukeras
#'   registers its methods with keras3's generic too (whenever keras3 is
#'   loaded), and this generic passes other objects (Keras models) on to
#'   keras3's when keras3 is loaded. `evaluate(fit, ...)` therefore works
#'   whichever package was attached last.
#' @export
evaluate <- function(object, ...) {
  UseMethod("evaluate")
}

#' @rdname predict.gpukeras_fit
#' @export
evaluate.default <- function(object, ...) {
  if (isNamespaceLoaded("keras3")) return(getExportedValue("keras3", "evaluate")(object, ...))
  abort_bad_argument(
    c(
      sprintf("evaluate() scores a gpu_fit() result or a gpu_load() model, not %s.", describe(object)),
      "For a Keras model, call model$evaluate(x, y), or keras3's evaluate() with keras3 loaded."
    )
  )
}

#' @rdname predict.gpukeras_fit
#' @export
evaluate.gpukeras_fit <- function(object, newdata, y = NULL, batch_size = 32,
                                  unknown = c("error", "zero", "code"), na = NULL, verbose = 0, ...) {
  call <- current_env()
  if (...length() > 0L) {
    abort_unused_args(
      rlang::names2(match.call(expand.dots = FALSE)$...), evaluate.gpukeras_fit, "predict.gpukeras_fit", "evaluate()",
      call = call
    )
  }
  if (missing(newdata)) abort_no_newdata(call)
  if (is.null(y) && !inherits(newdata, "python.builtin.object")) {
    abort_bad_argument("`y` is missing: evaluate() needs the labels of `newdata`.", call = call)
  }
  scoring <- scoring_data(object, newdata, y, batch_size, unknown, na, verbose, call)
  scores <- handover_call("evaluate", scoring$data, scoring$args, call = call)
  unlist(scores)
}

#' @rdname predict.gpukeras_fit
#' @export
evaluate.gpukeras_model <- evaluate.gpukeras_fit

# What the core's "predict" and "evaluate" take: the new data encoded (as
# handover_call() hands it over; with na = "drop", the core leaves out the rows
# with NA and gives NA rows for them) and their other arguments; with `rows`, the
# rows of R data (none for datasets and image files).
scoring_data <- function(object, newdata, y, batch_size, unknown, na, verbose, call) {
  model <- scoring_model(object, call)
  check_count(batch_size, call = call)
  unknown <- check_choice(unknown[[1]], c("error", "zero", "code"), "unknown", call = call)
  encoding <- object$encoding
  na <- if (is.null(na)) encoding$na %||% "error" else check_choice(na[[1]], c("error", "drop"), "na", call = call)
  if (!is.numeric(verbose) || length(verbose) != 1L || !verbose %in% 0:2) {
    abort_bad_argument(sprintf("`verbose` must be 0, 1 or 2, not %s.", describe(verbose)), call = call)
  }
  args <- list(model = model, batch_size = as.integer(batch_size), verbose = as.integer(verbose))
  if (is_text_encoding(encoding) && is.character(newdata)) {
    newdata <- text_dataset(newdata, y, batch_size, levels = encoding$y$levels, args = c("newdata", "y"), call = call)
    y <- NULL
  }
  files <- NULL
  if (is.character(newdata) && is.null(dim(newdata))) {
    if (is.null(encoding$images)) {
      abort_bad_argument(c(
        "`newdata` is a path, but the model was not trained on an image folder.",
        "Give the new data as the training data was given (R data, or a gpu_dataset())."
      ), call = call)
    }
    if (anyNA(newdata) || !length(newdata)) {
      abort_bad_argument("`newdata` must be image file paths or a folder, without NA.", call = call)
    }
    # the images of a flat folder (named folder/file) or the paths given; NULL for a folder of class
    # sub-folders, read labelled as the training folder was (for evaluate())
    files <- unlist(core_call("images_to_score", paths = as.list(newdata), error_call = call)$files)
    newdata <- if (is.null(files)) {
      gpu_dataset(newdata, batch_size = batch_size, shuffle = FALSE, like = encoding)
    } else {
      image_files_dataset(files, encoding$images, batch_size, call)
    }
  }
  # a NumPy array for a model trained on R data is R data's part (its shape checked), else Keras'
  if (inherits(newdata, "python.builtin.object") && !(is_numpy_part(newdata) && !is.null(encoding))) {
    check_dataset_encoding(newdata, encoding, "newdata", call)
    if (!is.null(y) && (inherits(newdata, "gpukeras_dataset") || !is.null(files))) {
      abort_bad_argument(
        "`y` is for R data: a dataset holds its own labels, and image files to score have none.",
        call = call
      )
    }
    data <- list(x = newdata, y = y, y_dtype = NULL, check_missing = FALSE)
    return(list(
      data = data, args = args, levels = encoding$y$levels, shuffled = is_shuffled(newdata), row_names = files
    ))
  }
  # without the training encoding (factors = NULL), the core refuses factor and character columns, whose
  # codes would be the new data's own
  data <- as_pipeline_data(newdata, y, na, call = call, encoding = encoding, unknown = unknown, factors = NULL)
  check_widths(model, data$encoding, call = call)
  list(
    data = data, args = args, levels = encoding$y$levels %||% data$encoding$y$levels,
    rows = count_rows(first_input(newdata)),
    row_names = if (is.data.frame(newdata) && .row_names_info(newdata) > 0) rownames(newdata)
  )
}

# A pipeline of unlabelled images read as the training folder's were (`images`: its
# image_size, color_mode and rescale), in the order given, for predict().
image_files_dataset <- function(files, images, batch_size, call = caller_env()) {
  options <- pipeline_options(batch_size, FALSE, NULL, FALSE, NULL, NULL, 0, FALSE, NULL, "auto", "auto", call = call)
  source <- list(
    files = as.list(files), image_size = as.list(as.integer(images$image_size)),
    color_mode = images$color_mode, rescale = images$rescale
  )
  made <- do.call(
    core_call, c(list("dataset_from_source", kind = "image_files", source = source), options, list(error_call = call))
  )
  made$dataset
}

# Whether a gpu_dataset() shuffles (its recipe says: the call for files, the
# options for R data); FALSE for other datasets, which cannot tell.
is_shuffled <- function(dataset) {
  recipe <- attr(dataset, "gpukeras_recipe")
  role <- attr(dataset, "gpukeras")$role
  !identical(role, "validation") && isTRUE(recipe$options$shuffle %||% recipe$shuffle)
}

abort_no_newdata <- function(call) abort_bad_argument("`newdata` is missing: give the new data to score.", call = call)

scoring_model <- function(object, call) {
  model <- object$model
  if (!inherits(model, "python.builtin.object")) {
    abort_bad_argument("This result holds no model to score with.", call = call)
  }
  if (reticulate::py_is_null_xptr(model)) {
    abort_bad_argument(c(
      "This result's model is gone: it was made in another R session (readRDS() keeps no Python objects).",
      "Save it with gpu_save(fit, \"model.keras\") and load it with gpu_load() in the new session."
    ), call = call)
  }
  model
}

# One output of the model as R returns it: rows for every row of the new data
# (the core's NA rows for those left out with na = "drop"), named by the row names and, for a
# classifier's one column per level, by the levels.
as_output <- function(output, scoring) {
  output <- as.array(output)
  if (length(dim(output)) == 1L) output <- matrix(output, ncol = 1L)
  if (length(dim(output)) == 2L) {
    levels <- scoring$levels
    names <- list(scoring$row_names, if (length(levels) == ncol(output)) levels)
    if (!all(vapply(names, is.null, logical(1)))) dimnames(output) <- names
  }
  output
}

# Each row's class by the core's class rule (data/class_rule.py), as a factor of `levels`
# or, without levels, class numbers (the core's NA for a row with NA).
output_classes <- function(output, levels, call) {
  codes <- core_call("class_codes", values = output, error_call = call)
  stats::setNames(if (is.null(levels)) codes else factor(levels[codes + 1L], levels = levels), rownames(output))
}
