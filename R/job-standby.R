# A standby for the next gpu_fit(background = TRUE). Starting a job's
# processes costs seconds: R, gpukeras, Python, and Keras with TensorFlow or
# JAX (bench/background.R). A standby is a supervisor whose first training
# child has done all that in a job folder of its own, but started no runtime
# (no devices, no GPU memory), so the job's gpu_setup() still applies there.
# It waits for the job's files and the go-ahead (go.rds, which also holds
# max_restarts, announced on its FIFO: process_signal()); the fit that takes
# it saves those seconds.
#
# One standby at most, started once a job trains, so it does not compete with
# that job's own start. It ends with the session, like every job's processes;
# options(gpukeras.job_standby = FALSE) turns it off.

standby_enabled <- function() !isFALSE(getOption("gpukeras.job_standby", TRUE))

# Start a supervisor for the job folder `dir`; with `standby`, its first
# child prepares and waits for go.rds. The credentials in `env` reach the child
# through the supervisor's environment, not through its arguments (a file callr writes).
start_supervisor <- function(dir, env, max_restarts, standby = FALSE) {
  process_start(
    "job_supervise", list(dir, max_restarts, env[setdiff(names(env), mlflow_secrets)], Sys.getpid(), standby), dir,
    stdout = job_file(dir, "supervisor.log"), stderr = "2>&1", env = env
  )
}

# Start a standby unless one already waits (or prepares). Cheap when one
# does: gpu_job_status() asks each time it sees a job training.
standby_start <- function() {
  if (!standby_enabled() || (!is.null(the$standby) && the$standby$process$is_alive())) return(invisible(the$standby))
  if (!is.null(the$standby)) standby_discard(the$standby)
  env <- process_env()
  dir <- tempfile("gpukeras-job-")
  dir.create(dir)
  the$standby <- list(dir = dir, env = env, process = start_supervisor(dir, env, 0L, standby = TRUE))
  invisible(the$standby)
}

# The standby, when one waits for a job with `env`; it is the caller's then.
# One that cannot serve (ended, for another Python or backend, or turned
# off since) is stopped.
standby_take <- function(env) {
  standby <- the$standby
  the$standby <- NULL
  if (is.null(standby)) return(NULL)
  if (standby_enabled() && standby$process$is_alive() && identical(standby$env, env)) {
    standby$own_files <- list.files(standby$dir)
    return(standby)
  }
  standby_discard(standby)
  NULL
}

# A fit that failed before its job started (e.g. a model that cannot be
# carried) gives the standby back, without the files it wrote there.
standby_return <- function(standby) {
  written <- setdiff(list.files(standby$dir), c(standby$own_files, standby_files))
  unlink(file.path(standby$dir, written), recursive = TRUE)
  the$standby <- standby
}

# What the standby's own processes write in its folder.
standby_files <- c("supervisor.log", "state.rds", "stdout-1.log", "stderr-1.log", "tmp", "go.fifo")

standby_discard <- function(standby) {
  standby$process$kill_tree()
  unlink(standby$dir, recursive = TRUE)
}

# Give the standby its job: the files are in its folder already.
standby_go <- function(standby, max_restarts, call = caller_env()) {
  write_rds_atomic(
    list(max_restarts = max_restarts), job_file(standby$dir, "go.rds"), "The go-ahead (go.rds)", call = call
  )
  process_signal(standby$dir)
  standby$process
}

# In the standby's first child: start Python and import Keras with its
# backend (importing starts no devices), then wait for the job (process_await()).
job_child_standby <- function(dir) {
  core_call("preload_keras")
  if (process_await(dir, "go.rds")) job_child(dir)
}
