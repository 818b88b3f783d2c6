# The processes behind gpu_fit(background = TRUE): the supervisor and the
# training child it starts (see job.R for the job folder they share).

# In the child: the data again, from what carry_data() wrote.
child_data <- function(carried) {
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

# The supervisor: runs the training child until it finishes, restarting it
# after a crash at most `max_restarts` times. Runs in its own R process, and
# stops the child and itself when the session that started it (`parent`) is
# gone. (processx's own supervisor would do that too, but it keeps two FIFOs
# open in the session for as long as the session lives.) A standby's first
# child waits for its job (job-standby.R), whose go.rds says max_restarts.
job_supervise <- function(dir, max_restarts, env, parent, standby = FALSE) {
  restarts <- 0L
  attempt <- 0L
  # The child's temp folder is the job's: what a killed child leaves there (TensorFlow's
  # autograph files, say) goes with the job folder.
  scratch <- job_file(dir, "tmp")
  dir.create(scratch, showWarnings = FALSE)
  causes <- character()
  child <- NULL
  # A state it cannot write (a full disk) ends the job: the session could not
  # follow it. The child goes too, and the exit status tells the session why.
  state <- function(value, ...) {
    written <- tryCatch({
      write_rds_atomic(
        list(state = value, pid = pid, attempt = attempt, restarts = restarts, causes = causes, ...),
        job_file(dir, "state.rds")
      )
      TRUE
    }, gpukeras_error_job_write = function(e) FALSE)
    if (!written) {
      if (!is.null(child)) child$kill_tree()
      quit(save = "no", status = job_write_status)
    }
  }
  repeat {
    attempt <- attempt + 1L
    child <- process_start(
      if (standby && attempt == 1L) "job_child_standby" else "job_child", list(dir), dir,
      stdout = job_file(dir, sprintf("stdout-%d.log", attempt)),
      stderr = job_file(dir, sprintf("stderr-%d.log", attempt)),
      env = c(env, GPUKERAS_JOB_ATTEMPT = attempt, TMPDIR = scratch)
    )
    pid <- child$get_pid()
    state(if (attempt == 1L) "starting" else "restarting")
    while (child$is_alive()) {
      child$wait(1000L)
      if (!process_alive(parent)) {
        child$kill_tree()
        return(state("cancelled", cause = "the R session that started the job ended"))
      }
    }
    status <- child$get_exit_status()
    if (file.exists(job_file(dir, "result.rds"))) return(state("done"))
    error <- child$error()
    if (!is.null(error)) return(state("failed", error = error_data(error)))
    # A child that could not write into the job's folder, or a crash on a full
    # disk (R cannot even make its temp folder there), would only meet it again.
    if (isTRUE(status == job_write_status) || isTRUE(disk_full(dir))) {
      causes <- c(
        causes, sprintf("the training process could not write to the job's folder %s: %s", dir, write_cause(dir))
      )
      return(state("failed", no_space = TRUE))
    }
    causes <- c(causes, exit_cause(status))
    if (standby) max_restarts <- read_rds_or_null(job_file(dir, "go.rds"))$max_restarts %||% 0L
    if (attempt > max_restarts) return(state("failed"))
    restarts <- restarts + 1L
  }
}

# What ended a process, from its exit status (processx gives -signal for a signal).
exit_cause <- function(status) {
  if (is.null(status) || is.na(status)) return("the training process ended for an unknown reason")
  if (status < 0) {
    signals <- c(
      `6` = "SIGABRT, an abort", `9` = "SIGKILL, e.g. the out-of-memory killer", `11` = "SIGSEGV, a segmentation fault",
      `15` = "SIGTERM"
    )
    name <- signals[as.character(-status)]
    return(sprintf(
      "the training process was killed by signal %d%s", -status, if (is.na(name)) "" else sprintf(" (%s)", name)
    ))
  }
  sprintf("the training process exited with status %d", status)
}

# The training child: gpu_setup() as the parent had it, before anything starts
# the runtime, then the model, data and gpu_fit() with the job's backup.
job_child <- function(dir) {
  spec <- readRDS(job_file(dir, "spec.rds"))
  attempt <- as.integer(Sys.getenv("GPUKERAS_JOB_ATTEMPT", "1"))
  failed <- tryCatch({
    track_restore(spec$track)
    setup <- if (!is.null(spec$setup)) do.call(gpu_setup, spec$setup)
    write_rds_atomic(setup, job_file(dir, "setup.rds"))
    carried <- core_call("job_load_carried", job_dir = dir, sys_path = as.list(spec$sys_path), schedule = spec$schedule)
    progress <- core_call(
      "job_progress_callback",
      job_dir = dir, attempt = attempt,
      batch_size = spec$fit$batch_size, arrays = spec$data$kind == "arrays"
    )
    fit_args <- fit_args_of(spec$fit)
    if (is.list(fit_args$learning_rate)) class(fit_args$learning_rate) <- "gpukeras_lr_schedule"
    fit <- do.call(gpu_fit, c(
      list(
        model = carried$model, data = child_data(spec$data),
        validation_data = if (!is.null(spec$validation)) child_data(spec$validation),
        callbacks = c(if (spec$callbacks) carried$callbacks, list(progress)), verbose = 0,
        strategy = if (!is.null(spec$strategy)) do.call(gpu_strategy, spec$strategy)
      ),
      fit_args[setdiff(names(fit_args), "learning_rate")],
      list(learning_rate = carried$schedule %||% fit_args$learning_rate)
    ))
    try(track_flush(ending = TRUE), silent = TRUE) # the run sent before the child ends
    core_call("job_save_trained", model = carried$model, path = job_file(dir, "trained.weights.h5"))
    process_report(dir, fit)
    NULL
  }, error = function(e) e)
  if (!is.null(failed)) {
    # Where even the error cannot be written, the exit status says why.
    quit(save = "no", status = if (process_report_error(dir, failed)) 3 else job_write_status)
  }
  invisible()
}
