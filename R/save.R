#' Save a trained model with its encoding; load both in a later session
#'
#' `gpu_save()` writes the model in Keras' `.keras` format (architecture,
#' weights, compile settings) and, beside it, how the training data was
#' encoded (see [gpu_dataset()]'s "Scoring new data": columns, factor levels,
#' dtype, NA rule) as JSON: for `path = "churn.keras"`, the file
#' `"churn.gpukeras.json"`. `gpu_load()` reads both back, so that [predict()]
#' and [evaluate()] in a later R session encode new data exactly as the
#' training session did.
#'
#' `gpu_save()` writes those two files and nothing else: it refuses to
#' replace either unless `overwrite = TRUE`, and writes each under a
#' temporary name first, so that a failed save leaves no half-written file.
#'
#' @param object A [gpu_fit()] result, a model from `gpu_load()`, or a Keras
#'   model (saved without an encoding: new data is then taken as numbers).
#' @param path The model's file, ending in `.keras`. For `gpu_load()` also a
#'   tracked run's model ([gpu_track()]): `"runs:/<run id>"`, or a row of
#'   [gpu_runs()].
#' @param overwrite Replace existing files.
#' @param lora For a LoRA fine-tune of a KerasHub preset ([gpu_text_classifier()]'s
#'   `lora_rank`): `"keep"` (default) saves the adapters apart from the frozen
#'   weights, and `gpu_load()` gives the model with LoRA at the same rank, only
#'   the adapters (and head) trainable; `"merge"` adds the adapters into the
#'   weights, and the model loads without LoRA. Both predict the same. Either way
#'   the file keeps the preset's name, the rank and the optimizer.
#' @param ... Not used: an argument these functions do not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return `gpu_save()`: the paths written (`model`, `encoding`), invisibly.
#'   `gpu_load()`: a `gpukeras_model`, a list with `model` (the Keras model),
#'   `encoding` (`NULL` when there was no JSON file beside it), `path` and
#'   `preset` (a KerasHub preset's model: its preset and LoRA, which `print()` shows),
#'   which [predict()], [evaluate()], `gpu_dataset(like = )` and `gpu_save()` take.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'   fit <- gpu_fit(model, list(x = iris[, 1:4], y = iris$Species), verbose = 0, monitor = FALSE)
#'   path <- file.path(tempdir(), "iris.keras")
#'   gpu_save(fit, path, overwrite = TRUE)
#'   saved <- gpu_load(path)
#'   print(saved)
#'   print(predict(saved, iris[c(1, 51, 101), ], type = "class"))
#' }
gpu_save <- function(object, path, overwrite = FALSE, lora = c("keep", "merge"), ...) {
  check_unknown_args("gpu_save")
  call <- current_env()
  check_string(path, call = call)
  check_flag(overwrite, call = call)
  lora <- check_choice(lora[[1]], c("keep", "merge"), "lora", call = call)
  if (!grepl("[.]keras$", path)) {
    abort_bad_argument(c(
      sprintf("`path` must end in .keras, not '%s'.", path),
      "Keras 3 saves whole models in its .keras format, e.g. gpu_save(fit, \"model.keras\")."
    ), call = call)
  }
  if (inherits(object, c("gpukeras_fit", "gpukeras_model"))) {
    model <- scoring_model(object, call)
    encoding <- object$encoding
  } else if (inherits(object, "python.builtin.object")) {
    model <- object
    encoding <- NULL
  } else {
    abort_bad_argument(
      sprintf("`object` must be a gpu_fit() result, a gpu_load() model or a Keras model, not %s.", describe(object)),
      call = call
    )
  }
  written <- core_call(
    "save_model",
    model = model, path = destination_path(path),
    encoding = encoding, overwrite = overwrite, lora = lora,
    error_call = call
  )
  invisible(written)
}

#' @rdname gpu_save
#' @export
gpu_load <- function(path, ...) {
  check_unknown_args("gpu_load", "gpu_save")
  call <- current_env()
  if (is.data.frame(path) || (is.character(path) && length(path) == 1L && startsWith(path, "runs:/"))) {
    return(load_run_model(path, call))
  }
  check_string(path, call = call)
  path <- normalizePath(path.expand(path), mustWork = FALSE)
  loaded <- core_call("load_model", path = path, error_call = call)
  structure(list(
    model = loaded$model, encoding = if (!is.null(loaded$encoding)) encoding_from_plain(loaded$encoding), path = path,
    preset = loaded$preset
  ), class = "gpukeras_model")
}

# gpu_load() of a tracked run's model (gpu_track()): downloaded into this session's
# temporary folder, then loaded as a saved file; `path` names the run.
load_run_model <- function(run, call) {
  run_id <- run_id_of(run, "path", call)
  folder <- tempfile("gpukeras-run-model-")
  track_flush(call)
  downloaded <- core_call(
    "track_download_model", track = track_needed(call), run_id = run_id, folder = folder, error_call = call
  )
  model <- gpu_load(downloaded$path)
  model$path <- paste0("runs:/", run_id, "/model/model.keras")
  model
}

#' @export
format.gpukeras_model <- function(x, ...) {
  c(
    sprintf("<gpukeras_model> %s", x$path), if (!is.null(x$preset)) paste0("  ", x$preset),
    if (is.null(x$encoding)) "  no encoding saved beside it: new data is taken as numbers" else format(x$encoding)[-1]
  )
}

#' @export
print.gpukeras_model <- print_formatted
