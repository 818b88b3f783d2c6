test_that("gpukeras_python() prefers GPUKERAS_PYTHON, then RETICULATE_PYTHON", {
  dir <- withr::local_tempdir()
  ours <- file.path(dir, "gpukeras-python")
  theirs <- file.path(dir, "reticulate-python")
  file.create(ours, theirs)
  withr::local_envvar(GPUKERAS_PYTHON = ours, RETICULATE_PYTHON = theirs)
  expect_identical(gpukeras_python(), ours)
  withr::local_envvar(GPUKERAS_PYTHON = NA)
  expect_identical(gpukeras_python(), theirs)
})

test_that("gpukeras_python() finds the virtualenv named by gpukeras.envname", {
  root <- withr::local_tempdir()
  env <- file.path(root, "my-gpukeras-env")
  dir.create(file.path(env, "bin"), recursive = TRUE)
  file.create(file.path(env, "pyvenv.cfg"))
  withr::local_envvar(GPUKERAS_PYTHON = NA, RETICULATE_PYTHON = NA, WORKON_HOME = root)
  withr::local_options(gpukeras.envname = "my-gpukeras-env")
  expect_identical(
    normalizePath(gpukeras_python(), mustWork = FALSE),
    normalizePath(file.path(env, "bin", "python"), mustWork = FALSE)
  )
  withr::local_options(gpukeras.envname = "no-such-env-xyz")
  expect_null(gpukeras_python())
})

test_that("gpukeras_python() errors when GPUKERAS_PYTHON names a missing file", {
  withr::local_envvar(GPUKERAS_PYTHON = "/nonexistent/python")
  expect_error(
    gpukeras_python(),
    "GPUKERAS_PYTHON is set to '/nonexistent/python', which does not exist",
    class = "gpukeras_error_no_python_env"
  )
  withr::local_envvar(GPUKERAS_PYTHON = NA, RETICULATE_PYTHON = "/nonexistent/python3")
  expect_error(gpukeras_python(), "RETICULATE_PYTHON is set to", class = "gpukeras_error_no_python_env")
})

test_that("gpukeras_python() does not start Python", {
  child <- run_in_fresh_r(
    list(python = gpukeras_python(), started = reticulate::py_available(initialize = FALSE)),
    env = c(GPUKERAS_PYTHON = "/bin/sh")
  )
  expect_identical(child, list(python = "/bin/sh", started = FALSE))
})

test_that("gpukeras starts the Python that gpukeras_python() names", {
  skip_if_no_python()
  stack <- shared_check()$stack
  expect_true(reticulate::py_available(initialize = FALSE))
  expect_identical(
    normalizePath(stack$python_executable),
    normalizePath(gpukeras_python())
  )
})

test_that("Python starts on first use, without importing TensorFlow", {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      before <- reticulate::py_available(initialize = FALSE)
      gpu_as_numpy(1:3)
      list(
        before = before,
        after = reticulate::py_available(initialize = FALSE),
        backend_imported = reticulate::py_eval(
          "any(m in __import__('sys').modules for m in ('tensorflow', 'jax', 'keras'))"
        )
      )
    },
    unset = "KERAS_BACKEND"
  )
  expect_identical(child, list(before = FALSE, after = TRUE, backend_imported = FALSE))
})

test_that("gpu_keras() returns the Keras 3 module on the configured backend", {
  skip_if_no_python()
  keras <- gpu_keras()
  expect_s3_class(keras, "python.builtin.module")
  expect_match(keras$`__version__`, "^3[.]")
  expect_identical(keras$`__version__`, shared_check()$stack$keras)
  expect_identical(keras$backend$backend(), shared_check()$stack$keras_backend)
  expect_identical(gpu_keras()$`__version__`, keras$`__version__`)
})
