# gpu_check(fix = TRUE): the repairs made in a throwaway environment and a
# temporary .Renviron (never the real ones), asking first when interactive;
# KERAS_BACKEND set after Python started.

# The core's plan for the JAX memory-growth repair (tools/repair.py).
jax_growth_repair <- list(
  id = "jax_memory_growth", what = "Set XLA_PYTHON_CLIENT_PREALLOCATE=false in the .Renviron",
  action = list(set_env = list(XLA_PYTHON_CLIENT_PREALLOCATE = "false")),
  when = "before Python starts: in ~/.Renviron", needs_restart = TRUE
)

test_that("fix must be TRUE or FALSE, checked before Python starts", {
  expect_snapshot(gpu_check(fix = NA), error = TRUE)
})

test_that("the .Renviron repair adds its line once and changes nothing else", {
  home <- withr::local_tempdir()
  renviron <- file.path(home, "Renviron")
  withr::local_envvar(HOME = home, R_ENVIRON_USER = renviron)
  # the user's own lines, the last without its newline
  writeBin(charToRaw("# mine\nFOO=bar"), renviron)
  expect_identical(renviron_path(), renviron)
  expect_message(status <- make_repair(jax_growth_repair, python = NULL), "Added")
  expect_identical(status, "done")
  expect_identical(readLines(renviron), c("# mine", "FOO=bar", "XLA_PYTHON_CLIENT_PREALLOCATE=false"))
  expect_message(make_repair(jax_growth_repair, python = NULL), "already has")
  expect_identical(readLines(renviron), c("# mine", "FOO=bar", "XLA_PYTHON_CLIENT_PREALLOCATE=false"))
  expect_identical(list.files(home, all.files = TRUE, no.. = TRUE), "Renviron")
})

test_that("the .Renviron repair writes the file R read at start-up, not one setwd() went to", {
  home <- withr::local_tempdir()
  withr::local_envvar(HOME = home, R_ENVIRON_USER = NA)
  project <- withr::local_tempdir()
  writeLines("FOO=bar", file.path(project, ".Renviron"))
  withr::local_dir(project)
  expect_identical(renviron_path(), file.path(home, ".Renviron"))
  said <- capture_messages(status <- make_repair(jax_growth_repair, python = NULL))
  expect_identical(status, "done")
  expect_identical(readLines(file.path(home, ".Renviron")), "XLA_PYTHON_CLIENT_PREALLOCATE=false")
  expect_identical(readLines(file.path(project, ".Renviron")), "FOO=bar")
  expect_match(said, "reads .*\\.Renviron.* instead", all = FALSE)
})

test_that("the .Renviron repair follows a link and keeps the file's permissions", {
  skip_on_os("windows")
  home <- withr::local_tempdir()
  dotfiles <- withr::local_tempdir()
  writeLines("FOO=bar", file.path(dotfiles, "Renviron"))
  Sys.chmod(file.path(dotfiles, "Renviron"), "0640")
  file.symlink(file.path(dotfiles, "Renviron"), file.path(home, ".Renviron"))
  withr::local_envvar(HOME = home, R_ENVIRON_USER = NA)
  expect_message(make_repair(jax_growth_repair, python = NULL), "Added")
  expect_identical(Sys.readlink(file.path(home, ".Renviron")), file.path(dotfiles, "Renviron"))
  expect_identical(readLines(file.path(dotfiles, "Renviron")), c("FOO=bar", "XLA_PYTHON_CLIENT_PREALLOCATE=false"))
  expect_identical(format(file.mode(file.path(dotfiles, "Renviron"))), "640")
  expect_identical(list.files(dotfiles, all.files = TRUE, no.. = TRUE), "Renviron")
})

test_that("on a full disk the .Renviron repair says it failed and leaves the file whole", {
  skip_on_os(c("windows", "mac"))
  home <- local_full_tmpfs()
  renviron <- file.path(home, ".Renviron")
  withr::local_envvar(HOME = home, R_ENVIRON_USER = renviron)
  writeLines("FOO=bar", renviron)
  fill_up(home)
  said <- capture_messages(status <- make_repair(jax_growth_repair, python = NULL))
  expect_identical(status, "failed")
  expect_match(said, "Could not write", all = FALSE)
  expect_false(any(grepl("Added", said)))
  expect_identical(readLines(renviron), "FOO=bar")
  expect_false(any(grepl("Renviron-", list.files(home, all.files = TRUE), fixed = TRUE)))
})

test_that("interactive: a declined repair changes nothing", {
  home <- withr::local_tempdir()
  renviron <- file.path(home, ".Renviron")
  withr::local_envvar(HOME = home, R_ENVIRON_USER = renviron)
  # the core's words for it, naming the .Renviron R reads (tools/repair.py how())
  jax_growth_repair$how <- sprintf("XLA_PYTHON_CLIENT_PREALLOCATE=false in %s", renviron_path())
  asked <- character()
  no <- function(question) {
    asked <<- c(asked, question)
    FALSE
  }
  expect_message(status <- make_repairs(list(jax_growth_repair), python = NULL, ask = no), "Not changed")
  expect_identical(status, "declined")
  expect_identical(
    asked,
    sprintf(
      "Set XLA_PYTHON_CLIENT_PREALLOCATE=false in the .Renviron (XLA_PYTHON_CLIENT_PREALLOCATE=false in %s)?", renviron
    )
  )
  expect_false(file.exists(renviron))
  said <- capture_messages(status <- make_repairs(list(jax_growth_repair), python = NULL, ask = function(q) TRUE))
  expect_match(said, "Added `XLA_PYTHON_CLIENT_PREALLOCATE=false`", all = FALSE)
  expect_match(said, "Restart R", all = FALSE)
  expect_identical(status, "done")
  expect_identical(readLines(renviron), "XLA_PYTHON_CLIENT_PREALLOCATE=false")
})

# A new virtualenv in a temporary folder, deleted when `env` ends, with
# `packages` installed; returns its Python.
local_throwaway_venv <- function(packages = character(), env = parent.frame()) {
  testthat::skip_on_cran()
  venv <- file.path(withr::local_tempdir(.local_envir = env), "throwaway")
  status <- system2(find_python_starter(), c("-m", "venv", shQuote(venv)), env = python_run_env)
  testthat::skip_if_not(identical(status, 0L), "python -m venv failed")
  python <- file.path(venv, "bin", "python")
  if (length(packages)) {
    status <- system2(python, c("-m", "pip", "install", "-q", shQuote(packages)), env = python_run_env)
    testthat::skip_if_not(identical(status, 0L), "pip could not install the packages")
  }
  python
}

test_that("the nvidia-ml-py repair installs it into the environment it is given", {
  python <- local_throwaway_venv()
  imports_pynvml <- function() {
    suppressWarnings(system2(
      python, c("-c", shQuote("import pynvml")), stdout = FALSE, stderr = FALSE, env = python_run_env
    ))
  }
  expect_false(identical(imports_pynvml(), 0L))
  pin <- grep("^nvidia-ml-py==", gpukeras_requirements(), value = TRUE)
  repair <- list(
    id = "nvidia_ml_py", what = paste("Install", pin), needs_restart = FALSE,
    action = list(pip_install = list(pin))
  )
  said <- capture_messages(status <- make_repair(repair, python))
  expect_match(said, "pip download .*Successfully downloaded nvidia-ml-py", all = FALSE)
  expect_match(said, "pip install --no-index .*Successfully installed nvidia-ml-py", all = FALSE)
  expect_identical(status, "done")
  expect_identical(imports_pynvml(), 0L)
})

test_that("fix = TRUE where reticulate < 1.38 meets NumPy 2 installs NumPy's pin, then says restart", {
  skip_if(reticulate_supports_numpy2(utils::packageVersion("reticulate")), "this reticulate supports NumPy 2")
  python <- local_throwaway_venv("numpy==2.2.6")
  numpy_version <- function() {
    system2(python, c("-c", shQuote("import numpy; print(numpy.__version__)")), stdout = TRUE, env = python_run_env)
  }
  expect_identical(numpy_version(), "2.2.6")
  child <- run_in_fresh_r(
    {
      output <- utils::capture.output(error <- catch_error(gpu_check(probe = FALSE, fix = TRUE)), type = "message")
      list(error = error, output = output)
    },
    env = c(GPUKERAS_PYTHON = python)
  )
  expect_identical(child$error$class[1], "gpukeras_error_numpy_version")
  expect_match(
    child$error$message, "numpy==1.26.4 is now installed: restart R, then run gpu_check() again.", fixed = TRUE
  )
  expect_true(any(grepl("Not an interactive session", child$output)))
  expect_true(any(grepl("Successfully installed numpy-1.26.4", child$output)))
  expect_identical(numpy_version(), "1.26.4")
})

test_that(paste(
  "a Keras with a published safe_mode bypass: gpu_check() says so, and fix = TRUE installs Keras' pin, then says",
  "restart"
), {
  python <- local_throwaway_venv(c("keras==3.8.0", "numpy==1.26.4"))
  keras_version <- function() {
    system2(
      python,
      c("-c", shQuote("import importlib.metadata as m; print(m.version('keras'))")),
      stdout = TRUE,
      env = python_run_env
    )
  }
  expect_identical(keras_version(), "3.8.0")
  child <- run_in_fresh_r(
    {
      said <- catch_error(gpu_check(probe = FALSE))
      output <- utils::capture.output(fixed <- catch_error(gpu_check(probe = FALSE, fix = TRUE)), type = "message")
      list(said = said, fixed = fixed, output = output)
    },
    env = c(GPUKERAS_PYTHON = python)
  )
  expect_identical(child$said$class[1], "gpukeras_error_keras_too_old")
  expect_match(child$said$message, "Keras 3.8.0 in the Python at", fixed = TRUE)
  expect_match(child$said$message, "(CVE-2025-1550, CVE-2025-9906, CVE-2025-9905, CVE-2026-1462)", fixed = TRUE)
  expect_match(child$said$message, "gpu_check(fix = TRUE)", fixed = TRUE)
  expect_identical(child$fixed$class[1], "gpukeras_error_keras_too_old")
  pin <- grep("^keras==", gpukeras_requirements(), value = TRUE)
  expect_match(
    child$fixed$message, sprintf("%s is now installed: restart R, then run gpu_check() again.", pin), fixed = TRUE
  )
  expect_true(any(grepl("Successfully installed keras-", child$output)))
  expect_identical(keras_version(), sub("keras==", "", pin))
})

# A stand-in for the environment's Python, as pip offline or with a broken index
# would answer: it records each pip command (the download folder as WHEELS) and
# fails those that match `fails` (a shell case pattern).
local_pip_stand_in <- function(fails, env = parent.frame()) {
  folder <- withr::local_tempdir(.local_envir = env)
  log <- file.path(folder, "pip.log")
  python <- file.path(folder, "python")
  writeLines(c(
    "#!/bin/sh",
    sprintf("echo \"$*\" | sed 's|[^ ]*gpukeras-repair-[^ ]*|WHEELS|g' >> '%s'", log),
    sprintf("case \"$*\" in %s) echo 'ERROR: No matching distribution'; exit 1;; esac", fails),
    "echo 'Successfully done'"
  ), python)
  Sys.chmod(python, "755")
  list(python = python, log = log)
}

gpu_build_repair <- list(id = "gpu_build", what = "Replace tensorflow-cpu", needs_restart = TRUE, action = list(
  pip_uninstall = list("tensorflow-cpu"), pip_install = list("tensorflow[and-cuda]==2.21.0"),
  pip_restore = list("tensorflow-cpu==2.21.0")
))

test_that("offline, the GPU-build repair downloads first and changes nothing", {
  skip_on_os("windows")
  pip <- local_pip_stand_in("*download*")
  said <- capture_messages(status <- make_repair(gpu_build_repair, pip$python))
  expect_identical(status, "failed")
  expect_identical(readLines(pip$log), "-m pip download --no-deps --dest WHEELS tensorflow-cpu==2.21.0")
  expect_match(said, "Nothing was changed", all = FALSE)
})

test_that("a failed GPU-build install is reported, not raised, and puts the CPU build back from its wheel", {
  skip_on_os("windows")
  pip <- local_pip_stand_in("*\"pip install\"*and-cuda*")
  said <- capture_messages(status <- make_repair(gpu_build_repair, pip$python))
  expect_identical(status, "failed")
  expect_identical(readLines(pip$log), c(
    "-m pip download --no-deps --dest WHEELS tensorflow-cpu==2.21.0",
    "-m pip download --dest WHEELS tensorflow[and-cuda]==2.21.0",
    "-m pip uninstall -y tensorflow-cpu",
    "-m pip install --no-index --find-links WHEELS tensorflow[and-cuda]==2.21.0",
    "-m pip install --no-index --find-links WHEELS --no-deps tensorflow-cpu==2.21.0"
  ))
  expect_match(said, "failed (status 1): ERROR: No matching distribution", fixed = TRUE, all = FALSE)
  expect_match(said, "Put back", all = FALSE)
})

test_that(paste(
  "a repair that leaves the environment without TensorFlow is a classed error with the command that restores it"
), {
  skip_on_os("windows")
  pip <- local_pip_stand_in("*\"pip install\"*")
  error <- expect_error(
    suppressMessages(make_repairs(list(gpu_build_repair), pip$python, ask = NULL)),
    class = "gpukeras_error_repair"
  )
  expect_match(conditionMessage(error), sprintf("%s -m pip install tensorflow-cpu==2.21.0", pip$python), fixed = TRUE)
  expect_snapshot(
    suppressMessages(make_repairs(list(gpu_build_repair), pip$python, ask = NULL)),
    error = TRUE,
    transform = function(lines) gsub(dirname(pip$python), "<folder>", lines, fixed = TRUE)
  )
})

test_that("fix = TRUE where nothing needs repair says so and changes nothing", {
  skip_if_no_python()
  skip_if_nvidia_gpu()
  home <- withr::local_tempdir()
  withr::local_envvar(R_ENVIRON_USER = file.path(home, ".Renviron"))
  expect_message(check <- gpu_check(probe = FALSE, fix = TRUE), "nothing to repair")
  expect_s3_class(check$repairs, "data.frame")
  expect_identical(nrow(check$repairs), 0L)
  expect_false(any(grepl("Repairs", format(check))))
  expect_false(file.exists(file.path(home, ".Renviron")))
})

test_that("the repairs print as what gpu_check(fix = TRUE) can make, then what it made", {
  skip_if_no_python()
  check <- structure(list(
    verdict = "no_gpu", reasons = "no GPU here", advice = character(),
    lines = list(stack = "R", devices = "CPU:0", placement = character(), probe = character()),
    setup = new_gpukeras_setup(list(lines = list("<gpukeras setup>"))),
    repairs = repairs_df(list(list(
      id = "nvidia_ml_py", what = "Install nvidia-ml-py==13.615.71", needs_restart = FALSE,
      how = "pip install nvidia-ml-py==13.615.71", action = list(pip_install = list("nvidia-ml-py==13.615.71"))
    )))
  ), class = "gpukeras_check")
  expect_identical(utils::tail(format(check), 2), c(
    "Repairs gpu_check(fix = TRUE) can make:",
    sprintf("  %s Install nvidia-ml-py==13.615.71 (pip install nvidia-ml-py==13.615.71)", arrow())
  ))
  check$repairs$status <- "done"
  expect_identical(
    utils::tail(format(check), 1), "  [done] Install nvidia-ml-py==13.615.71 (pip install nvidia-ml-py==13.615.71)"
  )
})

test_that("KERAS_BACKEND set after Python started: gpu_setup() warns, gpu_check() says so", {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      gpu_devices()
      Sys.setenv(KERAS_BACKEND = "jax")
      warning <- tryCatch(gpu_setup(mixed_precision = "float32"), warning = identity)
      check <- gpu_check(probe = FALSE)
      list(
        class = class(warning), message = conditionMessage(warning),
        backend = check$stack$keras_backend, reasons = check$reasons, advice = check$advice
      )
    },
    env = c(R_ENVIRON_USER = "/nonexistent/.Renviron"),
    unset = "KERAS_BACKEND"
  )
  expect_identical(child$class[1:2], c("gpukeras_warning_backend_ignored", "gpukeras_warning"))
  expect_match(
    child$message,
    "KERAS_BACKEND = jax was set after Python started, so it is ignored: this session runs tensorflow",
    fixed = TRUE
  )
  expect_identical(child$backend, "tensorflow")
  expect_true(
    sprintf("KERAS_BACKEND = jax was set after Python started, so it is ignored: this session runs tensorflow") %in%
      child$reasons
  )
  expect_true(
    "Set KERAS_BACKEND=jax before the first gpukeras call (e.g. in /nonexistent/.Renviron), then restart R." %in%
      child$advice
  )
})
