#' Find a good learning rate: the learning-rate range test
#'
#' Trains a copy of the model for `steps` batches while its learning rate
#' grows exponentially from `min_lr` to `max_lr`, records each batch's loss,
#' and stops once the loss diverges (Smith 2017; fastai's `lr_find()`, luz's
#' `lr_finder()`). The loss against the learning rate falls where the rate
#' starts to teach, flattens, then blows up: a good rate lies on the descent.
#' The model itself is not changed (its weights, optimizer state and compile
#' settings stay as they were).
#'
#' @section Suggestions:
#' All on the smoothed loss (an exponential moving average):
#' * `valley` (recommended, fastai's default): along the longest stretch
#'   where the loss keeps falling, the rate two thirds of the way down;
#' * `steepest`: where the loss falls fastest per decade of rate;
#' * `minimum`: a tenth of the rate at the lowest loss.
#'
#' Use one as the optimizer's learning rate, or as the peak of a schedule
#' ([lr_warmup_cosine()], [lr_cyclical()]'s `high`) given to [gpu_fit()].
#'
#' A loss that never diverges but rises after its lowest (by a quarter of
#' what it fell, before the last tenth of the steps) still gives suggestions:
#' the curve has its descent and its turn. When the loss neither diverges nor
#' turns up, nothing is suggested (all `NA`): every rule reads the curve
#' against the point where it turns up, and without it the lowest loss is
#' only the last rates tried. The result says so and advises a higher
#' `max_lr` (ten times) or more `steps` (twice as many).
#'
#' @inheritParams gpu_fit
#' @param model A compiled Keras 3 model (it is not changed).
#' @param batch_size Rows per batch when `data` is R data (default 32). Must
#'   be `NULL` for a dataset, which is batched already. One larger than the
#'   rows is the rows (one batch per epoch, as Keras makes it), with a
#'   `gpukeras_warning_batch_size` warning.
#' @param min_lr,max_lr The first and the last learning rate of the ramp.
#' @param steps Batches over which the rate goes from `min_lr` to `max_lr`
#'   (>= 10; the test stops earlier when the loss diverges).
#' @param stop_factor Stop once the smoothed loss exceeds this many times its
#'   lowest value (> 1).
#' @param smoothing The moving average's weight of the past, in `[0, 1)`.
#' @param ... Not used: an argument gpu_lr_find() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return A `gpukeras_lr_find`, a list with
#'   * `history`: a data.frame with a row per batch trained: `lr`, `loss`,
#'     `smoothed`;
#'   * `suggested`: a named numeric vector, `valley`, `steepest` and
#'     `minimum` (`NA` where the curve gives none, all `NA` when the loss
#'     neither diverged nor turned up);
#'   * `lr`: the recommended rate (`valley`, else `steepest`, else `minimum`),
#'     `NA` when none is suggested;
#'   * `stopped`: why the test stopped, and how the curve ended when it ran
#'     all steps;
#'   * `diverged`: `TRUE` when the loss blew up (or became `NaN`/`Inf`)
#'     before the last step;
#'   * `advice`: what to change when nothing is suggested for want of a turn
#'     (a higher `max_lr` or more steps), else `NULL`;
#'   * `settings`: the settings used, the optimizer and the backend.
#'
#'   It has `print()` and `plot()` methods.
#' @seealso [gpu_fit()], [lr_warmup_cosine()].
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
#'   found <- gpu_lr_find(model, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
#'     steps = 50, seed = 1
#'   )
#'   found
#'   plot(found)
#' }
gpu_lr_find <- function(model, data, min_lr = 1e-7, max_lr = 10, steps = 100, batch_size = NULL,
                        stop_factor = 4, smoothing = 0.98, seed = NULL, ...) {
  check_unknown_args("gpu_lr_find")
  check_positive_number(min_lr)
  check_positive_number(max_lr)
  if (max_lr <= min_lr) {
    abort_bad_argument(sprintf("`max_lr` (%s) must be greater than `min_lr` (%s).", format(max_lr), format(min_lr)))
  }
  check_count(steps)
  if (steps < 10) stop_input_type(steps, "a whole number >= 10")
  batch_size <- check_count(batch_size, allow_null = TRUE)
  check_positive_number(stop_factor)
  if (stop_factor <= 1) {
    stop_input_type(stop_factor, "greater than 1")
  }
  check_number_in(smoothing, "[0, 1)")
  seed <- check_seed(seed)
  data <- read_training_data(data, missing(data))
  check_not_split(data, "training")
  check_python_object(model, "model", "a compiled Keras 3 model")
  result <- core_call(
    "lr_find",
    model = model, data = fit_input(data), min_lr = as.numeric(min_lr), max_lr = as.numeric(max_lr),
    steps = as.integer(steps), batch_size = batch_size,
    stop_factor = as.numeric(stop_factor), smoothing = as.numeric(smoothing), seed = seed
  )
  new_gpukeras_lr_find(result)
}

new_gpukeras_lr_find <- function(result) {
  structure(list(
    history = data.frame(
      lr = as_numbers(result$lr), loss = as_numbers(result$loss), smoothed = as_numbers(result$smoothed)
    ),
    suggested = as_numbers(result$suggested),
    lr = as.numeric(result$recommended %||% NA), stopped = result$stopped,
    diverged = isTRUE(result$diverged), advice = result$advice, settings = result$settings,
    lines = unlist(result$lines)
  ), class = "gpukeras_lr_find")
}

#' @export
format.gpukeras_lr_find <- function(x, ...) x$lines

#' @export
print.gpukeras_lr_find <- print_formatted

#' Plot a learning-rate range test
#'
#' The loss per batch (grey) and its smoothed curve against the learning rate
#' (log scale), with the suggested rates marked.
#'
#' @param x A `gpukeras_lr_find` from [gpu_lr_find()].
#' @param ... Passed to [graphics::plot()].
#' @return `x`, invisibly.
#' @export
plot.gpukeras_lr_find <- function(x, ...) {
  h <- x$history[is.finite(x$history$loss), , drop = FALSE]
  if (!nrow(h)) abort_bad_argument("There is nothing to plot: no batch gave a finite loss.")
  lowest <- min(h$smoothed, na.rm = TRUE)
  top <- max(h$smoothed[seq_len(max(1L, which.min(h$smoothed)))], na.rm = TRUE)
  ylim <- c(lowest - 0.05 * abs(lowest), top + 0.5 * (top - lowest) + 1e-12)
  graphics::plot(h$lr, h$loss,
    log = "x", col = "grey70", pch = 20, cex = 0.6, ylim = ylim,
    xlab = "learning rate (log scale)", ylab = "loss", main = "Learning-rate range test", ...
  )
  graphics::lines(h$lr, h$smoothed, lwd = 2)
  marks <- x$suggested[!is.na(x$suggested)]
  colours <- c(valley = "firebrick", steepest = "steelblue", minimum = "darkgreen")[names(marks)]
  graphics::abline(v = marks, col = colours, lty = 2)
  if (length(marks)) {
    graphics::legend("topleft", legend = sprintf("%s %.2g", names(marks), marks), col = colours, lty = 2, bty = "n")
  }
  invisible(x)
}
