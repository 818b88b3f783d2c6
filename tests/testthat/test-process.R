# The one handle for work in another process (R/process.R), which jobs, searches and
# the worker pool share (its workers are callr sessions that run process_entry()).

test_that("a process's error comes back whole, as the parent of the session's classed error", {
  dir <- withr::local_tempdir()
  raised <- tryCatch(
    gpukeras_abort("`age` has levels the training data did not have.", "gpukeras_error_bad_data", column = "age"),
    error = identity
  )
  expect_true(process_report_error(dir, raised))
  error <- tryCatch(
    process_abort(
      "Fold 1 of 3 failed in its worker.", "gpukeras_error_cv_fold", parent = gpukeras_process$new(dir, NULL)$error()
    ),
    error = identity
  )
  # the session's class, and the process's, so that a handler for either catches it
  expect_s3_class(error, "gpukeras_error_cv_fold")
  expect_s3_class(error, "gpukeras_error_bad_data")
  expect_s3_class(error$parent, "gpukeras_error_bad_data")
  expect_identical(error$parent$column, "age")
  expect_match(conditionMessage(error), "`age` has levels", fixed = TRUE)
  expect_identical(error_data(error$parent)$class[1], "gpukeras_error_bad_data")
})

test_that("a result whose making warned is still written: the warning is the work's, not a failed write", {
  dir <- withr::local_tempdir()
  # a job's work is the lazy value it reports (process_report(dir, do.call(gpu_search, args)))
  expect_warning(process_report(dir, {
    warning("SQLite ignores the query string")
    list(value = 42)
  }), "ignores the query string")
  expect_identical(readRDS(file.path(dir, "result.rds")), list(value = 42))
})

test_that("processes are waited for many at once, and leave their result or their error", {
  skip_on_cran()
  dir <- withr::local_tempdir()
  dirs <- file.path(dir, c("ok", "failed"))
  lapply(dirs, dir.create)
  raised <- rlang::error_cnd(c("gpukeras_error_bad_data", "gpukeras_error"), message = "no", column = "age")
  start <- function(entry, args, dir) {
    process_start(
      entry,
      args,
      dir,
      env = callr::rcmd_safe_env(),
      stdout = file.path(dir, "out.log"),
      stderr = file.path(dir, "err.log")
    )
  }
  processes <- list(
    start("process_report", list(dirs[1], list(value = 42)), dirs[1]),
    start("process_report_error", list(dirs[2], raised), dirs[2])
  )
  withr::defer(for (p in processes) p$kill_tree())
  deadline <- Sys.time() + 120
  while (!all(vapply(processes, function(p) p$reported(), logical(1))) && Sys.time() < deadline) {
    process_wait(Filter(function(p) !p$reported(), processes), 5)
  }
  expect_identical(processes[[1]]$result(), list(value = 42))
  expect_null(processes[[1]]$error())
  expect_identical(processes[[2]]$error()$column, "age")
  expect_s3_class(processes[[2]]$error(), "gpukeras_error_bad_data")
  # a process that ended, waited for at once; one that runs, till the timeout
  processes[[1]]$wait(10000)
  expect_false(processes[[1]]$is_alive())
  started <- Sys.time()
  expect_true(process_wait(processes[1], 5, reported = FALSE))
  expect_lt(as.numeric(difftime(Sys.time(), started, units = "secs")), 1)
})
