# gpu_search(): trials in fresh worker processes on Optuna, a study that outlives the
# session, trials that fail without stopping the search, and results that can be repeated.

test_that("the space's values print what they draw", {
  skip_if_no_python()
  expect_identical(format(search_int(16, 256, log = TRUE)), "a whole number from 16 to 256 (log scale)")
  expect_identical(format(search_float(0, 0.5)), "a number from 0 to 0.5")
  expect_identical(format(search_choice("adam", "sgd", 3)), "one of \"adam\", \"sgd\", 3")
  expect_identical(
    space_to_plain(list(units = search_int(4, 8), optimizer = search_choice("adam", "sgd"))),
    list(
      units = list(type = "int", lower = 4L, upper = 8L, log = FALSE),
      optimizer = list(type = "choice", choices = list("adam", "sgd"), log = FALSE)
    )
  )
})

test_that("a name of the space that model_fn never reads is refused before any trial, with the one meant", {
  model_fn <- function(params) {
    keras <- gpu_keras()
    model <- keras$Sequential(list(keras$Input(shape = 4), keras$layers$Dense(params$units), keras$layers$Dense(3)))
    model$compile(optimizer = keras$optimizers$Adam(learning_rate = params[["learning_rate"]]), loss = "mse")
    model
  }
  data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
  units <- search_int(2, 8)
  expect_snapshot(error = TRUE, {
    gpu_search(model_fn, data, space = list(units = units, learning_rat = search_float(1e-3, 0.1, log = TRUE)))
    gpu_search(model_fn, data, space = list(units = units, batch_size = search_choice(16, 32)))
  })
  refused <- expect_error(gpu_search(model_fn, data, space = list(unit = units)), class = "gpukeras_error_bad_argument")
  expect_match(conditionMessage(refused), "Did you mean `units`?", fixed = TRUE)
  # what a model_fn that passes `params` on reads is not known: its names are not checked
  expect_null(params_read(function(params) build_model(params)))
  expect_null(params_read(function(p) with(p, units)))
  expect_identical(params_read(model_fn), c("units", "learning_rate"))
})

test_that("a search says how its trials trained, and its plot's legend names what occurred", {
  skip_if_no_python()
  trials <- data.frame(number = 0:2, value = c(0.5, 0.4, NA), state = c("pruned", "pruned", "failed"))
  search <- structure(list(
    trials = trials, best = NULL, objective = "val_loss", direction = "minimize", storage = "search/",
    study = "gpukeras", seed = 1L, validation = "given", interrupted = integer(), trained = "processes",
    trained_why = "populations train on JAX; Keras runs on tensorflow"
  ), class = "gpukeras_search")
  trained <- "Trained:    a fit per trial, in worker processes (populations train on JAX; Keras runs on tensorflow)"
  expect_true(trained %in% format(search))
  search$trained <- "populations"
  search$trained_why <- "the trials train in batches, as a population for each architecture"
  expect_match(format(search), "^Trained:    in batches, as populations \\(the trials train in batches", all = FALSE)
  # pruned trials alone: no completed point, no best so far
  expect_identical(search_plot_legend(trials$state[1:2])$label, "pruned (its last epoch)")
  expect_identical(search_plot_legend("complete")$label, c("complete", "best so far"))
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_identical(plot(search), search)
})

test_that("a background search's status says which trials run, and which a stop interrupted", {
  skip_if_no_python()
  status <- function(state, running) {
    structure(list(state = state, trials = 8L, done = 4L, running = running, best = list(number = 3L, value = 0.25),
                   objective = "val_loss", storage = "search/"), class = "gpukeras_search_job_status")
  }
  expect_identical(
    format(status("running", 1L))[1:2],
    c("Search running: 4 of 8 trials done, 1 running", "Best so far: trial 3, val_loss = 0.25")
  )
  expect_identical(format(status("running", 0L))[1], "Search running: 4 of 8 trials done")
  cancelled <- format(status("cancelled", 1L))
  expect_identical(
    cancelled[1], "Search cancelled: 4 of 8 trials done, 1 interrupted (run again when the search resumes)"
  )
  expect_identical(cancelled[3], "The study is kept in search/: the same gpu_search() call resumes it.")
})

test_that(paste(
  "a study folder is made for this user alone; another user's, one others may write to, or a linked search.db or",
  "models is refused"
), {
  skip_if_no_python()
  tmp <- withr::local_tempdir()
  made <- search_storage(file.path(tmp, "studies", "churn"), "gpukeras", environment())
  expect_identical(made$folder, normalizePath(file.path(tmp, "studies", "churn")))
  expect_identical(as.character(file.mode(made$folder)), "700")
  expect_identical(made$url, file.path(made$folder, "search.journal"))
  # a folder whose study an older gpukeras kept in SQLite resumes it there
  file.create(file.path(made$folder, "search.db"))
  expect_identical(search_storage(made$folder, "gpukeras", environment())$url,
                   paste0("sqlite:///", file.path(made$folder, "search.db")))

  # gpu_search() itself refuses them, before any data is carried or any trial runs
  search <- function(storage) {
    gpu_search(function(params) params$units, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
               space = list(units = search_int(2, 8)), trials = 1, storage = storage)
  }
  refused <- function(storage) {
    error <- tryCatch(search(storage), error = identity)
    expect_s3_class(error, "gpukeras_error_search_storage_unsafe")
    expect_match(conditionMessage(error), normalizePath(storage), fixed = TRUE)
    error
  }
  open <- file.path(tmp, "open")
  dir.create(open)
  Sys.chmod(open, "1777", use_umask = FALSE)
  refused(open)
  expect_snapshot(
    error = TRUE, search(open), transform = function(lines) gsub(normalizePath(tmp), "<tmp>", lines, fixed = TRUE)
  )
  victims <- file.path(tmp, "victim")
  dir.create(victims)
  writeLines("the victim's own model", file.path(victims, "trial-7.keras"))
  for (name in c("search.journal", "search.db", "models")) {
    study <- file.path(tmp, paste0("linked-", sub("[.]", "-", name)))
    dir.create(study, mode = "0700")
    file.symlink(if (name == "models") victims else file.path(victims, "trial-7.keras"), file.path(study, name))
    expect_match(
      conditionMessage(refused(study)),
      sprintf("%s in gpu_search()'s storage folder is a link", file.path(normalizePath(study), name)),
      fixed = TRUE
    )
  }
  expect_identical(readLines(file.path(victims, "trial-7.keras")), "the victim's own model")
  expect_identical(list.files(victims), "trial-7.keras")

  # a real second user: root gives a folder to nobody (as test-backup.R does)
  if (identical(unname(Sys.info()[["effective_user"]]), "root")) {
    theirs <- file.path(tmp, "theirs")
    dir.create(theirs, mode = "0755")
    stopifnot(system2("chown", c("nobody", theirs)) == 0)
    expect_match(conditionMessage(refused(theirs)), "belongs to nobody (uid ", fixed = TRUE)
    expect_identical(list.files(theirs, all.files = TRUE, no.. = TRUE), character())
  }
})

mark_slow()
skip_if_no_python()
skip_if_not(reticulate::py_module_available("optuna"), "optuna is not installed in gpukeras' Python")

# One fresh R process for the two tests that need one on TensorFlow (the first asserts that
# its search started no framework there, before its fit by hand does); each has its own study
# folder, and the second takes the first's spare workers.
tf_r <- shared_fresh_r()

test_that(paste(
  "a failed trial (killed worker, NaN loss) is recorded and the search goes on; the best is saved and repeatable"
), {
  dir <- withr::local_tempdir()
  result <- tf_r({
    dir <- Sys.getenv("GPUKERAS_TEST_DIR")
    model_fn <- function(params) {
      # a worker killed in the middle of its trial, and a rate that makes the loss NaN
      if (params$mode == "crash") tools::pskill(Sys.getpid(), tools::SIGKILL)
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = 4), keras$layers$Dense(8, activation = "relu"),
        keras$layers$Dense(3, activation = "softmax")
      ))
      rate <- if (params$mode == "nan") 1e30 else 0.01
      model$compile(optimizer = keras$optimizers$SGD(rate), loss = "sparse_categorical_crossentropy")
      model
    }
    data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
    search <- gpu_search(
      model_fn, data, space = list(mode = search_choice("ok", "crash", "nan")),
      trials = 3, sampler = "grid", pruner = "none", epochs = 2, batch_size = 16, seed = 5, storage = dir
    )
    frameworks <- reticulate::py_eval("sorted(set(__import__('sys').modules) & {'tensorflow', 'jax'})")
    # the best trial repeated by hand, as ?gpu_search says
    best <- search$trials[search$trials$number == search$best$number, ]
    rows <- setdiff(1:150, search$validation_rows)
    gpu_keras()$utils$set_random_seed(best$seed)
    fit <- gpu_fit(
      model_fn(list(mode = "ok")), list(x = data$x[rows, ], y = data$y[rows]), epochs = 2, batch_size = 16,
      validation_data = list(x = data$x[search$validation_rows, ], y = data$y[search$validation_rows]),
      seed = best$seed, verbose = 0
    )
    loaded <- gpu_load(search$best$path)
    grDevices::pdf(NULL)
    plotted <- plot(search)
    grDevices::dev.off()
    list(plotted = inherits(plotted, "gpukeras_search"),
      search = unclass(search), frameworks = frameworks, repeated = utils::tail(fit$history$val_loss, 1),
      predicted = predict(loaded, iris[c(1, 51, 101), 1:4], type = "class"),
      text = format(search), files = list.files(dir, recursive = TRUE)
    )
  }, env = c(GPUKERAS_TEST_DIR = dir), timeout = 300)
  search <- result$search
  trials <- search$trials
  expect_true(result$plotted)
  expect_identical(
    names(trials), c("number", "mode", "value", "state", "reason", "seconds", "device", "seed", "epochs")
  )
  expect_setequal(trials$mode, c("ok", "crash", "nan"))
  expect_identical(trials$state[trials$mode == "ok"], "complete")
  expect_identical(trials$state[trials$mode == "crash"], "failed")
  expect_match(trials$reason[trials$mode == "crash"], "killed by signal 9")
  expect_identical(trials$state[trials$mode == "nan"], "failed")
  expect_match(trials$reason[trials$mode == "nan"], "^the objective val_loss was (nan|inf)")
  # on a GPU (workers_per_device = "auto"), a fit's memory plan said more workers fit: the pool grew
  if (worker_device() == "GPU 0") {
    expect_match(search$workers$reason, "^[2-4] workers per GPU: (a fit's plan|the host's CPU cores)", all = FALSE)
  }
  expect_identical(search$best$number, trials$number[trials$mode == "ok"])
  expect_identical(search$best$params, list(mode = "ok"))
  # the session that searched started no framework: it held no device memory
  expect_identical(as.character(result$frameworks), character())
  # the best trial's objective, repeated by hand with its seed (exactly, on a CPU)
  expect_identical(result$repeated, search$best$value)
  expect_identical(length(result$predicted), 3L)
  expect_s3_class(result$predicted, "factor")
  # the study and the best model stay in the folder; the failed trials left no model
  expect_setequal(
    result$files, c("search.journal", sprintf("models/trial-%d.%s", search$best$number, c("keras", "gpukeras.json")))
  )
  expect_match(search$validation, "^30 of 150 rows held out \\(20 %, stratified, seed 5\\)")
  expect_match(result$text[1], "^<gpukeras_search> 3 trials \\(1 complete, 2 failed\\), minimize val_loss")
  expect_match(result$text, "^Trained:    a fit per trial, in worker processes \\(populations train on", all = FALSE)
})

test_that("a cancelled background search keeps its study, and the same call resumes it", {
  dir <- withr::local_tempdir()
  result <- tf_r({
    dir <- Sys.getenv("GPUKERAS_TEST_DIR")
    model_fn <- function(params) {
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = 4), keras$layers$Dense(params$units), keras$layers$Dense(3, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
      model
    }
    search <- function(background) {
      gpu_search(
        model_fn, list(x = as.matrix(iris[, 1:4]), y = iris$Species), space = list(units = search_int(2, 64)),
        trials = 3, objective = "val_accuracy", pruner = "none", epochs = 40, batch_size = 150, seed = 2,
        storage = dir, background = background
      )
    }
    job <- search(gpu_background())
    repeat {
      status <- gpu_job_status(job)
      if (status$done >= 1 || status$state != "running") break
      Sys.sleep(0.2)
    }
    running <- status
    gpu_job_cancel(job)
    cancelled <- gpu_job_status(job)
    # the study as the cancel left it, read with Optuna itself
    optuna <- reticulate::import("optuna")
    journal <- optuna$storages$journal$JournalFileBackend(file.path(dir, "search.journal"))
    study <- optuna$load_study(study_name = "gpukeras", storage = optuna$storages$JournalStorage(journal))
    # (read in Python: reticulate >= 1.41 converts an Enum such as the trial's state)
    done <- reticulate::py_eval("lambda study: [t for t in study.trials if t.state.name == 'COMPLETE']")(study)
    before <- data.frame(
      number = vapply(done, function(t) as.integer(t$number), 1L),
      value = vapply(done, function(t) t$value, 1),
      seconds = vapply(done, function(t) t$user_attrs$gpukeras_seconds, 1)
    )
    resumed <- search(FALSE)
    later <- search(FALSE) # the same call once more: nothing to run, nothing resumed
    mismatch <- tryCatch(
      gpu_search(model_fn, list(x = as.matrix(iris[, 1:4]), y = iris$Species), space = list(units = search_int(2, 32)),
                 trials = 3, objective = "val_accuracy", pruner = "none", epochs = 20, batch_size = 150, seed = 2,
                 storage = dir),
      error = function(e) e
    )
    list(running = unclass(running), cancelled = unclass(cancelled), text = format(cancelled), before = before,
         resumed = unclass(resumed), later = unclass(later), later_text = format(later),
         mismatch = class(mismatch), mismatch_message = conditionMessage(mismatch))
  }, env = c(GPUKERAS_TEST_DIR = dir), timeout = 300)
  expect_identical(result$running$state, "running")
  expect_gte(result$running$done, 1L)
  expect_identical(result$cancelled$state, "cancelled")
  expect_match(result$text, "the same gpu_search\\(\\) call resumes it", all = FALSE)
  expect_no_match(result$text, "running")
  resumed <- result$resumed
  # three trials in all: the ones done before the cancel kept as they were, none run twice
  expect_identical(nrow(resumed$trials), 3L)
  expect_identical(resumed$trials$state, rep("complete", 3))
  before <- result$before
  kept <- resumed$trials[match(before$number, resumed$trials$number), ]
  expect_identical(kept$value, before$value)
  expect_identical(kept$seconds, before$seconds)
  expect_identical(resumed$direction, "maximize")
  expect_true(all(resumed$interrupted < max(resumed$trials$number)))
  expect_identical(result$later$trials, resumed$trials)
  expect_identical(result$later$interrupted, integer())
  expect_no_match(result$later_text, "Resumed", fixed = TRUE)
  expect_true("gpukeras_error_search_mismatch" %in% result$mismatch)
  # which arguments differ, with what the study holds and what this call gave
  expect_match(result$mismatch_message, "gpu_fit()'s `epochs` is 40 in the study, 20 in this call", fixed = TRUE)
  expect_match(
    result$mismatch_message,
    "the search space's `units` is search_int(2, 64) in the study, search_int(2, 32) in this call",
    fixed = TRUE
  )
})

test_that("gpu_search() runs on JAX, with a searched gpu_fit() argument and validation data given", {
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  result <- run_in_fresh_r({
    model_fn <- function(params) {
      keras <- gpu_keras()
      model <- keras$Sequential(list(keras$Input(shape = 4), keras$layers$Dense(3, activation = "softmax")))
      model$compile(
        optimizer = keras$optimizers$Adam(params$rate),
        loss = "sparse_categorical_crossentropy",
        metrics = list("accuracy")
      )
      model
    }
    held <- seq(1, 150, by = 5)
    search <- gpu_search(
      model_fn, list(x = as.matrix(iris[-held, 1:4]), y = iris$Species[-held]),
      space = list(rate = search_float(1e-3, 1e-1, log = TRUE)),
      trials = 2, objective = "val_accuracy", epochs = 3, batch_size = search_choice(16, 32), seed = 9,
      validation_data = list(x = as.matrix(iris[held, 1:4]), y = iris$Species[held])
    )
    list(search = unclass(search), backend = gpu_keras()$backend$backend())
  }, env = c(KERAS_BACKEND = "jax"), timeout = 240)
  trials <- result$search$trials
  expect_identical(result$backend, "jax")
  expect_identical(trials$state, rep("complete", 2))
  expect_true(all(trials$batch_size %in% c(16, 32)))
  expect_true(all(trials$rate >= 1e-3 & trials$rate <= 1e-1))
  expect_identical(trials$epochs, c(3L, 3L))
  expect_identical(result$search$direction, "maximize")
  expect_identical(result$search$best$value, max(trials$value))
  expect_identical(result$search$validation, "the validation_data given")
  expect_null(result$search$validation_rows)
})
