#' Audit a Keras model for GPU speed
#'
#' Reads a built Keras 3 model (nothing is trained or run) and lists what in
#' it keeps a GPU from running at full speed, each with advice.
#'
#' @section Checks:
#' * `dims_not_multiple_of_8`: under mixed precision (a layer computing in
#'   float16 or bfloat16, see [gpu_setup()]), Tensor Cores run matrix
#'   multiplies and convolutions at full rate when the sizes are multiples of
#'   8. Checked: Dense units, convolution filters, Embedding widths, LSTM/GRU
#'   units, attention head sizes (`warning`), and an input width that comes
#'   from the data (`info`). A model output's width (the number of classes)
#'   and layers with under 1% of the FLOPs are left alone.
#' * `batch_not_multiple_of_8`: the same for `batch_size`, when given.
#' * `output_in_low_precision`: a final softmax or sigmoid computed in
#'   float16/bfloat16 (as [gpu_precision_check()] reports).
#' * `dominant_layer`: one very large layer (a kernel of at least
#'   4096 x 4096 weights) doing most of the model's FLOPs.
#' * `separable_conv`: a Conv1D/Conv2D with at least 5% of the FLOPs that a
#'   separable convolution (depthwise + pointwise) would do with at least 3x
#'   fewer multiply-adds (`factor`).
#' * `cpu_only_layer`: TextVectorization, StringLookup, IntegerLookup, Hashing
#'   and HashedCrossing run TensorFlow ops on the CPU (on JAX they cannot be
#'   compiled into the model at all): they belong in the input pipeline.
#' * `lambda_layer`: a Lambda layer, whose function cannot be checked.
#' * `rnn_no_cudnn`: LSTM/GRU settings that rule out Keras' fused cuDNN kernel
#'   (activation other than tanh, recurrent_activation other than sigmoid,
#'   no bias, `unroll`, `recurrent_dropout`, `use_cudnn = FALSE`, GRU
#'   `reset_after = FALSE`), SimpleRNN, and an RNN around an LSTM/GRU cell.
#' * `rnn_mask_on_jax`: on the JAX backend, Keras uses cuDNN only for
#'   unmasked sequences.
#'
#' Nested models and layers inside layers (Bidirectional, TimeDistributed)
#' are walked; their layers are named by path (`"block/dense"`).
#'
#' @param model A built Keras 3 model (from keras3, [gpu_keras()] or
#'   reticulate): one that starts with an Input.
#' @param batch_size The batch size it will train with, to check it too;
#'   `NULL` to leave it out.
#' @param ... Not used: an argument gpu_audit() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return A `gpukeras_audit`: a data.frame with a row per finding, warnings
#'   first and then by share of FLOPs, and columns `layer`, `layer_class`,
#'   `check`, `severity` (`"warning"`: it costs speed as it is; `"info"`: worth
#'   a look), `finding`, `advice`, `flops_share` (the layer's share of the
#'   model's counted forward FLOPs, `NA` where not counted) and `factor` (for
#'   `separable_conv`, how many times fewer multiply-adds). No rows when
#'   nothing was found. Its `print()` groups the findings by severity.
#' @seealso [gpu_quantize()] for a smaller inference copy,
#'   [gpu_precision_check()].
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(30L)),
#'     keras$layers$Dense(100L, activation = "relu", dtype = "mixed_float16"),
#'     keras$layers$Dense(3L, activation = "softmax", dtype = "mixed_float16")
#'   ))
#'   audit <- gpu_audit(model, batch_size = 50)
#'   print(audit)
#'   audit[audit$severity == "warning", c("layer", "check", "flops_share")]
#' }
gpu_audit <- function(model, batch_size = NULL, ...) {
  check_unknown_args("gpu_audit")
  if (!is.null(batch_size)) check_count(batch_size)
  check_python_object(model, "model", "a Keras 3 model")
  result <- core_call("audit", model = model, batch_size = if (!is.null(batch_size)) as.integer(batch_size))
  new_gpukeras_audit(result, batch_size)
}

audit_columns <- c("layer", "layer_class", "check", "severity", "finding", "advice", "flops_share", "factor")

new_gpukeras_audit <- function(result, batch_size) {
  findings <- rows_to_df(result$findings, audit_columns)
  for (name in c("flops_share", "factor")) findings[[name]] <- as.numeric(findings[[name]])
  result$uncounted <- as.character(unlist(result$uncounted))
  info <- c(result[names(result) != "findings"], list(batch_size = batch_size))
  structure(findings, class = c("gpukeras_audit", "data.frame"), audit = info)
}

#' @export
format.gpukeras_audit <- function(x, ...) {
  if (!all(audit_columns %in% names(x))) {
    # Some columns picked out: an ordinary table.
    return(utils::capture.output(print(as.data.frame(x), ...)))
  }
  info <- attr(x, "audit")
  # the core's words (tools/result_lines.py audit_lines()), for these rows
  unlist(core_call(
    "audit_lines", findings = lapply(unclass(x)[audit_columns], as_python),
    info = if (!is.null(info)) replace(info, "uncounted", list(as_python(info$uncounted))),
    width = max(40L, getOption("width", 80L) - 6L), bullet = bullet(), arrow = arrow()
  ))
}

#' @export
print.gpukeras_audit <- print_formatted
