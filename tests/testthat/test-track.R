# Tracking in MLflow, against the real thing: a folder store and a real `mlflow server`
# (helper-mlflow.R, one for the file, started when a test first needs it), read back through
# MLflow's own Python client and gpu_runs().
the_server <- local({
  server <- NULL
  function() {
    if (is.null(server)) server <<- start_mlflow_server()
    server
  }
})

test_that("install_gpukeras(extras = \"tracking\") pins MLflow's client", {
  reqs <- gpukeras_requirements(gpu = FALSE, os = "Linux", extras = "tracking")
  expect_identical(reqs, c(gpukeras_requirements(gpu = FALSE, os = "Linux"), "mlflow-skinny==3.17.2"))
})

test_that("gpu_track() and the readers say what is wrong", {
  local_tracking_off()
  expect_snapshot(error = TRUE, {
    gpu_track()
    gpu_track("runs", wait = -1)
    gpu_runs()
    gpu_track_sync()
    gpu_compare_runs("not a run", "3f2a")
    gpu_load("runs:/zz")
  })
  expect_null(track_request())
  Sys.setenv(MLFLOW_TRACKING_URI = "http://127.0.0.1:1")
  expect_false(is.null(track_request()))
  gpu_track(FALSE)
  expect_null(track_request())
})

test_that("a folder store: a fit's run holds its settings, epochs, report and model", {
  mark_slow()
  skip_if_no_mlflow()
  local_tracking_off()
  folder <- file.path(tempfile("runs-"), "store")
  tracking <- gpu_track(folder, experiment = "iris")
  expect_s3_class(tracking, "gpukeras_tracking")
  expect_true(file.exists(file.path(folder, "mlflow.db")))
  expect_match(format(tracking)[1], "experiment iris")
  fit <- gpu_fit(
    iris_model_fn(), list(x = iris[, 1:4], y = iris$Species), epochs = 3, batch_size = 32, seed = 1, verbose = 0
  )
  run_id <- fit$settings$tracking$run_id
  expect_type(run_id, "character")
  # the fit did not wait for its records (gpu_track(wait = 0)); gpu_runs() does
  runs <- gpu_runs()
  client <- mlflow_client(Sys.getenv("MLFLOW_TRACKING_URI"))
  run <- client$get_run(run_id)
  expect_equal(run$info$status, "FINISHED")
  params <- run$data$params
  expect_equal(params[["epochs"]], "3")
  expect_equal(params[["batch_size"]], "32")
  expect_equal(params[["gpukeras_version"]], format(utils::packageVersion("gpukeras")))
  steps <- vapply(py_list(client$get_metric_history(run_id, "loss")), function(m) m$step, numeric(1))
  expect_equal(sort(steps), 1:3)
  artifacts <- vapply(py_list(client$list_artifacts(run_id)), function(f) f$path, character(1))
  expect_setequal(artifacts, c("fit.png", "model", "model_summary.txt"))

  expect_s3_class(runs, "gpukeras_runs")
  expect_equal(runs$run_id, run_id)
  expect_equal(runs$params.epochs, 3L)
  expect_equal(runs$metrics.loss, fit$history$loss[3], tolerance = 1e-6)
  shown <- format(runs)
  expect_match(shown[1], "<gpukeras runs> 1 run")
  expect_true(any(grepl(substr(run_id, 1, 8), shown, fixed = TRUE)))
  loaded <- gpu_load(paste0("runs:/", run_id))
  expect_equal(predict(loaded, iris[c(1, 51, 101), 1:4]), predict(fit, iris[c(1, 51, 101), 1:4]))
  expect_equal(loaded$path, sprintf("runs:/%s/model/model.keras", run_id))
})

test_that("a real server: fits, a cv's folds and a search's trials as parents and children", {
  mark_slow()
  local_tracking_off()
  server <- the_server()
  Sys.setenv(MLFLOW_TRACKING_USERNAME = mlflow_user, MLFLOW_TRACKING_PASSWORD = mlflow_password)
  tracking <- gpu_track(server$url, experiment = "team")
  expect_true(tracking$reachable)
  expect_false(any(grepl(mlflow_password, format(tracking), fixed = TRUE)))
  data <- list(x = iris[, 1:4], y = iris$Species)
  small <- gpu_fit(iris_model_fn(4), data, epochs = 2, seed = 1, verbose = 0)
  large <- gpu_fit(iris_model_fn(16), data, epochs = 2, seed = 1, verbose = 0)
  comparison <- gpu_compare_runs(small$settings$tracking$run_id, paste0("runs:/", large$settings$tracking$run_id))
  expect_true("parameters" %in% comparison$params$param)
  expect_setequal(unique(comparison$history$metric), c("loss", "accuracy"))
  expect_equal(
    comparison$history$value[comparison$history$run == "b" & comparison$history$metric == "loss"],
    large$history$loss,
    tolerance = 1e-6
  )
  path <- tempfile(fileext = ".png")
  grDevices::png(path)
  plot(comparison)
  grDevices::dev.off()
  expect_true(file.size(path) > 0)

  # From here the credentials are in the tracking URI (as `https://user:password@host`): it
  # reaches the workers through their environment, and no file of the session's holds it,
  # not even callr's while a worker trains (looking_model_fn()).
  Sys.unsetenv(c("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"))
  with_password <- sub("://", sprintf("://%s:%s@", mlflow_user, mlflow_password), server$url, fixed = TRUE)
  gpu_track(with_password, experiment = "team")
  looked <- tempfile("looked-")
  model_fn <- looking_model_fn(iris_model_fn, mlflow_password, looked, ignore = server$folder)
  cv <- gpu_cv(function() model_fn(), data, folds = 2, epochs = 2, seed = 1, workers = 1)
  search <- gpu_search(
    function(p) model_fn(p$units), data, space = list(units = search_int(4, 16)),
    trials = 2, epochs = 2, seed = 1, workers = 1
  )
  expect_identical(expect_looked_and_not_held(looked), tempdir())
  listed <- gpu_runs(filter = "tags.`gpukeras.kind` = 'trial'") # waits for what is being sent
  expect_equal(nrow(listed), 2L)
  expect_setequal(listed$trial_state, "complete")
  client <- mlflow_client(with_password)
  runs <- mlflow_runs(client, "team")
  tag <- function(run, name) run$data$tags[[name]] %||% NA_character_
  kinds <- vapply(runs, tag, character(1), "gpukeras.kind")
  expect_equal(as.vector(table(kinds)[c("cv", "fit", "fold", "search", "trial")]), c(1L, 2L, 2L, 1L, 2L))
  parent_of <- function(kind) runs[[which(kinds == kind)]]$info$run_id
  for (run in runs[kinds == "fold"]) {
    expect_equal(tag(run, "mlflow.parentRunId"), parent_of("cv"))
    expect_true("held_out_loss" %in% names(run$data$metrics))
  }
  expect_equal(
    runs[[which(kinds == "cv")]]$data$metrics[["held_out_loss_mean"]], mean(cv$metrics$loss), tolerance = 1e-6
  )
  for (run in runs[kinds == "trial"]) {
    expect_equal(tag(run, "mlflow.parentRunId"), parent_of("search"))
    expect_equal(tag(run, "gpukeras.trial_state"), "complete")
    expect_true(as.integer(run$data$params[["units"]]) %in% search$trials$units)
    expect_equal(run$info$status, "FINISHED")
  }
  expect_equal(
    runs[[which(kinds == "search")]]$data$metrics[["best_value"]], search$best$value,
    tolerance = 1e-6
  )

  # A background fit reaches the server too, its credentials through its environment:
  # neither its files nor any other the session's processes wrote hold the password, while
  # it runs (callr's files that started it are kept until its result is read) or after.
  job <- gpu_fit(iris_model_fn(4), data, epochs = 2, seed = 1, verbose = 0, background = TRUE)
  while_running <- files_under(tempdir(), ignore = server$folder) # (the server's own)
  expect_true(any(grepl("callr-", while_running, fixed = TRUE)))
  expect_false(any(vapply(while_running, file_holds, logical(1), mlflow_password)))
  background <- gpu_job_wait(job, timeout = 240)
  run_ids <- vapply(mlflow_runs(client, "team"), function(r) r$info$run_id, "")
  expect_true(background$settings$tracking$run_id %in% run_ids)
  written <- files_under(tempdir(), ignore = server$folder)
  expect_gt(length(written), 0L)
  expect_false(any(vapply(written, file_holds, logical(1), mlflow_password)))
})

test_that("wrong credentials: the fit goes on, the warning hides them, gpu_track_sync() sends later", {
  mark_slow()
  local_tracking_off()
  server <- the_server()
  Sys.setenv(MLFLOW_TRACKING_USERNAME = mlflow_user, MLFLOW_TRACKING_PASSWORD = "wrong-Secret-123")
  said <- NULL
  tracking <- withCallingHandlers(
    gpu_track(server$url, experiment = "kept", wait = 5),
    gpukeras_warning_tracking = function(w) {
      said <<- conditionMessage(w)
      invokeRestart("muffleWarning")
    }
  )
  expect_match(said, "refused the credentials")
  expect_false(tracking$reachable)
  expect_false(any(grepl("wrong-Secret-123", format(tracking), fixed = TRUE)))
  warned <- NULL
  fit <- withCallingHandlers(
    gpu_fit(iris_model_fn(), list(x = iris[, 1:4], y = iris$Species), epochs = 2, seed = 1, verbose = 0),
    gpukeras_warning_tracking = function(w) {
      warned <<- conditionMessage(w)
      invokeRestart("muffleWarning")
    }
  )
  expect_null(warned) # gpu_track() said it: not again at each fit
  expect_equal(nrow(fit$history), 2L)
  track_flush() # the fit's plot, sent after it returned, kept too
  spool <- Sys.getenv("GPUKERAS_TRACK_SPOOL") # MLflow's own store of the runs kept
  expect_true(file.exists(file.path(spool, "mlflow.db")))
  written <- list.files(spool, recursive = TRUE, full.names = TRUE)
  expect_false(any(vapply(written, file_holds, logical(1), "wrong-Secret-123")))
  # a password in the URI is masked too
  masked <- suppressWarnings(gpu_track(sub("//", "//someone:uri-Secret-9@", server$url), experiment = "kept", wait = 5))
  expect_false(any(grepl("uri-Secret-9", format(masked), fixed = TRUE)))
  # ... and a token given as the URI's user
  said <- NULL
  token <- withCallingHandlers(
    gpu_track(sub("//", "//uri-Token-7@", server$url), experiment = "kept", wait = 5),
    warning = function(w) {
      said <<- c(said, conditionMessage(w))
      invokeRestart("muffleWarning")
    }
  )
  expect_false(any(grepl("uri-Token-7", c(format(token), said), fixed = TRUE)))

  Sys.setenv(MLFLOW_TRACKING_PASSWORD = mlflow_password)
  expect_match(format(gpu_track(server$url, experiment = "kept")), "1 run(s) kept in", fixed = TRUE, all = FALSE)
  synced <- gpu_track_sync()
  expect_equal(synced$left, 0L)
  expect_equal(synced$sent, 1L)
  runs <- mlflow_runs(mlflow_client(server$url), "kept")
  expect_length(runs, 1L)
  steps <- vapply(
    py_list(mlflow_client(server$url)$get_metric_history(runs[[1]]$info$run_id, "loss")), function(m) m$step, numeric(1)
  )
  expect_equal(sort(steps), 1:2)
})

test_that("a silent server costs a call one short wait, and is said once, whole", {
  mark_slow()
  skip_if_no_mlflow()
  local_tracking_off()
  checked <- start_silent_server()
  met <- start_silent_server()
  port <- function(x) gsub("127[.]0[.]0[.]1:[0-9]+", "127.0.0.1:<port>", x)
  # gpu_track() says it (MLflow's request, 2 s, no retry), and gpu_runs() why it cannot read
  expect_snapshot(error = TRUE, transform = port, {
    tracking <- gpu_track(checked$url, experiment = "silent")
    gpu_runs()
  })
  expect_false(tracking$reachable)
  expect_true(file.exists(file.path(tracking$spool, "mlflow.db"))) # the kept store, made up front
  said <- character()
  keep_said <- function(w) {
    said <<- c(said, conditionMessage(w))
    invokeRestart("muffleWarning")
  }
  fit_once <- function() {
    withCallingHandlers(
      gpu_fit(iris_model_fn(), list(x = iris[, 1:4], y = iris$Species), epochs = 1, seed = 1, verbose = 0),
      gpukeras_warning_tracking = keep_said
    )
  }
  fits <- list(fit_once(), fit_once())
  expect_identical(said, character()) # said by gpu_track(), not again
  expect_equal(vapply(fits, function(fit) nrow(fit$history), integer(1)), c(1L, 1L))

  # a server met by a fit first (MLFLOW_TRACKING_URI alone): the first fit says it, once
  gpu_track(FALSE)
  Sys.setenv(MLFLOW_TRACKING_URI = met$url)
  Sys.unsetenv("GPUKERAS_TRACK")
  fits <- list(fit_once(), fit_once())
  expect_length(said, 1L)
  expect_match(
    said, sprintf("^Tracking: %s does not take runs now: no answer within 2 s from %s[.] Training went on;", met$url,
      sub("http://", "", met$url, fixed = TRUE))
  )
  expect_equal(vapply(fits, function(fit) nrow(fit$history), integer(1)), c(1L, 1L))
  synced <- gpu_track_sync()
  expect_gt(synced$left, 0L)
  expect_identical(synced$sent, 0L)
  expect_match(synced$why, "^no answer within 2 s from 127[.]0[.]0[.]1:[0-9]+$")
})

test_that("a background fit whose child crashes mid-epoch goes on as the same run, each epoch once", {
  mark_slow()
  skip_if_no_mlflow()
  local_tracking_off()
  gpu_track(file.path(tempfile("runs-"), "store"), experiment = "background")
  sys <- reticulate::import("sys", convert = FALSE)
  here <- normalizePath(testthat::test_path("."))
  if (!here %in% reticulate::py_to_r(sys$path)) sys$path$append(here)
  marker <- withr::local_tempfile()
  crash <- reticulate::import("crash_once")$CrashAt(marker, 1L, 7L, 1L, "SIGSEGV") # epoch 2, batch 8
  x <- matrix(sin(seq_len(1600)), ncol = 4)
  job <- gpu_fit(
    iris_model_fn(), list(x = x, y = as.integer(x[, 1] > 0)), epochs = 3, batch_size = 10, seed = 7,
    backup = gpu_backup(NULL, every = 5), callbacks = crash, background = TRUE, verbose = 0
  )
  fit <- gpu_job_wait(job, timeout = 240)
  expect_identical(gpu_job_status(job)$restarts, 1L)
  runs <- gpu_runs()
  expect_equal(nrow(runs), 1L)
  expect_equal(runs$status, "FINISHED")
  expect_equal(runs$run_id, fit$settings$tracking$run_id)
  history <- py_list(mlflow_client(Sys.getenv("MLFLOW_TRACKING_URI"))$get_metric_history(runs$run_id, "loss"))
  expect_equal(sort(vapply(history, function(m) m$step, numeric(1))), 1:3)
})

test_that("a search's failed trial is a run that says so, with the reason", {
  mark_slow()
  skip_if_no_mlflow()
  local_tracking_off()
  gpu_track(file.path(tempfile("runs-"), "store"), experiment = "states")
  model_fn <- function(params) {
    keras <- gpu_keras()
    # nan: a rate that makes the loss NaN (no relu, which the first step could leave dead and finite)
    model <- keras$Sequential(list(
      keras$Input(shape = 4), keras$layers$Dense(8L, activation = if (params$mode == "ok") "relu" else "linear"),
      keras$layers$Dense(3L, activation = "softmax")
    ))
    model$compile(
      optimizer = keras$optimizers$SGD(if (params$mode == "nan") 1e30 else 0.01),
      loss = "sparse_categorical_crossentropy"
    )
    model
  }
  search <- gpu_search(
    model_fn, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
    space = list(mode = search_choice("ok", "nan")), trials = 2, sampler = "grid",
    pruner = "none", epochs = 2, batch_size = 16, seed = 5, workers = 1
  )
  states <- stats::setNames(search$trials$state, search$trials$mode)
  expect_identical(states[c("ok", "nan")], c(ok = "complete", nan = "failed"))
  listed <- gpu_runs(filter = "tags.`gpukeras.kind` = 'trial'")
  expect_setequal(listed$trial_state, c("complete", "failed"))
  client <- mlflow_client(Sys.getenv("MLFLOW_TRACKING_URI"))
  for (run_id in listed$run_id) {
    run <- client$get_run(run_id)
    mode <- run$data$params[["mode"]]
    tags <- run$data$tags
    expect_identical(tags[["gpukeras.trial_state"]], states[[mode]])
    expect_identical(run$info$status, switch(mode, ok = "FINISHED", nan = "FAILED"))
    if (mode == "nan") expect_match(tags[["gpukeras.trial_reason"]], "^the objective val_loss was (nan|inf)")
    # a trial that completed has no reason (not the text "None")
    if (mode == "ok") expect_false("gpukeras.trial_reason" %in% names(tags))
  }
})

test_that("a search's pruned trial is a run KILLED, tagged pruned with the epoch", {
  mark_slow()
  skip_if_no_mlflow()
  local_tracking_off()
  gpu_track(file.path(tempfile("runs-"), "store"), experiment = "pruned")
  model_fn <- function(params) {
    # seed 5 draws units 14, 14 and 16 for the three trials: the first two learn; the third
    # starts from zero weights and barely moves, so successive halving (asha, which ranks
    # trials from the first completed one on) prunes it after an epoch, behind the second
    # (its worker ran the first two: what marks it is its own parameters)
    bad <- identical(as.integer(params$units), 16L)
    keras <- gpu_keras()
    model <- keras$Sequential(list(
      keras$Input(shape = 4), keras$layers$Dense(params$units, activation = "relu"),
      keras$layers$Dense(3L, activation = "softmax", kernel_initializer = if (bad) "zeros" else "glorot_uniform")
    ))
    model$compile(optimizer = keras$optimizers$SGD(if (bad) 1e-9 else 0.05), loss = "sparse_categorical_crossentropy")
    model
  }
  search <- gpu_search(
    model_fn, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
    space = list(units = search_int(4, 16)), trials = 3, sampler = "random",
    pruner = "asha", epochs = 6, batch_size = 16, seed = 5, workers = 1
  )
  expect_identical(search$trials$state[order(search$trials$number)], c("complete", "complete", "pruned"))
  listed <- gpu_runs(filter = "tags.`gpukeras.trial_state` = 'pruned'")
  expect_equal(nrow(listed), 1L)
  run <- mlflow_client(Sys.getenv("MLFLOW_TRACKING_URI"))$get_run(listed$run_id[1])
  expect_identical(run$info$status, "KILLED")
  expect_match(run$data$tags[["gpukeras.trial_reason"]], "^pruned after epoch [1-5]$")
})
