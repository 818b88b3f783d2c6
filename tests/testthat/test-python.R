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
  expect_match(keras$`__version__`, "^3[.]")
  expect_identical(keras$layers$Dense$`__name__`, "Dense")
  expect_identical(keras$`__version__`, shared_check()$stack$keras)
  expect_identical(keras$backend$backend(), shared_check()$stack$keras_backend)
  expect_identical(gpu_keras()$`__version__`, keras$`__version__`)
})

test_that("gpu_keras() takes R's whole-number doubles where Keras wants integers, as keras3 does", {
  skip_if_no_python()
  keras <- gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = 4),
    keras$layers$Dense(64, activation = "relu"),
    keras$layers$Dropout(0.25),
    keras$layers$Dense(1)
  ))
  expect_identical(model$input_shape, list(NULL, 4L))
  expect_identical(model$layers[[1]]$units, 64L)
  expect_identical(model$layers[[2]]$rate, 0.25)
  conv <- keras$layers$Conv2D(16, kernel_size = c(3, 3), strides = 2)
  expect_identical(conv$kernel_size, list(3L, 3L))
  expect_identical(conv$strides, list(2L, 2L))
  expect_identical(keras$callbacks$EarlyStopping(patience = 3)$patience, 3L)
  # a float where Keras declares one stays a float; a fraction is never rounded
  expect_identical(keras$optimizers$SGD(momentum = 1)$momentum, 1)
  expect_error(keras$layers$Dense(2.5), "positive integer")
  # a base class is Keras' own, to subclass
  expect_true(reticulate::import_builtins()$isinstance(keras$layers$Layer, reticulate::import_builtins()$type))
  model$compile(optimizer = "adam", loss = "mse")
  expect_s3_class(gpu_fit(model, regression_data(64), verbose = 0), "gpukeras_fit")
})

# Where the Python gpukeras uses comes from, and why (gpu_check()'s Stack).
# Each case starts Python (not TensorFlow) in a fresh R process.

test_that("gpu_check()'s Stack says which Python is in use and why", {
  skip_if_no_python()
  check <- shared_check()
  # The tests run with GPUKERAS_PYTHON, RETICULATE_PYTHON or the install_gpukeras() virtualenv.
  expected <- if (nzchar(Sys.getenv("GPUKERAS_PYTHON"))) {
    "GPUKERAS_PYTHON"
  } else if (nzchar(Sys.getenv("RETICULATE_PYTHON"))) {
    "RETICULATE_PYTHON"
  } else {
    sprintf("the virtualenv '%s' made by install_gpukeras()", default_envname())
  }
  # In a fresh R process: in this one another test file may have started Python first
  # (then it is "already started in this R session", as the next tests show).
  child <- run_in_fresh_r({
    gpu_as_numpy(1:3)
    the$python_chosen_by
  })
  expect_identical(child, expected)
  line <- sprintf("Python: %s (chosen by %s)", check$stack$python_executable, check$stack$python_chosen_by)
  expect_true(line %in% trimws(format(check)))
  expect_true(check$stack$python_chosen_by %in% c(expected, "already started in this R session: reticulate's choice"))
})

test_that("GPUKERAS_PYTHON wins over RETICULATE_PYTHON when Python starts", {
  skip_if_no_python()
  python <- gpukeras_python()
  # Another Python that reticulate could start: a bare virtualenv of the same one.
  other_env <- withr::local_tempdir()
  system2(python, c("-m", "venv", "--without-pip", shQuote(other_env)), env = "LD_LIBRARY_PATH=")
  other <- file.path(other_env, "bin", "python")
  skip_if(!file.exists(other), "could not make a second virtualenv")
  child <- run_in_fresh_r(
    {
      gpu_as_numpy(1:3)
      list(python = reticulate::py_config()$python, chosen_by = the$python_chosen_by)
    },
    env = c(GPUKERAS_PYTHON = python, RETICULATE_PYTHON = other)
  )
  expect_identical(normalizePath(child$python), normalizePath(python))
  expect_identical(child$chosen_by, "GPUKERAS_PYTHON")
})

test_that("a Python another package started in the session is used, and said so", {
  skip_if_no_python()
  child <- do.call(run_in_fresh_r, list(
    expr = bquote({
      reticulate::use_python(.(gpukeras_python()), required = TRUE)
      reticulate::py_config()
      gpu_as_numpy(1:3)
      the$python_chosen_by
    }),
    unset = c("GPUKERAS_PYTHON", "RETICULATE_PYTHON")
  ))
  expect_match(child, "^already started in this R session: reticulate's choice \\(use_python")
})

test_that(paste(
  "with no environment named for gpukeras, reticulate >= 1.41 chooses one; older reticulate asks for",
  "install_gpukeras()"
), {
  skip_if_no_python()
  # A virtualenv that is active in the shell: reticulate's discovery takes it
  # (VIRTUAL_ENV) before making an environment of its own.
  env_dir <- dirname(dirname(gpukeras_python()))
  skip_if(!file.exists(file.path(env_dir, "pyvenv.cfg")), "the Python in use is not a virtualenv")
  child <- run_in_fresh_r(
    list(
      error = catch_error(gpu_as_numpy(1:3)),
      chosen_by = the$python_chosen_by,
      python = if (reticulate::py_available()) reticulate::py_config()$python
    ),
    env = c(VIRTUAL_ENV = env_dir, WORKON_HOME = tempfile("no-envs-")),
    unset = c("GPUKERAS_PYTHON", "RETICULATE_PYTHON", "RETICULATE_USE_MANAGED_VENV")
  )
  if (has_py_require()) {
    expect_null(child$error)
    expect_identical(child$chosen_by, "reticulate's choice (VIRTUAL_ENV)")
    expect_identical(normalizePath(child$python), normalizePath(gpukeras_python()))
  } else {
    expect_identical(child$error$class[1], "gpukeras_error_no_python_env")
    expect_match(child$error$message, "Run install_gpukeras\\(\\) once")
    expect_null(child$chosen_by)
  }
})

test_that("with no environment anywhere, reticulate >= 1.41 is asked for its managed one with gpukeras' requirements", {
  skip_if_not(has_py_require(), "reticulate < 1.41 manages no environments")
  # reticulate runs uv to make the environment; offline, uv fails at once (it
  # would download Python), which leaves the command reticulate ran.
  skip_if(!file.exists(Sys.getenv("RETICULATE_UV")), "RETICULATE_UV names no uv")
  child <- run_in_fresh_r(
    {
      uv_calls <- character()
      error <- withCallingHandlers(
        catch_error(gpu_as_numpy(1:3)),
        message = function(m) {
          uv_calls <<- c(uv_calls, grep(" run ", conditionMessage(m), value = TRUE))
          invokeRestart("muffleMessage")
        }
      )
      list(error = error, uv_calls = uv_calls, requirements = managed_requirements())
    },
    env = c(
      UV_OFFLINE = "1", `_RETICULATE_DEBUG_UV_` = "1",
      WORKON_HOME = tempfile("no-envs-"), R_USER_CACHE_DIR = tempfile("cache-")
    ),
    unset = c("GPUKERAS_PYTHON", "RETICULATE_PYTHON", "VIRTUAL_ENV", "RETICULATE_USE_MANAGED_VENV")
  )
  expect_identical(child$error$class[1], "gpukeras_error_python_start")
  expect_match(child$error$message, "^reticulate could not start a Python for gpukeras")
  expect_match(child$error$message, "Run install_gpukeras\\(\\)")
  expect_length(child$uv_calls, 1)
  # reticulate quotes only the arguments that need it for the shell.
  uv_call <- gsub("'", "", child$uv_calls)
  for (requirement in child$requirements) {
    expect_match(uv_call, paste0(" --with ", requirement, " "), fixed = TRUE)
  }
})

test_that("library(gpukeras) declares its needs with py_require() as reticulate loads, without starting Python", {
  skip_if_not(has_py_require(), "reticulate < 1.41 has no py_require()")
  child <- run_in_fresh_r(
    {
      declared <- reticulate::py_require()
      from_gpukeras <- Filter(function(entry) identical(entry$requested_from, "gpukeras"), declared$history)
      list(
        packages = declared$packages,
        from_gpukeras = unlist(lapply(from_gpukeras, `[[`, "packages")),
        expected = managed_requirements(),
        started = reticulate::py_available(initialize = FALSE)
      )
    },
    env = c(KERAS_BACKEND = "jax")
  )
  expect_identical(child$from_gpukeras, child$expected)
  expect_true(all(child$expected %in% child$packages))
  expect_true(any(startsWith(child$expected, "jax")))
  expect_false(any(startsWith(child$expected, "tensorflow")))
  expect_false(child$started)
})

test_that("NumPy 2 under reticulate < 1.38 is a classed error at first use; newer reticulate runs on it", {
  numpy2 <- Sys.getenv("GPUKERAS_NUMPY2_PYTHON")
  skip_if(!file.exists(numpy2), "GPUKERAS_NUMPY2_PYTHON names no Python with NumPy 2 (make test sets it)")
  child <- run_in_fresh_r(
    list(
      as_numpy = catch_error(gpu_as_numpy(1:3)),
      dataset = catch_error(gpu_dataset(matrix(1, 4, 2), 1:4, batch_size = 2)),
      dtype = tryCatch(as.character(gpu_as_numpy(1:3)$dtype), error = function(e) NULL)
    ),
    env = c(GPUKERAS_PYTHON = numpy2)
  )
  if (reticulate_supports_numpy2(utils::packageVersion("reticulate"))) {
    expect_null(child$as_numpy)
    expect_null(child$dataset)
    expect_identical(child$dtype, "int32")
  } else {
    for (error in list(child$as_numpy, child$dataset)) {
      expect_identical(error$class[1:2], c("gpukeras_error_numpy_version", "gpukeras_error"))
      expect_match(
        error$message,
        paste0(
          "^NumPy 2[.][0-9.]+ is installed in the Python at '.*', but reticulate 1[.][0-9.]+ cannot convert NumPy 2 ",
          "arrays"
        )
      )
      expect_match(
        error$message, "Run install_gpukeras\\(\\) again \\(it installs NumPy 1[.]26[.][0-9]+ for this reticulate"
      )
      expect_match(error$message, "upgrade reticulate to 1.38 or later")
      expect_null(error$python_traceback)
    }
  }
})

test_that("Python's warnings during a core call are classed R warnings, each once", {
  said <- list(
    list(class = "input_exhausted", message = "Training ran out of data before the epoch's steps were done."),
    list(class = "python", message = "UserWarning from keras: something"),
    list(class = "python", message = "UserWarning from keras: something")
  )
  caught <- list()
  withCallingHandlers(raise_core_warnings(said), warning = function(w) {
    caught[[length(caught) + 1L]] <<- w
    invokeRestart("muffleWarning")
  })
  expect_length(caught, 2)
  expect_s3_class(caught[[1]], "gpukeras_warning_input_exhausted")
  expect_s3_class(caught[[2]], "gpukeras_warning_python")
  expect_snapshot(raise_core_warnings(said[1:2]))
})
