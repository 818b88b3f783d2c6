# A real MLflow tracking server for the tracking tests: `mlflow server` (GPUKERAS_MLFLOW_SERVER,
# the full MLflow's command: make test installs it in an environment of its own; else the one
# beside gpukeras' Python, whose client the tests read back with) on 127.0.0.1 and a free
# port, with a SQLite backend, artifacts proxied over HTTP (as a team's server serves them)
# and MLflow's basic authentication (a user, and wrong credentials refused). One per test
# file; stopped (its process tree) when the file ends.
mlflow_user <- "admin"
mlflow_password <- "gpukeras-Test-Pass-4096"

skip_if_no_mlflow <- function() {
  skip_if_no_python()
  testthat::skip_if_not(gpu_tracking_available(), "MLflow is not installed in gpukeras' Python")
  mlflow <- Sys.getenv("GPUKERAS_MLFLOW_SERVER", file.path(dirname(gpukeras_python()), "mlflow"))
  testthat::skip_if_not(file.exists(mlflow), sprintf("no mlflow server command (%s)", mlflow))
  invisible(mlflow)
}

free_port <- function() {
  for (i in 1:50) {
    port <- sample(20000:60000, 1)
    listening <- tryCatch(
      {
        connection <- suppressWarnings(socketConnection("127.0.0.1", port, open = "r+", timeout = 1))
        close(connection)
        TRUE
      },
      error = function(e) FALSE
    )
    if (!listening) {
      return(port)
    }
  }
  stop("no free port")
}

start_mlflow_server <- function(env = testthat::teardown_env()) {
  mlflow <- skip_if_no_mlflow()
  folder <- tempfile("mlflow-server-")
  dir.create(folder)
  ini <- file.path(folder, "auth.ini")
  writeLines(c(
    "[mlflow]", "default_permission = EDIT", "auth_cache_ttl_seconds = 600",
    sprintf("database_uri = sqlite:///%s", file.path(folder, "auth.db")), sprintf("admin_username = %s", mlflow_user),
    "authorization_function = mlflow.server.auth:authenticate_request_basic_auth"
  ), ini)
  port <- free_port()
  # R's LD_LIBRARY_PATH names the system's libraries first, where a libpython of another
  # build can shadow the one the environment's Python was built with (its _ssl fails then).
  process <- withr::with_envvar(
    c(
      MLFLOW_AUTH_CONFIG_PATH = ini, MLFLOW_AUTH_ADMIN_PASSWORD = mlflow_password,
      MLFLOW_FLASK_SERVER_SECRET_KEY = "gpukeras-test",
      # no job runner (eight more processes, 12 s of CPU a start): tracking runs need none
      MLFLOW_SERVER_ENABLE_JOB_EXECUTION = "false",
      LD_LIBRARY_PATH = NA
    ),
    processx::process$new(
      mlflow,
      c(
        "server", "--app-name", "basic-auth", "--backend-store-uri",
        sprintf("sqlite:///%s", file.path(folder, "mlflow.db")),
        "--artifacts-destination", file.path(folder, "artifacts"), "--host", "127.0.0.1", "--port", port, "--workers",
        "1"
      ),
      wd = folder, stdout = file.path(folder, "server.log"), stderr = "2>&1", cleanup_tree = TRUE
    )
  )
  withr::defer(process$kill_tree(), envir = env)
  url <- sprintf("http://127.0.0.1:%d", port)
  deadline <- Sys.time() + 120
  while (Sys.time() < deadline) {
    if (!process$is_alive())
      stop(
        "mlflow server exited: ", paste(utils::tail(readLines(file.path(folder, "server.log")), 20), collapse = "\n")
      )
    up <- tryCatch(
      identical(curlGetHeaders(paste0(url, "/health"), timeout = 2)[1] != "", TRUE), error = function(e) FALSE
    )
    if (up) {
      return(list(url = url, folder = folder, process = process))
    }
    Sys.sleep(0.5)
  }
  stop("mlflow server did not start within 120 s")
}

# A server that accepts connections and never answers (silent_server.py, in gpukeras' Python):
# its process and URL, the process killed when `env` ends.
start_silent_server <- function(env = parent.frame()) {
  script <- normalizePath(testthat::test_path("silent_server.py"))
  process <- processx::process$new(gpukeras_python(), script, stdout = "|", stderr = "|")
  withr::defer(process$kill(), envir = env)
  port <- character()
  deadline <- Sys.time() + 30
  while (!length(port) && Sys.time() < deadline && process$is_alive()) {
    process$poll_io(1000)
    port <- process$read_output_lines(1)
  }
  if (!length(port)) stop("the silent server did not start: ", process$read_all_error())
  list(process = process, url = sprintf("http://127.0.0.1:%s", port))
}

# MLflow's own Python client, reading back what gpukeras recorded.
mlflow_client <- function(uri) {
  reticulate::import("mlflow")$MlflowClient(uri)
}

mlflow_runs <- function(client, experiment) {
  found <- client$get_experiment_by_name(experiment)
  if (is.null(found)) {
    return(list())
  }
  py_list(client$search_runs(list(found$experiment_id)))
}

# MLflow's paged lists reach R as Python objects: as an R list.
py_list <- function(x) if (inherits(x, "python.builtin.object")) reticulate::iterate(x) else x

iris_model_fn <- function(units = 8) {
  keras <- gpukeras::gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L)),
    keras$layers$Dense(as.integer(units), activation = "relu"),
    keras$layers$Dense(3L, activation = "softmax")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  model
}

# Tracking as it was before a test, back after it.
local_tracking_off <- function(env = parent.frame()) {
  names <- c(
    "MLFLOW_TRACKING_URI",
    "MLFLOW_EXPERIMENT_NAME",
    "MLFLOW_EXPERIMENT_ID",
    "MLFLOW_TRACKING_USERNAME",
    "MLFLOW_TRACKING_PASSWORD",
    "GPUKERAS_TRACK",
    "GPUKERAS_TRACK_SPOOL",
    "GPUKERAS_TRACK_WAIT"
  )
  old <- Sys.getenv(names, unset = NA)
  withr::defer(
    for (name in names) if (is.na(old[[name]])) Sys.unsetenv(name) else do.call(Sys.setenv, as.list(old[name])),
    envir = env
  )
  Sys.unsetenv(names)
  Sys.setenv(GPUKERAS_TRACK_SPOOL = file.path(tempfile("kept-")))
}
