# Shared helpers for the gpukeras tests.
#
# Python can start only once per R process, so anything that needs a different
# environment (no Python, another KERAS_BACKEND, CUDA_VISIBLE_DEVICES, ...) runs
# in a fresh R process through run_in_fresh_r().

# Skip a test that needs the Python core when no Python environment is
# configured (neither GPUKERAS_PYTHON, RETICULATE_PYTHON nor the virtualenv
# made by install_gpukeras()).
skip_if_no_python <- function() {
  if (is.null(gpukeras_python())) {
    testthat::skip("no Python environment for gpukeras (run install_gpukeras() or set GPUKERAS_PYTHON)")
  }
  invisible(TRUE)
}

# The slow marker: a file of slow tests (background jobs, several workers, tuning:
# child processes, whole fits) starts with mark_slow(), which skips it where
# GPUKERAS_SKIP_SLOW=true (the Makefile's newer-stack-test; R CMD check runs them all).
mark_slow <- function() {
  testthat::skip_if(identical(Sys.getenv("GPUKERAS_SKIP_SLOW"), "true"), "slow (GPUKERAS_SKIP_SLOW=true)")
}

# Skip assertions that only hold on a machine without an NVIDIA GPU.
skip_if_nvidia_gpu <- function() {
  if (has_nvidia_gpu()) {
    testthat::skip("an NVIDIA GPU is present")
  }
  invisible(TRUE)
}

# Skip assertions about the TensorFlow backend when the check ran on another one.
skip_unless_tensorflow <- function(check) {
  if (!identical(check$stack$keras_backend, "tensorflow")) {
    testthat::skip(sprintf("the Keras backend is %s, not tensorflow", check$stack$keras_backend))
  }
  invisible(TRUE)
}

# One in-process gpu_check() result, computed on first use and shared by all
# test files (the check starts TensorFlow and trains for a moment).
shared_check <- local({
  check <- NULL
  function() {
    if (is.null(check)) {
      check <<- gpu_check(probe_seconds = 0.5)
    }
    check
  }
})

# Is `path` a package source tree (as under devtools::test()) rather than an
# installed package (as under R CMD check)? Both have a DESCRIPTION and an R/
# folder; only a source tree has .R files in R/.
is_source_tree <- function(path) {
  file.exists(file.path(path, "DESCRIPTION")) &&
    length(list.files(file.path(path, "R"), pattern = "[.][Rr]$")) > 0
}

# Evaluate `expr` in a fresh R process in which the environment variables
# `env` are set and `unset` are removed, and `options` are set, all before
# gpukeras is loaded. The package under test is loaded the way this process
# loaded it (pkgload::load_all() for a source tree, library() otherwise).
# `expr` is evaluated in a child of the gpukeras namespace, where
# `catch_error(code)` returns a failed call's condition as plain data:
# list(class =, message =, python_traceback =), or NULL when `code` succeeds.
# The expression should return plain values (vectors, lists), not objects.
run_in_fresh_r <- function(expr, env = character(), unset = character(),
                           options = list(), timeout = 180) {
  call <- fresh_r_call(substitute(expr), env, unset, options)
  callr::r(call$func, args = call$args, timeout = timeout)
}

# One fresh R process for several run_in_fresh_r() calls of a test file, where each would
# otherwise start its own (seconds of CPU: R, Python, TensorFlow or JAX): `run(expr, env =,
# timeout =)` evaluates `expr` there as run_in_fresh_r() does. The process starts on the first
# call, with that call's `env` set before gpukeras is loaded (later calls should give the same
# `env`), and ends with the test file; later calls find what earlier ones left there (Python's
# modules, spare workers). `wait = FALSE`, for a call that runs until stopped (gpu_serve()):
# returns list(running = function(), stop = function()) at once; stop() interrupts the call,
# and the process takes the next one.
shared_fresh_r <- function() {
  session <- NULL
  end <- function() {
    session$kill()
    session <<- NULL
  }
  function(expr, env = character(), timeout = 180, wait = TRUE) {
    if (is.null(session)) {
      # supervised: it ends with this process, even one that crashed
      session <<- callr::r_session$new(callr::r_session_options(supervise = TRUE))
      withr::defer(if (!is.null(session)) session$close(), envir = testthat::teardown_env())
    }
    call <- fresh_r_call(substitute(expr), env, character(), list())
    session$call(call$func, call$args)
    if (!wait) {
      return(list(
        running = function() session$poll_process(0) == "timeout",
        stop = function() {
          session$interrupt()
          if (session$poll_process(timeout * 1000) == "ready") session$read() else end()
          invisible()
        }
      ))
    }
    if (session$poll_process(timeout * 1000) != "ready") {
      end()
      stop(sprintf("the shared fresh R process took more than %s s", timeout), call. = FALSE)
    }
    answer <- session$read()
    if (!is.null(answer$error)) stop(answer$error)
    answer$result
  }
}

# The error a fresh R caught, to raise again here for a snapshot (its trace stays there).
raise_again <- function(error) {
  error$trace <- NULL
  rlang::cnd_signal(error)
}

# run_in_fresh_r() in the background: returns the callr process (get_result()
# when it is done), for tests that need several R processes at once.
start_in_fresh_r <- function(expr, env = character()) {
  call <- fresh_r_call(substitute(expr), env, character(), list())
  callr::r_bg(call$func, args = call$args)
}

fresh_r_call <- function(expr, env, unset, options) {
  path <- getNamespaceInfo("gpukeras", "path")
  func <- function(expr, path, source_tree, env, unset, options) {
    if (length(unset)) Sys.unsetenv(unset)
    if (length(env)) do.call(Sys.setenv, as.list(env))
    if (length(options)) options(options)
    if (isNamespaceLoaded("gpukeras")) {
      # a shared_fresh_r() process, loaded by its first call
      NULL
    } else if (source_tree) {
      # Looked up rather than called with `::`: pkgload is only needed (and
      # only present) when the tests run on a source tree.
      load_all <- utils::getFromNamespace("load_all", "pkgload")
      load_all(path, quiet = TRUE, helpers = FALSE)
    } else {
      library("gpukeras", lib.loc = dirname(path), character.only = TRUE)
    }
    scope <- new.env(parent = asNamespace("gpukeras"))
    # The TCP sockets this process listens on (from /proc): address in /proc's hex,
    # port, whether on loopback, and whether its network has loopback alone.
    scope$listening_sockets <- function() {
      links <- vapply(list.files("/proc/self/fd", full.names = TRUE), function(fd) {
        tryCatch(Sys.readlink(fd), error = function(e) "")
      }, character(1))
      inodes <- sub("^socket:\\[([0-9]+)\\]$", "\\1", grep("^socket:", links, value = TRUE))
      interfaces <- trimws(sub(":.*", "", readLines("/proc/self/net/dev")[-(1:2)]))
      rows <- list()
      for (table in c("tcp", "tcp6")) {
        path <- file.path("/proc/self/net", table)
        if (!file.exists(path)) next
        for (line in readLines(path)[-1]) {
          f <- strsplit(trimws(line), "[[:space:]]+")[[1]]
          if (f[4] != "0A" || !f[10] %in% inodes) next
          hex <- strsplit(f[2], ":")[[1]]
          # IPv4 127.x.x.x, IPv6 ::1, or ::ffff:127.x.x.x (32-bit words in little-endian order)
          loopback <- (table == "tcp" && endsWith(hex[1], "7F")) ||
            hex[1] == "00000000000000000000000001000000" ||
            (startsWith(hex[1], "0000000000000000FFFF0000") && endsWith(hex[1], "7F"))
          rows[[length(rows) + 1L]] <- list(
            address = hex[1], port = strtoi(hex[2], 16L), loopback = loopback,
            private = all(interfaces == "lo")
          )
        }
      }
      rows
    }
    scope$catch_error <- function(code) {
      tryCatch(
        {
          code
          NULL
        },
        error = function(e) {
          list(
            class = class(e),
            message = conditionMessage(e),
            python_traceback = e$python_traceback
          )
        }
      )
    }
    eval(expr, scope)
  }
  list(
    func = func,
    args = list(
      expr = expr,
      path = path,
      source_tree = is_source_tree(path),
      env = env,
      unset = unset,
      options = options
    )
  )
}

# A callback that kills its process (crash_once.py's CrashAt) at batch `batch` of epoch
# `epoch` (0-based), at most `times` times, counted in the file `marker`. The callback
# module must be importable in a background job's child as in the parent: its folder
# goes on sys.path, which the job carries.
crash_at <- function(marker, epoch, batch, times = 1L, signal = "SIGSEGV") {
  sys <- reticulate::import("sys", convert = FALSE)
  here <- normalizePath(testthat::test_path("."))
  if (!here %in% reticulate::py_to_r(sys$path)) sys$path$append(here)
  reticulate::import("crash_once")$CrashAt(marker, as.integer(epoch), as.integer(batch), as.integer(times), signal)
}

# A tiny regression model, built and (unless told not to) compiled.
tiny_model <- function(compile = TRUE, learning_rate = 0.01, seed = 1L) {
  keras <- gpu_keras()
  keras$utils$set_random_seed(as.integer(seed))
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L)),
    keras$layers$Dense(8L, activation = "relu"),
    keras$layers$Dense(1L)
  ))
  if (compile) {
    model$compile(
      optimizer = keras$optimizers$Adam(learning_rate = learning_rate),
      loss = "mse", metrics = list("mae")
    )
  }
  model
}

# y = x w + noise: a model that learns at all makes the loss fall fast.
regression_data <- function(n = 256, seed = 1) {
  withr::with_seed(seed, {
    x <- matrix(stats::rnorm(n * 4), ncol = 4)
    y <- as.vector(x %*% c(1, -2, 0.5, 3) + stats::rnorm(n, sd = 0.1))
  })
  list(x = x, y = y)
}

# A small tmpfs (root only: skips elsewhere), unmounted when `env` ends: for what
# a full disk does. fill_up() then leaves it without a free byte.
local_full_tmpfs <- function(size = "256k", env = parent.frame()) {
  testthat::skip_on_cran()
  folder <- withr::local_tempdir(.local_envir = env)
  said <- suppressWarnings(system2(
    "mount", c("-t", "tmpfs", "-o", paste0("size=", size), "tmpfs", folder), stdout = TRUE, stderr = TRUE
  ))
  testthat::skip_if_not(is.null(attr(said, "status")), paste("cannot mount a tmpfs here:", paste(said, collapse = " ")))
  withr::defer(system2("umount", c("-l", folder)), envir = env)
  folder
}

fill_up <- function(folder) {
  filler <- file.path(folder, "filler")
  suppressWarnings(system2("dd", c("if=/dev/zero", paste0("of=", filler), "bs=4k"), stdout = FALSE, stderr = FALSE))
  invisible(filler)
}

# Whether this run simulates a GPU (GPUKERAS_SIMULATE_GPU, make test's simulated-GPU run):
# the "auto" choices are then a GPU's (bfloat16, worker slots on "GPU 0").
simulating_gpu <- function() {
  !tolower(Sys.getenv("GPUKERAS_SIMULATE_GPU")) %in% c("", "0", "false", "no") && !has_nvidia_gpu()
}

# The device gpu_cv()'s and gpu_search()'s workers run on here: "GPU 0" on a (simulated) GPU.
worker_device <- function() if (simulating_gpu() || has_nvidia_gpu()) "GPU 0" else "CPU"

# Keras' own predict() of `model` as R numbers, for comparing with gpukeras' answers: under
# mixed precision (the simulated-GPU run's bfloat16) Keras gives bfloat16 arrays, which
# reticulate cannot convert, so they become float32 in Python first.
keras_predict <- function(model, x, ...) {
  code <- paste0(
    "def predict(model, x, **kw):\n    import numpy\n    return numpy.asarray(model.predict(x, **kw), dtype='float32')"
  )
  reticulate::py_run_string(code, local = TRUE)$predict(model, x, ...)
}

# Whether the file `path` holds `text` in any of its bytes, read as it is or decompressed
# (an .rds file, as R reads it): where a password written there would be found. A regular
# file (a FIFO would block).
file_holds <- function(path, text) {
  if (!file.exists(path)) return(FALSE)
  con <- gzfile(path, "rb") # reads an uncompressed file as it is
  on.exit(close(con))
  chunks <- list()
  repeat {
    chunk <- readBin(con, "raw", 1e6)
    if (!length(chunk)) break
    chunks[[length(chunks) + 1L]] <- chunk
  }
  length(grepRaw(text, c(raw(), unlist(chunks)), fixed = TRUE)) > 0L
}

# The regular files under `folder` (no FIFO, which file_holds() would block on), but those
# under the folders `ignore`.
files_under <- function(folder, ignore = character()) {
  files <- system2("find", c(shQuote(folder), "-type", "f"), stdout = TRUE)
  for (skipped in ignore) files <- files[!startsWith(files, skipped)]
  files
}

# model_fn `made`, for gpu_cv() or gpu_search(), that first looks for `secret` in every file
# of the process that started its worker (the session, or a background job's: callr writes
# there the files that start a worker and give it its task), and adds to the file `looked`
# in how many files of which folder it looked ("looked in N files of FOLDER") and each that
# held it ("held by FILE"), but those in the folders `ignore` (a test server's own). Both
# functions travel alone: each in an environment of its own that holds what it uses (the
# secret as a code), without their source (the frames and the files they were made in may
# hold the secret: a test's variables, a helper's file).
looking_model_fn <- function(made, secret, looked, ignore = character()) {
  alone <- function(fn, env) {
    fn <- removeSource(fn)
    environment(fn) <- env
    fn
  }
  own <- function(...) list2env(list(...), parent = asNamespace("gpukeras"))
  made <- alone(made, own())
  code <- rev(utf8ToInt(secret))
  alone(function(...) {
    owner <- dirname(Sys.getenv("TMPDIR")) # a worker's temporary folder is in its owner's
    files <- files_under(owner, ignore)
    holds <- function(file) isTRUE(tryCatch(file_holds(file, intToUtf8(rev(code))), error = function(e) FALSE))
    held <- Filter(holds, files)
    said <- c(sprintf("looked in %d files of %s", length(files), owner), sprintf("held by %s", held))
    cat(said, file = looked, sep = "\n", append = TRUE)
    made(...)
  }, own(
    made = made, code = code, looked = looked, ignore = ignore,
    files_under = alone(files_under, own()), file_holds = alone(file_holds, own())
  ))
}

# What looking_model_fn() wrote to `looked`: the folders it looked in (one with files at
# least), and no file that held the secret.
expect_looked_and_not_held <- function(looked) {
  said <- readLines(looked)
  owners <- unique(sub("^looked in [0-9]+ files of ", "", grep("^looked in [1-9]", said, value = TRUE)))
  held <- grep("^held by", said, value = TRUE)
  expect(!length(held), paste(held, collapse = " | "))
  owners
}

# The float32 matrix the core encodes R data into (as_pipeline_data()'s, one input), back in
# R as doubles, its columns named as the encoding makes them: a factor's one-hot columns
# column=level.
core_encoded <- function(data) {
  x <- reticulate::py_to_r(to_numpy(data)$x)
  columns <- data$encoding$inputs$x$columns
  colnames(x) <- unlist(lapply(names(columns), function(column) {
    rule <- columns[[column]]
    one_hot <- identical(rule$encoding, "one_hot")
    if (one_hot) paste0(column, "=", rule$levels) else column
  }))
  x
}

# A live process (a zombie, ended but not yet reaped, is not).
process_running <- function(pid) {
  stat <- sprintf("/proc/%d/stat", as.integer(pid))
  file.exists(stat) && !grepl("^[0-9]+ \\(.*\\) Z", readLines(stat, warn = FALSE)[1])
}
