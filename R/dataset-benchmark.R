# gpu_dataset_benchmark(): an input pipeline timed alone, with no model.

#' Throughput of an input pipeline alone
#'
#' Reads `steps` batches from the pipeline with no model attached (after a
#' few untimed batches that fill caches and buffers). Compare with a training
#' step's time: a pipeline slower than the model starves the GPU.
#'
#' @param dataset A [gpu_dataset()] (or any `tf.data.Dataset`).
#' @param steps Batches to time.
#' @param ... Not used: an argument gpu_dataset_benchmark() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return An object of class `gpukeras_dataset_benchmark`: a list with
#'   `steps`, `seconds`, `batches_per_second` and `elements_per_second`.
#'   A batch that cannot be made from the data (a corrupt image file, a
#'   malformed record) stops it with a `gpukeras_error_bad_data` error naming
#'   the batch and TensorFlow's cause.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   gpu_dataset_benchmark(gpu_dataset(matrix(runif(4000), ncol = 4)), steps = 20)
#' }
gpu_dataset_benchmark <- function(dataset, steps = 100, ...) {
  check_unknown_args("gpu_dataset_benchmark")
  check_python_object(dataset, "dataset", "a gpu_dataset() or tf.data.Dataset")
  check_count(steps)
  result <- core_call("dataset_benchmark", dataset = dataset, steps = as.integer(steps))
  structure(result, class = "gpukeras_dataset_benchmark")
}

#' @export
format.gpukeras_dataset_benchmark <- function(x, ...) core_call("dataset_benchmark_line", speed = unclass(x))

#' @export
print.gpukeras_dataset_benchmark <- print_formatted
