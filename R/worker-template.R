# The worker template: one R process per pool with R, gpukeras, Python and Keras loaded
# (no runtime: no devices, no memory) that forks each worker the pool asks for. A fork is
# a fresh process (its own pid, memory, runtime, device and crash) that starts in
# milliseconds: a worker started from scratch took 5.3 s of a CPU core (bench/cv.R), which
# on a small machine the fit training beside it paid for. Python forks (tools/workers.py
# fork()), so that its own at-fork rules run (an open database connection is not shared).
#
# The pool asks by writing fork-<n>.rds (the worker's folder and its slot's environment)
# into the template's folder; the template writes pid.rds into the worker's folder, and
# status.rds (exit code, negative for a signal) once the worker has ended. Where a template
# cannot run (not Unix) or has died, the pool starts workers from scratch.

# The template for `pool`, started once: its process, or NULL where workers cannot fork.
template_start <- function(pool) {
  if (.Platform$OS.type != "unix") {
    return(NULL)
  }
  if (!is.null(pool$template)) {
    return(if (pool$template$process$is_alive()) pool$template)
  }
  dir <- file.path(pool$dir, "template")
  dir.create(file.path(dir, "tmp"), recursive = TRUE)
  # Its temp folder (and so every fork's) goes with the pool's folder.
  env <- c(worker_env(list()), TMPDIR = file.path(dir, "tmp"))
  process <- job_process(
    "worker_template", list(dir, Sys.getpid(), pool$warm),
    stdout = file.path(dir, "stdout.log"), stderr = file.path(dir, "stderr.log"), env = env
  )
  pool$template <- new.env(parent = emptyenv())
  pool$template$dir <- dir
  pool$template$process <- process
  pool$template$requests <- 0L
  pool$template
}

# A worker forked by `template` into folder `dir` with the environment `env` (its slot's
# devices): a handle with the methods worker_collect() and worker_close() use.
template_fork <- function(template, dir, env) {
  template$requests <- template$requests + 1L
  write_rds_atomic(
    list(dir = dir, env = as.list(env)),
    file.path(template$dir, sprintf("fork-%05d.rds", template$requests))
  )
  pid <- function() read_rds_or_null(file.path(dir, "pid.rds")) %||% NA_integer_
  status <- function() read_rds_or_null(file.path(dir, "status.rds"))
  is_alive <- function() {
    if (!is.null(status())) {
      return(FALSE)
    }
    if (is.na(pid())) template$process$is_alive() else process_alive(pid())
  }
  wait_until <- function(done, timeout_ms) {
    deadline <- Sys.time() + timeout_ms / 1000
    while (!done() && Sys.time() < deadline) Sys.sleep(0.02)
  }
  list(
    is_alive = is_alive,
    wait = function(timeout_ms) wait_until(Negate(is_alive), timeout_ms),
    # The template writes it within its 20 ms round once it has reaped the worker.
    get_exit_status = function() {
      wait_until(function() !is.null(status()), 1000)
      status() %||% NA_integer_
    },
    kill_tree = function() if (!is.na(pid())) tools::pskill(pid(), tools::SIGKILL)
  )
}

# End the template: it is told to go (so that R removes its temp folder), and killed if
# it has not gone within a second.
template_close <- function(pool) {
  template <- pool$template
  if (is.null(template)) {
    return(invisible())
  }
  if (dir.exists(template$dir)) file.create(file.path(template$dir, "stop"))
  template$process$wait(1000L)
  template$process$kill_tree()
  invisible()
}

# --- In the template process -----------------------------------------------------------

# Load what every worker needs, then fork a worker for each request until told to stop
# or the session is gone; reap the ended ones and write each one's exit status.
worker_template <- function(dir, parent, warm = NULL) {
  core()
  reticulate::import("keras")
  if (!is.null(warm)) do.call(core_call, c(list(warm$verb), warm$args))
  forked <- list()
  repeat {
    if (file.exists(file.path(dir, "stop")) || !process_alive(parent)) quit(save = "no", status = 0)
    for (request in sort(list.files(dir, "^fork-.*[.]rds$", full.names = TRUE))) {
      spec <- readRDS(request)
      unlink(request)
      pid <- core_call(
        "workers_fork",
        stdout = file.path(spec$dir, "stdout.log"), stderr = file.path(spec$dir, "stderr.log"),
        env = spec$env
      )
      if (pid == 0L) worker_forked(spec$dir, parent)
      write_rds_atomic(pid, file.path(spec$dir, "pid.rds"))
      forked[[as.character(pid)]] <- spec$dir
    }
    for (ended in core_call("workers_reap")) {
      worker_dir <- forked[[as.character(ended$pid)]]
      forked[[as.character(ended$pid)]] <- NULL
      # The session removes a worker's folder once it has its result: then nobody asks.
      if (!is.null(worker_dir)) try(write_rds_atomic(ended$status, file.path(worker_dir, "status.rds")), silent = TRUE)
    }
    Sys.sleep(0.02)
  }
}

# The forked worker: wait for its task, run it, and end at once (R's own exit would remove
# the temp folder it shares with the template).
worker_forked <- function(dir, parent) {
  tryCatch(worker_await(dir, parent), finally = core_call("workers_exit", status = 0L))
}
