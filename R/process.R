# Work in another process: the one handle behind gpu_fit(background = TRUE)'s supervisor
# and the training child it starts (job.R, job-child.R) and gpu_search(background =
# TRUE)'s process (search-job.R). Read against callr's r_process and processx's poll().
# (The worker pool of gpu_cv() and gpu_search() uses callr's r_session directly,
# workers.R, with process_entry() and process_call() below.)
#
# A process runs `entry`, a function of gpukeras, in a fresh R process (process_start()).
# It has a folder, `dir`, where it leaves its outcome: result.rds, what it made, or error.rds, the condition it
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
    # What processx::poll() waits on for it: its poll connection says when `entry` has
    # returned (a process that ends closes it too).
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

# The function a later call into a process that ran process_entry() runs (a callr
# r_session's): gpukeras' function `entry` with `args`.
process_call <- function(entry, args) do.call(get(entry, envir = asNamespace("gpukeras")), args)
environment(process_call) <- globalenv()

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

# The environment of a process: the session's Python and Keras backend, MLflow's
# credentials as the session has them now (a child inherits the session's environment as
# it was at its start: a process kept for later, such as the template or the standby, is
# made again when they change, since its environment then differs); with `visible`
# (a worker's GPU), that GPU alone, and memory that grows as the fit needs it (JAX would
# take 75 % of the GPU at start, TensorFlow all of it, leaving nothing to a second worker).
process_env <- function(visible = NULL) {
  c(
    callr::rcmd_safe_env(),
    GPUKERAS_PYTHON = reticulate::py_config()$python,
    KERAS_BACKEND = core_call("keras_backend"),
    Sys.getenv(mlflow_secrets)[nzchar(Sys.getenv(mlflow_secrets))],
    if (!is.null(visible)) {
      c(CUDA_VISIBLE_DEVICES = visible, TF_FORCE_GPU_ALLOW_GROWTH = "true", XLA_PYTHON_CLIENT_PREALLOCATE = "false")
    }
  )
}

# Wait at most `timeout` seconds for one of `processes` to end or, with `reported`, to
# leave its outcome, with processx::poll() on what each says ends with it (pollable()).
# Whether one did.
process_wait <- function(processes, timeout, reported = TRUE) {
  if (any(vapply(processes, function(p) (reported && p$reported()) || !p$is_alive(), logical(1)))) {
    return(invisible(TRUE))
  }
  ready <- processx::poll(lapply(processes, function(p) p$pollable()), as.integer(ceiling(timeout * 1000)))
  invisible(any(unlist(ready) == "ready"))
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
      if (status$state %in% final_states) return(status)
      if (Sys.time() >= deadline) timed_out(status)
      process_wait(list(job$process), every, reported = FALSE)
    },
    interrupt = function(condition) {
      cli::cli_alert_info("The job is still running: gpu_job_wait(job) waits again, gpu_job_cancel(job) stops it.")
      NULL
    }
  )
}

# --- Waiting on an event ----------------------------------------------------------------
# A process waits for the session's word (its task written, a fork asked for) on a FIFO,
# `go.fifo` in its folder, with processx::poll(), not by looking for a file in a sleep
# loop. The session writes the word's data to a file first (atomically), then a line to
# the FIFO (process_signal()); a process that has not opened the FIFO yet finds the file
# when it does.

# Make the FIFO `path` (anew, an earlier waiter's gone) and open it to wait on: its reader,
# and a writer of its own, so that the session's writers, come and gone, do not leave the
# reader ready for good (at its end).
fifo_listen <- function(path) {
  unlink(path)
  reader <- processx::conn_create_fifo(path, read = TRUE)
  list(reader = reader, writer = processx::conn_connect_fifo(path, write = TRUE))
}

# Write a line to the FIFO of the process that waits in `dir` (process_await()), if it has
# opened it yet.
process_signal <- function(dir) {
  fifo <- tryCatch(processx::conn_connect_fifo(file.path(dir, "go.fifo"), write = TRUE), error = function(e) NULL)
  if (!is.null(fifo)) {
    processx::conn_write(fifo, "\n")
    close(fifo)
  }
  invisible()
}

# In the process: wait until `file` is in `dir`, woken by process_signal(), and each second
# look whether `dir` and the session `parent` (optional) are still there. Whether it came.
process_await <- function(dir, file, parent = NULL) {
  fifo <- fifo_listen(file.path(dir, "go.fifo"))
  on.exit(lapply(fifo, close))
  repeat {
    if (file.exists(file.path(dir, file))) return(TRUE)
    if (!dir.exists(dir) || (!is.null(parent) && !process_alive(parent))) return(FALSE)
    processx::poll(list(fifo$reader), 1000L)
    processx::conn_read_lines(fifo$reader)
  }
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
  tryCatch({
    write_rds_atomic(condition, file.path(dir, "error.rds"))
    TRUE
  }, gpukeras_error_job_write = function(e) FALSE)
}

# Whether the process `pid` still runs (signal 0 tests without signalling).
process_alive <- function(pid) isTRUE(suppressWarnings(tools::pskill(pid, 0L)))

# --- In the session, after -----------------------------------------------------------

# A process's error as plain data: its class and message (a job's status, a worker's
# result as the search's core reads it).
error_data <- function(condition) {
  if (is.null(condition)) return(NULL)
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

# The last `n` lines a process wrote to the log at `path`: none where it wrote none, or
# ended before it made the file.
log_tail <- function(path, n = 20L) {
  if (file.exists(path)) utils::tail(readLines(path, warn = FALSE), n) else character()
}
