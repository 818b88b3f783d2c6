# gpu_batch_size(): the R side (argument checks before Python, the core's
# plain data as a gpukeras_batch_size, print and plot) and real searches on a
# tiny model on the CPU, where a memory budget decides what fits.

# A tiny regression model, built and (unless told not to) compiled.
batch_model <- function(compile = TRUE) {
  keras <- gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L)),
    keras$layers$Dense(16L, activation = "relu"),
    keras$layers$Dense(1L)
  ))
  if (compile) model$compile(optimizer = "adam", loss = "mse")
  model
}

batch_data <- function(n = 60) {
  withr::with_seed(1, {
    x <- matrix(stats::rnorm(n * 4), ncol = 4)
    list(x = x, y = as.vector(x %*% c(1, -2, 0.5, 3)))
  })
}

# What the core returns, as reticulate hands it to R (None as NULL).
batch_core_result <- function(gpu = FALSE) {
  trial <- function(batch_size, phase, fits, speed = NULL, peak = NULL, reason = NULL) {
    list(
      batch_size = batch_size, phase = phase, fits = fits, samples_per_second = speed,
      step_ms = if (!is.null(speed)) 1000 * batch_size / speed, estimated_mib = 100 + batch_size,
      peak_mib = peak, reason = reason, steps_per_epoch = as.integer(ceiling(4096 / batch_size))
    )
  }
  failure <- if (gpu) "out of memory: OOM when allocating tensor" else
    "over the host memory budget: 356 MiB estimated > 300 MiB"
  list(
    trials = list(
      trial(64L, "double", TRUE, 32000, if (gpu) 900),
      trial(128L, "double", TRUE, 64000, if (gpu) 1800),
      trial(256L, "double", FALSE, reason = failure),
      trial(192L, "bisect", TRUE, 60000, if (gpu) 2600),
      trial(224L, "bisect", FALSE, reason = failure),
      trial(208L, "bisect", TRUE, 61000)
    ),
    recommended = 128L, fastest = 128L, largest = 208L, smallest_failing = 224L,
    steps_rule = list(min_steps = 8L, rows = 4096L, largest_batch = 584L),
    device = if (gpu) "GPU:0" else "CPU:0", device_name = if (gpu) "NVIDIA H100 80GB HBM3" else "AMD EPYC",
    backend = "tensorflow",
    budget = if (gpu) list(mib = NULL, source = "none: out-of-memory errors on the GPU decide") else
      list(mib = 300, source = "memory_budget_mib"),
    estimate = list(
      fixed_mib = 100, per_sample_mib = 1, weights_mib = 25, gradients_mib = 25, optimizer_mib = 50,
      activations_per_sample_mib = 0.4, batch_per_sample_mib = 0.2,
      uncounted_layers = if (gpu) list("MyLayer") else list(),
      method = "weights + ..."
    ),
    settings = list(min_batch = 64L, max_batch = 4096L, steps = 5L, warmup = 1L, tolerance = 0.1, jit_compile = FALSE)
  )
}

expect_batch_png <- function(code) {
  path <- withr::local_tempfile(fileext = ".png")
  grDevices::png(path, width = 700, height = 500)
  device <- grDevices::dev.cur()
  tryCatch(code, finally = grDevices::dev.off(device))
  expect_gt(file.size(path), 1000)
}

test_that("the core's plain data becomes a trials data.frame with one type per column", {
  skip_if_no_python()
  sizes <- new_gpukeras_batch_size(batch_core_result())
  expect_s3_class(sizes, "gpukeras_batch_size")
  trials <- sizes$trials
  expect_identical(names(trials), names(batch_size_columns))
  expect_identical(trials$batch_size, c(64L, 128L, 256L, 192L, 224L, 208L))
  expect_identical(trials$fits, c(TRUE, TRUE, FALSE, TRUE, FALSE, TRUE))
  expect_identical(trials$samples_per_second, c(32000, 64000, NA, 60000, NA, 61000))
  expect_identical(trials$peak_mib, rep(NA_real_, 6)) # None everywhere: numeric NA, not logical
  expect_identical(trials$reason[1:3], c(NA, NA, "over the host memory budget: 356 MiB estimated > 300 MiB"))
  expect_identical(as.data.frame(sizes), trials)
  expect_identical(c(sizes$recommended, sizes$largest, sizes$smallest_failing), c(128L, 208L, 224L))
  expect_identical(sizes$estimate$uncounted_layers, character())
  expect_null(new_gpukeras_batch_size(modifyList(batch_core_result(), list(smallest_failing = NULL)))$smallest_failing)
})

test_that("print shows the judge, the estimate, a row per size and the recommendation", {
  skip_if_no_python()
  withr::local_options(width = 80)
  text <- format(new_gpukeras_batch_size(batch_core_result()))
  expect_identical(text[1:3], c(
    "<gpukeras batch size> CPU:0 (AMD EPYC, tensorflow): 6 sizes tried, 64 to 4096",
    "Fits:          by the memory estimate against a budget of 300 MiB (memory_budget_mib)",
    "Estimate:      100 MiB + 1 MiB per sample"
  ))
  expect_identical(text[4], "Steps/epoch:   8 or more recommended: 4,096 training rows allow batch_size 584 at most.")
  expect_match(text[5], "^ +batch_size +phase +fits +samples/s +step_ms +estimate +steps/epoch +note")
  expect_true(any(grepl("^ +128 +double +yes +64,000 +2.00 +228 MiB +32 +recommended *$", text)))
  expect_true(any(grepl("^ +256 +double +no +- +- +356 MiB +16 +over budget *$", text)))
  expect_identical(utils::tail(text, 2), c(
    "Recommended:   batch_size = 128, the fastest (64,000 samples/s, 2.00 ms a step, 32 steps per epoch).",
    "Largest fits:  208 (224 does not: over the host memory budget: 356 MiB estimated > 300 MiB)."
  ))
  expect_output(expect_invisible(print(new_gpukeras_batch_size(batch_core_result()))), "batch_size = 128")

  gpu <- format(new_gpukeras_batch_size(batch_core_result(gpu = TRUE)))
  expect_identical(gpu[2], "Fits:          by running each size (out-of-memory errors decide)")
  expect_identical(gpu[3], "Estimate:      100 MiB + 1 MiB per sample (not counted: MyLayer layers)")
  expect_match(gpu[5], "estimate +peak +steps/epoch +note")
  expect_true(any(grepl("^ +192 +bisect +yes +60,000 +3.20 +292 MiB +2.5 GiB", gpu)))
  expect_true(any(grepl("^ +224 +bisect +no .* out of memory *$", gpu)))

  at_max <- modifyList(batch_core_result(), list(smallest_failing = NULL, largest = 4096L))
  expect_identical(
    utils::tail(format(new_gpukeras_batch_size(at_max)), 1),
    "Largest fits:  4096 is max_batch: larger batches may fit (raise `max_batch`)."
  )
})

test_that("plot() draws throughput against batch size, failed sizes marked, into a file", {
  skip_if_no_python()
  sizes <- new_gpukeras_batch_size(batch_core_result())
  expect_batch_png(expect_identical(plot(sizes), sizes))
  expect_batch_png(plot(new_gpukeras_batch_size(batch_core_result(gpu = TRUE)), col = "darkgreen"))
})

test_that("bad arguments are classed errors raised before Python starts", {
  child <- run_in_fresh_r({
    data <- list(x = matrix(1, 2, 2), y = 1:2)
    list(
      max_batch = catch_error(gpu_batch_size(NULL, data, max_batch = 0)),
      min_batch = catch_error(gpu_batch_size(NULL, data, min_batch = NA)),
      order = catch_error(gpu_batch_size(NULL, data, min_batch = 64, max_batch = 32)),
      steps = catch_error(gpu_batch_size(NULL, data, steps = 1.5)),
      warmup = catch_error(gpu_batch_size(NULL, data, warmup = "one")),
      budget = catch_error(gpu_batch_size(NULL, data, memory_budget_mib = -1)),
      tolerance = catch_error(gpu_batch_size(NULL, data, tolerance = 1)),
      no_data = catch_error(gpu_batch_size(NULL)),
      matrix = catch_error(gpu_batch_size(NULL, matrix(1, 2, 2))),
      model = catch_error(gpu_batch_size("my_model", data)),
      started = reticulate::py_available(initialize = FALSE)
    )
  })
  expect_false(child$started)
  expect_bad <- function(error, pattern, class = "gpukeras_error_bad_argument") {
    expect_identical(error$class, c(class, "gpukeras_error", "rlang_error", "error", "condition"))
    expect_match(error$message, pattern)
  }
  expect_bad(child$max_batch, "^`max_batch` must be one whole number >= 1, not `0`")
  expect_bad(child$min_batch, "^`min_batch` must be one whole number >= 1, not `NA`")
  expect_bad(child$order, "^`max_batch` \\(32\\) must be at least `min_batch` \\(64\\)")
  expect_bad(child$steps, "^`steps` must be one whole number >= 1, not `1.5`")
  expect_bad(child$warmup, "^`warmup` must be one whole number >= 1, not `one`")
  expect_bad(child$budget, "^`memory_budget_mib` must be one positive number, not `-1`")
  expect_bad(child$tolerance, "^`tolerance` must be a number between 0 and 1, not `1`")
  expect_bad(child$no_data, "^`data` is missing")
  expect_bad(child$matrix, "^`data` is R data without labels", "gpukeras_error_bad_data")
  expect_bad(child$model, "^`model` must be a compiled Keras 3 model, not `my_model`")
})

test_that(paste(
  "a search on R data doubles to max_batch, recommends the fastest with 8 steps per epoch and leaves the model as it",
  "was"
), {
  skip_if_no_python()
  model <- batch_model()
  weights <- model$get_weights()
  sizes <- gpu_batch_size(model, batch_data(), min_batch = 4, max_batch = 128, steps = 2)
  trials <- sizes$trials
  expect_identical(trials$batch_size, c(4L, 8L, 16L, 32L, 64L, 128L))
  expect_true(all(trials$fits))
  expect_true(all(trials$samples_per_second > 0))
  # 60 rows: 8 steps per epoch up to batch_size 8 (tests/testthat/test-steps-rule.R)
  expect_identical(trials$steps_per_epoch, as.integer(ceiling(60 / trials$batch_size)))
  eight <- trials[trials$steps_per_epoch >= 8L, ]
  expect_identical(sizes$recommended, eight$batch_size[which.max(eight$samples_per_second)])
  expect_identical(sizes$fastest, trials$batch_size[which.max(trials$samples_per_second)])
  expect_identical(sizes$largest, 128L)
  expect_null(sizes$smallest_failing)
  expect_identical(model$get_weights(), weights)
  expect_identical(as.integer(model$optimizer$iterations$numpy()), 0L)
  expect_match(format(sizes)[1], "^<gpukeras batch size> (CPU|GPU):0 ")
  expect_batch_png(plot(sizes))
})

test_that("a memory budget cuts the search: the bisection closes in below the cut", {
  skip_if_no_python()
  model <- batch_model()
  data <- batch_data()
  estimate <- gpu_batch_size(model, data, min_batch = 8, max_batch = 8, steps = 1)$estimate
  budget <- estimate$fixed_mib + 50.5 * estimate$per_sample_mib # 50 rows fit, 51 do not
  sizes <- gpu_batch_size(model, data, min_batch = 8, max_batch = 1024, steps = 1, memory_budget_mib = budget)
  trials <- sizes$trials
  expect_identical(trials$batch_size[trials$phase == "double"], c(8L, 16L, 32L, 64L))
  bisected <- trials$batch_size[trials$phase == "bisect"]
  expect_true(length(bisected) > 0 && all(bisected > 32 & bisected < 64))
  expect_identical(trials$fits, trials$batch_size <= 50)
  expect_true(sizes$largest <= 50 && sizes$smallest_failing > 50)
  expect_true(all(startsWith(trials$reason[!trials$fits], "over the")))
  expect_true(all(is.na(trials$samples_per_second[!trials$fits])))
  expect_identical(sizes$budget$mib, budget)
})

test_that("the smallest batch over the budget, an uncompiled model and a non-model are classed errors", {
  skip_if_no_python()
  data <- batch_data()
  expect_error(
    gpu_batch_size(batch_model(), data, memory_budget_mib = 1e-6),
    "^Even a batch of 1 does not fit on .*memory_budget_mib", class = "gpukeras_error_out_of_memory"
  )
  expect_error(
    gpu_batch_size(batch_model(compile = FALSE), data),
    "compile it first", class = "gpukeras_error_model_not_compiled"
  )
  expect_error(
    gpu_batch_size(gpu_as_numpy(data$x), data),
    "must be a Keras 3 model", class = "gpukeras_error_bad_model"
  )
  expect_error(
    gpu_batch_size(batch_model(), list(x = data$x[, 1:3], y = data$y)),
    "cannot train on this data", class = "gpukeras_error_bad_data"
  )
})

test_that("a gpu_dataset() with a validation split is searched on its training pipeline", {
  skip_if_no_python()
  data <- batch_data(100)
  split <- gpu_dataset(data$x, data$y, batch_size = 10, validation_split = 0.2, seed = 1)
  sizes <- gpu_batch_size(batch_model(), split, min_batch = 16, max_batch = 64, steps = 1)
  expect_identical(sizes$trials$batch_size, c(16L, 32L, 64L))
  expect_true(all(sizes$trials$fits))
})
