# How a background job ends: what is kept of a stopped one, the fit it returns,
# or the error that says why it failed.

# The call that resumes the job from its backup (its seed too when gpukeras chose it), or
# NULL when no backup was committed.
resume_call <- function(job) {
  core_call(
    "job_resume_call",
    backup_dir = job$spec$fit$backup_dir, seed = if (isTRUE(job$spec$seed_chosen)) job$spec$fit$seed
  )
}

# The end of a job: the fit (weights loaded into the user's model), or a classed error.
job_outcome <- function(job, status, call = caller_env()) {
  if (!is.null(job$result)) return(job$result)
  if (status$state == "cancelled") {
    gpukeras_abort(c(
      "The job was cancelled (gpu_job_cancel()): it has no result.",
      if (!is.null(status$resume)) sprintf("%s resumes from its backup.", status$resume)
    ), "gpukeras_error_job_cancelled", call = call)
  }
  if (status$state == "failed") {
    job$final <- status
    # The carried data is not needed any more; the backup (and the logs) stay.
    unlink(list.files(job$dir, pattern = "[.]npy$", full.names = TRUE))
    job_failure(job, status, call = call)
  }
  fit <- job$fit
  core_call("job_load_trained", model = job$model, path = job_file(job, "trained.weights.h5"), error_call = call)
  # The child's model and encoding stayed there: this session's are the ones to score with.
  fit$model <- job$model
  fit$encoding <- job$encoding
  fit$settings$verbose <- job$verbose
  fit$settings[names(job$descriptions)] <- job$descriptions
  fit$settings$restarts <- status$restarts
  if (identical(fit$settings$backup_dir, job_file(job, "backup"))) {
    fit$settings$backup_dir <- "the job's own temporary folder (removed when it ended)"
  }
  job$result <- fit
  job$final <- status
  unlink(job$dir, recursive = TRUE)
  fit
}

# A job that crashed past its restarts, or stopped on a full disk (no restart would get
# further: the message counts the attempts made and says what to free), in the core's words.
job_failure <- function(job, status, call = caller_env()) {
  if (!is.null(status$error)) {
    # An error in the training itself, raised again as its parent: it would only repeat.
    process_abort("Training in the background failed.", parent = job$error, call = call)
  }
  no_space <- isTRUE(job$no_space)
  failed <- core_call(
    "job_failure",
    status = unclass(status), stderr = job$stderr, no_space = no_space, fix = job_space_fix
  )
  gpukeras_abort(
    rlang::set_names(unlist(failed$message), unlist(failed$bullets)), unlist(failed$class),
    folder = if (no_space) job$dir, cause = failed$cause, causes = status$causes, stderr = job$stderr,
    sample = status$sample, backup_dir = job$spec$fit$backup_dir, call = call
  )
}
