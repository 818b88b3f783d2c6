#' gpukeras: train Keras models on the GPU from R, and prove the GPU is used
#'
#' gpukeras answers the questions R users of Keras ask year after year: is my
#' GPU actually used, and if not, why? [gpu_check()] runs real work on every
#' device and says so with evidence; [install_gpukeras()] sets up the Python
#' environment it needs.
#'
#' Python is not started by `library(gpukeras)`: it starts at the first call
#' that needs it, so GPU settings can still be applied before TensorFlow runs.
#'
#' @keywords internal
#' @importFrom rlang caller_arg caller_env current_env %||%
"_PACKAGE"
