#' Find the largest batch size that fits, and the fastest
#'
#' Trains a copy of a compiled Keras 3 model on one batch of your data at
#' batch sizes doubling from `min_batch` up to `max_batch`. At the first size
#' that does not fit it bisects between the last size that fit and that one
#' (until the gap is within `tolerance` of the size that fits). Every size
#' that fits is timed, and the fastest in samples per second that makes at
#' least 8 steps per epoch is recommended (see Steps per epoch).
#'
#' @section Steps per epoch:
#' The size recommended never makes fewer than 8 steps (batches) per epoch
#' over the training rows: `ceiling(rows / batch_size) >= 8`. An epoch of one
#' to a few batches is one to a few updates per pass over the data, and leaves
#' the monitor and the epoch's validation little to measure. Larger sizes are
#' still tried, so `largest` says what fits, and the table's `steps/epoch` column
#' shows each size's steps per epoch. The rows are those of R data, or of a
#' [gpu_dataset()]'s training part (after its validation split) where known
#' (arrays, image folders); for another dataset, or one read as it streams
#' (CSV, TFRecord), they are not known and the rule is not applied (the print
#' says so). With fewer rows than that (fewer than 8), the smallest size that
#' fits is recommended.
#'
#' @section What "fits" means:
#' * On a GPU, each size really runs: an out-of-memory error from TensorFlow or
#'   XLA (JAX), or an allocation failure of a library under them that is not
#'   worded so (cuBLAS's or cuDNN's `ALLOC_FAILED`, TensorFlow's "Failed to
#'   get convolution algorithm"), is caught, the memory freed, and the size
#'   marked as not fitting. Where the backend measures it, the peak memory of
#'   the GPU the model trains on is reported per size too (`peak_mib`).
#' * On the CPU an out-of-memory error cannot be caught (the operating system
#'   kills R instead), so sizes are judged against a host memory budget,
#'   `memory_budget_mib`, by default half the memory available when the
#'   search starts. A size whose estimate is over it is not run.
#'
#' The estimate (`estimated_mib`, and `estimate` in the result): weights +
#' gradients + the optimizer's variables + batch size x (2 x the layers'
#' outputs + the batch's own rows). It is a rough figure: XLA fuses some
#' intermediates away, while workspaces and temporary copies add memory it
#' does not count; hence the default budget of only half the available memory.
#'
#' @section Your model is not changed:
#' A copy is built with `keras.models.clone_model()` and compiled like your
#' model (a new optimizer with the same settings; the same loss and metrics),
#' with fresh weights, as speed and memory do not depend on their values.
#' Custom layers, losses and metrics must be registered with Keras
#' (`keras.saving.register_keras_serializable()`) to be copied. Your model
#' stays in memory meanwhile, so on a GPU the largest size found leaves room
#' for one more copy of its weights.
#'
#' @section Timing:
#' Each size runs `warmup` untimed steps (tracing and compiling for the new
#' shape happen there), then `steps` timed ones with `train_on_batch()`, on a
#' batch made once (the first rows of the data, repeated when there are
#' fewer) and put on the device beforehand. Every step waits for its loss, as
#' training with per-batch logs does. The fastest size is often the largest:
#' larger batches also change how training converges, so a smaller size with
#' nearly the same throughput may be the better choice.
#'
#' @param model A compiled Keras 3 model (from keras3, [gpu_keras()] or
#'   reticulate). It is not trained or changed.
#' @param data The data, in the forms [gpu_fit()] takes: a [gpu_dataset()]
#'   (its first batch is used; with a validation split, the training
#'   pipeline's), or R data as `list(x = , y = )`.
#' @param max_batch The largest batch size to try.
#' @param min_batch The smallest batch size to try, where the doubling starts.
#'   If it does not fit, the error has class `gpukeras_error_out_of_memory`.
#' @param steps Timed train steps per batch size.
#' @param warmup Untimed train steps before them, per batch size.
#' @param memory_budget_mib MiB of memory the estimate of a size may reach.
#'   `NULL`: half of the host's available memory on the CPU, no budget on a
#'   GPU (out-of-memory errors decide there; a budget given is applied too).
#' @param tolerance How close the bisection gets to the limit: it stops when
#'   the gap between the largest size that fits and the smallest that does
#'   not is at most this share of the former. A number between 0 and 1.
#' @param ... Not used: an argument gpu_batch_size() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return An object of class `gpukeras_batch_size`, a list with
#'   * `trials`: a data.frame with a row per size tried, in the order tried:
#'     `batch_size`, `phase` (`"double"` or `"bisect"`), `fits`,
#'     `samples_per_second` and `step_ms` (where it fits), `estimated_mib`,
#'     `peak_mib` (the GPU's measured peak, `NA` where not known),
#'     `reason` (why a size does not fit) and `steps_per_epoch` (`NA` where
#'     the rows are not known);
#'   * `recommended`: the fastest size that fits and makes at least 8 steps
#'     per epoch; `fastest`: the fastest size that fits;
#'   * `steps_rule`: `min_steps` (8), `rows` (the training rows, `NULL` where
#'     not known) and `largest_batch` (the largest size with 8 steps or more);
#'   * `largest`: the largest size that fits; `smallest_failing`: the
#'     smallest that does not (`NULL` when `max_batch` fits);
#'   * `device`, `device_name`, `backend`;
#'   * `budget`: `mib` (`NULL` for none) and `source`;
#'   * `estimate`: the memory estimate's parts (`fixed_mib`,
#'     `per_sample_mib`, `weights_mib`, `gradients_mib`, `optimizer_mib`,
#'     `activations_per_sample_mib`, `batch_per_sample_mib`,
#'     `uncounted_layers`, `method`);
#'   * `settings`: `min_batch`, `max_batch`, `steps`, `warmup`, `tolerance`,
#'     `jit_compile`.
#'
#'   It has `print()`, `plot()` and `as.data.frame()` (the trials) methods.
#' @seealso [gpu_fit()] to train with the size found.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(16L, activation = "relu"),
#'     keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'   sizes <- gpu_batch_size(
#'     model, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
#'     min_batch = 8, max_batch = 256, steps = 2
#'   )
#'   print(sizes)
#'   plot(sizes)
#' }
gpu_batch_size <- function(model, data, max_batch = 4096, min_batch = 1, steps = 5, warmup = 1,
                           memory_budget_mib = NULL, tolerance = 0.1, ...) {
  check_unknown_args("gpu_batch_size")
  check_count(max_batch)
  check_count(min_batch)
  if (max_batch < min_batch) {
    abort_bad_argument(
      sprintf(
        "`max_batch` (%s) must be at least `min_batch` (%s): give a larger `max_batch` or a smaller `min_batch`.",
        format(max_batch), format(min_batch)
      )
    )
  }
  check_count(steps)
  check_count(warmup)
  memory_budget_mib <- check_positive_number(memory_budget_mib, allow_null = TRUE)
  check_positive_number(tolerance)
  if (tolerance >= 1) {
    stop_input_type(tolerance, "a number between 0 and 1")
  }
  data <- read_training_data(data, missing(data))
  check_python_object(model, "model", "a compiled Keras 3 model")

  result <- core_call(
    "batch_size", model = model, data = fit_input(data), max_batch = as.integer(max_batch),
    min_batch = as.integer(min_batch), steps = as.integer(steps), warmup = as.integer(warmup),
    memory_budget_mib = memory_budget_mib, tolerance = as.double(tolerance)
  )
  new_gpukeras_batch_size(result)
}

# The core's rows as a data.frame, each column of the type `types` names ("integer",
# "numeric", ...): a column that is None in every row arrives as logical NA.
typed_rows <- function(rows, types) {
  df <- rows_to_df(rows, names(types))
  df[] <- Map(function(values, type) match.fun(paste0("as.", type))(values), df, types)
  df
}

batch_size_columns <- c(
  batch_size = "integer", phase = "character", fits = "logical", samples_per_second = "numeric", step_ms = "numeric",
  estimated_mib = "numeric", peak_mib = "numeric", reason = "character", steps_per_epoch = "integer"
)

# The gpukeras_batch_size object from the core's plain data.
new_gpukeras_batch_size <- function(result) {
  trials <- typed_rows(result$trials, batch_size_columns)
  estimate <- result$estimate
  estimate$uncounted_layers <- as.character(unlist(estimate$uncounted_layers))
  structure(list(
    trials = trials, recommended = as.integer(result$recommended), fastest = as.integer(result$fastest),
    steps_rule = result$steps_rule, largest = as.integer(result$largest),
    smallest_failing = if (!is.null(result$smallest_failing)) as.integer(result$smallest_failing),
    device = result$device, device_name = result$device_name, backend = result$backend, budget = result$budget,
    estimate = estimate, settings = result$settings, lines = unlist(core_call("batch_size_lines", result = result))
  ), class = "gpukeras_batch_size")
}

#' @export
as.data.frame.gpukeras_batch_size <- function(x, row.names = NULL, optional = FALSE, ...) {
  x$trials
}

# The lines, made by the core from its plain data.
#' @export
format.gpukeras_batch_size <- function(x, ...) x$lines

#' @export
print.gpukeras_batch_size <- print_formatted

#' Plot a gpu_batch_size() search
#'
#' Draws, with base graphics, the measured throughput (samples per second)
#' against the batch size on a log2 axis: sizes that fit as points joined by
#' a line, sizes that do not as red crosses on the axis, the recommended
#' size circled and the largest size that fits as a dashed line.
#'
#' @param x A `gpukeras_batch_size` from [gpu_batch_size()].
#' @param ... Passed to [graphics::plot()].
#' @return `x`, invisibly.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(keras$Input(shape = list(2L)), keras$layers$Dense(1L)))
#'   model$compile(optimizer = "sgd", loss = "mse")
#'   x <- matrix(runif(200), ncol = 2)
#'   sizes <- gpu_batch_size(model, list(x = x, y = x %*% c(1, -1)), max_batch = 64, steps = 2)
#'   plot(sizes)
#' }
plot.gpukeras_batch_size <- function(x, ...) {
  trials <- x$trials[order(x$trials$batch_size), , drop = FALSE]
  fits <- trials$fits
  speed <- trials$samples_per_second
  graphics::plot(
    trials$batch_size[fits], speed[fits],
    log = "x", type = "b", pch = 19, xaxt = "n",
    xlim = range(trials$batch_size), ylim = c(0, 1.1 * max(speed, na.rm = TRUE)),
    xlab = "batch size (log2 scale)", ylab = "samples / s",
    main = sprintf("Throughput by batch size on %s", x$device), ...
  )
  powers <- seq(floor(log2(min(trials$batch_size))), ceiling(log2(max(trials$batch_size))))
  graphics::axis(1, at = 2^powers, labels = format(2^powers, big.mark = ",", trim = TRUE))
  if (any(!fits)) {
    graphics::points(trials$batch_size[!fits], rep(0, sum(!fits)), pch = 4, cex = 1.4, lwd = 2, col = "firebrick")
  }
  best <- trials[fits & trials$batch_size == x$recommended, ][1, ]
  graphics::points(best$batch_size, best$samples_per_second, pch = 1, cex = 2.4, lwd = 2, col = "dodgerblue3")
  graphics::abline(v = x$largest, lty = 2, col = "grey40")
  graphics::legend(
    "topleft", c("fits (measured)", "does not fit", "recommended", "largest that fits"),
    pch = c(19, 4, 1, NA), lty = c(1, NA, NA, 2), lwd = c(1, 2, 2, 1),
    col = c("black", "firebrick", "dodgerblue3", "grey40"), bty = "n", cex = 0.8
  )
  invisible(x)
}
