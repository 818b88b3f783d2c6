# Printing background jobs and their progress.

format_job_sample <- function(status) {
  sample <- status$sample
  parts <- c(
    if (!is.null(status$epoch)) {
      sprintf(
        "epoch %d/%d, batch %d%s", as.integer(status$epoch), as.integer(status$epochs),
        as.integer(status$batch %||% 0), if (!is.null(status$steps)) sprintf("/%d", as.integer(status$steps)) else ""
      )
    },
    if (!is.null(sample$samples_per_second)) {
      sprintf("%s samples/s", format(round(sample$samples_per_second), big.mark = ","))
    } else if (!is.null(sample$batches_per_second)) {
      sprintf("%.1f batches/s", sample$batches_per_second)
    },
    if (!is.null(sample$gpu_memory_used_mib)) {
      sprintf(
        "GPU %s%s MiB", if (!is.null(sample$gpu_utilization)) sprintf("%.0f %%, ", sample$gpu_utilization) else "",
        format(round(sample$gpu_memory_used_mib), big.mark = ",")
      )
    },
    if (length(sample$logs)) paste(names(sample$logs), as_keras_shows(unlist(sample$logs)), collapse = ", ")
  )
  paste(parts, collapse = "; ")
}

# Logged values as Keras' progress display shows them (a fit in the R session): 4 decimals,
# or 4 in scientific notation near zero (the core's train/live.py as_keras_shows()).
as_keras_shows <- function(x) ifelse(abs(x) > 1e-3, sprintf("%.4f", x), sprintf("%.4e", x))

#' @export
format.gpukeras_job_status <- function(x, ...) {
  c(
    sprintf(
      "<gpukeras job status> %s after %.1f s%s", x$state, x$elapsed,
      if (x$restarts) sprintf(", %d restart(s)", as.integer(x$restarts)) else ""
    ),
    if (!is.null(x$pid) && !x$state %in% final_states) sprintf("  Process:  %d", as.integer(x$pid)),
    if (!is.null(x$sample)) sprintf("  Progress: %s", format_job_sample(x)),
    if (length(x$causes)) paste0("  Crashed:  ", x$causes),
    format_job_backup(x)
  )
}

# Where a stopped job's work is: its backup and the call that resumes from it.
format_job_backup <- function(status) {
  if (!status$state %in% c("cancelled", "failed")) return(NULL)
  stopped <- sprintf(
    "  %s %s", if (status$state == "cancelled") "Cancelled" else "Failed",
    if (!is.null(status$epoch)) sprintf("in epoch %d", as.integer(status$epoch)) else "before training started"
  )
  if (is.null(status$resume)) {
    return(if (status$state == "cancelled")
      paste0(stopped, if (!is.null(status$epoch)) ", before its first backup", "."))
  }
  c(
    sprintf("%s; its backup is in %s:", stopped, status$backup_dir),
    sprintf("  %s resumes from it.", status$resume),
    if (in_session_temp(status$backup_dir)) {
      paste0(
        "  It is in the session's temporary folder and is removed when R ends: copy it, or give backup = gpu_backup() ",
        "a folder of your own."
      )
    }
  )
}

in_session_temp <- function(path) {
  startsWith(normalizePath(path, mustWork = FALSE), paste0(normalizePath(tempdir()), .Platform$file.sep))
}

#' @export
print.gpukeras_job_status <- function(x, ...) print_formatted(x, ...)

#' @export
format.gpukeras_job <- function(x, ...) {
  status <- gpu_job_status(x)
  lines <- format(status)
  lines[1] <- sub("<gpukeras job status>", "<gpukeras job>", lines[1], fixed = TRUE)
  c(
    lines,
    if (!status$state %in% final_states) {
      c(
        sprintf(
          "  Backups:  %s (up to %d restart(s) after a crash)", x$spec$fit$backup_dir, as.integer(x$max_restarts)
        ),
        "  gpu_job_wait(job) waits for the fit, gpu_job_status(job) says where it is, gpu_job_cancel(job) stops it."
      )
    }
  )
}

#' @export
print.gpukeras_job <- function(x, ...) print_formatted(x, ...)

# gpu_job_wait()'s progress: one line per finished epoch (verbose 2), or one
# line rewritten in place (verbose 1); nothing with verbose 0.
show_job_progress <- function(job, status) {
  if (job$verbose == 0) return(invisible())
  if (job$verbose == 1) {
    if (!is.null(status$sample)) cat("\r", format_job_sample(status), "\033[K", sep = "")
    if (status$state %in% final_states) cat("\n")
    return(invisible())
  }
  path <- job_file(job, "epochs.tsv")
  lines <- if (file.exists(path)) readLines(path, warn = FALSE) else character()
  for (line in lines[seq_len(length(lines)) > job$epochs_shown]) {
    fields <- strsplit(line, "\t", fixed = TRUE)[[1]]
    cat(sprintf(
      "Epoch %s/%d: %s\n", fields[1], as.integer(job$spec$fit$epochs), paste(sub("=", " ", fields[-1]), collapse = ", ")
    ))
  }
  job$epochs_shown <- max(job$epochs_shown, length(lines))
  invisible()
}
