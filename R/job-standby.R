# A standby for the next gpu_fit(background = TRUE). Starting a job's process costs
# seconds: R, gpukeras, Python, and Keras with TensorFlow or JAX (bench/background.R). A
# standby is a job's r_session (job_session()) started ahead in a job folder of its own,
# that has done all that but started no runtime (no devices, no GPU memory), so the job's
# gpu_setup() still applies there. The fit that takes it calls its job_child() there and
# saves those seconds.
#
# One standby at most, started once a job trains, so it does not compete with that job's
# own start. It ends with the session, like every job's process;
# options(gpukeras.job_standby = FALSE) turns it off.

standby_enabled <- function() !isFALSE(getOption("gpukeras.job_standby", TRUE))

# Start a standby unless one already waits (or prepares). Cheap when one does:
# gpu_job_status() asks each time it sees a job training.
standby_start <- function() {
  if (!standby_enabled() || (!is.null(the$standby) && the$standby$session$is_alive())) return(invisible(the$standby))
  if (!is.null(the$standby)) standby_discard(the$standby)
  env <- process_env()
  dir <- tempfile("gpukeras-job-")
  dir.create(dir)
  session <- job_session(env, dir)
  session$call(process_entry, list(path = getNamespaceInfo("gpukeras", "path"), entry = "job_standby", args = list()))
  the$standby <- list(dir = dir, env = env, session = session)
  invisible(the$standby)
}

# In the standby: start Python and import Keras with its backend (importing starts no
# devices).
job_standby <- function() invisible(core_call("preload_keras"))

# The standby, when one waits for a job with `env`; it is the caller's then. One that
# cannot serve (ended, for another Python or backend, or turned off since) is stopped.
standby_take <- function(env) {
  standby <- the$standby
  the$standby <- NULL
  if (is.null(standby)) return(NULL)
  if (standby_enabled() && standby$session$is_alive() && identical(standby$env, env)) {
    standby$own_files <- list.files(standby$dir)
    return(standby)
  }
  standby_discard(standby)
  NULL
}

# The standby's r_session, once it has loaded all (waiting for it if it still loads:
# less than a fresh process would take); NULL, the standby ended, if it failed to.
standby_ready <- function(standby) {
  session <- standby$session
  message <- if (identical(session$get_state(), "busy")) session_read(session, 60000L)
  if (identical(session$get_state(), "idle") && is.null(message$error)) return(session)
  session$kill()
  NULL
}

# A fit that failed before its job started (e.g. a model that cannot be carried) gives the
# standby back, without the files it wrote there.
standby_return <- function(standby) {
  unlink(file.path(standby$dir, setdiff(list.files(standby$dir), standby$own_files)), recursive = TRUE)
  the$standby <- standby
}

standby_discard <- function(standby) {
  standby$session$kill()
  unlink(standby$dir, recursive = TRUE)
}
