# Issue #32, item 8: a batch larger than the training rows is the rows, said with a
# warning; gpu_batch_size() and gpu_tune() never recommend fewer than 8 steps per epoch;
# a fit with `tuned = tune` gets advice that leaves the tuned settings alone.

steps_model <- function() {
  keras <- gpu_keras()
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L)),
    keras$layers$Dense(8L, activation = "relu"),
    keras$layers$Dense(3L, activation = "softmax")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  model
}

iris_data <- function() list(x = as.matrix(iris[, 1:4]), y = iris$Species)

test_that("gpu_fit(): a batch_size larger than the rows warns and trains one batch of all rows", {
  skip_if_no_python()
  data <- iris_data()
  expect_snapshot(fit <- gpu_fit(steps_model(), data, batch_size = 512, verbose = 0, monitor = FALSE))
  expect_identical(fit$settings$batch_size, 150L)
  expect_identical(fit$settings$steps_per_epoch, 1L)
  expect_warning(
    fit <- gpu_fit(
      steps_model(),
      list(x = gpu_as_numpy(data$x), y = gpu_as_numpy(as.integer(data$y) - 1L)),
      batch_size = 151,
      verbose = 0,
      monitor = FALSE
    ),
    "larger than the 150 training rows", class = "gpukeras_warning_batch_size"
  )
  expect_identical(fit$settings$batch_size, 150L)
  # with accumulate, a multiple of it: still one batch of all rows per epoch
  expect_warning(
    fit <- gpu_fit(steps_model(), data, batch_size = 512, accumulate = 4, verbose = 0, monitor = FALSE),
    "batch_size = 152, a multiple of accumulate = 4", class = "gpukeras_warning_batch_size"
  )
  expect_identical(fit$settings$batch_size, 152L)
  # within the rows, or the default on a few rows: nothing to say
  expect_no_warning(gpu_fit(steps_model(), data, batch_size = 150, verbose = 0, monitor = FALSE))
  few <- c(1:7, 51:57, 101:106) # 20 rows, each class among them (a class no row has is warned of)
  expect_no_warning(gpu_fit(steps_model(), list(x = data$x[few, ], y = data$y[few]), verbose = 0, monitor = FALSE))
})

test_that("gpu_dataset(): a batch_size larger than the training rows (after the split) is the rows", {
  skip_if_no_python()
  data <- iris_data()
  expect_snapshot(split <- gpu_dataset(data$x, data$y, batch_size = 256, validation_split = 0.2, seed = 1))
  expect_identical(attr(split$train, "gpukeras")$batches, 1L)
  expect_warning(
    gpu_dataset(data$x, data$y, batch_size = 151, drop_remainder = TRUE),
    "larger than the 150 training rows: each epoch is one batch of all 150 rows", class = "gpukeras_warning_batch_size"
  )
  # the default on a few rows, and new data read like training data, are no mistake
  few <- c(1:4, 51:53, 101:103) # 10 rows, each class among them
  expect_no_warning(small <- gpu_dataset(data$x[few, ], data$y[few]))
  expect_identical(attr(small, "gpukeras")$batches, 1L)
  expect_no_warning(gpu_dataset(data$x[1:3, ], like = split$train, batch_size = 64, shuffle = FALSE))
})

# A search's plain data from the core, as reticulate hands it to R: 150 rows.
steps_core_result <- function() {
  trial <- function(batch_size, speed) {
    list(
      batch_size = batch_size, phase = "double", fits = TRUE, samples_per_second = speed,
      step_ms = 1000 * batch_size / speed, estimated_mib = 1 + batch_size / 100, peak_mib = NULL,
      reason = NULL, steps_per_epoch = as.integer(ceiling(150 / batch_size))
    )
  }
  list(
    trials = list(trial(8L, 4000), trial(16L, 8000), trial(32L, 12000), trial(64L, 20000)),
    recommended = 16L, fastest = 64L, largest = 64L, smallest_failing = NULL,
    steps_rule = list(min_steps = 8L, rows = 150L, largest_batch = 21L),
    device = "CPU:0", device_name = "AMD EPYC", backend = "tensorflow",
    budget = list(mib = 300, source = "memory_budget_mib"),
    estimate = list(fixed_mib = 1, per_sample_mib = 0.01, uncounted_layers = list()),
    settings = list(min_batch = 8L, max_batch = 64L, steps = 2L, warmup = 1L, tolerance = 0.1, jit_compile = FALSE)
  )
}

test_that("gpu_batch_size()'s print states the rule, shows steps per epoch and the faster size passed over", {
  skip_if_no_python()
  withr::local_options(width = 80)
  sizes <- new_gpukeras_batch_size(steps_core_result())
  expect_identical(sizes$trials$steps_per_epoch, c(19L, 10L, 5L, 3L))
  expect_snapshot(print(sizes))
  # rows not known (a dataset read as it streams): the rule is not applied, and said so
  unknown <- steps_core_result()
  unknown$steps_rule$rows <- NULL
  unknown$recommended <- 64L
  unknown$trials <- lapply(unknown$trials, function(t) modifyList(t, list(steps_per_epoch = NULL)))
  text <- format(new_gpukeras_batch_size(unknown))
  expect_match(text[4], "^Steps/epoch: +not known .* rule of 8 or more steps per epoch is not applied")
  expect_true(any(grepl(
    "^Recommended: +batch_size = 64, the fastest \\(20,000 samples/s, 3.20 ms a step\\)\\.$", text
  )))
})

test_that("gpu_batch_size() recommends no size under 8 steps per epoch of the training rows", {
  skip_if_no_python()
  sizes <- gpu_batch_size(steps_model(), iris_data(), min_batch = 4, max_batch = 64, steps = 1)
  trials <- sizes$trials
  expect_identical(trials$steps_per_epoch, as.integer(ceiling(150 / trials$batch_size)))
  expect_identical(sizes$steps_rule$largest_batch, 21L)
  # 150 rows: 4, 8 and 16 make 8 steps or more; 32 and 64 do not, however fast
  ok <- trials[trials$steps_per_epoch >= 8L, ]
  expect_identical(sizes$recommended, ok$batch_size[which.max(ok$samples_per_second)])
  expect_true(sizes$recommended <= 16L)
  # a gpu_dataset()'s training part counts: 120 rows after the split
  split <- gpu_dataset(iris_data()$x, iris_data()$y, batch_size = 8, validation_split = 0.2, seed = 1)
  on_split <- gpu_batch_size(steps_model(), split, min_batch = 8, max_batch = 32, steps = 1)
  expect_identical(on_split$steps_rule$rows, 120L)
  expect_identical(on_split$trials$steps_per_epoch, c(15L, 8L, 4L))
  expect_true(on_split$recommended <= 16L)
})

test_that("gpu_tune()'s table shows steps per epoch; sizes under 8 steps are left out, said in the header", {
  skip_if_no_python()
  run <- function(axis, batch, spe, rate) {
    list(
      axis = axis, precision = "float32", batch_size = batch, steps_per_execution = spe, jit_compile = FALSE,
      samples_per_second = rate, samples = 640L, loss = 0.5, finite = TRUE, overflows = NULL, sound = TRUE,
      stopped_early = FALSE, seconds = 2, note = NULL, data = "host", steps_per_epoch = as.integer(ceiling(150 / batch))
    )
  }
  result <- list(
    trials = list(
      run("baseline", 16L, 1L, 1000), run("batch_size", 8L, 1L, 600), run("steps_per_execution", 16L, 8L, 3000)
    ),
    recommended = list(precision = "float32", batch_size = 16L, steps_per_execution = 8L, jit_compile = FALSE),
    baseline = NULL, loss_samples = 640L, skipped = list(), device = "CPU:0", device_name = "AMD EPYC",
    backend = "tensorflow", seconds = 5, settings = list(),
    batch_sizes_from = "given (64 left out: 8 or more steps per epoch over 150 rows need batch_size 21 or less)"
  )
  withr::local_options(width = 80)
  expect_snapshot(print(gpukeras:::new_gpukeras_tune(result, "r")))
  expect_snapshot(
    gpu_tune(steps_model(), iris_data(), time_budget = 5, precisions = "float32", batch_sizes = c(32, 64)),
    error = TRUE
  )
})

test_that("gpu_fit(tuned = tune) carries the tune's choice, and its advice does not undo it", {
  skip_if_no_python()
  mark_slow()
  data <- iris_data()
  model <- steps_model()
  tune <- gpu_tune(model, data,
    time_budget = 5, precisions = "float32", batch_sizes = c(8, 16, 64), steps_per_execution = c(1, 8),
    jit_compile = FALSE, seed = 1
  )
  tried <- c(tune$trials$batch_size, tune$skipped$batch_size)
  expect_false(64 %in% tried) # 3 steps per epoch of 150 rows
  expect_match(tune$batch_sizes_from, "64 left out", fixed = TRUE)
  expect_true(all(tune$trials$steps_per_epoch == ceiling(150 / tune$trials$batch_size)))
  skip_if(is.null(tune$recommended), "no run was timed within the budget")
  chosen <- tune$recommended[c("precision", "batch_size", "steps_per_execution", "jit_compile")]
  fit <- gpu_fit(model, data, epochs = 2, tuned = tune, verbose = 0)
  expect_identical(fit$settings$tuned, list(
    precision = chosen$precision, batch_size = as.integer(chosen$batch_size),
    steps_per_execution = as.integer(chosen$steps_per_execution), jit_compile = isTRUE(chosen$jit_compile)
  ))
  # the advice of this run names none of the settings the tune chose
  expect_false(any(grepl("batch_size|batch size|steps_per_execution|jit_compile|mixed precision", fit$monitor$advice)))
  # a background fit's child gets the same choice back
  job <- gpu_fit(model, data, epochs = 1, tuned = tune, verbose = 0, background = TRUE)
  child <- gpu_job_wait(job)
  expect_identical(child$settings$tuned, fit$settings$tuned)
  expect_identical(child$settings$batch_size, fit$settings$batch_size)
})
