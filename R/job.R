# gpu_fit(background = TRUE): training in a child R process, a callr r_session that this
# session follows (job-child.R): it reads the fit, or the error, the child's call gave back
# (callr's read()), and starts a crashed child again from the backup. The job's folder:
#   model.keras, callbacks.pkl, *.npy   the carried model, callbacks and data
#   setup.rds                           the gpu_setup() the child applied
#   progress.dcf, epochs.tsv            the child's progress (job.py)
#   trained.weights.h5                  the child's trained weights
#   backup/, tmp/                       the job's own backup and the child's temp folder
# R data travels as .npy files the child memory-maps: the parent converts it
# once, as gpu_fit() does, writes it and lets it go.

job_file <- function(job, name) file.path(if (is.environment(job)) job$dir else job, name)

not_carriable <- function(what, fix, call = caller_env()) {
  gpukeras_abort(
    c(sprintf("%s cannot be carried to a background process.", what), fix), "gpukeras_error_not_carriable", call = call
  )
}

# Start the job: carry everything (any failure here comes before a child
# starts), then its process. `request` is gpu_fit()'s checked request (fit_request()).
fit_in_background <- function(model, data, validation, request, strategy, max_restarts,
                              call = caller_env()) {
  strategy <- if (!is.null(strategy)) carry_strategy(strategy, call = call)
  env <- process_env()
  standby <- standby_take(env)
  dir <- standby$dir
  if (is.null(dir)) {
    dir <- tempfile("gpukeras-job-")
    dir.create(dir)
  }
  started <- FALSE
  on.exit(if (!started) {
    if (is.null(standby)) unlink(dir, recursive = TRUE) else standby_return(standby)
  }, add = TRUE)
  # the model, the callbacks and a Keras learning-rate schedule (the child gets its config)
  schedule <- if (inherits(request$learning_rate, "python.builtin.object")) request$learning_rate
  carried <- carry_writes(dir, "The model (model.keras)", core_call(
    "job_carry", model = model, job_dir = dir, callbacks = request$callbacks, schedule = schedule, error_call = call
  ), call = call)
  spec <- list(
    # the child's own callbacks and verbose replace these two, and a schedule its config
    fit = request[setdiff(names(request), c("callbacks", "verbose", if (!is.null(schedule)) "learning_rate"))],
    schedule = carried$schedule,
    callbacks = length(request$callbacks) > 0L,
    data = carry_data(data, dir, "data", call = call),
    validation = if (!is.null(validation)) carry_data(validation, dir, "validation", call = call),
    strategy = strategy,
    setup = the$setup_args,
    sys_path = carried$sys_path,
    # tracking as this session has it (the child continues the run after a restart)
    track = track_carry()
  )
  # A run that resumes must see the batches in the same order: it needs a seed.
  spec$seed_chosen <- is.null(spec$fit$seed)
  spec$fit$seed <- chosen_seed(spec$fit$seed)
  spec$fit$backup_dir <- spec$fit$backup_dir %||% file.path(dir, "backup")
  descriptions <- list(
    data = describe_fit_data(data, if (data$kind == "python") data$dataset, request$batch_size, call = call),
    validation_data = if (!is.null(validation)) {
      describe_fit_data(
        validation, if (validation$kind == "python") validation$dataset, NULL, role = "validation", call = call
      )
    }
  )
  # The job, its process started with `env`. Dropping the job object ends its process.
  job <- structure(list2env(list(
    dir = dir, env = env, model = model, spec = spec, descriptions = descriptions, max_restarts = max_restarts,
    verbose = request$verbose, started = Sys.time(), epochs_shown = 0L, attempt = 0L, restarts = 0L,
    causes = character()
  ), parent = emptyenv()), class = "gpukeras_job")
  job$encoding <- fit_encoding(data)
  # callr writes the files that start the call in tempdir(), where the job's folder is.
  carry_writes(
    dir, "The files that start the job's process", job_attempt(job, if (!is.null(standby)) standby_ready(standby)),
    call = call
  )
  started <- TRUE
  job
}

check_job <- function(job, call = caller_env()) {
  if (!inherits(job, "gpukeras_job")) {
    abort_bad_argument(sprintf(
      "`job` must be a gpukeras_job (from gpu_fit(background = TRUE) or gpu_search(background = TRUE)), not %s.",
      describe(job)
    ), call = call)
  }
  invisible(job)
}

final_states <- c("done", "failed", "cancelled")

#' Background training jobs: status, wait, cancel
#'
#' `gpu_fit(background = TRUE)` trains in a child R process (a callr
#' session) and returns a `gpukeras_job` at once. A crash of the child (a
#' signal, an abort, an out-of-memory kill) cannot take the R session down:
#' when the session next looks at the job (`gpu_job_status()`,
#' `gpu_job_wait()`, its print), it starts the child again from its backup, up
#' to `max_restarts` times, and the run ends with the weights an unbroken run
#' would have. When the job ends,
#' its process ends, and with it all the GPU and host memory it held.
#'
#' * `gpu_job_status()` says where the job is, without waiting.
#' * `gpu_job_wait()` waits for the end, showing progress (a line that
#'   updates in place with `verbose = 1`, one line per epoch with `2`, as
#'   `gpu_fit(verbose = )` chose), and returns the `gpukeras_fit`; the model
#'   given to [gpu_fit()] then holds the trained weights and optimizer state.
#'   Interrupted (Ctrl-C), it returns the job, still running. A job that
#'   failed past `max_restarts` is a `gpukeras_error_job_failed` error with the
#'   cause (signal or exit status), the last 20 lines of the child's stderr,
#'   the last progress sample and where the backup is; an error in the
#'   training itself (bad data, say) is raised without restarts, of its own
#'   class, with the child's error whole (its class and fields) as its
#'   `parent`. A disk that fills up under the job's folder (in [tempdir()])
#'   stops it without restarts, as a `gpukeras_error_job_write` error (also a
#'   `gpukeras_error_job_failed`) naming the folder and the attempts made.
#' * `gpu_job_cancel()` ends the job's processes and keeps its work: the
#'   backup (the last one committed, at the end of an epoch or every
#'   `backup_freq` batches) stays, and the status and print say where it is
#'   and how to go on from it: [gpu_fit()] with the same arguments and that
#'   `backup_dir` (and the `seed` the job chose, when none was given), in the
#'   session or in the background. The rest of the job's files (the carried
#'   data, logs) go; a job cancelled before its first backup leaves nothing.
#'
#' Unless `gpu_fit(backup = gpu_backup(dir))` names a folder, a job backs up into its own
#' folder in the session's temporary folder ([tempdir()]), which R removes
#' when the session ends: copy a backup from there to keep it, or give
#' `backup_dir` a folder of your own, which gpukeras never removes.
#'
#' What the child gets: the model (a `.keras` file; a KerasHub preset's with
#' its preset, tokenizer and LoRA), R data (`.npy` files it
#' memory-maps), a [gpu_dataset()] of files (the call that made it) or of R
#' data (its arrays as `.npy` files, and its options), [gpu_text_data()]'s
#' texts, classes and options (made again there), callbacks (pickled), a
#' one-device or mirrored [gpu_strategy()] (its type and devices), and this
#' session's [gpu_setup()] settings, applied there before its runtime starts.
#' What cannot be carried (a custom layer defined in `__main__` or without
#' `get_config()`, a `LambdaCallback`, a [gpu_dataset()] with a `map`
#' function, or of R data split into train and validation without a `seed`, a
#' multi-worker strategy) is a `gpukeras_error_not_carriable` error before
#' any process starts.
#'
#' Keep the job object: when it is garbage collected, its process ends.
#'
#' A search's job (`gpu_search(background = TRUE)`, a `gpukeras_search_job`)
#' takes the same three functions: its status says how many trials are done
#' and the best so far (read from the study's storage), `gpu_job_wait()`
#' returns the `gpukeras_search`, and `gpu_job_cancel()` ends the search and
#' its workers and keeps the study, which the same `gpu_search()` call resumes.
#'
#' Starting a job's process (R, Python, Keras and its backend) takes
#' seconds. So once a job trains, gpukeras readies a standby for the next
#' one: a process that has started all that but no runtime (no devices,
#' no GPU memory), so the next job's [gpu_setup()] settings still apply there.
#' The next `gpu_fit(background = TRUE)` takes it (waiting for it to finish
#' its start, if it has not yet) and starts training without those seconds.
#' There is one standby at most; it ends with the session.
#' `options(gpukeras.job_standby = FALSE)` turns it off.
#'
#' @param job A `gpukeras_job` from `gpu_fit(background = TRUE)`.
#' @param ... Not used: an argument these functions do not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return `gpu_job_status()`: an object of class `gpukeras_job_status`, a
#'   list with `state` (`"starting"`, `"running"`, `"restarting"`, `"done"`,
#'   `"failed"` or `"cancelled"`), `epoch`, `epochs`, `batch` (batches done in
#'   the epoch), `steps` (per epoch), `pid` (of the training child),
#'   `restarts`, `causes` (what ended each crashed child), `sample` (the last
#'   progress sample: `batches_per_second`, `samples_per_second` for R data,
#'   on a GPU `gpu_utilization` (%) and `gpu_memory_used_mib` from NVML, the
#'   latest `logs`), `elapsed` (seconds) and `setup` (the [gpu_setup()]
#'   settings applied in the child, `NULL` when the parent made none),
#'   `backup_dir` (for a cancelled job, the folder its backup was kept in;
#'   `NULL` when none is left), `resume` (for a cancelled or failed job with
#'   a backup, the [gpu_fit()] call that goes on from it, `NULL` otherwise)
#'   and, for a job that failed in the training itself, `error` (its class
#'   and message).
#'   `gpu_job_wait()`: the `gpukeras_fit`. `gpu_job_cancel()`: the job,
#'   invisibly.
#' @seealso [gpu_fit()]
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)), keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'   job <- gpu_fit(model, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
#'                  epochs = 2, seed = 1, background = TRUE)
#'   gpu_job_status(job)$state # "starting", then "running", then "done"
#'   # fit <- gpu_job_wait(job) would wait for the fit (a fresh R, Python and
#'   # TensorFlow take some seconds to start) and return it as gpu_fit() does.
#'   gpu_job_cancel(job)
#'   gpu_job_status(job)$state
#' }
gpu_job_status <- function(job, ...) {
  check_unknown_args("gpu_job_status")
  check_job(job)
  UseMethod("gpu_job_status")
}

#' @export
gpu_job_status.gpukeras_job <- function(job, ...) {
  if (!is.null(job$final)) return(job$final)
  job_look(job)
  progress <- core_call("job_progress", job_dir = job$dir)
  value <- job$state
  if (value %in% c("starting", "restarting") && identical(progress$attempt, as.numeric(job$attempt))) {
    value <- "running"
  }
  # Now that this job trains, ready the process of the next one.
  if (value %in% c("running", "done")) standby_start()
  structure(list(
    state = value, epoch = progress$epoch, epochs = progress$epochs %||% job$spec$fit$epochs, batch = progress$batch,
    steps = progress$steps, pid = job$process$get_pid(), restarts = job$restarts, causes = job$causes,
    sample = progress$sample,
    elapsed = as.numeric(difftime(Sys.time(), job$started, units = "secs")),
    setup = read_rds_or_null(job_file(job, "setup.rds")), error = error_data(job$error),
    backup_dir = job$spec$fit$backup_dir, resume = if (value == "failed") resume_call(job)
  ), class = "gpukeras_job_status")
}

#' @rdname gpu_job_status
#' @param timeout Seconds to wait at most; past it, a
#'   `gpukeras_error_job_timeout` error (the job keeps running).
#' @export
gpu_job_wait <- function(job, timeout = Inf, ...) {
  check_unknown_args("gpu_job_wait", "gpu_job_status")
  check_job(job)
  check_timeout(timeout)
  UseMethod("gpu_job_wait")
}

#' @export
gpu_job_wait.gpukeras_job <- function(job, timeout = Inf, ...) {
  status <- job_wait_until(job, timeout, function() show_job_progress(job, gpu_job_status(job)))
  if (is.null(status)) return(invisible(job))
  job_outcome(job, status)
}

#' @rdname gpu_job_status
#' @export
gpu_job_cancel <- function(job, ...) {
  check_unknown_args("gpu_job_cancel", "gpu_job_status")
  check_job(job)
  UseMethod("gpu_job_cancel")
}

#' @export
gpu_job_cancel.gpukeras_job <- function(job, ...) {
  status <- gpu_job_status(job)
  if (status$state %in% final_states) return(invisible(job))
  job$process$kill_tree()
  # Ended (and reaped) before its files are touched.
  job$process$wait(5000L)
  # Where it stopped (the child may have gone on since `status` was read), the call that
  # resumes it and the backup kept (the core's job_cancelled: the rest of its folder goes).
  cancelled <- core_call(
    "job_cancelled",
    job_dir = job$dir, backup_dir = job$spec$fit$backup_dir, seed = if (isTRUE(job$spec$seed_chosen)) job$spec$fit$seed
  )
  status[names(cancelled)] <- cancelled
  job$final <- status
  invisible(job)
}
