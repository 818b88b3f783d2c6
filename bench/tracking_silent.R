# What a tracking server that accepts connections and never answers costs the calls a user
# makes (issue #75, item 2: at most a second or two each; a fit never fails).
#
# The silent server is a real process (tests/testthat/silent_server.py): a Python socket on
# 127.0.0.1 that accepts every connection and never writes a byte. Each round starts two on
# new ports (targets the session has not met), and times, in this order, as a user meets them:
#   track:          gpu_track(uri), which checks the server (and warns);
#   untracked_fit:  gpu_fit() of a tiny model (4-8-3 on iris), one epoch, tracking off;
#   tracked_fit_1:  the same fit, tracked to the silent server;
#   tracked_fit_2:  the same again (a later fit of the session);
#   runs:           gpu_runs(), until its error;
#   env_fit_1, env_fit_2: two tracked fits to another silent server named by
#                   MLFLOW_TRACKING_URI alone (no gpu_track() first: the fit meets it).
# With each call, the tracking warnings it gave (how many, and their text) and, for
# gpu_runs(), its error's message. MLflow's own timeout and retry variables are left unset
# (gpukeras' defaults).
#
# Usage (from the repository root): Rscript bench/tracking_silent.R [--quick | --smoke]
# Writes bench/results/tracking-silent-cpu-<date>.json (a smoke run: see bench/lib/common.R).
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/lib/load.R")
source("bench/lib/common.R")
source("tests/testthat/helper-mlflow.R") # start_silent_server()
mode <- bench_mode()
code <- code_state()
rounds <- if (mode$smoke) 1L else if (mode$quick) 2L else 3L
if (!gpu_tracking_available()) {
  cat("MLflow is not installed in gpukeras' Python (extras = 'tracking'): nothing to time\n")
  quit(save = "no")
}
for (name in c(
  "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "MLFLOW_HTTP_REQUEST_TIMEOUT",
  "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"
)) Sys.unsetenv(name)
Sys.setenv(GPUKERAS_TRACK_SPOOL = file.path(tempfile("tracking-silent-"), "kept"))

keras <- gpu_keras()
model_fn <- function() {
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L)), keras$layers$Dense(8L, activation = "relu"),
    keras$layers$Dense(3L, activation = "softmax")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  model
}
data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
fit_once <- function() gpu_fit(model_fn(), data, epochs = 1, batch_size = 32, seed = 1, verbose = 0)

# Seconds `expr` took, the tracking warnings it gave and the error it ended with.
timed_call <- function(expr) {
  said <- character()
  started <- Sys.time()
  error <- tryCatch(
    withCallingHandlers(
      {
        force(expr)
        NULL
      },
      gpukeras_warning_tracking = function(w) {
        said <<- c(said, conditionMessage(w))
        invokeRestart("muffleWarning")
      }
    ),
    error = function(e) conditionMessage(e)
  )
  list(seconds = as.numeric(difftime(Sys.time(), started, units = "secs")), warnings = said, error = error)
}

invisible(fit_once()) # the first compilations, outside the times
ways <- c("track", "untracked_fit", "tracked_fit_1", "tracked_fit_2", "runs", "env_fit_1", "env_fit_2")
measured <- stats::setNames(rep(list(list()), length(ways)), ways)
one_round <- function() {
  server <- start_silent_server() # killed as the round ends
  other <- start_silent_server()
  took <- list()
  gpu_track(FALSE)
  took$untracked_fit <- timed_call(fit_once())
  took$track <- timed_call(gpu_track(server$url, experiment = "silent"))
  took$tracked_fit_1 <- timed_call(fit_once())
  took$tracked_fit_2 <- timed_call(fit_once())
  took$runs <- timed_call(gpu_runs())
  gpu_track(FALSE)
  Sys.setenv(MLFLOW_TRACKING_URI = other$url)
  Sys.unsetenv("GPUKERAS_TRACK")
  took$env_fit_1 <- timed_call(fit_once())
  took$env_fit_2 <- timed_call(fit_once())
  gpu_track(FALSE)
  Sys.unsetenv("MLFLOW_TRACKING_URI")
  took
}
for (round in seq_len(rounds)) {
  took <- one_round()
  for (way in ways) measured[[way]] <- c(measured[[way]], list(took[[way]]))
  cat(sprintf(
    "round %d: %s\n", round,
    paste(sprintf("%s %.2f s", ways, vapply(took[ways], function(t) t$seconds, numeric(1))), collapse = ", ")
  ))
}

summary <- lapply(measured, function(calls) {
  seconds <- vapply(calls, function(t) t$seconds, numeric(1))
  list(
    median_seconds = stats::median(seconds), seconds_rounds = seconds,
    warnings = vapply(calls, function(t) length(t$warnings), integer(1)),
    said = unique(unlist(lapply(calls, function(t) t$warnings))),
    error = unique(unlist(lapply(calls, function(t) t$error)))
  )
})
result <- list(
  benchmark = "tracking_silent",
  command = bench_command("bench/tracking_silent.R", mode),
  date = format(Sys.Date()),
  smoke = mode$smoke,
  workload = "iris, Dense 4-8-3, one epoch, batch 32; a silent server on 127.0.0.1 (accepts, never answers)",
  goal_seconds = 2,
  rounds = rounds,
  calls = summary,
  tracked_fit_extra_seconds = summary$tracked_fit_1$median_seconds - summary$untracked_fit$median_seconds,
  versions = version_facts(),
  machine = machine_facts(load_before),
  code = code,
  wall_seconds = round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
)
out <- write_result(result, sprintf("tracking-silent-cpu-%s", result$date), mode)
cat(out, "\n")
