test_that("gpukeras_abort() raises an rlang error with the specific class first", {
  error <- tryCatch(
    gpukeras_abort(c("First line.", "Second line."), "gpukeras_error_bad_data", extra = 42, call = NULL),
    error = identity
  )
  expect_identical(class(error), c("gpukeras_error_bad_data", "gpukeras_error", "rlang_error", "error", "condition"))
  # The lines after the first are "i" bullets, unless named otherwise.
  expect_identical(conditionMessage(error), paste0("First line.\n", rlang::format_error_bullets(c(i = "Second line."))))
  expect_null(conditionCall(error))
  expect_identical(error$extra, 42)
  named <- tryCatch(gpukeras_abort(c("Wrong.", x = "Why.", "Fix."), call = NULL), error = identity)
  expect_identical(conditionMessage(named), paste0("Wrong.\n", rlang::format_error_bullets(c(x = "Why.", i = "Fix."))))

  base <- tryCatch(gpukeras_abort("Plain."), error = identity)
  expect_identical(class(base), c("gpukeras_error", "rlang_error", "error", "condition"))
  expect_error(gpukeras_abort("x", "gpukeras_error_bad_argument"), class = "gpukeras_error")
})

test_that("gpukeras_warn() raises an rlang warning of its class", {
  expect_warning(
    gpukeras_warn(c("Careful.", "Do this."), "gpukeras_warning_not_applied"), class = "gpukeras_warning_not_applied"
  )
  warning <- tryCatch(gpukeras_warn("Careful.", "gpukeras_warning_not_applied"), warning = identity)
  expect_identical(
    class(warning), c("gpukeras_warning_not_applied", "gpukeras_warning", "rlang_warning", "warning", "condition")
  )
})

test_that("an error names the exported function the user called, however deep it is raised", {
  bad <- matrix(1:4, 2)
  error <- tryCatch(gpu_dataset(bad, batch_size = 0), error = identity)
  expect_s3_class(error, "gpukeras_error_bad_argument")
  expect_identical(conditionCall(error), quote(gpu_dataset(bad, batch_size = 0)))
  # From the user's own function, the call is still gpukeras' (not the user's or a helper's).
  mine <- function(size) gpu_dataset(bad, batch_size = size)
  error <- tryCatch(mine(0), error = identity)
  expect_identical(conditionCall(error), quote(gpu_dataset(bad, batch_size = size)))
  error <- tryCatch(gpukeras::gpu_dataset(bad, batch_size = 0), error = identity)
  expect_identical(conditionCall(error), quote(gpukeras::gpu_dataset(bad, batch_size = 0)))
  # do.call() puts the values in the call: the header shows the name alone.
  error <- tryCatch(do.call("gpu_dataset", list(matrix(runif(400), 100), batch_size = 0)), error = identity)
  expect_identical(rlang::call_name(conditionCall(error)), "gpu_dataset")
  expect_match(format(error, backtrace = FALSE), "\nError in `gpu_dataset()`:\n", fixed = TRUE)
  # Raised three helpers down (as_pipeline_data() -> encode_labels()).
  error <- tryCatch(gpu_dataset(bad, y = list(1, 2)), error = identity)
  expect_s3_class(error, "gpukeras_error_bad_data")
  expect_identical(rlang::call_name(conditionCall(error)), "gpu_dataset")
})

test_that("an error from the Python core names the exported function the user called", {
  skip_if_no_python()
  not_a_dataset <- reticulate::r_to_py(list(1, 2))
  error <- tryCatch(gpu_dataset_benchmark(not_a_dataset, steps = 2), error = identity)
  expect_s3_class(error, "gpukeras_error_bad_argument")
  expect_match(conditionMessage(error), "dataset must be a gpu_dataset() or a tf.data.Dataset", fixed = TRUE)
  expect_identical(conditionCall(error), quote(gpu_dataset_benchmark(not_a_dataset, steps = 2)))
})

test_that("argument checks name the argument and what was given", {
  flag <- TRUE
  expect_identical(check_flag(flag), TRUE)
  expect_error(
    check_flag(NA, arg = "verbose"),
    "^`verbose` must be TRUE or FALSE, not `NA`[.]$",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    check_positive_number(-2, arg = "n"),
    "^`n` must be one positive number, not `-2`[.]$",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    check_string(NULL, arg = "s"),
    "^`s` must be one non-empty string, not NULL[.]$",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    check_string(letters[1:3], arg = "s"), "not a character of length 3", class = "gpukeras_error_bad_argument"
  )
  expect_identical(check_positive_number(0.5), 0.5)
  expect_identical(check_string("float32"), "float32")
})

test_that("a count above MAX_COUNT is refused saying the limit", {
  expect_error(
    check_count(2e6, arg = "n"),
    "^`n` must be one whole number >= 1, not `2e[+]06` [(]at most 1e6[)][.]$",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(check_auto_count(2e6, "n"), "(at most 1e6)", fixed = TRUE, class = "gpukeras_error_bad_argument")
})

test_that("an error raised in the Python core keeps its class and has no traceback", {
  skip_if_no_python()
  error <- tryCatch(core_call("check", matmul_size = 0L), error = identity)
  expect_identical(
    class(error), c("gpukeras_error_bad_argument", "gpukeras_error", "rlang_error", "error", "condition")
  )
  expect_match(conditionMessage(error), "must be positive numbers", fixed = TRUE)
  expect_false(grepl("Traceback", conditionMessage(error), fixed = TRUE))
  expect_null(error$python_traceback)
})

test_that("a failure inside the Python core is reported as gpukeras_error_python", {
  skip_if_no_python()
  error <- tryCatch(core_call("check", no_such_argument = 1), error = identity)
  expect_s3_class(error, "gpukeras_error_python")
  expect_s3_class(error, "gpukeras_error")
  expect_match(conditionMessage(error), "^The Python core failed in check: TypeError: ")
  expect_match(conditionMessage(error), "no_such_argument", fixed = TRUE)
  expect_match(conditionMessage(error), "please report it", fixed = TRUE)
  # The traceback is kept on the condition, never in the message.
  expect_false(grepl("Traceback", conditionMessage(error), fixed = TRUE))
  expect_match(error$python_traceback, "^Traceback \\(most recent call last\\)")
  expect_match(error$python_traceback, "bridge.py", fixed = TRUE)
})

test_that("without a Python environment, gpu_check() says to run install_gpukeras()", {
  empty <- withr::local_tempdir()
  child <- run_in_fresh_r(
    list(
      python = gpukeras_python(),
      bad_argument = catch_error(gpu_check(probe = NA)),
      check = catch_error(gpu_check(probe_seconds = 0.5)),
      devices = catch_error(gpu_devices()),
      numpy = catch_error(gpu_as_numpy(1:3)),
      started = reticulate::py_available(initialize = FALSE)
    ),
    # reticulate >= 1.41 would otherwise pick the virtualenv this process runs
    # (VIRTUAL_ENV, inherited) or make a managed one.
    env = c(WORKON_HOME = empty, RETICULATE_USE_MANAGED_VENV = "no"),
    unset = c("GPUKERAS_PYTHON", "RETICULATE_PYTHON", "VIRTUAL_ENV"),
    options = list(gpukeras.envname = "no-such-env-xyz")
  )
  expect_null(child$python)
  # Arguments are checked before Python is looked for.
  expect_identical(child$bad_argument$class[1], "gpukeras_error_bad_argument")
  expect_identical(
    child$check$class, c("gpukeras_error_no_python_env", "gpukeras_error", "rlang_error", "error", "condition")
  )
  expect_match(child$check$message, "No Python environment for gpukeras was found", fixed = TRUE)
  expect_match(child$check$message, "install_gpukeras()", fixed = TRUE)
  expect_match(child$check$message, "'no-such-env-xyz'", fixed = TRUE)
  expect_match(child$check$message, "GPUKERAS_PYTHON", fixed = TRUE)
  expect_identical(child$devices$class[1], "gpukeras_error_no_python_env")
  expect_identical(child$numpy$class[1], "gpukeras_error_no_python_env")
  expect_false(child$started)
})

test_that("GPUKERAS_PYTHON naming a missing file is an error that names it", {
  child <- run_in_fresh_r(
    list(
      python = catch_error(gpukeras_python()),
      check = catch_error(gpu_check(probe_seconds = 0.5)),
      started = reticulate::py_available(initialize = FALSE)
    ),
    env = c(GPUKERAS_PYTHON = "/nonexistent/python")
  )
  expect_identical(
    child$check$class, c("gpukeras_error_no_python_env", "gpukeras_error", "rlang_error", "error", "condition")
  )
  expect_match(
    child$check$message, "GPUKERAS_PYTHON is set to '/nonexistent/python', which does not exist.", fixed = TRUE
  )
  expect_match(child$check$message, "install_gpukeras()", fixed = TRUE)
  expect_identical(child$python, child$check)
  expect_false(child$started)
})

test_that("a GPUKERAS_PYTHON that is not Python gives gpukeras_error_python_start", {
  skip_on_os("windows")
  not_python <- Sys.which("true")
  skip_if(!nzchar(not_python), "no `true` executable")
  child <- run_in_fresh_r(
    catch_error(gpu_check(probe_seconds = 0.5)),
    env = c(GPUKERAS_PYTHON = unname(not_python))
  )
  expect_identical(child$class, c("gpukeras_error_python_start", "gpukeras_error", "rlang_error", "error", "condition"))
  expect_match(child$message, sprintf("Python at '%s' could not be started", not_python), fixed = TRUE)
  expect_match(child$message, "install_gpukeras()", fixed = TRUE)
})

test_that("KERAS_BACKEND=torch is refused with a classed error and no traceback", {
  skip_if_no_python()
  child <- run_in_fresh_r(
    list(
      check = catch_error(gpu_check(probe_seconds = 0.5)),
      keras = catch_error(gpu_keras()),
      tensorflow_started = reticulate::py_eval("'tensorflow' in __import__('sys').modules")
    ),
    env = c(KERAS_BACKEND = "torch")
  )
  expect_identical(
    child$check$class, c("gpukeras_error_backend_unsupported", "gpukeras_error", "rlang_error", "error", "condition")
  )
  expect_match(child$check$message, "KERAS_BACKEND is 'torch'", fixed = TRUE)
  expect_match(child$check$message, "tensorflow and jax", fixed = TRUE)
  expect_match(child$check$message, "Sys.setenv(KERAS_BACKEND = 'tensorflow')", fixed = TRUE)
  expect_false(grepl("Traceback", child$check$message, fixed = TRUE))
  expect_null(child$check$python_traceback)
  expect_identical(child$keras$class[1], "gpukeras_error_backend_unsupported")
  # The stack is checked before any backend is imported.
  expect_false(child$tensorflow_started)
})

test_that("KERAS_BACKEND=jax without JAX installed says how to install it", {
  skip_if_no_python()
  skip_if(!is.null(shared_check()$stack$jax), "JAX is installed in the Python environment")
  child <- run_in_fresh_r(catch_error(gpu_check(probe_seconds = 0.5)), env = c(KERAS_BACKEND = "jax"))
  expect_identical(child$class[1], "gpukeras_error_backend_missing")
  expect_match(child$message, "KERAS_BACKEND is 'jax' but jax is not installed", fixed = TRUE)
  expect_false(grepl("Traceback", child$message, fixed = TRUE))
})
