# gpu_search()'s trials as populations on JAX: a real SQLite study, trials of two shapes
# (units searched) with their own learning rates and epochs, each trial's objective what a fit of its
# parameters alone with its seed reaches, the best trial's model saved; turned off, a
# process per trial.

# One fresh R process on JAX for the tests after the first (whose gpu_setup() stays in its own
# process): they give each call its own study folder, and share the process's spare workers.
jax_r <- shared_fresh_r()

test_that("on JAX the trials train as populations, each trial's objective a fit of its parameters alone", {
  mark_slow()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  skip_if_not(reticulate::py_module_available("optuna"), "optuna is not installed")
  dir <- withr::local_tempdir()
  result <- run_in_fresh_r({
    # the session's "auto" choices, which its workers take: mixed_bfloat16 under make test's
    # simulated GPU, float32 on the CPU
    gpu_setup()
    dir <- Sys.getenv("GPUKERAS_TEST_DIR")
    made <- tempfile() # a line for each model_fn() call, the workers' too
    model_fn <- function(params) {
      cat("made\n", file = made, append = TRUE)
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = 4), keras$layers$Dense(params$units, activation = "relu"), keras$layers$Dropout(0.2),
        keras$layers$Dense(3, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
      model
    }
    data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
    search <- gpu_search(
      model_fn, data, space = list(units = search_choice(4L, 8L)), learning_rate = search_float(1e-3, 0.1, log = TRUE),
      trials = 4, sampler = "random", pruner = "none", epochs = search_choice(1L, 2L), batch_size = 16, seed = 5,
      storage = dir
    )
    built <- length(readLines(made))
    rows <- setdiff(1:150, search$validation_rows)
    refit <- lapply(seq_len(nrow(search$trials)), function(i) {
      trial <- search$trials[i, ]
      gpu_keras()$utils$set_random_seed(trial$seed)
      fit <- gpu_fit(
        model_fn(list(units = trial$units)), list(x = data$x[rows, ], y = data$y[rows]), epochs = trial$epochs,
        batch_size = 16,
        validation_data = list(x = data$x[search$validation_rows, ], y = data$y[search$validation_rows]),
        seed = trial$seed, learning_rate = trial$learning_rate, verbose = 0
      )
      utils::tail(fit$history$val_loss, 1)
    })
    loaded <- gpu_load(search$best$path)
    off <- gpu_search(
      model_fn, data, space = list(units = search_choice(4L, 8L)), learning_rate = search_float(1e-3, 0.1, log = TRUE),
      trials = 1, sampler = "random", pruner = "none", epochs = 2, batch_size = 16, seed = 5,
      storage = file.path(dir, "off"),
      workers = gpu_workers(population = FALSE)
    )
    list(
      policy = gpu_keras()$config$dtype_policy()$name, search = unclass(search), refit = unlist(refit),
      text = format(search),
      predicted = predict(loaded, iris[c(1, 51, 101), 1:4], type = "class"), off = unclass(off), built = built
    )
  }, env = c(KERAS_BACKEND = "jax", GPUKERAS_TEST_DIR = dir), timeout = 400)
  expect_identical(result$policy, if (simulating_gpu()) "mixed_bfloat16" else "float32")
  search <- result$search
  expect_identical(search$trained, "populations")
  expect_match(search$trained_why, "trials train in batches", fixed = TRUE)
  expect_match(result$text, "^Trained:    in batches, as populations", all = FALSE)
  expect_identical(search$trials$state, rep("complete", 4))
  expect_type(search$trials$value, "double")
  expect_equal(search$trials$value, result$refit, tolerance = 1e-5) # each with the epochs it drew
  expect_true(all(search$trials$epochs %in% 1:2))
  # one model made for each architecture (a population's, or a group of one's process), not each trial
  expect_identical(result$built, length(unique(search$trials$units)))
  expect_true(file.exists(search$best$path))
  expect_length(result$predicted, 3L)
  expect_identical(result$off$trained, "processes")
  expect_match(result$off$trained_why, "population = FALSE", fixed = TRUE)
  expect_identical(result$off$trials$state, "complete")
})

test_that("a background search of populations, cancelled mid-batch, keeps its study, and the same call resumes it", {
  mark_slow()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  skip_if_not(reticulate::py_module_available("optuna"), "optuna is not installed")
  dir <- withr::local_tempdir()
  result <- jax_r({
    dir <- Sys.getenv("GPUKERAS_TEST_DIR")
    model_fn <- function(params) {
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = 4), keras$layers$Dense(8L), keras$layers$Dense(3, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
      model
    }
    # one shape, the learning rate gpu_fit()'s: the trials one population
    search <- function(background) {
      gpu_search(
        model_fn, list(x = as.matrix(iris[, 1:4]), y = iris$Species), space = list(),
        learning_rate = search_float(1e-3, 1e-1, log = TRUE), trials = 4, sampler = "random", pruner = "none",
        epochs = 300, batch_size = 150, seed = 2,
        storage = dir, background = background
      )
    }
    job <- search(gpu_background())
    repeat {
      status <- gpu_job_status(job)
      if (status$running >= 1 || status$state != "running") break
      Sys.sleep(0.2)
    }
    Sys.sleep(2) # the batch's worker starts, and trains
    gpu_job_cancel(job)
    cancelled <- gpu_job_status(job)
    resumed <- search(FALSE)
    list(cancelled = unclass(cancelled), resumed = unclass(resumed))
  }, env = c(KERAS_BACKEND = "jax", GPUKERAS_TEST_DIR = dir), timeout = 400)
  expect_identical(result$cancelled$state, "cancelled")
  expect_gte(result$cancelled$running, 1L)
  resumed <- result$resumed
  expect_identical(resumed$trained, "populations")
  # four trials in all, those the cancel interrupted run again (uncounted), none twice
  expect_identical(nrow(resumed$trials), 4L)
  expect_identical(resumed$trials$state, rep("complete", 4))
  expect_gte(length(resumed$interrupted), 1L)
  expect_true(all(resumed$interrupted < min(setdiff(resumed$trials$number, resumed$interrupted))))
  expect_true(file.exists(resumed$best$path))
})

test_that("a batch whose model_fn fails fails each of its trials, and stops the search as a process's trial does", {
  mark_slow()
  # model_fn fails before a model exists: the simulated GPU's precision and memory plan are not reached
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  skip_if_not(reticulate::py_module_available("optuna"), "optuna is not installed")
  dir <- withr::local_tempdir()
  result <- jax_r({
    dir <- Sys.getenv("GPUKERAS_TEST_DIR")
    failed <- function(workers) {
      storage <- file.path(dir, if (isFALSE(workers$population)) "processes" else "populations")
      error <- tryCatch(
        gpu_search(
          function(params) stop("no model for ", params$units, " units"),
          list(x = as.matrix(iris[, 1:4]), y = iris$Species),
          space = list(units = search_choice(4L)), learning_rate = search_float(1e-3, 0.1), trials = 2,
          sampler = "random", pruner = "none", epochs = 1, seed = 5, storage = storage, workers = workers
        ),
        error = identity
      )
      # read in Python: reticulate >= 1.41 converts optuna's TrialState (an IntEnum) to a number
      study <- reticulate::py_run_string(sprintf(paste(
        "import optuna",
        "journal = optuna.storages.journal.JournalFileBackend('%s')",
        "trials = optuna.load_study(study_name = 'gpukeras', storage = optuna.storages.JournalStorage(journal)).trials",
        "states = [trial.state.name for trial in trials]",
        "reasons = [trial.user_attrs['gpukeras_reason'] for trial in trials]",
        sep = "\n"
      ), file.path(storage, "search.journal")), local = TRUE)
      list(
        class = class(error), message = conditionMessage(error), parent = conditionMessage(error$parent),
        states = unlist(study$states), reasons = unlist(study$reasons)
      )
    }
    list(populations = failed(gpu_workers()), processes = failed(gpu_workers(population = FALSE)))
  }, env = c(KERAS_BACKEND = "jax", GPUKERAS_TEST_DIR = dir), timeout = 300)
  populations <- result$populations
  processes <- result$processes
  expect_identical(populations[c("class", "message", "parent")], processes[c("class", "message", "parent")])
  expect_true("gpukeras_error_search_trial" %in% populations$class)
  expect_match(populations$message, "Trial 0 failed, and no trial has completed.", fixed = TRUE)
  expect_match(populations$parent, "no model for 4 units", fixed = TRUE)
  # the batch's two trials failed with the error, as the process's one trial
  expect_identical(populations$states, c("FAIL", "FAIL"))
  expect_identical(populations$reasons, rep(processes$reasons[[1]], 2))
  expect_identical(processes$states[[1]], "FAIL")
})

test_that("a model that refuses the data fails a batch as it fails a process's trial: a classed error, in its words", {
  mark_slow()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  skip_if_not(reticulate::py_module_available("optuna"), "optuna is not installed")
  dir <- withr::local_tempdir()
  result <- jax_r({
    dir <- Sys.getenv("GPUKERAS_TEST_DIR")
    model_fn <- function(params) {
      keras <- gpu_keras()
      model <- keras$Sequential(list(keras$Input(shape = 7), keras$layers$Dense(1L)))
      model$compile(optimizer = "adam", loss = "mse")
      model
    }
    data <- list(x = matrix(seq_len(13 * 20) / 260, 20, 13), y = seq_len(20) / 20)
    # (one architecture: the batch's two trials train as one population)
    failed <- function(workers, folder) {
      tryCatch(
        gpu_search(
          model_fn, data, space = list(), learning_rate = search_choice(0.01, 0.1), trials = 2, sampler = "random",
          pruner = "none", epochs = 1, batch_size = 8, seed = 1, storage = file.path(dir, folder), workers = workers
        ),
        error = identity
      )
    }
    list(populations = failed(gpu_workers(workers = 1), "populations"),
         processes = failed(gpu_workers(workers = 1, population = FALSE), "processes"))
  }, env = c(KERAS_BACKEND = "jax", GPUKERAS_TEST_DIR = dir), timeout = 300)
  populations <- result$populations
  expect_s3_class(populations, "gpukeras_error_bad_data")
  expect_s3_class(populations, "gpukeras_error_search_trial")
  expect_identical(class(populations), class(result$processes))
  expect_identical(conditionMessage(populations$parent), conditionMessage(result$processes$parent))
  expect_snapshot(raise_again(populations), error = TRUE)
})

test_that("a units search trains its architectures at once in two workers, a group of one as a process", {
  mark_slow()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  skip_if_not(reticulate::py_module_available("optuna"), "optuna is not installed")
  dir <- withr::local_tempdir()
  result <- jax_r({
    dir <- Sys.getenv("GPUKERAS_TEST_DIR")
    model_fn <- function(params) {
      # which worker process built which architecture, and when
      cat(sprintf("%d %d %.3f\n", params$units, Sys.getpid(), as.numeric(Sys.time())), file = file.path(dir, "built"),
          append = TRUE)
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = 4), keras$layers$Dense(params$units, activation = "relu"),
        keras$layers$Dense(3, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
      model
    }
    # the grid's 5 of 6 combinations: two units values drawn twice, one once
    search <- gpu_search(
      model_fn, list(x = as.matrix(iris[, 1:4]), y = iris$Species), space = list(units = search_choice(4L, 8L, 16L)),
      learning_rate = search_choice(0.01, 0.1), trials = 5, sampler = "grid", pruner = "none", epochs = 2,
      batch_size = 16, seed = 3, storage = file.path(dir, "study"), workers = gpu_workers(workers = 2)
    )
    built <- utils::read.table(file.path(dir, "built"), col.names = c("units", "pid", "at"))
    list(search = unclass(search), built = built)
  }, env = c(KERAS_BACKEND = "jax", GPUKERAS_TEST_DIR = dir), timeout = 400)
  search <- result$search
  built <- result$built
  expect_identical(search$trials$state, rep("complete", 5))
  expect_identical(sort(as.vector(table(search$trials$units))), c(1L, 2L, 2L))
  expect_identical(search$trained, "populations and processes")
  expect_match(
    search$trained_why, "split by architecture into tasks for the workers: 4 trials in 2 populations; 1 in processes",
    fixed = TRUE
  )
  # each architecture's models built in one worker process, and the first two in different ones
  pids <- tapply(built$pid, built$units, unique)
  expect_true(all(lengths(pids) == 1L))
  first <- unique(built$units[order(built$at)])[1:2]
  expect_false(identical(pids[[as.character(first[1])]], pids[[as.character(first[2])]]))
})
