#' Find the fastest sound training settings: precision, batch size, steps per execution, XLA
#'
#' Tries, on copies of the model, the settings that decide training speed:
#' the dtype policy (`precisions`), the batch size, `steps_per_execution` and
#' `jit_compile`. Each combination trains a fresh copy for a short timed run;
#' the recommended combination is the fastest among the numerically sound
#' ones. Give it to [gpu_fit()] as `tuned`. The model itself is never
#' trained or changed.
#'
#' @section The search:
#' Trying every combination would take dozens of runs, so the search goes one
#' axis at a time from a baseline (coordinate descent): float32, the middle
#' batch size, `steps_per_execution` 1 and gpu_fit()'s own XLA choice; then
#' every precision, keeping the fastest sound one; then every batch size; then
#' `steps_per_execution`; then `jit_compile`. Every run gets an equal share of
#' what is left of `time_budget`, and stops early once it runs at less than
#' half the best rate so far (it is clearly slower). Runs the budget leaves no
#' time for are listed in `skipped`. The budget is kept to within about one
#' run's compile time.
#'
#' @section Steps per epoch:
#' For R data, no batch size tried, and so none recommended, makes fewer than
#' 8 steps per epoch over the data's rows (`ceiling(rows / batch_size) >= 8`;
#' with fewer than 8 rows, batches of 1), the rule of [gpu_batch_size()]: its
#' search stops at the largest such size, and sizes in `batch_sizes` that make
#' fewer are left out (the header says so; if none is left, the error says
#' which sizes would do). A dataset keeps its own batches. The table's `steps`
#' column is each run's steps per epoch.
#'
#' @section Memory:
#' On a GPU the search asks [gpu_memory_plan()] first: the batch sizes it
#' measures stop at the largest power of two the plan fits in the free memory
#' (`batch_sizes_from` says so), and a combination the plan says cannot fit
#' (mixed precision counted with half the activations) is not run; nor is
#' one that runs out of memory when it trains. Both are in `skipped`, with a
#' `reason` that starts "memory:" and gives the plan's figures or the
#' engine's error; `print()` lists them.
#'
#' @section A run:
#' The copy (with the model's weights, rebuilt under the run's dtype policy;
#' a softmax or sigmoid output layer stays float32) trains with Keras' own
#' `fit()` on the first rows of the data, repeated (a dataset gives its first
#' batch: the pipeline's own speed is not part of it; see [gpu_fit()]'s
#' monitor for that). On JAX the rows train on the device where [gpu_fit()]
#' would put arrays there, `steps_per_execution` being the steps run per
#' dispatch: the axis then tunes that (the `data` column says where). Samples
#' per second are timed as gpu_fit()'s monitor times them, over the steps after the first two executions (tracing and
#' compiling). A run is *sound* when every loss it logged and every weight it
#' ended with is finite and, under `mixed_float16`, loss scaling skipped at
#' most a quarter of its steps for overflows. `loss` is the mean training loss
#' over the same first `loss_samples` samples for every run (`NA` for runs
#' stopped early before them): a precision that trains worse shows there.
#'
#' @section Precision:
#' `precisions = NULL` tries what the device computes natively: float32 and
#' mixed_bfloat16 on a CPU; on a GPU mixed_float16 from compute capability
#' 7.0 and mixed_bfloat16 from 8.0. [gpu_fit()] cannot change the dtype
#' policy of a model that is built: to train in the recommended precision,
#' build the model after `gpu_setup(mixed_precision = )` (or keras3's
#' `config_set_dtype_policy()`); `gpu_fit(tuned = )` refuses a model built
#' under another policy.
#'
#' @param model A compiled Keras 3 model (it is not changed).
#' @param data The data, in the forms [gpu_fit()] takes (a train/validation
#'   split: give its training part).
#' @param time_budget Seconds for the whole search (the batch-size search
#'   included).
#' @param precisions Dtype policies to try (`"float32"`, `"mixed_bfloat16"`,
#'   `"mixed_float16"`); `NULL`: what the device supports (see Precision).
#' @param batch_sizes Batch sizes to try for R data; `NULL`: the three
#'   fastest sizes [gpu_batch_size()]'s search finds (up to `max_batch`). Sizes
#'   that make fewer than 8 steps per epoch are left out (see Steps per
#'   epoch). A dataset keeps its own batches (`batch_sizes` must be `NULL`).
#' @param steps_per_execution Values of `steps_per_execution` to try.
#' @param jit_compile Values of `jit_compile` to try (`FALSE`, `TRUE`).
#' @param max_batch The largest size [gpu_batch_size()]'s search tries.
#' @param seed Seeds Keras before every run, so all start alike.
#' @param ... Not used: an argument gpu_tune() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return A `gpukeras_tune`, a list with
#'   * `trials`: a data.frame with a row per run, in the order run: `axis`
#'     (the axis it varied, `"baseline"` first), `precision`, `batch_size`,
#'     `steps_per_execution`, `jit_compile`, `samples_per_second`, `samples`
#'     (trained), `loss`, `finite`, `overflows` (loss-scale overflows, `NA`
#'     without loss scaling), `sound`, `stopped_early`, `seconds`, `note`
#'     and `data` (`"device"` where the rows trained on the device, as
#'     [gpu_fit()] trains arrays on JAX, `steps_per_execution` then being its
#'     steps per dispatch; else `"host"`) and `steps_per_epoch` (batches of
#'     that size in one pass over the data, `NA` where not known);
#'   * `recommended`: the fastest sound run's `precision`, `batch_size`,
#'     `steps_per_execution` and `jit_compile` (`NULL` when none is sound);
#'   * `baseline`, `loss_samples`, `skipped` (a data.frame of combinations
#'     not run, with the `reason`: "memory: ..." or "time: ..."), `device`, `device_name`, `backend`,
#'     `batch_sizes_from`, `seconds`, `data_kind` and `settings`.
#'
#'   It has `print()`, `plot()` and `as.data.frame()` (the trials) methods.
#' @seealso [gpu_fit()] (`tuned = `), [gpu_batch_size()], [gpu_setup()].
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
#'   iris_data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
#'   # The model is built under float32: tune the other axes for it (another
#'   # precision needs the model built again under that policy).
#'   tune <- gpu_tune(model, iris_data,
#'     time_budget = 2, precisions = "float32", batch_sizes = c(8, 16),
#'     steps_per_execution = c(1, 8), jit_compile = FALSE
#'   )
#'   tune
#'   plot(tune)
#'   fit <- gpu_fit(model, iris_data, epochs = 2, tuned = tune, verbose = 0)
#' }
gpu_tune <- function(model, data, time_budget = 120, precisions = NULL, batch_sizes = NULL,
                     steps_per_execution = c(1, 8, 32), jit_compile = c(FALSE, TRUE),
                     max_batch = 1024, seed = NULL, ...) {
  check_unknown_args("gpu_tune")
  check_positive_number(time_budget)
  if (!is.null(precisions)) {
    known <- c("float32", "mixed_bfloat16", "mixed_float16", "bfloat16", "float16")
    if (!is.character(precisions) || !length(precisions) || anyNA(precisions) || !all(precisions %in% known)) {
      abort_bad_argument(
        sprintf(
          "`precisions` must be among \"float32\", \"mixed_bfloat16\" and \"mixed_float16\", not %s.",
          describe(precisions)
        )
      )
    }
  }
  if (!is.null(batch_sizes)) check_counts(batch_sizes)
  check_counts(steps_per_execution)
  if (!is.logical(jit_compile) || !length(jit_compile) || anyNA(jit_compile)) {
    stop_input_type(jit_compile, "TRUE and/or FALSE")
  }
  check_count(max_batch)
  seed <- check_seed(seed)
  data <- read_training_data(data, missing(data))
  check_not_split(data, "training")
  check_python_object(model, "model", "a compiled Keras 3 model")
  result <- core_call(
    "tune",
    model = model, data = fit_input(data), time_budget = as.numeric(time_budget),
    precisions = as_python(precisions),
    batch_sizes = if (!is.null(batch_sizes)) as.list(as.integer(batch_sizes)),
    steps_per_execution = as.list(as.integer(steps_per_execution)),
    jit_compile = as.list(jit_compile), max_batch = as.integer(max_batch), seed = seed
  )
  new_gpukeras_tune(result, data$kind)
}

check_counts <- function(x, arg = caller_arg(x), call = caller_env()) {
  if (!is.numeric(x) || !length(x) || anyNA(x) || any(x < 1) || any(x != round(x))) {
    stop_input_type(x, "whole numbers >= 1", arg, call)
  }
  invisible(x)
}

tune_columns <- c(
  "axis", "precision", "batch_size", "steps_per_execution", "jit_compile", "samples_per_second",
  "samples", "loss", "finite", "overflows", "sound", "stopped_early", "seconds", "note", "data",
  "steps_per_epoch"
)

new_gpukeras_tune <- function(result, data_kind) {
  trials <- rows_to_df(result$trials, tune_columns)
  for (column in c("samples_per_second", "loss", "seconds")) trials[[column]] <- as.numeric(trials[[column]])
  trials$steps_per_epoch <- as.integer(trials$steps_per_epoch)
  structure(list(
    trials = trials, recommended = result$recommended, baseline = result$baseline, loss_samples = result$loss_samples,
    skipped = rows_to_df(result$skipped, c("axis", tune_columns[2:5], "reason")), device = result$device,
    device_name = result$device_name, backend = result$backend, batch_sizes_from = result$batch_sizes_from,
    seconds = result$seconds, data_kind = data_kind, settings = result$settings,
    lines = unlist(core_call("tune_lines", result = result))
  ), class = "gpukeras_tune")
}

# Which runs are the recommended combination's (none where nothing is recommended).
is_recommended <- function(x) {
  t <- x$trials
  best <- x$recommended
  if (is.null(best)) return(rep(FALSE, nrow(t)))
  t$sound & t$precision == best$precision & t$batch_size == best$batch_size &
    t$steps_per_execution == best$steps_per_execution & t$jit_compile == best$jit_compile
}

# The lines, made by the core from its plain data.
#' @export
format.gpukeras_tune <- function(x, ...) x$lines

#' @export
print.gpukeras_tune <- print_formatted

#' @export
as.data.frame.gpukeras_tune <- function(x, ...) x$trials

#' Plot a settings search
#'
#' Samples per second of every run, one bar per combination in the order
#' run; numerically unsound runs are red and marked "unsound", runs stopped
#' early grey, the recommended one dark blue.
#'
#' @param x A `gpukeras_tune` from [gpu_tune()].
#' @param ... Passed to [graphics::barplot()].
#' @return `x`, invisibly.
#' @export
plot.gpukeras_tune <- function(x, ...) {
  t <- x$trials
  rates <- ifelse(is.na(t$samples_per_second), 0, t$samples_per_second)
  labels <- sprintf(
    "%s b%d s%d %s", sub("^mixed_", "", t$precision), as.integer(t$batch_size), as.integer(t$steps_per_execution),
    ifelse(t$jit_compile, "xla", "")
  )
  colours <- ifelse(
    !t$sound, "firebrick", ifelse(is_recommended(x), "navy", ifelse(t$stopped_early, "grey70", "steelblue"))
  )
  ylim <- c(0, max(rates, 1) * 1.15)
  at <- pretty(ylim)
  ticks <- format(at, big.mark = ",", scientific = FALSE, trim = TRUE)
  margins <- tune_plot_margins(labels, ticks)
  old <- graphics::par(mar = margins)
  on.exit(graphics::par(old))
  centres <- graphics::barplot(rates,
    names.arg = labels, las = 2, col = colours, axes = FALSE,
    main = "gpu_tune(): throughput per combination", ylim = ylim, ...
  )
  graphics::axis(2, at = at, labels = ticks, las = 2)
  graphics::title(ylab = "samples / s", line = margins[2] - 1.5)
  if (any(!t$sound)) {
    graphics::text(centres[!t$sound], rates[!t$sound], "unsound", pos = 3, col = "firebrick", cex = 0.8)
  }
  invisible(x)
}

# The margins (lines: bottom, left, top, right) that hold the bar labels, written
# upwards, and the rate axis' labels with the axis title beside them, on the open
# device: a fixed margin clipped long labels ("float32 b16384 s128 xla", "2,500,000").
tune_plot_margins <- function(labels, ticks) {
  lines <- function(text) max(graphics::strwidth(text, units = "inches")) / graphics::par("csi")
  c(lines(labels) + 1.5, lines(ticks) + 3, 3, 1)
}

# gpu_fit(tuned = ): the batch size, steps_per_execution and jit_compile a gpu_tune()
# recommends, in place of arguments left at their defaults, as the core applies them
# (train/fit_request.py apply_tuned()), with the `record` the fit's request carries.
tune_fit_settings <- function(settings, data_kind, batch_size, steps_per_execution, jit_compile, call = caller_env()) {
  given <- list(batch_size = batch_size, steps_per_execution = steps_per_execution, jit_compile = jit_compile)
  # a background fit's child: the parent applied the choice to these arguments already
  if (is_tuned_record(settings)) return(c(given, list(record = settings)))
  if (!inherits(settings, "gpukeras_tune")) {
    stop_input_type(settings, "a gpu_tune() result", "tuned", call)
  }
  core_call(
    "tune_apply",
    recommended = settings$recommended, tuned_kind = settings$data_kind, data_kind = data_kind, given = given,
    error_call = call
  )
}

tuned_fields <- c("precision", "batch_size", "steps_per_execution", "jit_compile")

# The choice a gpu_fit() request carries (tune_fit_settings()'s record), which a background
# fit's child gets back as `tuned`.
is_tuned_record <- function(x) is.list(x) && !is.object(x) && identical(names(x), tuned_fields)
