# A full disk under a background job (issue #32, item 7): a job's folder is in
# R's temporary folder, here a small tmpfs (mounting needs root; skipped where
# it is not allowed) that each test fills. The jobs run in a fresh R started
# with TMPDIR on the tmpfs, so this session's own temporary folder stays whole.

mark_slow()

# A tmpfs of `size` at a new folder, unmounted when the test ends.
local_tmpfs <- function(size, env = parent.frame()) {
  folder <- withr::local_tempdir(.local_envir = env)
  done <- tryCatch(
    suppressWarnings(system2(
      "mount", c("-t", "tmpfs", "-o", paste0("size=", size, ",mode=0700"), "tmpfs", folder),
      stdout = TRUE, stderr = TRUE
    )),
    error = function(e) structure(conditionMessage(e), status = 1L)
  )
  if (!is.null(attr(done, "status"))) {
    testthat::skip(paste("cannot mount a tmpfs here:", paste(done, collapse = " ")))
  }
  withr::defer(system2("umount", folder), envir = env)
  folder
}

# Evaluate `expr` in a fresh R whose temporary folder (and so its jobs' folders) is in
# `folder` (TMPDIR must be set before R starts), with `values` and the helpers
# below defined there. Returns its value.
in_r_with_tmpdir <- function(folder, expr, values = list()) {
  expr <- bquote({
    list2env(.(values), environment())
    .(disk_helpers)
    .(substitute(expr))
  })
  call <- fresh_r_call(expr, character(), character(), list())
  callr::r(call$func, args = call$args, env = c(callr::rcmd_safe_env(), TMPDIR = folder), timeout = 240)
}

disk_helpers <- quote({
  # Fill the disk of `dir` but `leave` bytes.
  fill_disk <- function(dir, leave) {
    available <- as.numeric(strsplit(trimws(system2("df", c("-P", "-B1", dir), stdout = TRUE)[2]), " +")[[1]][4])
    writeBin(raw(max(0, available - leave)), file.path(dir, "filler"))
  }
  tiny_model_for_disk <- function() {
    keras <- gpu_keras()
    keras$utils$set_random_seed(5L)
    model <- keras$Sequential(list(
      keras$Input(shape = list(4L)), keras$layers$Dense(8L, activation = "relu"), keras$layers$Dense(1L)
    ))
    model$compile(optimizer = "adam", loss = "mse")
    model
  }
})

# Temporary folders, job folders and pids vary from run to run.
mask_job <- function(lines) {
  lines <- gsub("/[^ ]*/Rtmp[A-Za-z0-9]+", "<tempdir>", lines)
  gsub("gpukeras-job-[0-9a-f]+", "gpukeras-job-<id>", lines)
}

test_that("a full disk while the data is carried is a classed error naming the file, the folder and the cause", {
  skip_if_no_python()
  folder <- local_tmpfs("512k")
  caught <- in_r_with_tmpdir(folder, {
    model <- tiny_model_for_disk()
    x <- matrix(sin(seq_len(40000)), ncol = 4)
    # Room for the model (about 20 KB, and what Keras writes on the way), not
    # for x (160 KB as float32).
    fill_disk(tempdir(), leave = 120000)
    error <- tryCatch(
      gpu_fit(model, list(x = x, y = x[, 1]), epochs = 1, background = TRUE, verbose = 0),
      error = identity
    )
    list(error = error, folders = list.files(tempdir(), pattern = "^gpukeras-job-"))
  })
  expect_s3_class(caught$error, "gpukeras_error_job_write")
  expect_match(caught$error$folder, "gpukeras-job-[0-9a-f]+$")
  expect_identical(caught$folders, character()) # the half-carried job's folder went
  expect_snapshot(raise_again(caught$error), error = TRUE, transform = mask_job)
})

test_that("a full disk before the model is carried names the model, not a layer that cannot be saved", {
  skip_if_no_python()
  folder <- local_tmpfs("64k")
  error <- in_r_with_tmpdir(folder, {
    model <- tiny_model_for_disk()
    fill_disk(tempdir(), leave = 0)
    tryCatch(
      gpu_fit(model, list(x = matrix(1, 4, 4), y = 1:4), epochs = 1, background = TRUE, verbose = 0),
      error = identity
    )
  })
  expect_s3_class(error, "gpukeras_error_job_write")
  expect_false(inherits(error, "gpukeras_error_not_carriable"))
  expect_snapshot(raise_again(error), error = TRUE, transform = mask_job)
})

test_that("a disk that fills up under a running job stops it with the cause and the attempts made", {
  skip_if_no_python()
  folder <- local_tmpfs("4m")
  marker <- withr::local_tempfile()
  here <- normalizePath(testthat::test_path("."))
  caught <- in_r_with_tmpdir(folder, values = list(marker = marker, here = here), {
    sys <- reticulate::import("sys", convert = FALSE)
    sys$path$append(here)
    # A crash at the 3rd batch of the first epoch, once: the second attempt is
    # the one the full disk stops.
    crash <- reticulate::import("crash_once")$CrashAt(marker, 0L, 2L, 1L, "SIGSEGV")
    x <- matrix(sin(seq_len(1600)), ncol = 4)
    job <- gpu_fit(tiny_model_for_disk(), list(x = x, y = x[, 1]), epochs = 1000, batch_size = 10, seed = 7,
                   callbacks = list(crash), background = gpu_background(max_restarts = 3), verbose = 0)
    deadline <- Sys.time() + 180
    repeat {
      status <- gpu_job_status(job)
      if (identical(status$restarts, 1L) && identical(status$state, "running")) break
      if (status$state %in% c("done", "failed", "cancelled") || Sys.time() > deadline) {
        stop("the job did not restart and run: ", status$state, ": ", paste(status$causes, collapse = "; "))
      }
      Sys.sleep(0.1)
    }
    fill_disk(tempdir(), leave = 0)
    error <- tryCatch(gpu_job_wait(job, timeout = 120), error = identity)
    list(error = error, status = unclass(gpu_job_status(job)))
  })
  error <- caught$error
  expect_s3_class(error, "gpukeras_error_job_write")
  expect_s3_class(error, "gpukeras_error_job_failed")
  expect_match(error$folder, "gpukeras-job-[0-9a-f]+$")
  # Two attempts: the first crashed, the second met the full disk and was not restarted.
  expect_identical(caught$status$state, "failed")
  expect_identical(caught$status$restarts, 1L)
  expect_match(caught$status$causes[1], "signal 11")
  expect_match(caught$status$causes[2], "could not write .* no space left on device$")
  # Where training stood when the disk filled (the epoch, whether a backup was
  # committed yet) and what the child wrote to stderr vary: those lines go.
  # They come after the cause and the fix, which stay.
  lines <- strsplit(error$message, "\n", fixed = TRUE)[[1]]
  varying <- "^. (The last lines of its stderr|Last progress|The backup is in|No backup was written)"
  error$message <- paste(lines[cumsum(grepl(varying, lines)) == 0], collapse = "\n")
  expect_snapshot(raise_again(error), error = TRUE, transform = mask_job)
})
