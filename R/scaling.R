#' Does training on several devices pay? Measure the scaling
#'
#' A mirrored strategy (TensorFlow's MirroredStrategy, JAX's DataParallel)
#' splits each global batch over N devices and exchanges the gradients every
#' step, so a small model can train slower on N devices than on one.
#' `gpu_scaling()` trains copies of `model` (with its weights, compiled as it
#' is; the model itself is not changed) on the first of `devices` and on all
#' of them, with the same data, global batch and seed, alternating `rounds`
#' times, and times each run by its fastest epoch after the first (which
#' compiles). It keeps each side's best run.
#'
#' The efficiency is the throughput on N devices over N times the
#' throughput on one: 1 is perfect scaling, `1/N` no gain at all. Below 0.8
#' the result says what to change: a larger global batch (each device gets
#' more work per exchange), more steps per execution, a faster input
#' pipeline, or staying on one device.
#'
#' On a machine without several GPUs, logical CPU devices show how it works:
#' `gpu_setup(cpu_devices = 2)` before Python starts (the efficiency of
#' logical devices that share the same cores says nothing about GPUs).
#'
#' @param model A compiled Keras 3 model.
#' @param data The training data, as [gpu_fit()] takes it.
#' @param devices Two devices or more, as [gpu_strategy()] takes them
#'   (`c("GPU:0", "GPU:1")`); `NULL`: every GPU, else every logical CPU
#'   device.
#' @param batch_size The global batch for R data (split over the devices);
#'   `NULL` for a dataset, which batches itself.
#' @param epochs Epochs each run trains, at least 2 (the first is not timed).
#' @param rounds Runs on each side, alternating one device and N.
#' @param seed The seed of every run.
#' @return An object of class `gpukeras_scaling`: a list with `efficiency`,
#'   `speedup` (throughput on N devices over one), `replicas`, `devices`,
#'   `runs` (a data.frame, one row per run: `devices`, `round`,
#'   `samples_per_second`, `step_time_ms`, `input_wait_share`, `batch_size`,
#'   `steps_per_execution`, `data`), `batch_size`, `per_replica_batch_size`,
#'   `backend` and `advice`. It has `format()`, `print()` and `plot()` methods.
#' @seealso [gpu_strategy()], [gpu_fit()]'s `strategy`.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   # In a fresh R session: gpu_setup(cpu_devices = 2) first.
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(16L, activation = "relu"),
#'     keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'   data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
#'   if (nrow(gpu_devices()) > 2) {
#'     scaling <- gpu_scaling(model, data, batch_size = 32, rounds = 1)
#'     scaling
#'   }
#' }
gpu_scaling <- function(model, data, devices = NULL, batch_size = NULL, epochs = 3, rounds = 2, seed = 1, ...) {
  check_unknown_args("gpu_scaling")
  call <- current_env()
  if (!is.null(devices) && (!is.character(devices) || anyNA(devices) || length(devices) < 2L)) {
    abort_bad_argument(c(
      sprintf(
        "`devices` must name two devices or more, as c(\"GPU:0\", \"GPU:1\"), or be NULL, not %s.", describe(devices)
      ),
      "NULL takes every GPU, else every logical CPU device."
    ), call = call)
  }
  check_count(batch_size, allow_null = TRUE, call = call)
  check_count(epochs, call = call)
  if (epochs < 2) abort_bad_argument("`epochs` must be at least 2: the first compiles and is not timed.", call = call)
  check_count(rounds, call = call)
  seed <- check_seed(seed, call = call)
  data <- read_training_data(data, missing(data), call = call)
  check_python_object(model, "model", "a compiled Keras 3 model", call = call)
  result <- core_call(
    "scaling",
    model = model, data = fit_input(data, call = call), devices = if (!is.null(devices)) as.list(devices),
    batch_size = if (!is.null(batch_size)) as.integer(batch_size), epochs = as.integer(epochs),
    rounds = as.integer(rounds), seed = seed, error_call = call
  )
  result$devices <- as.character(unlist(result$devices))
  result$advice <- as.character(unlist(result$advice))
  result$runs <- rows_to_df(result$runs, c(
    "devices", "round", "samples_per_second", "step_time_ms", "input_wait_share",
    "batch_size", "steps_per_execution", "data"
  ))
  structure(result, class = "gpukeras_scaling")
}

#' @export
format.gpukeras_scaling <- function(x, ...) {
  c(unlist(x$lines), if (length(x$advice)) c("Advice:", paste(" ", arrow(), x$advice)))
}

#' @export
print.gpukeras_scaling <- print_formatted

#' @rdname gpu_scaling
#' @param x A `gpu_scaling()` result.
#' @param ... `gpu_scaling()`: not used, an argument it does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#'   `plot()`: passed to [graphics::barplot()].
#' @export
plot.gpukeras_scaling <- function(x, ...) {
  best <- vapply(c(1, x$replicas), function(n) max(x$runs$samples_per_second[x$runs$devices == n]), numeric(1))
  heights <- c(best, best[1] * x$replicas)
  bars <- graphics::barplot(
    heights,
    names.arg = c("1 device", sprintf("%d devices", x$replicas), "perfect scaling"),
    col = c("grey60", "dodgerblue3", NA), border = c("grey30", "grey30", "grey50"),
    ylab = "samples / s", main = sprintf("Scaling efficiency %.2f", x$efficiency), ...
  )
  graphics::text(bars[2], best[2], sprintf("%.2fx", x$speedup), pos = 3, xpd = TRUE)
  invisible(x)
}
