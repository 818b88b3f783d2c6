# The worker template: one R process per session with R, gpukeras, Python, Keras and the
# core's modules a worker calls loaded (worker_load(); no runtime: no devices, no memory)
# that forks each worker a pool asks for. A fork is a fresh process (its own pid, memory,
# runtime, device and crash) that starts in milliseconds: a worker started from scratch
# took 5.3 s of a CPU core (bench/cv.R), which on a small machine the fit training beside
# it paid for. The template outlives the call that started it, so that the next gpu_cv()
# or gpu_search() of the session starts no process either; it ends with the session.
# Python forks (tools/workers.py fork()), so that its own at-fork rules run (an open
# database connection is not shared).
#
# A pool asks by writing fork-<n>.rds (the worker's folder, its slot's environment, what
# to open ahead: `warm`, which the template does once and the forks inherit, and how the
# worker prepares its own runtime: `prepare`, worker_prepare()) into the
# template's folder; the template writes pid.rds into the worker's folder, and status.rds
# (exit code, negative for a signal) once the worker has ended. Where a template cannot
# run (not Unix) or has died, the pool starts workers from scratch.

# The session's template, started on first use (again if it has died, or if the backend
# or Python it was started with is not the session's now); NULL where workers cannot fork.
template_start <- function() {
  if (.Platform$OS.type != "unix") {
    return(NULL)
  }
  env <- process_env()
  template <- the$template
  if (!is.null(template) && template$process$is_alive() && identical(template$env, env)) {
    return(template)
  }
  if (!is.null(template)) template$process$kill_tree()
  dir <- tempfile("gpukeras-template-")
  dir.create(file.path(dir, "tmp"), recursive = TRUE)
  template <- new.env(parent = emptyenv())
  template$dir <- dir
  template$env <- env
  template$requests <- 0L
  # Its temp folder (and so every fork's) is in the session's.
  template$process <- process_start(
    "worker_template", list(dir, Sys.getpid()), dir,
    stdout = file.path(dir, "stdout.log"), stderr = file.path(dir, "stderr.log"),
    env = c(env, TMPDIR = file.path(dir, "tmp"))
  )
  the$template <- template
  template
}

# A worker forked by `template` into folder `dir` with the environment `env` (its slot's
# devices), the template having done `warm` first, that prepares its runtime by `prepare`
# (worker_prepare()): a gpukeras_forked.
template_fork <- function(template, dir, env, warm = NULL, prepare = NULL) {
  template$requests <- template$requests + 1L
  write_rds_atomic(
    list(dir = dir, env = as.list(env), warm = warm, prepare = prepare),
    file.path(template$dir, sprintf("fork-%05d.rds", template$requests))
  )
  gpukeras_forked$new(dir, template)
}

# A process the template forked: the handle of process.R, whose pid (pid.rds) and exit
# status (status.rds, negative for a signal) the template writes into its folder.
gpukeras_forked <- R6::R6Class(
  "gpukeras_forked",
  inherit = gpukeras_process,
  cloneable = FALSE,
  public = list(
    initialize = function(dir, template) {
      self$dir <- dir
      private$template <- template
    },
    get_pid = function() read_rds_or_null(file.path(self$dir, "pid.rds")) %||% NA_integer_,
    # Until the template has reaped it (a zombie answers signal 0 too).
    is_alive = function() {
      if (!is.null(private$status())) {
        return(FALSE)
      }
      pid <- self$get_pid()
      if (is.na(pid)) private$template$process$is_alive() else process_alive(pid)
    },
    wait = function(timeout_ms) {
      process_wait(list(self), timeout_ms / 1000, reported = FALSE)
      invisible(self)
    },
    # The template writes it within its 20 ms round once it has reaped the worker.
    get_exit_status = function() {
      deadline <- Sys.time() + 1
      while (is.null(private$status()) && Sys.time() < deadline) Sys.sleep(0.02)
      private$status() %||% NA_integer_
    },
    # A worker not forked yet ends by itself: its folder is gone by then.
    kill_tree = function() {
      pid <- self$get_pid()
      if (!is.na(pid)) tools::pskill(pid, tools::SIGKILL)
    },
    pollable = function() NULL
  ),
  private = list(
    template = NULL,
    status = function() read_rds_or_null(file.path(self$dir, "status.rds"))
  )
)

# --- In the template process -----------------------------------------------------------

# Load what every worker needs, then fork a worker for each request until the session
# is gone; reap the ended ones and write each one's exit status.
worker_template <- function(dir, parent) {
  worker_load()
  warmed <- list()
  forked <- list()
  last_request <- Sys.time()
  repeat {
    if (!process_alive(parent)) quit(save = "no", status = 0)
    for (request in sort(list.files(dir, "^fork-.*[.]rds$", full.names = TRUE))) {
      spec <- readRDS(request)
      unlink(request)
      last_request <- Sys.time()
      # A request its pool no longer waits for (the folder went with the pool).
      if (!dir.exists(spec$dir)) next
      warm <- spec$warm
      if (!is.null(warm) && !any(vapply(warmed, identical, logical(1), warm))) {
        do.call(core_call, c(list(warm$verb), warm$args))
        warmed <- c(warmed, list(warm))
      }
      pid <- core_call(
        "workers_fork",
        stdout = file.path(spec$dir, "stdout.log"), stderr = file.path(spec$dir, "stderr.log"),
        env = spec$env
      )
      if (pid == 0L) worker_forked(spec$dir, parent, spec$prepare)
      # The session removes a worker's folder once it has its result: then nobody asks.
      try(write_rds_atomic(pid, file.path(spec$dir, "pid.rds")), silent = TRUE)
      forked[[as.character(pid)]] <- spec$dir
    }
    for (ended in core_call("workers_reap")) {
      worker_dir <- forked[[as.character(ended$pid)]]
      forked[[as.character(ended$pid)]] <- NULL
      if (!is.null(worker_dir)) try(write_rds_atomic(ended$status, file.path(worker_dir, "status.rds")), silent = TRUE)
    }
    # Between a session's searches it looks four times a second (0.5 % of a core; every
    # 20 ms took 5 %): the first worker of the next pool waits that long at most.
    idle <- !length(forked) && difftime(Sys.time(), last_request, units = "secs") > 2
    Sys.sleep(if (idle) 0.25 else 0.02)
  }
}

# The forked worker: wait for its task, run it, and end at once (R's own exit would remove
# the temp folder it shares with the template).
worker_forked <- function(dir, parent, prepare) {
  tryCatch(worker_await(dir, parent, prepare), finally = core_call("workers_exit", status = 0L))
}
