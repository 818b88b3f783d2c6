# Printing background jobs and their progress, in the core's words (train/job_report.py).

#' @export
format.gpukeras_job_status <- function(x, ...) {
  unlist(core_call("job_status_lines", status = unclass(x), temp_dir = tempdir()))
}

#' @export
print.gpukeras_job_status <- print_formatted

#' @export
format.gpukeras_job <- function(x, ...) {
  unlist(core_call(
    "job_status_lines",
    status = unclass(gpu_job_status(x)), temp_dir = tempdir(),
    job = list(backup_dir = x$spec$fit$backup_dir, max_restarts = x$max_restarts)
  ))
}

#' @export
print.gpukeras_job <- print_formatted

# gpu_job_wait()'s progress: one line per finished epoch (verbose 2), or one
# line rewritten in place (verbose 1); nothing with verbose 0. Returns `status`.
show_job_progress <- function(job, status) {
  if (job$verbose == 1) {
    if (!is.null(status$sample)) cat("\r", core_call("job_sample_line", status = unclass(status)), "\033[K", sep = "")
    if (status$state %in% final_states) cat("\n")
  } else if (job$verbose == 2) {
    lines <- unlist(core_call(
      "job_epoch_lines",
      job_dir = job$dir, shown = job$epochs_shown, epochs = job$spec$fit$epochs
    ))
    cat(sprintf("%s\n", lines), sep = "")
    job$epochs_shown <- job$epochs_shown + length(lines)
  }
  invisible(status)
}
