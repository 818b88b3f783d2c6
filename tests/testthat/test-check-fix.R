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

test_that("interactive: a declined repair changes nothing", {
  home <- withr::local_tempdir()
  renviron <- file.path(home, ".Renviron")
  withr::local_envvar(HOME = home, R_ENVIRON_USER = renviron)
  asked <- character()
  no <- function(question) {
    asked <<- c(asked, question)
    FALSE
  }
  expect_message(status <- make_repairs(list(jax_growth_repair), python = NULL, ask = no), "Not changed")
  expect_identical(status, "declined")
  expect_identical(asked, sprintf("Set XLA_PYTHON_CLIENT_PREALLOCATE=false in the .Renviron (XLA_PYTHON_CLIENT_PREALLOCATE=false in %s)?", renviron))
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
    suppressWarnings(system2(python, c("-c", shQuote("import pynvml")), stdout = FALSE, stderr = FALSE, env = python_run_env))
  }
  expect_false(identical(imports_pynvml(), 0L))
  pin <- grep("^nvidia-ml-py==", gpukeras_requirements(), value = TRUE)
  repair <- list(
    id = "nvidia_ml_py", what = paste("Install", pin), needs_restart = FALSE,
    action = list(pip_install = list(pin))
  )
  expect_message(status <- make_repair(repair, python), "Successfully installed nvidia-ml-py")
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
  expect_match(child$error$message, "numpy==1.26.4 is now installed: restart R, then run gpu_check() again.", fixed = TRUE)
  expect_true(any(grepl("Not an interactive session", child$output)))
  expect_true(any(grepl("Successfully installed numpy-1.26.4", child$output)))
  expect_identical(numpy_version(), "1.26.4")
})

test_that("a failed GPU-build install is reported, not raised, and puts the CPU build back", {
  skip_on_os("windows")
  # A stand-in for the environment's Python: records each pip command; the GPU build fails.
  folder <- withr::local_tempdir()
  log <- file.path(folder, "pip.log")
  python <- file.path(folder, "python")
  writeLines(c(
    "#!/bin/sh",
    sprintf("echo \"$*\" >> '%s'", log),
    "case \"$*\" in *and-cuda*) echo 'ERROR: No matching distribution'; exit 1;; esac",
    "echo 'Successfully done'"
  ), python)
  Sys.chmod(python, "755")
  repair <- list(id = "gpu_build", what = "Replace tensorflow-cpu", needs_restart = TRUE, action = list(
    pip_uninstall = list("tensorflow-cpu"), pip_install = list("tensorflow[and-cuda]==2.21.0"),
    pip_restore = list("tensorflow-cpu==2.21.0")
  ))
  said <- capture_messages(status <- make_repair(repair, python))
  expect_identical(status, "failed")
  expect_identical(readLines(log), c(
    "-m pip uninstall -y tensorflow-cpu",
    "-m pip install tensorflow[and-cuda]==2.21.0",
    "-m pip install tensorflow-cpu==2.21.0"
  ))
  expect_match(said, "failed (status 1): ERROR: No matching distribution", fixed = TRUE, all = FALSE)
  expect_match(said, "Put back", all = FALSE)
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
  repairs <- repairs_df(list(list(
    id = "nvidia_ml_py", what = "Install nvidia-ml-py==13.615.71", needs_restart = FALSE,
    action = list(pip_install = list("nvidia-ml-py==13.615.71"))
  )))
  expect_identical(format_repairs(repairs), c(
    "Repairs gpu_check(fix = TRUE) can make:",
    sprintf("  %s Install nvidia-ml-py==13.615.71 (pip install nvidia-ml-py==13.615.71)", arrow())
  ))
  repairs$status <- "done"
  expect_identical(format_repairs(repairs)[2], "  [done] Install nvidia-ml-py==13.615.71 (pip install nvidia-ml-py==13.615.71)")
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
  expect_match(child$message, "KERAS_BACKEND = jax was set after Python started, so it is ignored: this session runs tensorflow", fixed = TRUE)
  expect_identical(child$backend, "tensorflow")
  expect_true(sprintf("KERAS_BACKEND = jax was set after Python started, so it is ignored: this session runs tensorflow") %in% child$reasons)
  expect_true("Set KERAS_BACKEND=jax before the first gpukeras call (e.g. in /nonexistent/.Renviron), then restart R." %in% child$advice)
})
