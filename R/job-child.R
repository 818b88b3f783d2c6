# The process behind gpu_fit(background = TRUE), and how the session follows it (see job.R
# for the job's folder).

# In the child: the data again, from what carry_data() wrote.
child_data <- function(carried) {
  if (carried$kind == "texts") return(do.call(text_dataset, readRDS(carried$file)))
  if (carried$kind == "dataset") {
    recipe <- carried$recipe
    made <- if (is.null(recipe$arrays)) {
      do.call(gpu_dataset, recipe)
    } else {
      recipe$arrays <- load_arrays(recipe$arrays)
      datasets_from_result(arrays_pipeline(recipe), recipe)
    }
    if (inherits(made, "gpukeras_dataset")) return(made)
    return(made[[carried$role]])
  }
  load_arrays(carried)
}

# A callr r_session for a job in `dir`, with `env` (process_env()) and the job's folder as
# its temporary folder: what a killed child leaves there (TensorFlow's autograph files, say)
# goes with the job. It ends when this session ends, however it ends (process_entry()).
job_session <- function(env, dir) {
  scratch <- job_file(dir, "tmp")
  dir.create(scratch, showWarnings = FALSE)
  callr::r_session$new(
    callr::r_session_options(env = c(env, TMPDIR = scratch)), wait_timeout = 60000
  )
}

# Start the job's next attempt: job_child() in `session`, an r_session that loaded gpukeras
# already (the standby), or in a fresh one.
job_attempt <- function(job, session = NULL) {
  job$attempt <- job$attempt + 1L
  job$state <- if (job$attempt == 1L) "starting" else "restarting"
  args <- list(entry = "job_child", args = list(job$spec, job$dir, job$attempt))
  if (is.null(session)) {
    session <- job_session(job$env, job$dir)
    session$call(process_entry, c(list(path = getNamespaceInfo("gpukeras", "path")), args))
  } else {
    session$call(process_call, args)
  }
  job$process <- session
  invisible(job)
}

# Read what the job's process said, if it said anything: the fit (done), the error its
# gpu_fit() raised (failed, without restarts: it would only repeat), or its end (a crash):
# then the job starts again from its backup, `max_restarts` times at most. A process that
# could not write into the job's folder, or a crash on a full disk, would only meet it
# again: that stops the job too, told apart (no_space).
job_look <- function(job) {
  if (job$state %in% final_states) return(invisible(job))
  process <- job$process
  message <- session_read(process)
  if (is.null(message)) return(invisible(job))
  if (message$code == 200 && is.null(message$error)) {
    job$fit <- message$result
    job$state <- "done"
    try(process$close(), silent = TRUE)
    return(invisible(job))
  }
  job$stderr <- stderr_tail(message)
  # the condition the child raised (callr's own error when it could not give it back)
  error <- message$error$parent %||% if (message$code == 200) message$error
  ended <- core_call(
    "job_attempt_ended",
    job_dir = job$dir, error = if (!is.null(error)) class(error), exit_status = process$get_exit_status(),
    attempt = job$attempt, max_restarts = job$max_restarts
  )
  job$causes <- c(job$causes, ended$cause)
  job$no_space <- ended$no_space
  if (ended$state == "restarting") {
    job$restarts <- job$restarts + 1L
    return(invisible(job_attempt(job)))
  }
  if (is.null(ended$cause)) job$error <- error
  job$state <- "failed"
  process$kill()
  invisible(job)
}
# The training child: gpu_setup() as the parent had it, before anything starts the
# runtime, then the model, data and gpu_fit() with the job's backup. Its fit goes back
# through callr; the trained weights, with the optimizer's state, through the job's folder.
job_child <- function(spec, dir, attempt) {
  track_restore(spec$track)
  setup <- if (!is.null(spec$setup)) do.call(gpu_setup, spec$setup)
  write_rds_atomic(setup, job_file(dir, "setup.rds"))
  carried <- core_call("job_load_carried", job_dir = dir, sys_path = as.list(spec$sys_path), schedule = spec$schedule)
  progress <- core_call(
    "job_progress_callback",
    job_dir = dir, attempt = attempt,
    # "auto": the batch is the fit's to choose, so rows per second are not known before it
    batch_size = if (is.numeric(spec$fit$batch_size)) spec$fit$batch_size,
    arrays = spec$data$kind == "arrays" && !identical(spec$fit$batch_size, "auto")
  )
  fit_args <- fit_args_of(spec$fit)
  if (is.list(fit_args$learning_rate)) class(fit_args$learning_rate) <- "gpukeras_lr_schedule"
  fit_args$learning_rate <- carried$schedule %||% fit_args$learning_rate
  fit <- do.call(gpu_fit, c(list(
    model = carried$model, data = child_data(spec$data),
    validation_data = if (!is.null(spec$validation)) child_data(spec$validation),
    callbacks = c(if (spec$callbacks) carried$callbacks, list(progress)), verbose = 0,
    strategy = if (!is.null(spec$strategy)) do.call(gpu_strategy, spec$strategy)
  ), fit_args))
  try(track_flush(ending = TRUE), silent = TRUE) # the run sent before the child ends
  core_call("job_save_trained", model = carried$model, path = job_file(dir, "trained.weights.h5"))
  fit
}
