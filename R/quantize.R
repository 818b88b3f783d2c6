#' Quantize a Keras model for inference
#'
#' Makes a copy of the model whose Dense, EinsumDense and Embedding kernels are
#' stored as integers (Keras 3's `quantize()`), for smaller and faster
#' inference (`predict()`, `evaluate()`), and reports what it saved and what
#' it cost: the bytes of the weights before and after, and, with evaluation
#' data, the loss and metrics of both models and how far their outputs differ.
#' The original model is not changed. Other layers (convolutions,
#' normalization) keep their float weights.
#'
#' @section Modes:
#' * `"int8"`: one byte per weight, a quarter of float32; the layer's inputs
#'   are quantized on the fly too. Keras refuses it for layers computing in
#'   float16 (quantize a float32 or bfloat16 build).
#' * `"int4"`: two weights per byte, weights only; every output channel
#'   also keeps a scale and a zero point, so it pays in large layers.
#'
#' Keras' other modes are refused with the reason: `"float8"` is for training
#' with FP8 Tensor Cores on Hopper-class GPUs and keeps float32 weights;
#' `"gptq"` and `"awq"` need calibration data and a block structure (large
#' language models).
#'
#' @param model A built Keras 3 model (functional or Sequential; a subclassed
#'   model must support `get_config()`), ideally trained.
#' @param mode `"int8"` or `"int4"`.
#' @param data Evaluation data, `NULL` for none: a [gpu_dataset()] (or another
#'   `tf.data` dataset of `(x, y)` batches) or R data as `list(x = , y = )`, as
#'   [gpu_fit()] takes it. Without `y` (or with an uncompiled model) only the
#'   outputs are compared.
#' @param batch_size Rows per batch for R data (default 32); `NULL` for a
#'   dataset, which is batched already.
#' @param ... Not used: an argument gpu_quantize() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return A `gpukeras_quantized`, a list with
#'   * `model`: the quantized copy, for `predict()` and `evaluate()`;
#'   * `mode`, `backend`;
#'   * `bytes_before`, `bytes_after`: bytes of all the weights;
#'   * `size_before`, `size_after`: the same by dtype (named numeric vectors);
#'   * `layers`: a data.frame with a row per layer with weights: `layer`,
#'     `layer_class`, `quantized`, `bytes_before`, `bytes_after`;
#'   * `layers_quantized`, `layers_kept`: how many layers were quantized and
#'     how many kept their float weights;
#'   * `metrics`: with labelled data and a compiled model, a data.frame of
#'     `metric`, `before`, `after`, `change` (after - before); else `NULL`;
#'   * `output_max_abs_diff`, `output_mean_abs_diff`: with data, the largest
#'     and mean absolute difference between the two models' outputs; else
#'     `NULL`.
#'
#'   It has a `print()` method.
#' @seealso [gpu_audit()], which points at the layers quantization shrinks most.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(8L, activation = "relu"),
#'     keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(
#'     optimizer = "adam", loss = "sparse_categorical_crossentropy",
#'     metrics = list("accuracy")
#'   )
#'   # (an untrained model here, to keep the example short: quantize a trained one)
#'   iris_data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
#'   small <- gpu_quantize(model, "int8", data = iris_data)
#'   print(small)
#'   small$model$predict(gpu_as_numpy(as.matrix(iris[1:2, 1:4])), verbose = 0L)
#' }
gpu_quantize <- function(model, mode = "int8", data = NULL, batch_size = NULL, ...) {
  check_unknown_args("gpu_quantize")
  check_string(mode)
  if (!is.null(batch_size)) check_count(batch_size)
  data <- if (!is.null(data)) fit_data(data, "data")
  check_not_split(data, "validation")
  if (!is.null(batch_size) && !identical(data$kind, "r")) {
    abort_bad_argument(
      "`batch_size` is for R data in `data`: a dataset is batched already, and without data nothing is run."
    )
  }
  check_python_object(model, "model", "a Keras 3 model")
  result <- core_call(
    "quantize", model = model, mode = mode, data = if (!is.null(data)) fit_input(data),
    batch_size = if (!is.null(batch_size)) as.integer(batch_size)
  )
  new_gpukeras_quantized(result)
}

new_gpukeras_quantized <- function(result) {
  result$metrics <- if (length(result$metrics)) rows_to_df(result$metrics)
  result$layers <- rows_to_df(result$layers, c("layer", "layer_class", "quantized", "bytes_before", "bytes_after"))
  result$size_before <- unlist(result$size_before)
  result$size_after <- unlist(result$size_after)
  structure(result, class = "gpukeras_quantized")
}

# Bytes in the binary unit that keeps the number readable.
format_sizes <- function(sizes) paste(names(sizes), format_bytes(unlist(sizes)), collapse = " + ")

#' @export
format.gpukeras_quantized <- function(x, ...) {
  kept <- x$layers$layer_class[!x$layers$quantized]
  quantized <- x$layers$layer_class[x$layers$quantized]
  classes <- function(found) if (length(found)) sprintf(" (%s)", paste(unique(found), collapse = ", ")) else ""
  metrics <- if (!is.null(x$metrics)) {
    m <- x$metrics
    paste(sprintf("%s %.4g -> %.4g (%+.3g)", m$metric, m$before, m$after, m$change), collapse = "; ")
  }
  c(
    sprintf("<gpukeras quantized model> %s, for inference (%s backend)", x$mode, x$backend),
    sprintf(
      "Weights: %s -> %s (%.1fx smaller): %s -> %s",
      format_bytes(x$bytes_before), format_bytes(x$bytes_after), x$bytes_before / x$bytes_after,
      format_sizes(x$size_before), format_sizes(x$size_after)
    ),
    sprintf(
      "Layers:  %d quantized%s, %d kept as they were%s",
      as.integer(x$layers_quantized), classes(quantized), as.integer(x$layers_kept), classes(kept)
    ),
    if (!is.null(metrics)) paste("Metrics:", metrics),
    if (!is.null(x$output_max_abs_diff)) {
      sprintf("Outputs: differ by %.3g at most, %.3g on average", x$output_max_abs_diff, x$output_mean_abs_diff)
    },
    if (is.null(x$output_max_abs_diff)) "Accuracy: not measured (give `data` to compare the two models)",
    "Use $model for predict() and evaluate(); the original model is unchanged."
  )
}

#' @export
print.gpukeras_quantized <- print_formatted
