# gpu_launch(): real R worker processes on 127.0.0.1.

mark_slow()

# The network interfaces a process sees (from /proc), and whether it may listen beyond loopback.
interfaces_seen <- function() trimws(sub(":.*", "", readLines("/proc/net/dev")[-(1:2)]))

test_that("each worker gets its index and the cluster as TF_CONFIG, on distinct free ports", {
  results <- gpu_launch(function(index) {
    config <- Sys.getenv("TF_CONFIG")
    cat("worker", index, "says hello\n")
    list(index = index, env_index = Sys.getenv("GPUKERAS_WORKER_INDEX"), tf_config = config)
  }, workers = 3, quiet = TRUE)
  expect_length(results, 3L)
  expect_identical(vapply(results, function(r) r$index, integer(1)), 0:2)
  expect_identical(vapply(results, function(r) r$env_index, character(1)), c("0", "1", "2"))
  workers <- regmatches(results[[1]]$tf_config, gregexpr("127\\.0\\.0\\.1:[0-9]+", results[[1]]$tf_config))[[1]]
  expect_length(unique(workers), 3L)
  for (i in 1:3) {
    expect_match(results[[i]]$tf_config, sprintf('"task": \\{"type": "worker", "index": %d\\}', i - 1L))
    expect_identical(attr(results, "output")[[i]], sprintf("worker %d says hello", i - 1L))
  }
})

test_that("output is shown as it comes, each line headed by its worker", {
  shown <- capture.output(gpu_launch(function(greeting) cat(greeting, "\n"), workers = 2, args = list(greeting = "hi")))
  expect_identical(
    sort(grep("^\\[worker", shown, value = TRUE)), c("[worker 0] hi ", "[worker 1] hi "),
    info = paste(c("All that was shown:", shown), collapse = "\n")
  )
})

test_that("a worker's output is read to its end: lines a process it started writes after it exits", {
  skip_on_os("windows")
  results <- gpu_launch(function() {
    system("(sleep 1; echo late) &")
    "done"
  }, workers = 1, quiet = TRUE)
  expect_identical(results[[1]], "done")
  expect_identical(attr(results, "output")[[1]], "late")
})

test_that("a process a worker leaves behind holding its output does not hold gpu_launch() past 5 s", {
  skip_on_os("windows")
  started <- Sys.time()
  results <- gpu_launch(function() {
    system("sleep 40 &")
    "done"
  }, workers = 1, quiet = TRUE)
  expect_identical(results[[1]], "done")
  # sleep holds the pipe 40 s; gpu_launch() stops reading it 5 s after the worker exited.
  expect_lt(as.numeric(difftime(Sys.time(), started, units = "secs")), 30)
})

test_that("a worker that fails stops the others at once, with a classed error naming it", {
  started <- Sys.time()
  error <- expect_error(
    gpu_launch(function(index) {
      if (index == 1L) {
        cat("about to fail\n")
        stop("the data is not here")
      }
      Sys.sleep(60)
    }, workers = 2, quiet = TRUE),
    class = "gpukeras_error_worker_lost"
  )
  # The healthy worker sleeps 60 s: it was stopped, not waited for.
  expect_lt(as.numeric(difftime(Sys.time(), started, units = "secs")), 45)
  expect_identical(error$worker, 1L)
  expect_match(conditionMessage(error), "Worker 1 of 2 stopped: an error: .*the data is not here")
  expect_match(conditionMessage(error), "about to fail")
})

test_that("a worker killed by a signal is reported with the signal", {
  skip_on_os("windows")
  error <- expect_error(
    gpu_launch(function(index) {
      if (index == 0L) tools::pskill(Sys.getpid(), tools::SIGKILL)
      Sys.sleep(60)
    }, workers = 2, quiet = TRUE),
    class = "gpukeras_error_worker_lost"
  )
  expect_identical(error$worker, 0L)
  expect_match(conditionMessage(error), "Worker 0 of 2 stopped: killed by signal 9")
})

test_that("an R script runs in each worker, its index in the environment", {
  script <- withr::local_tempfile(fileext = ".R")
  writeLines('cat("index", Sys.getenv("GPUKERAS_WORKER_INDEX"), "\\n")', script)
  results <- gpu_launch(script, workers = 2, quiet = TRUE)
  expect_identical(results, structure(list(NULL, NULL), output = attr(results, "output")))
  expect_identical(trimws(unlist(attr(results, "output"))), c("index 0", "index 1"))
})

test_that("the timeout stops the workers with a classed error", {
  expect_error(
    gpu_launch(function() Sys.sleep(60), workers = 1, timeout = 2, quiet = TRUE),
    "did not finish within 2 s",
    class = "gpukeras_error_timeout"
  )
})

test_that("bad input to gpu_launch() gets a classed error before any worker starts", {
  cases <- list(
    list(args = list(worker = 42), message = "`worker` must be a function or the path of an R script"),
    list(args = list(worker = "no/such/script.R"), message = "does not exist"),
    list(args = list(worker = identity, workers = 0), message = "workers"),
    list(args = list(worker = identity, args = "x"), message = "`args` must be a list"),
    list(args = list(worker = identity, timeout = -1), message = "`timeout` must be a number of seconds"),
    list(args = list(worker = identity, quiet = NA), message = "quiet"),
    list(
      args = list(worker = identity, network = "open"), message = "`network` must be one of \"private\", \"trusted\""
    )
  )
  for (case in cases) {
    expect_error(do.call(gpu_launch, case$args), case$message, class = "gpukeras_error_bad_argument")
  }
})

test_that("the workers get a private network: loopback alone, where they reach one another", {
  skip_on_os(c("windows", "mac"))
  port <- free_ports(1L)
  results <- gpu_launch(function(index, port, interfaces) {
    if (index == 0L) {
      server <- serverSocket(port)
      on.exit(close(server))
      peer <- socketAccept(server, blocking = TRUE, timeout = 30) # else readLines may find no line yet
      said <- readLines(peer, n = 1L)
      close(peer)
    } else {
      peer <- NULL
      for (attempt in 1:100) {
        peer <- tryCatch(socketConnection("127.0.0.1", port, open = "r+", timeout = 5), error = function(e) NULL)
        if (!is.null(peer)) break
        Sys.sleep(0.1)
      }
      writeLines("hello from worker 1", peer)
      close(peer)
      said <- "sent"
    }
    list(interfaces = interfaces(), said = said, trusted = Sys.getenv("GPUKERAS_TRUSTED_NETWORK"))
  }, workers = 2, args = list(port = port, interfaces = interfaces_seen), timeout = 60, quiet = TRUE)
  for (result in results) {
    expect_identical(result$interfaces, "lo")
    expect_identical(result$trusted, "")
  }
  expect_identical(results[[1]]$said, "hello from worker 1")
})

test_that("an R script worker runs in the private network too", {
  skip_on_os(c("windows", "mac"))
  script <- withr::local_tempfile(fileext = ".R")
  writeLines('cat(trimws(sub(":.*", "", readLines("/proc/net/dev")[-(1:2)])), "\\n")', script)
  results <- gpu_launch(script, workers = 2, quiet = TRUE)
  expect_identical(trimws(unlist(attr(results, "output"))), c("lo", "lo"))
})

test_that("network = 'trusted' runs the workers on this machine's network and tells them so", {
  skip_on_os(c("windows", "mac"))
  skip_if(identical(interfaces_seen(), "lo"), "this machine's network has loopback alone")
  results <- gpu_launch(function(interfaces) {
    list(interfaces = interfaces(), trusted = Sys.getenv("GPUKERAS_TRUSTED_NETWORK"))
  }, workers = 1, args = list(interfaces = interfaces_seen), quiet = TRUE, network = "trusted")
  expect_true(length(setdiff(results[[1]]$interfaces, "lo")) > 0)
  expect_identical(results[[1]]$trusted, "true")
})

test_that("where no private network can be made, gpu_launch() refuses and names the way out", {
  skip_on_os(c("windows", "mac"))
  # A PATH without unshare: the tools a private network needs are not all there.
  bin <- withr::local_tempdir()
  for (tool in c("sh", "nsenter", "ip")) file.symlink(Sys.which(tool), file.path(bin, tool))
  withr::local_envvar(PATH = bin)
  expect_error(gpu_launch(function() 1, workers = 1), class = "gpukeras_error_launch")
  expect_snapshot(gpu_launch(function() 1, workers = 1), error = TRUE)
})

test_that("where unshare is refused (as in most containers), the error gives its own words", {
  skip_on_os(c("windows", "mac"))
  # unshare as a container's seccomp policy leaves it: it says why, and exits 1.
  bin <- withr::local_tempdir()
  for (tool in c("sh", "nsenter", "ip")) file.symlink(Sys.which(tool), file.path(bin, tool))
  writeLines(
    c("#!/bin/sh", "echo 'unshare: unshare failed: Operation not permitted' >&2", "exit 1"), file.path(bin, "unshare")
  )
  Sys.chmod(file.path(bin, "unshare"), "0755")
  withr::local_envvar(PATH = bin)
  error <- expect_error(gpu_launch(function() 1, workers = 1), class = "gpukeras_error_launch")
  expect_match(conditionMessage(error), "unshare failed: Operation not permitted", fixed = TRUE)
  expect_snapshot(gpu_launch(function() 1, workers = 1), error = TRUE)
})
