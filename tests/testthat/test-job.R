# gpu_fit(background = TRUE): training in a supervised child R process, with
# real processes (a child costs seconds to start: R, Python, TensorFlow).

mark_slow()

# 400 rows in batches of 10: 40 batches an epoch.
job_data <- function() {
  x <- matrix(sin(seq_len(1600)), ncol = 4)
  list(x = x, y = as.vector(x %*% c(1, -2, 0.5, 3)))
}

job_model <- function() tiny_model(seed = 5L)

job_folders <- function() list.files(tempdir(), pattern = "^gpukeras-job-")

# One unbroken background run, shared by the tests that compare with it.
unbroken_run <- local({
  run <- NULL
  function() {
    if (is.null(run)) {
      model <- job_model()
      job <- gpu_fit(model, job_data(), epochs = 3, batch_size = 10, seed = 7,
                     backup = gpu_backup(NULL, every = 5), background = TRUE, verbose = 0)
      started <- gpu_job_status(job)
      fit <- gpu_job_wait(job, timeout = 240)
      run <<- list(job = job, started = started, fit = fit, model = model)
    }
    run
  }
})

test_that(paste(
  "a background fit returns a job at once; wait gives the fit and the model gets the weights and optimizer state"
), {
  skip_if_no_python()
  run <- unbroken_run()
  expect_s3_class(run$job, "gpukeras_job")
  expect_true(run$started$state %in% c("starting", "running"))
  expect_s3_class(run$fit, "gpukeras_fit")
  expect_identical(run$fit$history$epoch, 1:3)
  expect_identical(run$fit$settings$data, "400 rows of R data in batches of 10")
  expect_lt(run$fit$history$loss[3], run$fit$history$loss[1])
  # The user's model object holds what the child trained: 120 optimizer steps.
  expect_identical(as.integer(run$model$optimizer$iterations$numpy()), 120L)
  expect_false(isTRUE(all.equal(
    lapply(run$model$get_weights(), as.vector), lapply(job_model()$get_weights(), as.vector)
  )))
  predicted <- as.vector(keras_predict(run$model, job_data()$x[1:50, ], verbose = 0L))
  expect_lt(mean((predicted - job_data()$y[1:50])^2), run$fit$history$loss[1])
  status <- gpu_job_status(run$job)
  expect_identical(status$state, "done")
  expect_identical(status$restarts, 0L)
  expect_identical(as.integer(status$epoch), 3L)
  expect_false(dir.exists(run$job$dir)) # the job's files go when its result is taken
  expect_identical(gpu_job_wait(run$job), run$fit) # waiting again gives the same fit
  expect_match(format(run$job)[1], "^<gpukeras job> done after [0-9.]+ s$")
})

test_that(paste(
  "a child killed with SIGSEGV mid-epoch restarts from the backup and ends with the weights of an unbroken run"
), {
  skip_if_no_python()
  unbroken <- unbroken_run()
  marker <- withr::local_tempfile()
  model <- job_model()
  # Killed at the 8th batch of epoch 2 (backups every 5 batches): resumed after 5.
  job <- gpu_fit(model, job_data(), epochs = 3, batch_size = 10, seed = 7,
                 backup = gpu_backup(NULL, every = 5), callbacks = crash_at(marker, epoch = 1, batch = 7),
                 background = gpu_background(max_restarts = 2), verbose = 0)
  fit <- gpu_job_wait(job, timeout = 240)
  status <- gpu_job_status(job)
  expect_identical(readLines(marker, warn = FALSE), "1")
  expect_identical(status$restarts, 1L)
  expect_match(status$causes, "killed by signal 11 \\(SIGSEGV")
  expect_identical(fit$settings$resumed_from, list(epoch = 2L, batches_done = 5L))
  expect_true(any(grepl("^Backups: .*, every 5 batches \\(resumed in epoch 2, after 5 batches\\)$", format(fit))))
  expect_identical(fit$history$epoch, 1:3)
  expect_equal(fit$history$loss, unbroken$fit$history$loss, tolerance = 1e-6)
  expect_identical(lapply(model$get_weights(), as.vector), lapply(unbroken$model$get_weights(), as.vector))
})

test_that(paste(
  "the signals gpu_fit() handles reach the child: a warning signal there saves mid-epoch, and the rerun ends as an",
  "unbroken run"
), {
  skip_if_no_python()
  skip_on_os("windows")
  unbroken <- unbroken_run()
  marker <- withr::local_tempfile()
  backups <- withr::local_tempdir()
  # SIGUSR1 at the 8th batch of epoch 2 (backups every 5 batches): saved after 8, not 5.
  job <- gpu_fit(job_model(), job_data(), epochs = 3, batch_size = 10, seed = 7,
                 backup = gpu_backup(backups, every = 5, signals = c("SIGTERM", "SIGUSR1")),
                 callbacks = crash_at(marker, epoch = 1, batch = 7, signal = "SIGUSR1"),
                 background = gpu_background(max_restarts = 0), verbose = 0)
  error <- tryCatch(gpu_job_wait(job, timeout = 240), error = identity)
  # The child stopped for the signal, as gpu_fit() in the session does: the same class.
  expect_s3_class(error, "gpukeras_error_preempted")
  expect_match(conditionMessage(error), "SIGUSR1")
  state_text <- paste(readLines(file.path(backups, "gpukeras-backup.json"), warn = FALSE), collapse = "\n")
  state <- reticulate::import("json")$loads(state_text)
  expect_identical(c(state$epoch, state$batches_done), c(1L, 8L))
  model <- job_model()
  fit <- gpu_fit(model, job_data(), epochs = 3, batch_size = 10, seed = 7,
                 backup = gpu_backup(backups, every = 5), verbose = 0)
  expect_identical(fit$settings$resumed_from, list(epoch = 2L, batches_done = 8L))
  expect_identical(lapply(model$get_weights(), as.vector), lapply(unbroken$model$get_weights(), as.vector))
})

test_that(paste(
  "a child killed more often than max_restarts: gpukeras_error_job_failed with the cause, its stderr and the backup"
), {
  skip_if_no_python()
  marker <- withr::local_tempfile()
  job <- gpu_fit(job_model(), job_data(), epochs = 2, batch_size = 10, seed = 7,
                 backup = gpu_backup(NULL, every = 1), callbacks = crash_at(marker, epoch = 0, batch = 2, times = 99),
                 background = gpu_background(max_restarts = 1), verbose = 0)
  error <- tryCatch(gpu_job_wait(job, timeout = 240), error = identity)
  expect_s3_class(error, "gpukeras_error_job_failed")
  expect_s3_class(error, "gpukeras_error")
  expect_identical(readLines(marker, warn = FALSE), "2") # the first run and one restart
  expect_match(error$cause, "killed by signal 11 \\(SIGSEGV, a segmentation fault\\)")
  expect_length(error$causes, 2L)
  expect_true(length(error$stderr) >= 1 && length(error$stderr) <= 20)
  expect_match(paste(error$stderr, collapse = "\n"), "segfault|aborting", ignore.case = TRUE)
  expect_true(file.exists(file.path(error$backup_dir, "gpukeras-backup.json")))
  message <- conditionMessage(error)
  expect_match(
    message, "^Training in the background failed after 1 restart\\(s\\): the training process was killed by signal 11"
  )
  expect_match(message, sprintf("The backup is in %s", error$backup_dir), fixed = TRUE)
  expect_identical(gpu_job_status(job)$state, "failed")
  unlink(dirname(error$backup_dir), recursive = TRUE)
})

test_that(paste(
  "status while running, Ctrl-C in wait, then cancel: the processes end, the backup stays and gpu_fit() resumes from",
  "it"
), {
  skip_if_no_python()
  job <- gpu_fit(job_model(), job_data(), epochs = 10000, batch_size = 10, seed = 1,
                 monitor = FALSE, background = TRUE, verbose = 0)
  withr::defer(unlink(job$dir, recursive = TRUE))
  deadline <- Sys.time() + 180
  repeat {
    status <- gpu_job_status(job)
    # In the second epoch: the first one's backup is committed.
    if (identical(status$state, "running") && isTRUE(status$epoch >= 2 && status$batch > 0) ||
        Sys.time() > deadline) break
    Sys.sleep(0.2)
  }
  expect_identical(status$state, "running")
  expect_identical(as.integer(status$epochs), 10000L)
  expect_true(is.numeric(status$sample$batches_per_second) && status$sample$batches_per_second > 0)
  expect_true(is.numeric(status$sample$samples_per_second))
  expect_true(is.numeric(status$sample$logs$loss))
  expect_true(process_running(status$pid))
  expect_match(format(status)[2], sprintf("^  Process:  %d$", status$pid))
  # One backup folder, one fit: this session cannot train into the job's folder meanwhile.
  busy <- expect_error(
    gpu_fit(job_model(), job_data(), epochs = 1, batch_size = 10, seed = 1, monitor = FALSE,
            backup = gpu_backup(file.path(job$dir, "backup")), verbose = 0),
    class = "gpukeras_error_backup_in_use"
  )
  expect_match(conditionMessage(busy), sprintf("is in use by another fit (process %d", status$pid), fixed = TRUE)
  # Ctrl-C in gpu_job_wait() leaves the job running and says how to stop it.
  skip_on_os("windows")
  system(sprintf("(sleep 1; kill -INT %d) > /dev/null 2>&1 &", Sys.getpid()))
  expect_message(
    returned <- gpu_job_wait(job, timeout = 120),
    "still running: gpu_job_wait(job) waits again, gpu_job_cancel(job) stops it", fixed = TRUE
  )
  expect_identical(returned, job)
  expect_identical(gpu_job_status(job)$state, "running")
  gpu_job_cancel(job)
  cancelled <- gpu_job_status(job)
  expect_identical(cancelled$state, "cancelled")
  expect_false(job$process$is_alive())
  Sys.sleep(0.5)
  expect_false(process_running(status$pid))

  # The work stays: the job's folder keeps its backup alone (the carried data,
  # logs and temp files go), and status and print say where it is.
  backup <- file.path(job$dir, "backup")
  expect_identical(cancelled$backup_dir, backup)
  expect_identical(list.files(job$dir, all.files = TRUE, no.. = TRUE), "backup")
  expect_true(file.exists(file.path(backup, "gpukeras-backup.json")))
  expect_identical(cancelled$resume, sprintf("gpu_fit(<same arguments>, backup = gpu_backup(\"%s\"))", backup))
  expect_true(cancelled$epoch >= 2)
  printed <- format(job)
  expect_match(printed[1], "^<gpukeras job> cancelled after [0-9.]+ s$")
  expect_identical(utils::tail(printed, 3), c(
    sprintf("  Cancelled in epoch %d; its backup is in %s:", as.integer(cancelled$epoch), backup),
    sprintf("  gpu_fit(<same arguments>, backup = gpu_backup(\"%s\")) resumes from it.", backup),
    paste0(
      "  It is in the session's temporary folder and is removed when R ends: copy it, or give backup = gpu_backup() a ",
      "folder of your own."
    )
  ))
  error <- expect_error(gpu_job_wait(job), class = "gpukeras_error_job_cancelled")
  expect_match(conditionMessage(error), sprintf("%s resumes from its backup.", cancelled$resume), fixed = TRUE)

  # The same call with that backup folder goes on from there, in this session.
  model <- job_model()
  epochs <- as.integer(cancelled$epoch) + 1L
  fit <- gpu_fit(model, job_data(), epochs = epochs, batch_size = 10, seed = 1, monitor = FALSE,
                 backup = gpu_backup(backup), verbose = 0)
  expect_true(fit$settings$resumed_from$epoch >= 1L)
  expect_identical(fit$history$epoch, seq_len(epochs))
  expect_identical(as.integer(model$optimizer$iterations$numpy()), 40L * epochs)
})

test_that("a job cancelled before its first backup leaves no folder, and a backup_dir the user gave is never removed", {
  skip_if_no_python()
  before <- job_folders()
  fresh <- gpu_fit(job_model(), job_data(), epochs = 10000, batch_size = 10, seed = 1,
                   monitor = FALSE, background = TRUE, verbose = 0)
  gpu_job_cancel(fresh)
  status <- gpu_job_status(fresh)
  expect_identical(status$state, "cancelled")
  expect_null(status$backup_dir)
  expect_null(status$resume)
  expect_false(dir.exists(fresh$dir))
  expect_match(
    utils::tail(format(status), 1), "^  Cancelled (before training started|in epoch 1, before its first backup)\\.$"
  )

  mine <- withr::local_tempdir()
  writeLines("mine", file.path(mine, "notes.txt"))
  job <- gpu_fit(job_model(), job_data(), epochs = 10000, batch_size = 10, seed = 1,
                 monitor = FALSE, backup = gpu_backup(mine), background = TRUE, verbose = 0)
  gpu_job_cancel(job)
  expect_false(dir.exists(job$dir))
  expect_identical(gpu_job_status(job)$backup_dir, normalizePath(mine))
  expect_identical(readLines(file.path(mine, "notes.txt")), "mine")
  # (A standby a job took is that job's folder, gone with it.)
  expect_identical(setdiff(job_folders(), before), character())
})

test_that("the call that resumes a stopped job names the seed the job chose: a resumed run needs the same", {
  skip_if_no_python()
  dir <- withr::local_tempdir()
  backup <- file.path(dir, "backup")
  job <- new.env()
  job$dir <- dir
  job$spec <- list(fit = list(backup_dir = backup, seed = 12345L), seed_chosen = TRUE)
  expect_null(resume_call(job)) # no backup committed
  dir.create(backup)
  writeLines("{}", file.path(backup, "gpukeras-backup.json"))
  expect_identical(
    resume_call(job), sprintf("gpu_fit(<same arguments>, seed = 12345, backup = gpu_backup(\"%s\"))", backup)
  )
  job$spec$seed_chosen <- FALSE # the user gave it: it is among the same arguments
  expect_identical(resume_call(job), sprintf("gpu_fit(<same arguments>, backup = gpu_backup(\"%s\"))", backup))
})

test_that("what cannot be carried to the child is a classed error before any child starts", {
  skip_if_no_python()
  keras <- gpu_keras()
  before <- job_folders()
  reticulate::py_run_string(paste(
    "import keras",
    "class Doubling(keras.layers.Layer):",
    "    def call(self, x):",
    "        return x * 2",
    sep = "\n"
  ))
  custom <- keras$Sequential(list(keras$Input(shape = list(4L)), reticulate::py$Doubling(), keras$layers$Dense(1L)))
  custom$compile(optimizer = "adam", loss = "mse")
  error <- expect_error(gpu_fit(custom, job_data(), background = TRUE), class = "gpukeras_error_not_carriable")
  expect_match(
    conditionMessage(error), "uses Doubling (not registered), which a fresh Python process cannot import", fixed = TRUE
  )

  error <- expect_error(
    gpu_fit(
      job_model(),
      job_data(),
      callbacks = keras$callbacks$LambdaCallback(on_epoch_end = function(...) NULL),
      background = TRUE
    ),
    class = "gpukeras_error_not_carriable"
  )
  expect_match(conditionMessage(error), "^The callback LambdaCallback cannot be carried to a background process")

  at_random <- gpu_dataset(job_data()$x, job_data()$y, batch_size = 10, validation_split = 0.25)
  error <- expect_error(
    gpu_fit(job_model(), at_random$train, validation_data = at_random$validation, background = TRUE),
    class = "gpukeras_error_not_carriable"
  )
  expect_match(conditionMessage(error), "split into train and validation rows at random", fixed = TRUE)
  expect_match(conditionMessage(error), "Give gpu_dataset() a `seed`", fixed = TRUE)
  mapped <- gpu_dataset(job_data()$x, job_data()$y, map = function(x, y) list(x, y))
  error <- expect_error(gpu_fit(job_model(), mapped, background = TRUE), class = "gpukeras_error_not_carriable")
  expect_match(conditionMessage(error), "a gpu_dataset() with a `map` function", fixed = TRUE)
  expect_error(gpu_fit(job_model(), job_data(), background = "yes"), class = "gpukeras_error_bad_argument")
  expect_error(
    gpu_fit(job_model(), job_data(), background = gpu_background(max_restarts = -1)),
    class = "gpukeras_error_bad_argument"
  )
  # the argument that moved into gpu_background() shows the new form
  expect_error(
    gpu_fit(job_model(), job_data(), background = TRUE, max_restarts = 3),
    "background = gpu_background(max_restarts = )",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  expect_error(gpu_job_status("job"), class = "gpukeras_error_bad_argument")
  expect_identical(job_folders(), before)
})

test_that("a gpu_dataset() of R data, split with a seed, trains in the background as it does in the session", {
  skip_if_no_python()
  data <- job_data()
  frame <- data.frame(a = data$x[, 1], b = data$x[, 2], c = data$x[, 3], d = data$x[, 4])
  # Unshuffled, so the batches come in the same order in both processes: the
  # same weights then show that the child split the rows as this session did.
  split <- gpu_dataset(frame, data$y, batch_size = 10, shuffle = FALSE, seed = 4, validation_split = 0.25)
  here <- job_model()
  in_session <- gpu_fit(
    here, split$train, validation_data = split$validation, epochs = 2, seed = 7, monitor = FALSE, verbose = 0
  )
  there <- job_model()
  job <- gpu_fit(there, split$train, validation_data = split$validation, epochs = 2, seed = 7,
                 monitor = FALSE, background = TRUE, verbose = 0)
  expect_true(all(file.exists(file.path(job$dir, c("data-x.npy", "data-y.npy", "validation-x.npy")))))
  fit <- gpu_job_wait(job, timeout = 240)
  expect_match(fit$settings$data, "^gpu_dataset\\(\\) train pipeline from arrays")
  expect_identical(fit$settings$data, in_session$settings$data)
  expect_identical(names(fit$history), names(in_session$history))
  expect_equal(fit$history$val_loss, in_session$history$val_loss, tolerance = 1e-5)
  expect_equal(lapply(there$get_weights(), as.vector), lapply(here$get_weights(), as.vector), tolerance = 1e-5)
})

test_that("background fits in a loop leave the parent's resident memory where it was", {
  skip_if_no_python()
  skip_if_not(file.exists("/proc/self/status"), "resident memory is read from /proc")
  rss_mib <- function() {
    gc()
    reticulate::import("gc")$collect()
    status <- readLines("/proc/self/status")
    as.numeric(gsub("\\D", "", grep("^VmRSS:", status, value = TRUE))) / 1024
  }
  x <- matrix(runif(1e5 * 32), ncol = 32) # 24 MiB as R doubles, 12 MiB as float32
  data <- list(x = x, y = rowSums(x))
  model <- gpu_keras()$Sequential(list(gpu_keras()$Input(shape = list(32L)), gpu_keras()$layers$Dense(1L)))
  model$compile(optimizer = "adam", loss = "mse")
  fit <- function() {
    gpu_job_wait(
      gpu_fit(model, data, epochs = 1, batch_size = 1024, monitor = FALSE, background = TRUE, verbose = 0),
      timeout = 240
    )
  }
  fit() # the first one loads what every later one shares (h5 readers, callr)
  folders <- job_folders()
  rss <- vapply(1:3, function(i) {
    fit()
    rss_mib()
  }, numeric(1))
  # A copy of the data kept per fit would add 12 MiB with every fit; the
  # allocator keeping a freed buffer for reuse adds to the resident memory
  # once, so one of the two later fits must leave it (nearly) where it was.
  cat("\nparent RSS after fits 2-4 (MiB):", round(rss, 1), "\n")
  expect_lt(min(diff(rss)), 4)
  expect_lt(rss[3] - rss[1], 20)
  # Each job's folder goes with it; one standby's folder waits for the next job.
  expect_length(job_folders(), length(folders))
})

# One fresh R session, shared by the three tests after it (each costs seconds to
# start: R, Python, TensorFlow). There, in order: gpu_setup() with two logical CPU
# devices; a gpu_dataset() of CSV files trained in the background under a mirrored
# strategy (the first job: no standby yet); the same small model trained twice, with
# the standby that job readied and with the standby turned off; what it saw is saved
# to RESULT_FILE. Then a job that trains until the last test kills the session, whose two
# pids go to PIDS_FILE.
fresh_session <- local({
  session <- NULL
  files <- NULL
  function() {
    if (is.null(session)) {
      folder <- tempfile("gpukeras-test-job-")
      # the session's temporary files (TensorFlow's autograph files, the jobs' folders)
      # go with this folder: the test kills the session, which leaves them behind
      dir.create(file.path(folder, "tmp"), recursive = TRUE)
      files <<- c(result = file.path(folder, "result.rds"), pids = file.path(folder, "pids.txt"))
      x <- job_data()$x
      utils::write.csv(data.frame(a = x[, 1], b = x[, 2], c = x[, 3], d = x[, 4], label = job_data()$y),
                       file.path(folder, "train.csv"), row.names = FALSE)
      session <<- start_in_fresh_r(
        {
          gpu_setup(cpu_devices = 2, threads = c(intra = 1, inter = 2))
          keras <- gpu_keras()
          data <- gpu_dataset(file.path(Sys.getenv("GPUKERAS_TEST_FOLDER"), "train.csv"), label = "label",
                              batch_size = 20, seed = 1, validation_split = 0.25)
          model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(1L)))
          model$compile(optimizer = keras$optimizers$Adam(learning_rate = 0.05), loss = "mse")
          # Two logical CPU devices exist in the child only if gpu_setup() ran there first.
          job <- gpu_fit(model, data, epochs = 2, strategy = gpu_strategy("mirrored"), background = TRUE, verbose = 2)
          printed <- utils::capture.output(fit <- gpu_job_wait(job, timeout = 240))
          csv <- list(
            dir = job$dir,
            setup = unclass(gpu_job_status(job)$setup)[c("cpu_devices", "intra_op_threads", "inter_op_threads")],
            history = fit$history, data = fit$settings$data, printed = printed,
            strategy = fit$settings$strategy[c("type", "replicas")],
            iterations = as.integer(model$optimizer$iterations$numpy())
          )
          x <- matrix(sin(seq_len(1600)), ncol = 4)
          arrays <- list(x = x, y = as.vector(x %*% c(1, -2, 0.5, 3)))
          train <- function() {
            keras$utils$set_random_seed(3L)
            model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(1L)))
            model$compile(optimizer = "adam", loss = "mse")
            job <- gpu_fit(model, arrays, epochs = 2, batch_size = 20, seed = 1, monitor = FALSE,
                           strategy = gpu_strategy("mirrored"), background = TRUE, verbose = 0)
            fit <- gpu_job_wait(job, timeout = 240)
            list(dir = job$dir, replicas = fit$settings$strategy$replicas,
                 weights = lapply(model$get_weights(), as.vector))
          }
          standby <- gpukeras:::the$standby
          warm <- train()
          options(gpukeras.job_standby = FALSE)
          off <- train()
          saveRDS(list(csv = csv, warm = warm, off = off, standby_dir = standby$dir,
                       standby_after_off = gpukeras:::the$standby), Sys.getenv("RESULT_FILE"))
          model$compile(optimizer = "sgd", loss = "mse")
          job <- gpu_fit(model, list(x = x, y = x %*% 1:4), epochs = 10000, batch_size = 10, seed = 1,
                         monitor = FALSE, background = TRUE, verbose = 0)
          repeat {
            status <- gpu_job_status(job)
            if (identical(status$state, "running")) break
            Sys.sleep(0.2)
          }
          writeLines(as.character(c(job$process$get_pid(), status$pid)), Sys.getenv("PIDS_FILE"))
          Sys.sleep(600)
        },
        env = c(GPUKERAS_TEST_FOLDER = folder, RESULT_FILE = files[["result"]],
                PIDS_FILE = files[["pids"]],
                TMPDIR = file.path(folder, "tmp"))
      )
      withr::defer({
        session$kill()
        unlink(folder, recursive = TRUE)
      }, envir = testthat::teardown_env())
    }
    list(session = session, files = files)
  }
})

# Waits (up to 400 s) for the fresh session to write `file`; an error there is this test's.
fresh_session_wrote <- function(file) {
  shared <- fresh_session()
  deadline <- Sys.time() + 400
  while (!file.exists(shared$files[[file]]) && Sys.time() < deadline) {
    if (!shared$session$is_alive()) shared$session$get_result()
    Sys.sleep(0.2)
  }
  Sys.sleep(0.2) # written whole
  shared$files[[file]]
}

test_that(paste(
  "in a fresh session: gpu_setup() settings reach the child, where a gpu_dataset() of CSV files trains under a",
  "mirrored strategy"
), {
  skip_if_no_python()
  result <- readRDS(fresh_session_wrote("result"))$csv
  expect_identical(result$setup, list(cpu_devices = 2L, intra_op_threads = 1L, inter_op_threads = 2L))
  expect_identical(result$history$epoch, 1:2)
  expect_identical(result$strategy, list(type = "mirrored", replicas = 2L))
  expect_true(all(c("loss", "val_loss") %in% names(result$history)))
  expect_match(result$data, "^gpu_dataset\\(\\) train pipeline from csv")
  expect_true(result$iterations > 0)
  expect_match(result$printed, "^Epoch [12]/2: loss [0-9.e-]+, val_loss [0-9.e-]+$")
  expect_length(result$printed, 2L)
})

test_that(paste(
  "the next background fit takes the standby the last one readied: gpu_setup() reaches it, it trains the same, and it",
  "can be turned off"
), {
  skip_if_no_python()
  result <- readRDS(fresh_session_wrote("result"))
  # The first job found no standby: it readied the one the next job took.
  expect_false(identical(result$csv$dir, result$standby_dir))
  expect_identical(result$warm$dir, result$standby_dir)
  # Two logical CPU devices exist in the standby only if gpu_setup() reached it.
  expect_identical(c(result$warm$replicas, result$off$replicas), c(2L, 2L))
  # Turned off, the job starts its own process, and trains the same.
  expect_false(identical(result$off$dir, result$standby_dir))
  expect_equal(result$off$weights, result$warm$weights, tolerance = 1e-6)
  expect_null(result$standby_after_off)
})

test_that("when the session that started a job ends, the job's processes end too", {
  skip_if_no_python()
  skip_on_os("windows")
  pids <- as.integer(readLines(fresh_session_wrote("pids")))
  expect_length(pids, 2L)
  expect_true(all(vapply(pids, process_running, logical(1))))
  fresh_session()$session$kill() # the session dies as a crash would end it: no chance to clean up
  deadline <- Sys.time() + 15
  while (any(vapply(pids, process_running, logical(1))) && Sys.time() < deadline) Sys.sleep(0.2)
  # The supervisor saw its session gone (within a second), stopped the child and itself.
  expect_false(process_running(pids[1]))
  expect_false(process_running(pids[2]))
})
