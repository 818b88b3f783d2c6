# A finished gpu_search()'s study opened in optuna-dashboard (PyPI), the tool Optuna users
# watch studies with, started here on 127.0.0.1, its trials read back through its HTTP API.

test_that("a finished search's storage opens in optuna-dashboard, with every trial", {
  mark_slow()
  skip_if_no_python()
  skip_if_not_installed("jsonlite")
  dashboard <- file.path(dirname(gpukeras_python()), "optuna-dashboard")
  skip_if_not(file.exists(dashboard), "optuna-dashboard is not installed beside gpukeras' Python")
  local_tracking_off()
  storage <- file.path(tempfile("search-"), "study")
  model_fn <- iris_model_fn
  search <- gpu_search(
    function(p) model_fn(p$units), list(x = iris[, 1:4], y = iris$Species),
    space = list(units = search_int(4, 16)), trials = 2, epochs = 1, storage = storage, seed = 1, workers = 1
  )
  port <- free_port()
  process <- withr::with_envvar(
    c(LD_LIBRARY_PATH = NA), # R's, which can shadow the Python's own libpython (helper-mlflow.R)
    processx::process$new(
      dashboard,
      c(file.path(storage, "search.journal"), "--host", "127.0.0.1", "--port", port, "--quiet"),
      stdout = "|", stderr = "2>&1", cleanup_tree = TRUE
    )
  )
  withr::defer(process$kill_tree())
  api <- sprintf("http://127.0.0.1:%d/api/studies", port)
  read_json <- function(url) {
    jsonlite::fromJSON(
      paste(readLines(url, warn = FALSE), collapse = ""), simplifyVector = FALSE
    )
  }
  # a read waits at most 5 s: one the dashboard accepted while it was still starting waited
  # R's default 60 s (options(timeout)) before the next try found it up
  withr::local_options(timeout = 5)
  studies <- NULL
  deadline <- Sys.time() + 60
  while (is.null(studies) && Sys.time() < deadline && process$is_alive()) {
    studies <- tryCatch(suppressWarnings(read_json(api)), error = function(e) NULL)
    if (is.null(studies)) Sys.sleep(0.3)
  }
  expect_false(is.null(studies), info = if (!process$is_alive()) process$read_output())
  summary <- studies$study_summaries[[1]]
  expect_equal(summary$study_name, "gpukeras")
  detail <- read_json(sprintf("%s/%d", api, summary$study_id))
  trials <- detail$trials
  expect_equal(vapply(trials, function(t) t$number, numeric(1)), search$trials$number)
  expect_equal(vapply(trials, function(t) t$state, character(1)), rep("Complete", 2))
  expect_equal(vapply(trials, function(t) t$values[[1]], numeric(1)), search$trials$value, tolerance = 1e-6)
  units <- vapply(trials, function(t) as.numeric(t$params[[1]]$param_external_value), numeric(1))
  expect_equal(units, search$trials$units)
  expect_equal(detail$best_trials[[1]]$number, search$best$number)
})
