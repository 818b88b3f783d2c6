# A process waits for the session's word on a FIFO (process_await()), not in a sleep loop.

test_that("a waiting process wakes when the session signals, and finds a file written before it waited", {
  skip_on_os("windows")
  dir <- withr::local_tempdir()
  process_signal(dir) # nobody listens yet: nothing to do
  waiting <- parallel::mcparallel({
    started <- Sys.time()
    came <- process_await(dir, "task.rds", parent = Sys.getpid())
    c(came = came, seconds = as.numeric(difftime(Sys.time(), started, units = "secs")))
  })
  deadline <- Sys.time() + 10
  while (!file.exists(file.path(dir, "go.fifo")) && Sys.time() < deadline) Sys.sleep(0.01)
  Sys.sleep(0.1)
  saveRDS(1, file.path(dir, "task.rds"))
  process_signal(dir)
  waited <- parallel::mccollect(waiting, wait = TRUE)[[1]]
  expect_equal(waited[["came"]], 1)
  expect_lt(waited[["seconds"]], 0.9) # woken, not the next round's look
  expect_true(process_await(dir, "task.rds"))
  unlink(file.path(dir, "task.rds"))
  expect_false(process_await(dir, "task.rds", parent = 4194305L)) # no such process: the session gone
})
