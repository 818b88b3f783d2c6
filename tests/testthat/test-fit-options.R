# gpu_fit()'s option objects: gpu_step(), gpu_backup(), gpu_background(); the arguments they
# replaced (an error showing the new form, or a deprecation warning).

test_that("gpu_fit() has at most 20 formals, its options grouped in objects", {
  expect_lte(length(formals(gpu_fit)), 20L)
  expect_true(all(c("step", "backup", "background", "tuned") %in% names(formals(gpu_fit))))
  expect_false(any(c("backup_dir", "backup_freq", "signals", "max_restarts", "settings") %in% names(formals(gpu_fit))))
})

test_that("option objects check and convert their arguments, and print what they hold", {
  step <- gpu_step(steps_per_execution = 8, jit_compile = TRUE)
  expect_s3_class(step, c("gpukeras_step", "gpukeras_fit_option"))
  expect_identical(step$steps_per_execution, 8L)
  expect_identical(
    unclass(gpu_step()), list(steps_per_execution = "auto", jit_compile = "auto", remat = FALSE, ema = NULL)
  )
  backup <- gpu_backup("~/run-1", every = 100, signals = c("TERM", "USR1"))
  expect_identical(backup$dir, normalizePath("~/run-1", mustWork = FALSE))
  expect_identical(backup$every, 100L)
  expect_identical(backup$signals, c("SIGTERM", "SIGUSR1"))
  expect_null(gpu_backup(NULL)$dir)
  expect_identical(check_fit_option(TRUE, "background", gpu_background, flag = TRUE), gpu_background())
  expect_null(check_fit_option(FALSE, "background", gpu_background, flag = TRUE))
  expect_identical(gpu_background()$max_restarts, 2L)
  expect_identical(format(step), c(
    "<gpukeras step option>", "  steps_per_execution: 8", "  jit_compile        : TRUE", "  remat              : FALSE",
    "  ema                : NULL"
  ))
  expect_output(print(gpu_background(5)), "max_restarts: 5")
  expect_error(
    gpu_step(steps_per_execution = 0), "^`steps_per_execution` must be", class = "gpukeras_error_bad_argument"
  )
  expect_error(gpu_backup(), "`dir` is missing", class = "gpukeras_error_bad_argument")
  expect_error(gpu_background(-1), "`max_restarts` must be", class = "gpukeras_error_bad_argument")
})

test_that("a request goes back to gpu_fit()'s arguments with its option objects rebuilt", {
  backup_dir <- tempfile("b")
  request <- list(epochs = 2L, steps_per_execution = 4L, jit_compile = FALSE, remat = TRUE, backup_dir = backup_dir,
                  backup_freq = 5L, signals = "SIGTERM", seed = 1L)
  args <- fit_args_of(request)
  expect_identical(sort(names(args)), sort(c("epochs", "seed", "step", "backup")))
  expect_identical(args$step, gpu_step(4L, FALSE, TRUE))
  expect_identical(args$backup, gpu_backup(backup_dir, every = 5L))
})

test_that("the arguments that moved into an option object are an error showing the new form", {
  rows <- list(x = matrix(1, 2, 2), y = 1:2)
  expect_snapshot(error = TRUE, gpu_fit(NULL, rows, backup_dir = "runs", backup_freq = 10))
  expect_snapshot(error = TRUE, gpu_fit(NULL, rows, background = TRUE, max_restarts = 3))
  expect_error(
    gpu_fit(NULL, rows, signals = "SIGUSR1"),
    "backup = gpu_backup(dir, signals = )",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    suppressWarnings(gpu_fit(NULL, rows, step = gpu_step(), steps_per_execution = 2)),
    "Give `step` or `steps_per_execution`, not both",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_fit(NULL, rows, background = gpu_step()),
    "^`background` must be gpu_background",
    class = "gpukeras_error_bad_argument"
  )
})

test_that("the step options given the old way still train, with a deprecation warning, as gpu_step() does", {
  skip_if_no_python()
  keras <- gpu_keras()
  model <- function() {
    keras$utils$set_random_seed(1L)
    m <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(3L, activation = "softmax")))
    m$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
    m
  }
  data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
  expect_warning(
    old <- gpu_fit(
      model(), data, epochs = 1, batch_size = 30, seed = 1, verbose = 0, monitor = FALSE, steps_per_execution = 5
    ),
    "gpu_fit(steps_per_execution = ) is deprecated: give step = gpu_step(steps_per_execution = )", fixed = TRUE,
    class = "gpukeras_warning_deprecated"
  )
  new <- gpu_fit(
    model(),
    data,
    epochs = 1,
    batch_size = 30,
    seed = 1,
    verbose = 0,
    monitor = FALSE,
    step = gpu_step(steps_per_execution = 5)
  )
  expect_identical(old$settings$steps_per_execution, 5L)
  expect_identical(new$settings$steps_per_execution, 5L)
  expect_identical(old$history$loss, new$history$loss)
  # NULL is gpu_step()'s defaults, as the other options' NULL is none
  plain <- gpu_fit(model(), data, epochs = 1, batch_size = 30, seed = 1, verbose = 0, monitor = FALSE, step = NULL)
  expect_identical(plain$settings$steps_per_execution, 1L)
})

test_that("the request reaches Python in its fields' types: R's checks convert, the core converts nothing", {
  expect_identical(check_count(3), 3L)
  expect_identical(check_positive_number(1L), 1)
  expect_identical(gpu_backup(NULL, every = 50)$every, 50L)
  skip_if_no_python()
  core()
  sent <- reticulate::r_to_py(list(
    signals = as_python("SIGTERM"),
    class_weight = as_python(list(`0` = 1, `2` = 3), int_keys = TRUE),
    none = as_python(NULL)
  ))
  shown <- reticulate::py_to_r(reticulate::import_builtins(convert = FALSE)$repr(sent))
  expect_identical(shown, "{'signals': ['SIGTERM'], 'class_weight': {0: 1.0, 2: 3.0}, 'none': None}")
})
