#' Export a trained model for serving: a TensorFlow SavedModel or ONNX
#'
#' `gpu_export()` writes the model where serving engines read it, with the
#' training encoding (see [gpu_dataset()]'s "Scoring new data") so that they
#' score raw rows as [predict()] does in R.
#'
#' **`format = "savedmodel"`** writes Keras' own export (`model.export()`, an
#' `ExportArchive`) to the folder `path`, with the encoding built into the
#' served function: the signature `serving_default` takes each training column
#' by name, as a batch of values (one per row):
#' * a numeric column as `float64` (R's numbers; cast to float32 inside, as
#'   `predict()` does),
#' * a logical column as `bool`,
#' * a factor or character column as `string`, matched to the training levels
#'   by name (their order in the new data does not matter), then one-hot or
#'   coded as in training,
#' * an array input (a matrix, images) as the model's own `float32` tensor,
#'   rows first, named by the input (`x` for a model with one).
#'
#' With several inputs (a named list), each column is a signature input of its
#' own, named by the column, or `<input>_<column>` where two inputs share a
#' column name. Signature input names hold letters, digits and `_` only: other
#' characters become `_` (`Sepal.Length` is `Sepal_Length`); the returned
#' object's `inputs` (and its print) gives each name's column.
#'
#' It returns a dict of named outputs: `output`, the model's output as
#' `predict(fit, type = "raw")` gives it; for a classifier (factor labels)
#' with one output column per level, one output per level named by the level
#' (that level's column), and `class`, the level `predict(type = "class")`
#' gives (also for a single sigmoid output of two levels). A level named
#' `output` or `class` gets a suffix (`class_2`). A model with several outputs
#' gives each under its output name. TensorFlow Serving's REST API then
#' answers `{"instances": [{"income": 1.2, "region": "north"}]}` with
#' `{"predictions": [{"output": [...], "no": 0.3, "yes": 0.7, "class": "yes"}]}`.
#' The model's own function on encoded rows is the signature `encoded`; what
#' each name is, and the encoding, are in `assets.extra/gpukeras.json` inside
#' the folder.
#'
#' The served function has no NA rule: a `NaN` number gives `NaN` outputs, and
#' a missing string is a level training did not have.
#'
#' A model of a KerasHub image classifier preset ([gpu_image_backbone()]) has
#' its preprocessing outside the model, as KerasHub runs it: the preset's
#' image converter (resizing to its image size, scale and offset) and the
#' softmax that makes its logits probabilities. `serving_default` applies
#' both, so it takes the images as `predict()` does (in pixels of 0 to 255,
#' of the training size) and gives the same probabilities; the `encoded`
#' signature and an ONNX graph are the model alone (images already converted
#' in, logits out), and `preprocessing` in the JSON says what the converter
#' and the activation are.
#'
#' **`format = "onnx"`** writes Keras' ONNX export of the model (`path`
#' ending in `.onnx`), which takes the encoded rows (float32, the columns
#' `predict()` makes), with the encoding beside it as the JSON [gpu_save()]
#' writes (`name.gpukeras.json`, plus the ONNX graph's input and output
#' names). It needs the packages `install_gpukeras(extras = "onnx")` installs
#' (onnx, tf2onnx, onnxruntime). A layer ONNX has no operation for (such as
#' `Discretization`, TensorFlow's `Bucketize`) is a `gpukeras_error_export`
#' naming the layers. On the JAX engine, Keras exports ONNX with jax2onnx
#' (JAX >= 0.8.1); where it is missing, the error says to export from the
#' TensorFlow engine (a `.keras` file saved under JAX loads there).
#'
#' The SavedModel is written on both engines (on JAX, Keras converts the model
#' with jax2tf; TensorFlow must be installed). Nothing is written under `path`
#' unless the whole export succeeded: it is built in a temporary folder beside
#' it and renamed into place; an existing `path` is replaced only with
#' `overwrite = TRUE`.
#'
#' @param object A [gpu_fit()] result or a model from [gpu_load()]; a model
#'   trained on NumPy arrays (no recorded encoding) is exported with its
#'   inputs as they are.
#' @param path The SavedModel's folder, or the `.onnx` file.
#' @param format `"savedmodel"` (TensorFlow Serving and other engines that
#'   load a SavedModel) or `"onnx"` (onnxruntime).
#' @param unknown What a factor level the training data did not have becomes
#'   in the served function (SavedModel): `"error"` fails the request with a
#'   message naming the column, the levels it knows and the unseen values;
#'   `"zero"` gives a one-hot factor's row 0 in every indicator column;
#'   `"code"` gives a factor of integer codes the reserved code
#'   `length(levels)`, as [predict()] does. As in `predict()`, a rule that
#'   does not fit a column's encoding leaves that column's unseen levels an
#'   error.
#' @param overwrite Replace what is at `path` (and the JSON beside an `.onnx`
#'   file).
#' @param ... Not used: an argument gpu_export() does not have is an error
#'   that says what to use instead (the one meant, for a misspelt one).
#' @return A `gpukeras_export`, invisibly: `path`, `format`, `inputs` (a
#'   data.frame: each signature input's `name`, and for a SavedModel the
#'   model `input` and `column` it is, its `type`, `dtype` and `levels`),
#'   `outputs` (each output's `name`, and `what` it is: the output, a level's
#'   column, or the class), `encoding_file` and `backend`.
#' @seealso [gpu_save()] to score in a later R session.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'   fit <- gpu_fit(model, list(x = iris[, 1:4], y = iris$Species), epochs = 1,
#'                  verbose = 0, monitor = FALSE)
#'   exported <- gpu_export(fit, file.path(tempdir(), "iris-model"), overwrite = TRUE)
#'   print(exported)
#' }
gpu_export <- function(object, path, format = c("savedmodel", "onnx"), unknown = c("error", "zero", "code"),
                       overwrite = FALSE, ...) {
  check_unknown_args("gpu_export")
  call <- current_env()
  check_trained_model(
    object,
    "Its recorded encoding is what lets the export take raw columns; for a Keras model alone, use model$export(path).",
    call = call
  )
  if (missing(path)) {
    abort_bad_argument(
      "`path` is missing: give the SavedModel's folder, or a file ending in .onnx with format = \"onnx\".",
      call = call
    )
  }
  check_string(path, call = call)
  format <- check_choice(format[[1]], c("savedmodel", "onnx"), "format", call = call)
  unknown <- check_choice(unknown[[1]], c("error", "zero", "code"), "unknown", call = call)
  check_flag(overwrite, call = call)
  path <- destination_path(path)
  check_export_path(path, format, overwrite, call)
  model <- scoring_model(object, call)
  written <- core_call(
    "export",
    model = model, path = path, format = format,
    encoding = object$encoding,
    unknown = unknown, overwrite = overwrite, error_call = call
  )
  invisible(new_export(written))
}

# What gpu_export() can refuse before Python starts: the file name, an existing path.
check_export_path <- function(path, format, overwrite, call) {
  if (format == "onnx" && !grepl("[.]onnx$", path)) {
    abort_bad_argument(sprintf("`path` must end in .onnx for format = \"onnx\", not '%s'.", path), call = call)
  }
  if (format == "savedmodel" && grepl("[.](keras|onnx|h5)$", path)) {
    abort_bad_argument(c(
      sprintf("`path` is a folder for format = \"savedmodel\", not a file name such as '%s'.", basename(path)),
      "Give a folder name, e.g. gpu_export(fit, \"churn-model\")."
    ), call = call)
  }
  if (!dir.exists(dirname(path))) {
    abort_bad_argument(sprintf("`path`: the folder '%s' does not exist.", dirname(path)), call = call)
  }
  beside <- if (format == "onnx") sub("[.]onnx$", ".gpukeras.json", path)
  existing <- Filter(path_taken, c(path, beside))
  if (length(existing) && !overwrite) {
    abort_bad_argument(c(
      sprintf(
        "%s already exist%s.", paste0("'", existing, "'", collapse = " and "), if (length(existing) == 1L) "s" else ""
      ),
      "Give overwrite = TRUE to replace it, or another path."
    ), call = call)
  }
}

new_export <- function(written) {
  records <- function(rows, fields) {
    data.frame(lapply(stats::setNames(fields, fields), function(field) {
      vapply(rows, function(row) {
        value <- row[[field]]
        if (is.null(value)) NA_character_ else paste(unlist(value), collapse = ", ")
      }, character(1))
    }), stringsAsFactors = FALSE)
  }
  inputs <- records(written$inputs, c("name", "input", "column", "type", "dtype", "levels", "unknown"))
  outputs <- records(written$outputs, c("name", "what", "level"))
  structure(list(
    path = written$path, format = written$format, inputs = inputs, outputs = outputs,
    encoding_file = written$encoding_file, backend = written$backend
  ), class = "gpukeras_export")
}

#' @export
format.gpukeras_export <- function(x, ...) {
  input_line <- function(i) {
    row <- x$inputs[i, ]
    if (is.na(row$type)) return(sprintf("    %s", row$name))
    what <- if (!is.na(row$column) && row$column != row$name) sprintf(" (column %s)", row$column) else ""
    levels <- if (!is.na(row$levels)) sprintf(", levels %s; unseen: %s", row$levels, row$unknown) else ""
    sprintf("    %s%s: %s%s", row$name, what, row$dtype, levels)
  }
  output_line <- function(i) {
    row <- x$outputs[i, ]
    what <- switch(
      row$what, level = sprintf("the column of level %s", row$level), class = "the most likely level",
      "the model's output"
    )
    sprintf("    %s: %s", row$name, what)
  }
  c(
    sprintf("<gpukeras_export> %s, %s (from %s)", x$path, if (x$format == "onnx") "ONNX" else "SavedModel", x$backend),
    if (x$format == "onnx") "  takes the encoded rows; the encoding is beside it:" else
      "  signature serving_default takes:",
    vapply(seq_len(nrow(x$inputs)), input_line, character(1)),
    "  and returns:",
    vapply(seq_len(nrow(x$outputs)), output_line, character(1)),
    sprintf("  encoding and names: %s", x$encoding_file)
  )
}

#' @export
print.gpukeras_export <- print_formatted
