#' Track every fit, fold and trial in MLflow
#'
#' `gpu_track()` turns tracking on for the session: from then on every
#' [gpu_fit()] (in the background too), every [gpu_cv()] (a parent run and a
#' child run per fold) and every [gpu_search()] (a parent run and a child run
#' per trial, with its state) is a run in [MLflow](https://mlflow.org), the
#' open-source tracking server R and Python teams share. Tracking is off until
#' asked for: gpukeras writes no tracking files you did not ask for.
#'
#' @section Where runs go:
#' * A folder: `gpu_track("runs")` keeps runs in MLflow's own SQLite store
#'   `runs/mlflow.db`, with the artifacts (models, plots) in `runs/artifacts`
#'   (made for you alone when missing). Nothing to start; MLflow's UI opens it
#'   (`mlflow ui --backend-store-uri sqlite:///<absolute path>/runs/mlflow.db`),
#'   and so do [gpu_runs()] and MLflow's own clients.
#' * A server: `gpu_track("http://mlflow.example.org:5000", experiment =
#'   "churn")`, for a team (see `vignette("tracking", package = "gpukeras")`).
#'   The credentials are MLflow's own variables, `MLFLOW_TRACKING_USERNAME` and
#'   `MLFLOW_TRACKING_PASSWORD` (or `MLFLOW_TRACKING_TOKEN`), set in
#'   `.Renviron` rather than in code; they never appear in a print, an error, a
#'   warning, a run's params or the files gpukeras keeps (a background job or
#'   a worker gets them through its environment, and so a URI that holds
#'   credentials, `https://user:password@host`). A URI is shown without its
#'   user information (a user alone too: it may be a token) and without the
#'   value of any query key that names a password, token, key, secret,
#'   credential, authorization or signature, in its query or its fragment.
#' * MLflow's variables alone: where `MLFLOW_TRACKING_URI` (and
#'   `MLFLOW_EXPERIMENT_NAME` or `MLFLOW_EXPERIMENT_ID`) is set, as for every
#'   MLflow client, runs are tracked there without a call to `gpu_track()`;
#'   `gpu_track(FALSE)` turns that off for the session.
#'
#' `gpu_track()` sets those same variables, so the processes gpukeras starts
#' (background fits, the workers of [gpu_cv()] and [gpu_search()]) track too.
#'
#' @section What a run holds:
#' A [gpu_fit()] run: the fit's arguments and the settings in force as params
#' (epochs, batch size, accumulation, steps per execution, XLA, precision,
#' optimizer and learning rate or schedule, clipping, seed, class weights,
#' backend, device, gpukeras/Keras/framework versions, the data's shapes and a
#' content hash, the model's layer and parameter counts); each epoch's loss and
#' metrics under Keras' names with the epoch as the step, sent as each epoch
#' ends; the report's measures as metrics (`samples_per_second`,
#' `input_wait_share`, `gpu_utilization_mean`, `gpu_memory_used_max_mib`,
#' `mfu`, ...), the input verdict and the session's last [gpu_check()]
#' verdict as tags; and as artifacts the trained model as [gpu_save()] writes
#' it (`model/model.keras` with its encoding, which `gpu_load("runs:/<run
#' id>")` loads), a summary of the model and the fit's plot. A fit resumed
#' from its [gpu_backup()] folder (after a kill, a scheduler's signal, or a
#' background child's crash) continues the same run. `fit$settings$tracking`
#' names the run, and says the seconds tracking took on the training thread
#' and waited at the end (`wait`).
#'
#' @section A server that does not answer:
#' Tracking never fails or stalls training. Records are sent by MLflow's own
#' asynchronous logging while training goes on, and a tracked call does not
#' wait for them at its end (unless `wait`). Whether a
#' server answers is asked once a session, in 2 seconds and without retries
#' (or as MLflow's own `MLFLOW_HTTP_REQUEST_TIMEOUT` and
#' `MLFLOW_HTTP_REQUEST_MAX_RETRIES` say, where you set them), and
#' remembered: a server that accepts connections but never answers costs a
#' call a second or two, once. What a server that is down, too slow, or
#' refusing the credentials did not take is kept in MLflow's own store in a
#' folder of yours (`spool/mlflow.db`, with the artifacts beside it; MLflow's
#' UI opens it too), and a `gpukeras_warning_tracking` warning says why, once a
#' session; `gpu_track_sync()` copies those runs to the server with MLflow's
#' client when it answers again, each value once (or, with `discard = TRUE`,
#' deletes them unsent). `gpu_track()`, `gpu_track_sync()` and [gpu_runs()] ask the
#' server again, and so does a run 10 minutes later.
#'
#' @param uri A folder for a store of your own, an MLflow server's URL
#'   (`http://`, `https://`), or any tracking URI MLflow takes
#'   (`sqlite:///path.db`, `postgresql://...`, `databricks`). `NULL` takes
#'   `MLFLOW_TRACKING_URI`. `FALSE` turns tracking off for the session.
#' @param experiment The MLflow experiment's name; `NULL` takes
#'   `MLFLOW_EXPERIMENT_NAME` (or `MLFLOW_EXPERIMENT_ID`), else MLflow's
#'   "Default".
#' @param wait Seconds a tracked call waits at its end for its records to be
#'   sent, before it keeps the rest for `gpu_track_sync()`. `0` (the default):
#'   it waits only for its run to be made (a few seconds at most, for the run
#'   id), and the records go on being sent while R carries on; [gpu_runs()],
#'   [gpu_compare_runs()] and `gpu_load("runs:/...")` wait for them first.
#' @param spool The folder of the MLflow store where what could not be sent is
#'   kept, made for you alone when a store does not take runs: by `gpu_track()`
#'   when the server does not answer it, else by the first run it refuses.
#' @param discard `TRUE` to delete the runs kept for the store, unsent.
#' @param ... Not used: an argument these functions do not have is an error
#'   that says what to use instead.
#' @return `gpu_track()`: a `gpukeras_tracking` object (where runs go, whether
#'   it answered, the credentials in use by name, what is kept), invisibly.
#'   `gpu_track_sync()`: a `gpukeras_track_sync` object: `sent` (runs copied,
#'   or discarded), `left`, `why` (what stopped it) and `kept` (the runs left:
#'   `name`, `key`, `why`), invisibly.
#'   `gpu_tracking_available()`: `TRUE` when MLflow is installed in the Python
#'   gpukeras uses ([gpukeras_python()]), looked up there without importing it
#'   (a fraction of a second); `FALSE` otherwise.
#' @seealso [gpu_runs()] and [gpu_compare_runs()] to read runs back,
#'   `vignette("tracking", package = "gpukeras")`.
#' @export
#' @examples
#' \dontshow{old <- Sys.getenv(c("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "GPUKERAS_TRACK"), unset = NA)}
#' # \donttest: MLflow makes a new store's tables (seconds, once)
#' \donttest{
#' if (!is.null(gpukeras_python()) && gpu_tracking_available()) {
#'   # a store in a folder: made at the first call (MLflow makes its tables, a few
#'   # seconds), opened at once after that (gpu_runs()' example uses this one too)
#'   gpu_track(file.path(tempdir(), "runs"), experiment = "iris")
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'   fit <- gpu_fit(model, list(x = iris[, 1:4], y = iris$Species), epochs = 2, verbose = 0)
#'   print(fit$settings$tracking$run_id)
#'   print(gpu_runs())
#'   gpu_track(FALSE)
#' }
#' }
#' \dontshow{for (name in names(old)) {
#'   if (is.na(old[[name]])) Sys.unsetenv(name) else do.call(Sys.setenv, as.list(old[name]))
#' }}
gpu_track <- function(uri = NULL, experiment = NULL, wait = 0, spool = track_spool_default(), ...) {
  check_unknown_args("gpu_track")
  if (isFALSE(uri)) {
    Sys.setenv(GPUKERAS_TRACK = "false")
    return(invisible(new_gpukeras_tracking(NULL)))
  }
  if (!is.null(experiment)) check_string(experiment)
  if (!is_number(wait) || wait < 0) stop_input_type(wait, "one number of seconds >= 0")
  check_string(spool)
  if (is.null(uri)) {
    uri <- Sys.getenv("MLFLOW_TRACKING_URI")
    if (!nzchar(uri)) {
      abort_bad_argument(c(
        "`uri` is missing and MLFLOW_TRACKING_URI is not set: say where runs go.",
        "A folder of your own: gpu_track(\"runs\"); a server: gpu_track(\"http://host:5000\")."
      ))
    }
  }
  check_string(uri)
  if (!grepl("^[A-Za-z][A-Za-z0-9+.-]*:", uri)) {
    uri <- core_call("track_open_folder", folder = path.expand(uri))$uri
  }
  Sys.setenv(MLFLOW_TRACKING_URI = uri, GPUKERAS_TRACK_WAIT = format(wait), GPUKERAS_TRACK_SPOOL = path.expand(spool))
  if (!is.null(experiment)) {
    Sys.setenv(MLFLOW_EXPERIMENT_NAME = experiment)
    Sys.unsetenv("MLFLOW_EXPERIMENT_ID")
  }
  Sys.unsetenv("GPUKERAS_TRACK")
  checked <- core_call("track_check", track = track_request())
  raise_core_warnings(checked$warnings)
  invisible(new_gpukeras_tracking(checked))
}

#' @rdname gpu_track
#' @export
gpu_track_sync <- function(discard = FALSE, ...) {
  check_unknown_args("gpu_track_sync", "gpu_track")
  check_flag(discard)
  track <- track_needed(off = "Tracking is off: turn it on with gpu_track() to send what was kept to its store.")
  track_flush()
  synced <- core_call("track_sync", track = track, discard = discard)
  synced$other <- unlist(synced$other)
  invisible(structure(synced, class = "gpukeras_track_sync"))
}

#' @rdname gpu_track
#' @export
gpu_tracking_available <- function(...) {
  check_unknown_args("gpu_tracking_available", "gpu_track")
  python <- gpukeras_python()
  !is.null(python) && nzchar(Sys.which(python)) &&
    identical(
      suppressWarnings(system2(
        python, c("-c", shQuote("import importlib.util, sys; sys.exit(importlib.util.find_spec('mlflow') is None)")),
        stdout = FALSE, stderr = FALSE
      )), 0L
    )
}

# Where what could not be sent is kept, by default: this user's data folder for gpukeras.
track_spool_default <- function() {
  Sys.getenv("GPUKERAS_TRACK_SPOOL", file.path(tools::R_user_dir("gpukeras", "data"), "tracking-kept"))
}

track_spool <- function() path.expand(track_spool_default())

# MLflow's variables the core passes on to MLflow's client (R's environment, which Python's
# own copy of it does not follow), each by name (never by prefix: see DESIGN.md).
mlflow_variables <- c(
  "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID",
  "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN",
  "MLFLOW_TRACKING_INSECURE_TLS", "MLFLOW_TRACKING_SERVER_CERT_PATH", "MLFLOW_TRACKING_CLIENT_CERT_PATH",
  "MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"
)

# Whether runs are tracked now: MLFLOW_TRACKING_URI set and gpu_track(FALSE) not said.
tracking_on <- function() {
  nzchar(Sys.getenv("MLFLOW_TRACKING_URI")) && !identical(tolower(Sys.getenv("GPUKERAS_TRACK")), "false")
}

# Where runs go, as the core takes it with every tracked call (NULL when tracking is off),
# with `the$track_context` (a worker's parent run and its run's key) and `...` added.
track_request <- function(...) {
  if (!tracking_on()) return(NULL)
  the$tracked <- TRUE # there may be records to send before R ends (track_flush())
  env <- Sys.getenv(mlflow_variables)
  env <- as.list(env[nzchar(env)])
  wait <- suppressWarnings(as.numeric(Sys.getenv("GPUKERAS_TRACK_WAIT", "10")))
  c(
    list(
      uri = env$MLFLOW_TRACKING_URI, experiment = env$MLFLOW_EXPERIMENT_NAME, experiment_id = env$MLFLOW_EXPERIMENT_ID,
      spool = track_spool(), wait = if (is.na(wait)) 10 else wait, env = env,
      versions = list(gpukeras = format(utils::packageVersion("gpukeras")), R = format(getRversion())),
      gpu_verdict = the$check_verdict
    ),
    the$track_context,
    list(...)
  )
}

# MLflow's credentials: they reach a child process through its environment
# (process_env()), never through what it carries in a file (track_carry(); callr writes a
# call's arguments, and a load hook, to files).
mlflow_secrets <- c("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")

# The variables of mlflow_secrets that are set, and MLFLOW_TRACKING_URI where it holds
# credentials (user information, a secret query key: the core's masking rule), with their
# values: what a child gets in its environment.
mlflow_secret_env <- function() {
  env <- Sys.getenv(mlflow_secrets)
  uri <- Sys.getenv("MLFLOW_TRACKING_URI")
  if (nzchar(uri) && !identical(core_call("mask_uri", uri = uri), uri)) env <- c(env, MLFLOW_TRACKING_URI = uri)
  env[nzchar(env)]
}

# The tracking settings a child process takes back (a background job, a worker): the
# variables, as this session has them, but for the credentials.
track_carry <- function() {
  if (!tracking_on()) return(NULL)
  secret <- c(mlflow_secrets, names(mlflow_secret_env()))
  names <- c(setdiff(mlflow_variables, secret), "GPUKERAS_TRACK_WAIT", "GPUKERAS_TRACK_SPOOL")
  values <- Sys.getenv(names, unset = NA)
  as.list(values[!is.na(values)])
}

# In a child: the carried settings (track_carry()) set, and the run's context (its parent's
# key, its own key, name, tags) kept for track_request().
track_restore <- function(carried, context = NULL) {
  if (length(carried)) {
    do.call(Sys.setenv, carried)
    Sys.unsetenv("GPUKERAS_TRACK")
  } else {
    Sys.setenv(GPUKERAS_TRACK = "false")
  }
  the$track_context <- context
  invisible()
}

# Wait (at most `wait` s) for the records this session's Python still sends, and raise the
# warnings due: before runs are read, at a worker's end, when R ends (`ending`: what is
# left then is kept). Nothing when tracking never started in this process.
track_flush <- function(call = caller_env(), wait = 30, ending = FALSE) {
  if (is.null(the$bridge) || !isTRUE(the$tracked)) return(invisible())
  flushed <- core_call("track_flush", wait = wait, ending = ending, error_call = call)
  raise_core_warnings(flushed$warnings)
  invisible(flushed)
}

# Log to the run `key` (a parent's summary, a fold's held-out scores, a trial's state) and
# end it with `status`; the core's warnings raised. Nothing when tracking is off.
track_record <- function(track, key, ..., call = caller_env()) {
  if (is.null(track) || is.null(key)) return(invisible())
  recorded <- core_call("track_record", track = track, key = key, ..., error_call = call)
  raise_core_warnings(recorded$warnings)
  invisible(recorded)
}

# The fit's plot as an artifact of its run (where R can draw a PNG).
track_plot <- function(fit, track) {
  key <- fit$settings$tracking$key
  if (is.null(track) || is.null(key) || !isTRUE(capabilities("png"))) return(invisible())
  path <- file.path(tempfile("gpukeras-plot-"), "fit.png")
  dir.create(dirname(path))
  drawn <- tryCatch({
    grDevices::png(path, width = 900, height = 600)
    on.exit(grDevices::dev.off(), add = TRUE)
    plot(fit)
    TRUE
  }, error = function(e) FALSE)
  if (drawn && file.exists(path)) try(core_call("track_artifact", track = track, key = key, path = path), silent = TRUE)
  unlink(dirname(path), recursive = TRUE)
  invisible()
}

new_gpukeras_tracking <- function(checked) {
  structure(list(
    on = !is.null(checked), uri = checked$uri, experiment = checked$experiment,
    reachable = checked$reachable, why = checked$why,
    credentials = unlist(checked$credentials), username = checked$username,
    spool = checked$spool, kept = checked$kept %||% 0L, lines = unlist(checked$lines) %||% "<gpukeras tracking> off"
  ), class = "gpukeras_tracking")
}

# Both print the core's lines (tracked_runs.py check_lines(), sync()).
#' @export
format.gpukeras_tracking <- function(x, ...) x$lines

#' @export
print.gpukeras_tracking <- print_formatted

#' @export
format.gpukeras_track_sync <- function(x, ...) unlist(x$lines)

#' @export
print.gpukeras_track_sync <- print_formatted

# A parent run (a cv's or a search's) and the keys of `children` runs under it (their
# workers' fits); an environment whose `key` is NULL when tracking is off.
track_many <- function(kind, children, params, call = caller_env()) {
  tracked <- new.env(parent = emptyenv())
  tracked$track <- track_request()
  tracked$ended <- TRUE
  if (is.null(tracked$track)) return(tracked)
  opened <- core_call(
    "track_open_run",
    track = tracked$track, kind = kind, name = kind, params = track_params(params),
    children = as.integer(children), error_call = call
  )
  raise_core_warnings(opened$warnings)
  tracked$key <- opened$key
  tracked$children <- as.character(unlist(opened$children))
  tracked$carried <- track_carry()
  tracked$ended <- FALSE
  tracked
}

# What a worker takes to track its fit as child `i` of `tracked` (NULL when off): the
# session's settings and the run's context (its parent, its key, name, kind, tags, params).
track_child <- function(tracked, i, name, kind, tags = NULL, params = NULL, key = NULL) {
  if (is.null(tracked$key)) return(NULL)
  key <- key %||% tracked$children[[i]]
  list(
    carried = tracked$carried,
    context = list(
      parent = tracked$key, key = key, name = name, kind = kind, tags = tags, params = track_params(params)
    )
  )
}

# A fresh run key for a child not counted ahead (a search's trial).
track_new_key <- function(tracked, call = caller_env()) {
  if (is.null(tracked$key)) return(NULL)
  core_call("track_new_key", error_call = call)
}

# The parent's end (once), with its summary.
track_many_end <- function(tracked, status, metrics = NULL, tags = NULL, call = caller_env()) {
  if (isTRUE(tracked$ended)) return(invisible())
  tracked$ended <- TRUE
  track_record(
    tracked$track, tracked$key, metrics = metrics, tags = tags, status = status, kind = "parent", call = call
  )
}

# Values as a run's params: one level of lists flattened into their names (a cv's `fit`
# arguments), each a number or a string (a Python object by its class).
track_params <- function(params) {
  if (!length(params)) return(list())
  flat <- list()
  for (name in names(params)) {
    value <- params[[name]]
    if (is.list(value) && !inherits(value, "python.builtin.object") && !is.null(names(value))) {
      flat[names(value)] <- lapply(value, track_param_value)
    } else {
      flat[[name]] <- track_param_value(value)
    }
  }
  Filter(Negate(is.null), flat)
}

track_param_value <- function(value) {
  if (is.null(value)) return(NULL)
  if (inherits(value, "python.builtin.object")) return(class(value)[1])
  if (is.atomic(value) && length(value) == 1L) return(if (is.factor(value)) as.character(value) else value)
  paste(deparse(value, width.cutoff = 500L), collapse = "")
}
