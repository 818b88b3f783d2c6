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
# template's folder, and a line to its FIFO (process_signal()); the template writes
# pid.rds into the worker's folder, and status.rds (exit code, negative for a signal) once
# the worker has ended. The worker alone holds the writing end of alive.fifo in its folder,
# which the session waits on: its end is an event to the session too. Where a template cannot
# run (not Unix) or has died, the pool starts workers from scratch.

# The session's template, started on first use (again if it has died, or if the backend
# or Python it was started with is not the session's now); NULL where workers cannot fork.
template_start <- function() {
  if (.Platform$OS.type != "unix") return(NULL)
  env <- process_env()
  template <- the$template
  if (!is.null(template) && template$process$is_alive() && identical(template$env, env)) return(template)
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
  forked <- gpukeras_forked$new(dir, template)
  write_rds_atomic(
    list(dir = dir, env = as.list(env), warm = warm, prepare = prepare),
    file.path(template$dir, sprintf("fork-%05d.rds", template$requests))
  )
  process_signal(template$dir)
  forked
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
      private$alive <- processx::conn_create_fifo(file.path(dir, "alive.fifo"), read = TRUE)
    },
    get_pid = function() read_rds_or_null(file.path(self$dir, "pid.rds")) %||% NA_integer_,
    # Until the template has reaped it (a zombie answers signal 0 too).
    is_alive = function() {
      if (!is.null(private$status())) return(FALSE)
      pid <- self$get_pid()
      if (is.na(pid)) private$template$process$is_alive() else process_alive(pid)
    },
    wait = function(timeout_ms) {
      process_wait(list(self), timeout_ms / 1000, reported = FALSE)
      invisible(self)
    },
    # The template writes it as soon as it has reaped the worker (the worker's end wakes
    # it): this waits milliseconds. The exit status is the template's alone to read
    # (waitpid() answers only a parent), so the session has no event of its own here.
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
    # Ready once the worker has ended (the writing end it holds closes); never before it
    # is forked.
    pollable = function() private$alive
  ),
  private = list(template = NULL, alive = NULL, status = function() read_rds_or_null(file.path(self$dir, "status.rds")))
)

# --- In the template process -----------------------------------------------------------

# Load what every worker needs, then fork a worker for each request until the session
# is gone; reap the ended ones and write each one's exit status. It waits on its FIFO (a
# request) and on a pipe per worker, whose writing end only the worker holds (its end),
# with processx::poll(), and each second looks whether the session is still there.
worker_template <- function(dir, parent) {
  worker_load()
  requests <- fifo_listen(file.path(dir, "go.fifo"))
  warmed <- list()
  forked <- list() # by pid: the worker's folder and the reading end of its pipe
  repeat {
    if (!process_alive(parent)) quit(save = "no", status = 0)
    for (request in sort(list.files(dir, "^fork-.*[.]rds$", full.names = TRUE))) {
      spec <- readRDS(request)
      unlink(request)
      # A request its pool no longer waits for (the folder went with the pool).
      if (!dir.exists(spec$dir)) next
      warm <- spec$warm
      if (!is.null(warm) && !any(vapply(warmed, identical, logical(1), warm))) {
        do.call(core_call, c(list(warm$verb), warm$args))
        warmed <- c(warmed, list(warm))
      }
      # The worker's end, for the template (a pipe) and for the session (alive.fifo): the
      # writing ends go with the fork alone.
      pipe <- processx::conn_create_pipepair()
      alive <- tryCatch(
        processx::conn_connect_fifo(file.path(spec$dir, "alive.fifo"), write = TRUE),
        error = function(e) NULL
      )
      pid <- core_call(
        "workers_fork",
        stdout = file.path(spec$dir, "stdout.log"), stderr = file.path(spec$dir, "stderr.log"),
        env = spec$env
      )
      if (pid == 0L) worker_forked(spec$dir, parent, spec$prepare)
      close(pipe[[2]])
      if (!is.null(alive)) close(alive)
      # The session removes a worker's folder once it has its result: then nobody asks.
      try(write_rds_atomic(pid, file.path(spec$dir, "pid.rds")), silent = TRUE)
      forked[[as.character(pid)]] <- list(dir = spec$dir, ended = pipe[[1]])
    }
    for (ended in core_call("workers_reap")) {
      worker <- forked[[as.character(ended$pid)]]
      forked[[as.character(ended$pid)]] <- NULL
      if (is.null(worker)) next
      close(worker$ended)
      try(write_rds_atomic(ended$status, file.path(worker$dir, "status.rds")), silent = TRUE)
    }
    processx::poll(c(list(requests$reader), lapply(forked, `[[`, "ended")), 1000L)
    processx::conn_read_lines(requests$reader)
  }
}

# The forked worker: wait for its task, run it, and end at once (R's own exit would remove
# the temp folder it shares with the template).
worker_forked <- function(dir, parent, prepare) {
  tryCatch(worker_await(dir, parent, prepare), finally = core_call("workers_exit", status = 0L))
}
