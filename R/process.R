# Work in another process, on callr: gpu_fit(background = TRUE)'s child (a callr
# r_session, job-child.R), gpu_search(background = TRUE)'s process (callr's r_bg,
# search-job.R) and the worker pool of gpu_cv() and gpu_search() (r_sessions, workers.R).
# Each runs process_entry() first: gpukeras loaded as this session has it. What a process
# made, or the condition it raised, comes back through callr (r_session's read(), r_bg's
# get_result()): the condition whole, as the `parent` of callr's error, which the session
# raises again as the `parent` of its own classed error (process_abort()).

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
  get("end_with_session", envir = asNamespace("gpukeras"))()
  do.call(get(entry, envir = asNamespace("gpukeras")), args)
}
environment(process_entry) <- globalenv()

# In a process the session started (process_env() names the session): end it when the
# session ends, however it ends, even while it is busy (the core's end_with_parent). Not
# processx's `supervise = TRUE`: its FIFOs stay open as R connections for the rest of the
# session, which R CMD check takes for connections an example left open.
end_with_session <- function() {
  session <- Sys.getenv("GPUKERAS_SESSION_PID")
  if (nzchar(session)) core_call("end_with_parent", parent = as.integer(session))
  invisible()
}

# What the call running in `session` (a callr r_session) gave back, waiting at most `wait`
# ms for it (its 301s, progress, skipped); NULL where nothing came.
session_read <- function(session, wait = 0L) {
  while (identical(session$poll_process(wait), "ready")) {
    message <- session$read()
    if (!identical(message$code, 301)) return(message)
  }
  NULL
}

# The function a later call into a process that ran process_entry() runs (a callr
# r_session's): gpukeras' function `entry` with `args`.
process_call <- function(entry, args) do.call(get(entry, envir = asNamespace("gpukeras")), args)
environment(process_call) <- globalenv()

# The environment of a process: the session's Python, Keras backend and compilation cache, MLflow's
# credentials as the session has them now (mlflow_secret_env(); a child inherits the
# session's environment as it was at its start: a process kept for later, a spare worker or
# the standby, is made again when they change, since its environment then differs); with `visible`
# (a worker's GPU), that GPU alone, and memory that grows as the fit needs it (JAX would
# take 75 % of the GPU at start, TensorFlow all of it, leaving nothing to a second worker).
process_env <- function(visible = NULL) {
  c(
    callr::rcmd_safe_env(),
    GPUKERAS_SESSION_PID = Sys.getpid(),
    GPUKERAS_PYTHON = reticulate::py_config()$python,
    KERAS_BACKEND = core_call("keras_backend"),
    compile_cache_env(),
    mlflow_secret_env(),
    if (!is.null(visible)) {
      c(CUDA_VISIBLE_DEVICES = visible, TF_FORCE_GPU_ALLOW_GROWTH = "true", XLA_PYTHON_CLIENT_PREALLOCATE = "false")
    }
  )
}

check_timeout <- function(timeout, call = caller_env()) {
  if (!(is.numeric(timeout) && length(timeout) == 1L && !is.na(timeout) && timeout > 0)) {
    abort_bad_argument(
      sprintf("`timeout` must be a number of seconds > 0 (or Inf), not %s.", describe(timeout)), call = call
    )
  }
}

# Wait for `job` (a gpukeras_job) to end, at most `timeout` seconds: `look()` gives its
# status at least every `every` seconds, and each time its process has ended.
# Its final status; NULL when interrupted (Ctrl-C), the job still running. Past the
# deadline, a gpukeras_error_job_timeout (the core's words: job_timed_out).
job_wait_until <- function(job, timeout, look, every = 0.1, call = caller_env()) {
  deadline <- Sys.time() + min(timeout, 1e9)
  tryCatch(
    repeat {
      status <- look()
      if (status$state %in% final_states) return(status)
      if (Sys.time() >= deadline) {
        timed_out <- core_call("job_timed_out", status = unclass(status), timeout = timeout)
        gpukeras_abort(unlist(timed_out), "gpukeras_error_job_timeout", call = call)
      }
      job$process$wait(as.integer(every * 1000))
    },
    interrupt = function(condition) {
      cli::cli_alert_info("The job is still running: gpu_job_wait(job) waits again, gpu_job_cancel(job) stops it.")
      NULL
    }
  )
}

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
# process raised: kept whole as the error's parent (its class and fields; not its
# backtrace, the process's frames, which the session's print would show as its own), and
# the error is of its own classes too, so that a handler for the process's class
# (gpukeras_error_preempted, say) catches it.
process_abort <- function(message, class = NULL, parent = NULL, ..., call = caller_env()) {
  own <- if (!is.null(parent)) setdiff(class(parent), c("gpukeras_error", "rlang_error", "error", "condition"))
  if (!is.null(parent)) parent$trace <- NULL
  gpukeras_abort(message, unique(c(own, class)), parent = parent, ..., call = call)
}

# The last 20 lines a callr call's `message` (its read()) says the process wrote to stderr.
stderr_tail <- function(message) utils::tail(strsplit(message$stderr %||% "", "\n")[[1]], 20L)

# The last `n` lines a process wrote to the log at `path`: none where it wrote none, or
# ended before it made the file.
log_tail <- function(path, n = 20L) {
  if (file.exists(path)) utils::tail(readLines(path, warn = FALSE), n) else character()
}
