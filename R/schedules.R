#' Learning-rate schedules for gpu_fit()
#'
#' Each helper returns a small spec (a list of class `gpukeras_lr_schedule`)
#' that [gpu_fit()] passes as `learning_rate`; the Python core builds the
#' schedule from `keras.optimizers.schedules` and sets it on the model's
#' optimizer. Steps are optimizer steps (batches), not epochs. The spec is
#' checked here, in R, so a bad value fails before any training starts.
#'
#' * `lr_warmup_cosine()`: linear warmup from 0 to `peak` over
#'   `warmup_steps`, then cosine decay from `peak` to `alpha * peak` over
#'   `decay_steps` (Keras' `CosineDecay` with `warmup_target`).
#' * `lr_exponential()`: `initial * decay_rate ^ (step / decay_steps)`, the
#'   exponent rounded down with `staircase = TRUE` (Keras'
#'   `ExponentialDecay`).
#' * `lr_cyclical()`: a triangular cycle between `low` and `high`, half a cycle
#'   taking `step_size` steps (Smith, 2017); `"triangular2"` halves the height
#'   of every cycle.
#'
#' @param peak The learning rate reached at the end of the warmup.
#' @param warmup_steps Steps of linear warmup from 0 (`0` for none).
#' @param decay_steps Steps of the decay after the warmup (cosine), or steps
#'   per factor of `decay_rate` (exponential).
#' @param alpha The floor of the cosine decay as a share of `peak`, in `[0, 1]`.
#' @param ... Not used: an argument these functions do not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return An object of class `gpukeras_lr_schedule`: a list with `schedule`
#'   (`"warmup_cosine"`, `"exponential"` or `"cyclical"`) and the parameters,
#'   step counts as integers.
#' @seealso [gpu_fit()]
#' @export
#' @examples
#' lr_warmup_cosine(peak = 1e-3, warmup_steps = 100, decay_steps = 1000)
#' lr_exponential(initial = 0.01, decay_steps = 500, decay_rate = 0.9, staircase = TRUE)
#' lr_cyclical(low = 1e-4, high = 1e-2, step_size = 200, mode = "triangular2")
lr_warmup_cosine <- function(peak, warmup_steps, decay_steps, alpha = 0, ...) {
  check_unknown_args("lr_warmup_cosine")
  check_positive_number(peak)
  check_steps(warmup_steps, minimum = 0)
  check_steps(decay_steps)
  check_number_in(alpha, "[0, 1]", " (the floor as a share of `peak`)")
  new_lr_schedule(
    "warmup_cosine",
    peak = as.double(peak), warmup_steps = as.integer(warmup_steps),
    decay_steps = as.integer(decay_steps), alpha = as.double(alpha)
  )
}

#' @rdname lr_warmup_cosine
#' @param initial The learning rate at step 0.
#' @param decay_rate The factor applied every `decay_steps` steps, in `(0, 1]`.
#' @param staircase Decay in whole steps of `decay_rate` rather than smoothly.
#' @export
lr_exponential <- function(initial, decay_steps, decay_rate, staircase = FALSE, ...) {
  check_unknown_args("lr_exponential", "lr_warmup_cosine")
  check_positive_number(initial)
  check_steps(decay_steps)
  check_number_in(decay_rate, "(0, 1]", " (the factor the learning rate is multiplied by every `decay_steps` steps)")
  check_flag(staircase)
  new_lr_schedule(
    "exponential",
    initial = as.double(initial), decay_steps = as.integer(decay_steps),
    decay_rate = as.double(decay_rate), staircase = staircase
  )
}

#' @rdname lr_warmup_cosine
#' @param low,high The lowest and highest learning rate of a cycle
#'   (`0 < low < high`).
#' @param step_size Steps from `low` to `high` (half a cycle).
#' @param mode `"triangular"` (every cycle the same) or `"triangular2"` (each
#'   cycle half as high as the one before).
#' @export
lr_cyclical <- function(low, high, step_size, mode = c("triangular", "triangular2"), ...) {
  check_unknown_args("lr_cyclical", "lr_warmup_cosine")
  check_positive_number(low)
  check_positive_number(high)
  if (high <= low) {
    abort_bad_argument(sprintf("`high` (%s) must be greater than `low` (%s).", format(high), format(low)))
  }
  check_steps(step_size)
  mode <- check_choice(mode[[1]], c("triangular", "triangular2"), "mode")
  new_lr_schedule(
    "cyclical",
    low = as.double(low), high = as.double(high),
    step_size = as.integer(step_size), mode = mode
  )
}

new_lr_schedule <- function(schedule, ...) structure(list(schedule = schedule, ...), class = "gpukeras_lr_schedule")

# A number of optimizer steps: whole, >= minimum.
check_steps <- function(x, minimum = 1, arg = caller_arg(x), call = caller_env()) {
  if (!is_whole_number(x, minimum, .Machine$integer.max)) {
    stop_input_type(x, sprintf("one whole number of steps >= %d", as.integer(minimum)), arg, call)
  }
  invisible(x)
}

# The core's line (core/schedules.py line()).
#' @export
format.gpukeras_lr_schedule <- function(x, ...) core_call("schedule_line", spec = unclass(x), arrow = arrow())

#' @export
print.gpukeras_lr_schedule <- print_formatted
