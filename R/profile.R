#' Profile a range of training steps: a profiler trace and TensorBoard logs
#'
#' Trains `model` for `steps[2]` steps through the same core as [gpu_fit()]
#' (same data handling and speed options), takes a profiler trace of steps
#' `steps[1]` to `steps[2]` with the backend's own profiler (TensorFlow's, or
#' JAX's), logs every step's loss and metrics for TensorBoard, and reads back
#' what it can: the files written, the per-step scalars, the steps the trace
#' holds and, on a GPU, how busy the device was during them. The step time,
#' throughput and the share of time spent waiting for input are measured for
#' exactly the traced steps by gpukeras' step timer, so they are there even
#' where the trace cannot be read.
#'
#' The model really trains: its weights and optimizer state move by
#' `steps[2]` steps. Profile a copy (or a freshly built model) if that
#' matters. The first steps compile the train step, so trace later ones (the
#' default traces steps 10 to 20).
#'
#' @section Files:
#' In `logdir`, laid out as Keras' TensorBoard callback does, so
#' `tensorboard --logdir <logdir>` shows one run, `train`:
#' * `train/plugins/profile/<session>/`: the trace (`<host>.xplane.pb`; on JAX
#'   also `<host>.trace.json.gz`, which <https://ui.perfetto.dev> opens too).
#' * `train/events.out.tfevents.*`: the scalars `batch_loss`,
#'   `batch_<metric>`, one per step (the running mean over the epoch that
#'   Keras logs). Written with TensorFlow, so not where only JAX is installed;
#'   the scalars are returned all the same.
#'
#' Viewing needs TensorBoard and, for the Profile tab, its profile plugin
#' (`pip install tensorboard tensorboard-plugin-profile` in gpukeras' Python);
#' writing the files needs neither. The printed result says what is missing.
#' Each traced step is marked for the profiler, so the Profile tab's overview
#' page shows the traced steps one by one with its own input-pipeline
#' verdict.
#'
#' @param model A compiled Keras 3 model. It trains for `steps[2]` steps.
#' @param batch_size Rows per batch when `data` is R data (default 32). Must
#'   be `NULL` for a dataset, which is batched already. One larger than the
#'   rows is the rows (one batch per epoch, as Keras makes it), with a
#'   `gpukeras_warning_batch_size` warning.
#' @param data The training data, in the forms [gpu_fit()] takes: a
#'   [gpu_dataset()] (of a train/validation split, only the train part is
#'   used) or R data as `list(x = , y = )`. Data with fewer than `steps[2]`
#'   batches is gone through again.
#' @param steps Two whole numbers `c(start, stop)`, `1 <= start <= stop`: the
#'   first and last step traced. A step is one call of the compiled train
#'   step (`steps_per_execution` batches, 1 by default).
#' @param logdir The folder for the trace and the TensorBoard logs; created
#'   if missing. A folder used before keeps its earlier traces and each call
#'   adds its own, but TensorBoard then draws the scalars of all of them as
#'   one run: give each profile its own folder (the default does).
#' @param verbose `0` (silent, the default), `1` (progress bar), `2` (one line
#'   per epoch) or `"auto"`, as in [gpu_fit()].
#' @param ... Not used: an argument gpu_profile() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return An object of class `gpukeras_profile`, a list with
#'   * `logdir`, `trace_dir` (the trace's folder) and `tensorboard` (the
#'     `command` to open the logs, and a `note`);
#'   * `trace_files` and `event_files`: data.frames of `path` and `bytes`;
#'   * `steps`: `start`, `stop` and `trained` (steps run);
#'   * `numbers`: the step timer's numbers for the traced steps:
#'     `step_time_mean_ms`, `step_time_sd_ms`, `samples_per_second`,
#'     `input_wait_share`, `input_verdict`, `steps_timed`,
#'     `input_wait_method` (`NULL` where not known);
#'   * `trace`: what the trace holds: `parsed`, `steps` (the step numbers
#'     found), `step_time_mean_ms` (host view), `span_ms`, on TensorFlow
#'     `input_ms`, `input_share` and `input_verdict` (the time tf.data's
#'     iterator ops took to hand Keras' compiled step its batches, waiting
#'     included, as TensorFlow's profiler counts input time; unlike the step
#'     timer's share it leaves the step as Keras runs it and leaves out the
#'     Python cost of an eager `next()`; `NULL` on JAX), `devices` (a
#'     data.frame per device plane: `plane`, `events`, `busy_ms`,
#'     `busy_share`; no rows on the CPU) and `note`;
#'   * `scalars`: a data.frame, `step` and a column per logged metric, and
#'     `scalars_source` (the event files, or memory without TensorFlow);
#'   * `backend` and `settings` (batch size, `steps_per_execution`,
#'     `jit_compile`, dtype policy, device, data kind).
#'
#'   It has `print()` and `format()` methods.
#' @seealso [gpu_fit()], whose monitor measures a whole training run.
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
#'   profile <- gpu_profile(
#'     model, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
#'     steps = c(3, 5), batch_size = 16
#'   )
#'   print(profile)
#'   profile$scalars
#' }
gpu_profile <- function(model, data, steps = c(10, 20), logdir = tempfile("gpukeras-profile-"),
                        batch_size = NULL, verbose = 0, ...) {
  check_unknown_args("gpu_profile")
  # Every check that needs no Python comes first, so a mistake fails at once.
  steps <- check_step_range(steps)
  check_string(logdir)
  logdir <- normalizePath(path.expand(logdir), mustWork = FALSE)
  check_count(batch_size, allow_null = TRUE)
  verbose <- resolve_verbose(verbose)
  data <- read_training_data(data, missing(data))
  check_python_object(model, "model", "a compiled Keras 3 model")

  result <- core_call(
    "profile", model = model, data = fit_input(data), steps = steps, logdir = logdir,
    batch_size = if (!is.null(batch_size)) as.integer(batch_size), verbose = verbose
  )
  new_gpukeras_profile(result)
}

check_step_range <- function(steps, call = caller_env()) {
  if (!is.numeric(steps) || length(steps) != 2L || anyNA(steps) || any(steps != round(steps)) ||
    steps[1] < 1 || steps[1] > steps[2] || steps[2] > 1e6) {
    abort_bad_argument(c(
      sprintf("`steps` must be two whole numbers c(start, stop) with 1 <= start <= stop, not %s.", describe(steps)),
      "They are the first and last step to trace, e.g. steps = c(10, 20)."
    ), call = call)
  }
  as.integer(steps)
}

# The gpukeras_profile object from the core's plain data.
new_gpukeras_profile <- function(result) {
  result$lines <- unlist(core_call("profile_lines", result = result))
  result$trace$steps <- as.integer(unlist(result$trace$steps))
  result$trace$devices <- rows_to_df(result$trace$devices, c("plane", "events", "busy_ms", "busy_share"))
  for (name in c("trace_files", "event_files")) result[[name]] <- rows_to_df(result[[name]], c("path", "bytes"))
  result$scalars <- as_samples_df(result$scalars, "step")
  result$scalars$step <- as.integer(result$scalars$step)
  structure(result, class = "gpukeras_profile")
}

# The core's lines, with the step timer's numbers after the first as gpu_fit()'s print
# writes them.
#' @export
format.gpukeras_profile <- function(x, ...) {
  timer <- format_fit_monitor(x$numbers)
  timer <- timer[grepl("^(Throughput|Input pipeline):", timer)]
  c(x$lines[1], timer, x$lines[-1])
}

#' @export
print.gpukeras_profile <- print_formatted
