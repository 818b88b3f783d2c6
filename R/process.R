# Work in another process: the one handle behind gpu_fit(background = TRUE)'s supervisor
# and the training child it starts (job.R, job-child.R), gpu_search(background = TRUE)'s
# process (search-job.R), the worker pool's workers (workers.R) and the workers the
# template forks (worker-template.R). Read against callr's r_process and processx's poll().
#
# A process runs `entry`, a function of gpukeras, in a fresh R process (process_start()),
# or is forked by the session's template (a gpukeras_forked). It has a folder, `dir`,
# where it leaves its outcome: result.rds, what it made, or error.rds, the condition it
# raised, whole (process_report(), process_report_error()). The session raises that
# condition again as the `parent` of its own error, keeping its class and fields
# (process_abort(), as callr's get_result() does). The session waits for many processes
# at once, with a timeout, by process_wait().

# The handle: a processx-like interface (is_alive(), get_pid(), wait(), get_exit_status(),
# kill_tree()) and the process's outcome (result(), error()).
gpukeras_process <- R6::R6Class(
  "gpukeras_process",
  cloneable = FALSE,
  public = list(
    dir = NULL,
    initialize = function(dir, process) {
      self$dir <- dir
      private$process <- process
    },
    is_alive = function() private$process$is_alive(),
    get_pid = function() private$process$get_pid(),
    # Wait at most `timeout_ms` for the process to end.
    wait = function(timeout_ms) {
      private$process$wait(timeout_ms)
      invisible(self)
    },
    get_exit_status = function() private$process$get_exit_status(),
    kill_tree = function() private$process$kill_tree(),
    # What the process made (result.rds), or NULL.
    result = function() read_rds_or_null(file.path(self$dir, "result.rds")),
    # The condition the process raised (error.rds), or NULL.
    error = function() read_rds_or_null(file.path(self$dir, "error.rds")),
    # Whether it left its outcome.
    reported = function() any(file.exists(file.path(self$dir, c("result.rds", "error.rds")))),
    # What processx::poll() waits on for it (its poll connection says when `entry` has
    # returned; a process that ends closes it too), NULL for a process it cannot wait on.
    pollable = function() private$process
  ),
  private = list(process = NULL)
)

# The function a process runs: load gpukeras as this session has it (pkgload::load_all()
# of a source tree, else the installed package at `path`) and call its function `entry`.
# Its environment is the global one, so serializing it for the new process does not load
# a namespace there first.
process_entry <- function(path, entry, args) {
  if (length(list.files(file.path(path, "R"), pattern = "[.][Rr]$"))) {
    getExportedValue("pkgload", "load_all")(path, quiet = TRUE, helpers = FALSE)
  } else {
    loadNamespace("gpukeras", lib.loc = dirname(path))
  }
  do.call(get(entry, envir = asNamespace("gpukeras")), args)
}
environment(process_entry) <- globalenv()

# Start `entry` of gpukeras with `args` in a new R process (see process_entry()), its
# outcome in `dir`: a gpukeras_process.
process_start <- function(entry, args, dir, env, stdout, stderr) {
  process <- callr::r_bg(
    process_entry,
    args = list(path = getNamespaceInfo("gpukeras", "path"), entry = entry, args = args),
    stdout = stdout, stderr = stderr, env = env, cleanup_tree = TRUE
  )
  gpukeras_process$new(dir, process)
}

# The environment of a process: the session's Python and Keras backend; with `visible`
# (a worker's GPU), that GPU alone, and memory that grows as the fit needs it (JAX would
# take 75 % of the GPU at start, TensorFlow all of it, leaving nothing to a second worker).
process_env <- function(visible = NULL) {
  c(
    callr::rcmd_safe_env(),
    GPUKERAS_PYTHON = reticulate::py_config()$python,
    KERAS_BACKEND = core_call("keras_backend"),
    if (!is.null(visible)) {
      c(CUDA_VISIBLE_DEVICES = visible, TF_FORCE_GPU_ALLOW_GROWTH = "true", XLA_PYTHON_CLIENT_PREALLOCATE = "false")
    }
  )
}

# Wait at most `timeout` seconds for one of `processes` to end or, with `reported`, to
# leave its outcome. processx::poll() waits on those it can (until `entry` returns); a
# forked one is looked at every 20 ms (the template's round). Whether one did.
process_wait <- function(processes, timeout, reported = TRUE) {
  deadline <- Sys.time() + timeout
  repeat {
    if (any(vapply(processes, function(p) (reported && p$reported()) || !p$is_alive(), logical(1)))) {
      return(invisible(TRUE))
    }
    left <- as.numeric(difftime(deadline, Sys.time(), units = "secs"))
    if (left <= 0) {
      return(invisible(FALSE))
    }
    pollable <- Filter(Negate(is.null), lapply(processes, function(p) p$pollable()))
    if (length(pollable) < length(processes)) left <- min(left, 0.02)
    if (!length(pollable)) {
      Sys.sleep(left)
    } else if (any(unlist(processx::poll(pollable, as.integer(ceiling(left * 1000)))) == "ready")) {
      return(invisible(TRUE))
    }
  }
}

# Wait for `job` (a gpukeras_job) to end, at most `timeout` seconds: `look()` gives its
# status, each time its process has reported or ended and at least every `every` seconds.
# Its final status; NULL when interrupted (Ctrl-C), the job still running. Past the
# deadline, the error `timed_out(status)` raises.
job_wait_until <- function(job, timeout, look, timed_out, every = 0.1) {
  deadline <- Sys.time() + min(timeout, 1e9)
  tryCatch(
    repeat {
      status <- look()
      if (status$state %in% final_states) {
        return(status)
      }
      if (Sys.time() >= deadline) timed_out(status)
      process_wait(list(job$process), every, reported = FALSE)
    },
    interrupt = function(condition) {
      cli::cli_alert_info("The job is still running: gpu_job_wait(job) waits again, gpu_job_cancel(job) stops it.")
      NULL
    }
  )
}

# --- In the process ------------------------------------------------------------------

# Leave what the process made in `dir` (result.rds).
process_report <- function(dir, value, what = "The process's result (result.rds)") {
  write_rds_atomic(value, file.path(dir, "result.rds"), what)
}

# Leave the condition the process raised in `dir` (error.rds), whole but for its backtrace
# (this process's frames, which the session's print would show as its own). Whether it
# could be written (a full disk, say, cannot take it).
process_report_error <- function(dir, condition) {
  condition$trace <- NULL
  tryCatch(
    {
      write_rds_atomic(condition, file.path(dir, "error.rds"))
      TRUE
    },
    gpukeras_error_job_write = function(e) FALSE
  )
}

# Whether the process `pid` still runs (signal 0 tests without signalling).
process_alive <- function(pid) {
  isTRUE(suppressWarnings(tools::pskill(pid, 0L)))
}

# --- In the session, after -----------------------------------------------------------

# A process's error as plain data: its class and message (a job's status, a worker's
# result as the search's core reads it).
error_data <- function(condition) {
  if (is.null(condition)) {
    return(NULL)
  }
  c(
    list(class = class(condition), message = conditionMessage(condition)),
    if (isTRUE(condition$crashed)) list(crashed = TRUE)
  )
}

# Raise `message` as the session's error of `class`, caused by `parent`, the condition a
# process raised: kept whole as the error's parent (its class and fields), and the error
# is of its own classes too, so that a handler for the process's class
# (gpukeras_error_preempted, say) catches it.
process_abort <- function(message, class = NULL, parent = NULL, ..., call = caller_env()) {
  own <- if (!is.null(parent)) setdiff(class(parent), c("gpukeras_error", "rlang_error", "error", "condition"))
  gpukeras_abort(message, unique(c(own, class)), parent = parent, ..., call = call)
}
