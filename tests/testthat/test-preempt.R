# gpu_fit(backup = gpu_backup(dir, signals = )): a scheduler's SIGTERM, or a warning signal the user
# names, stops training at the next step after a backup of it; the same call
# then resumes there. Real R processes and real signals; every wait is bounded.

test_that("signals are checked before Python starts", {
  data <- list(x = matrix(1, 4, 4), y = 1:4)
  expect_error(
    gpu_fit(NULL, data, backup = gpu_backup(NULL, signals = c("SIGTERM", "SIGKILL"))),
    "`signals`: \"SIGKILL\" is not a signal gpu_fit() can handle.",
    fixed = TRUE, class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_fit(NULL, data, backup = gpu_backup(NULL, signals = 15)),
    "`signals` must be signal names",
    class = "gpukeras_error_bad_argument"
  )
  expect_identical(check_signals(c("term", "SIGUSR1", "USR1")), c("SIGTERM", "SIGUSR1"))
  expect_identical(check_signals(NULL), character())
})

# gpu_fit() in a fresh R process, reporting its progress to a file after each
# batch ("epoch batch", 0-based) and pausing there, so the test can signal it in
# the middle of an epoch. Its result: the fit's class ("done", or the condition's
# classes) and message, where it resumed from, and the final weights; also saved
# to `report` (an .rds file), for a process that does not return.
start_fit <- function(backup_dir, scratch, name, pause = 0, signals = "SIGTERM", then = "") {
  start_in_fresh_r(
    {
      setwd(Sys.getenv("GPUKERAS_TEST_SCRATCH"))
      keras <- gpu_keras()
      keras$utils$set_random_seed(5L)
      model <- keras$Sequential(list(
        keras$Input(shape = list(4L)),
        keras$layers$Dense(8L, activation = "relu"),
        keras$layers$Dense(1L)
      ))
      model$compile(optimizer = keras$optimizers$Adam(learning_rate = 0.01), loss = "mse")
      x <- matrix(sin(seq_len(800)), ncol = 4)
      data <- list(x = x, y = as.vector(x %*% c(1, -2, 0.5, 3)))
      reticulate::py_run_string(paste(
        "import time, keras",
        "class Progress(keras.callbacks.Callback):",
        "    def __init__(self, path, pause):",
        "        super().__init__()",
        "        self.path, self.pause = path, pause",
        "    def on_epoch_begin(self, epoch, logs=None):",
        "        self.epoch = epoch",
        "    def on_train_batch_end(self, batch, logs=None):",
        "        open(self.path, 'w').write(f'{self.epoch} {batch}')",
        "        time.sleep(self.pause)",
        sep = "\n"
      ))
      name <- Sys.getenv("GPUKERAS_TEST_NAME")
      progress <- reticulate::py$Progress(paste0(name, "-progress.txt"), as.numeric(Sys.getenv("GPUKERAS_TEST_PAUSE")))
      backup_dir <- Sys.getenv("GPUKERAS_TEST_BACKUP_DIR")
      outcome <- tryCatch(
        {
          fit <- gpu_fit(
            model, data, epochs = 3, batch_size = 10, seed = 9,
            backup = gpu_backup(
              if (nzchar(backup_dir)) backup_dir, signals = strsplit(Sys.getenv("GPUKERAS_TEST_SIGNALS"), ",")[[1]]
            ),
            callbacks = progress,
            verbose = 0, monitor = FALSE
          )
          list(class = "done", resumed_from = fit$settings$resumed_from)
        },
        gpukeras_error = function(e) list(class = class(e), message = conditionMessage(e))
      )
      outcome$weights <- lapply(model$get_weights(), as.vector)
      saveRDS(outcome, paste0(name, ".rds"))
      eval(parse(text = Sys.getenv("GPUKERAS_TEST_THEN")))
      outcome
    },
    env = c(
      GPUKERAS_TEST_SCRATCH = scratch, GPUKERAS_TEST_NAME = name, GPUKERAS_TEST_PAUSE = pause,
      GPUKERAS_TEST_BACKUP_DIR = backup_dir %||% "",
      GPUKERAS_TEST_SIGNALS = paste(signals, collapse = ","), GPUKERAS_TEST_THEN = then,
      TMPDIR = scratch
    )
  )
}

# Wait (up to 180 s) until the process reported a batch at or past (epoch, batch), 0-based.
wait_for_batch <- function(process, scratch, name, epoch, batch) {
  path <- file.path(scratch, paste0(name, "-progress.txt"))
  deadline <- Sys.time() + 180
  while (Sys.time() < deadline && process$is_alive()) {
    # The file is rewritten after every batch: it may be empty when read.
    line <- if (file.exists(path)) readLines(path, warn = FALSE)
    at <- if (length(line) == 1) suppressWarnings(as.integer(strsplit(line, " ")[[1]]))
    if (length(at) == 2 && !anyNA(at) && (at[1] > epoch || (at[1] == epoch && at[2] >= batch))) {
      return(invisible(at))
    }
    Sys.sleep(0.05)
  }
  stop(sprintf(
    "%s did not reach epoch %d, batch %d: %s",
    name,
    epoch + 1,
    batch + 1,
    paste(process$read_all_error_lines(), collapse = "\n")
  ))
}

finish <- function(process) {
  process$wait(timeout = 240 * 1000)
  if (process$is_alive()) {
    process$kill()
    stop("the R process did not finish within 240 s")
  }
  process$get_result()
}

test_that("SIGTERM mid-epoch stops gpu_fit() with a classed condition, and the rerun ends as an unbroken run", {
  skip_if_no_python()
  skip_on_os("windows")
  scratch <- withr::local_tempdir()
  folder <- file.path(scratch, "backup")
  unbroken <- start_fit(NULL, scratch, "unbroken")
  stopped <- start_fit(folder, scratch, "stopped", pause = 0.1)
  wait_for_batch(stopped, scratch, "stopped", 1, 5) # the 6th batch of 20 in epoch 2
  tools::pskill(stopped$get_pid(), tools::SIGTERM)
  outcome <- finish(stopped)
  expect_identical(outcome$class, c("gpukeras_error_preempted", "gpukeras_error", "rlang_error", "error", "condition"))
  expect_match(outcome$message, "^Training stopped at SIGTERM in epoch 2, after [0-9]+ of its batches; the backup in ")
  expect_match(outcome$message, "Run the same gpu_fit() call again, with the same backup_dir", fixed = TRUE)
  done <- as.integer(sub(".*after ([0-9]+) of its batches.*", "\\1", outcome$message))
  resumed <- finish(start_fit(folder, scratch, "resumed"))
  expect_identical(resumed$class, "done")
  expect_identical(resumed$resumed_from, list(epoch = 2L, batches_done = done))
  expect_identical(resumed$weights, finish(unbroken)$weights)
  expect_false(dir.exists(folder))
})

test_that("SIGUSR1 named by the user stops gpu_fit(), and R's own SIGUSR1 handler is back afterwards", {
  skip_if_no_python()
  skip_on_os("windows")
  scratch <- withr::local_tempdir()
  # After the fit the child signals itself: R's handler saves the workspace and quits
  # with status 2 (a handler left by gpukeras would let it run on; none would kill it).
  stopped <- start_fit(
    file.path(scratch, "backup"), scratch, "warned", pause = 0.1,
    signals = c("SIGTERM", "SIGUSR1"),
    then = "tools::pskill(Sys.getpid(), tools::SIGUSR1); Sys.sleep(10); writeLines('ran on', 'ran-on.txt')"
  )
  wait_for_batch(stopped, scratch, "warned", 0, 8)
  tools::pskill(stopped$get_pid(), tools::SIGUSR1)
  stopped$wait(timeout = 240 * 1000)
  expect_false(stopped$is_alive())
  outcome <- readRDS(file.path(scratch, "warned.rds"))
  expect_identical(outcome$class[1], "gpukeras_error_preempted")
  expect_match(outcome$message, "^Training stopped at SIGUSR1 in epoch 1, after ")
  expect_identical(stopped$get_exit_status(), 2L)
  expect_true(file.exists(file.path(scratch, ".RData")))
  expect_false(file.exists(file.path(scratch, "ran-on.txt")))
})
