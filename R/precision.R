#' Check a model's output precision under mixed precision
#'
#' Under a float16 or bfloat16 policy (see [gpu_setup()]), a final softmax or
#' sigmoid computed in that dtype distorts probabilities and the loss; the fix
#' is `dtype = "float32"` on the output layer. `gpu_precision_check()` warns
#' once per model (a `gpukeras_warning_output_precision` warning) and returns
#' the finding.
#'
#' @param model A Keras 3 model (from keras3, [gpu_keras()] or reticulate).
#' @param ... Not used: an argument gpu_precision_check() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return The finding as a string, or `NULL` when the output is fine, invisibly.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(3L, activation = "softmax", dtype = "mixed_float16")
#'   ))
#'   gpu_precision_check(model)
#' }
gpu_precision_check <- function(model, ...) {
  check_unknown_args("gpu_precision_check")
  check_python_object(model, "model", "a Keras 3 model")
  # the core says whether to warn: once per model, gpu_fit() included
  checked <- core_call("precision_check", model = model)
  if (isTRUE(checked$warn)) gpukeras_warn(checked$finding, "gpukeras_warning_output_precision")
  invisible(checked$finding)
}

check_python_object <- function(x, arg, what, call = caller_env()) {
  if (!inherits(x, "python.builtin.object")) {
    abort_bad_argument(sprintf("`%s` must be %s, not %s.", arg, what, describe(x)), call = call)
  }
  invisible(x)
}
