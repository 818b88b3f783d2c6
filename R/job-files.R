# The files of a background job's folder (see job.R): written whole or not at all, read
# back or taken as absent, and a full disk told apart from other failures.

# Write an R object so a reader never sees half of it. saveRDS() leaves a
# cut-off file in silence on a full disk (its gzip stream hides the failed
# write), so the bytes are written plainly (write_file_atomic()): a short file is a
# gpukeras_error_job_write naming `what` and the folder, and the old file stays.
write_rds_atomic <- function(object, path, what = basename(path), call = caller_env()) {
  force(object)
  if (!isTRUE(write_file_atomic(path, serialize(object, NULL)))) job_write_failed(dirname(path), what, call = call)
  invisible(TRUE)
}

# A write into the job's folder that failed: what, where, why and what to free.
job_write_failed <- function(dir, what, call = caller_env()) {
  gpukeras_abort(
    c(sprintf("%s could not be written to the job's folder %s: %s.", what, dir, write_cause(dir)), job_space_fix),
    "gpukeras_error_job_write", folder = dir, call = call
  )
}

job_space_fix <- paste(
  "Background jobs write in R's temporary folder (tempdir()): free space on its disk,",
  "or start R with TMPDIR set to a folder on a disk with room."
)

# Why a write into `dir` failed (no space left, or cut short).
write_cause <- function(dir) core_call("job_write_cause", folder = dir)

# Run `code`, which writes `what` into the job's folder `dir`; its failure on a
# full disk (numpy's bare OSError, Keras' save, a classed one from the core) is
# a gpukeras_error_job_write, naming the file the core's error names where it
# names one (one core call may write several: job_carry's model and callbacks).
# Other errors pass unchanged.
carry_writes <- function(dir, what, code, call = caller_env()) {
  tryCatch(code, error = function(e) {
    if (inherits(e, "gpukeras_error_job_write") || isTRUE(core_call("job_disk_full", folder = dir))) {
      named <- regmatches(conditionMessage(e), regexec("^(.+?) could not be written", conditionMessage(e)))[[1]]
      job_write_failed(dir, if (length(named)) named[[2]] else what, call = call)
    }
    stop(e)
  })
}

read_rds_or_null <- function(path) {
  if (!file.exists(path)) return(NULL)
  tryCatch(readRDS(path), error = function(e) NULL)
}
