# gpu_tune(): settings measured on copies of the model; gpu_fit(tuned = ) applies them.

test_that("bad input to gpu_tune() gets a classed error before Python starts", {
  data <- list(x = matrix(1:4, 2), y = 1:2)
  cases <- list(
    list(args = list(time_budget = -1), message = "^`time_budget` must be one positive number"),
    list(args = list(precisions = "float64"), message = "^`precisions` must be among"),
    list(args = list(batch_sizes = integer()), message = "^`batch_sizes` must be whole numbers >= 1"),
    list(args = list(steps_per_execution = c(1, 0)), message = "^`steps_per_execution` must be whole numbers >= 1"),
    list(args = list(jit_compile = "yes"), message = "^`jit_compile` must be TRUE and/or FALSE"),
    list(args = list(max_batch = 2.5), message = "^`max_batch` must be one whole number >= 1"),
    list(args = list(seed = -1), message = "^`seed` must be one whole number >= 0")
  )
  for (case in cases) {
    expect_error(
      do.call(gpu_tune, c(list(model = NULL, data = data), case$args)),
      case$message,
      class = "gpukeras_error_bad_argument"
    )
  }
})

mark_slow()

tune_data <- function() {
  set.seed(1)
  x <- matrix(stats::rnorm(512 * 8), ncol = 8)
  list(x = x, y = as.integer(x[, 1] > 0))
}

tune_model <- function() {
  keras <- gpu_keras()
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(8L)),
    keras$layers$Dense(16L, activation = "relu"),
    keras$layers$Dense(2L, activation = "softmax")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  model
}

test_that("gpu_tune() tries two values per axis, recommends the fastest sound run, and gpu_fit(tuned = ) applies it", {
  skip_if_no_python()
  data <- tune_data()
  model <- tune_model()
  before <- lapply(model$get_weights(), as.vector)
  tune <- gpu_tune(model, data,
    time_budget = 30, precisions = c("float32", "mixed_bfloat16"), batch_sizes = c(16, 64),
    steps_per_execution = c(1, 8), seed = 1
  )
  expect_s3_class(tune, "gpukeras_tune")
  trials <- as.data.frame(tune)
  for (axis in c("precision", "batch_size", "steps_per_execution", "jit_compile")) {
    expect_gte(length(unique(trials[[axis]])), 2)
  }
  sound <- trials[trials$sound & !is.na(trials$samples_per_second), ]
  fastest <- sound[which.max(sound$samples_per_second), ]
  expect_identical(
    list(
      tune$recommended$precision,
      tune$recommended$batch_size,
      tune$recommended$steps_per_execution,
      tune$recommended$jit_compile
    ),
    list(fastest$precision, fastest$batch_size, fastest$steps_per_execution, fastest$jit_compile)
  )
  expect_identical(lapply(model$get_weights(), as.vector), before)
  expect_equal(as.numeric(model$optimizer$iterations$numpy()), 0)

  printed <- format(tune)
  expect_match(printed[1], "^<gpukeras tune> \\d+ runs in \\d+ s on CPU:0")
  expect_true(any(grepl("^Recommended: ", printed)))
  path <- withr::local_tempfile(fileext = ".png")
  grDevices::png(path)
  expect_identical(plot(tune), tune)
  grDevices::dev.off()
  expect_gt(file.size(path), 1000)

  if (tune$recommended$precision == "float32") {
    fit <- gpu_fit(model, data, epochs = 1, tuned = tune, verbose = 0, monitor = FALSE)
    expect_identical(fit$settings$batch_size, tune$recommended$batch_size)
    expect_identical(fit$settings$steps_per_execution, tune$recommended$steps_per_execution)
    expect_identical(fit$settings$jit_compile, tune$recommended$jit_compile)
  }
  # A model built under another policy is refused, with how to rebuild it.
  other <- tune
  other$recommended$precision <- "mixed_bfloat16"
  expect_error(
    gpu_fit(model, data, tuned = other, verbose = 0),
    "cannot change a built model's policy.*mixed_precision = \"bfloat16\"",
    class = "gpukeras_error_bad_argument"
  )
})

test_that("bad input to gpu_tune() and gpu_fit(tuned = ) gets a classed error", {
  data <- list(x = matrix(1:4, 2), y = 1:2)
  cases <- list(
    list(args = list(time_budget = 0), message = "`time_budget` must be one positive number"),
    list(args = list(precisions = "float64"), message = "`precisions` must be among"),
    list(args = list(batch_sizes = c(16, 0)), message = "`batch_sizes` must be whole numbers >= 1"),
    list(args = list(steps_per_execution = 1.5), message = "`steps_per_execution` must be whole numbers >= 1"),
    list(args = list(jit_compile = "yes"), message = "`jit_compile` must be TRUE and/or FALSE"),
    list(args = list(max_batch = 0), message = "`max_batch` must be"),
    list(args = list(seed = -1), message = "`seed` must be one whole number >= 0")
  )
  for (case in cases) {
    expect_error(
      do.call(gpu_tune, c(list(model = NULL, data = data), case$args)),
      case$message,
      class = "gpukeras_error_bad_argument"
    )
  }
  skip_if_no_python()
  model <- tune_model()
  expect_error(
    gpu_fit(model, data, tuned = list()),
    "`tuned` must be a gpu_tune\\(\\) result",
    class = "gpukeras_error_bad_argument"
  )
  none <- structure(list(recommended = NULL), class = "gpukeras_tune")
  expect_error(gpu_fit(model, data, tuned = none), "recommends nothing", class = "gpukeras_error_bad_argument")
  some <- structure(
    list(
      recommended = list(precision = "float32", batch_size = 8L, steps_per_execution = 1L, jit_compile = FALSE),
      data_kind = "r"
    ),
    class = "gpukeras_tune"
  )
  expect_error(
    gpu_fit(model, data, batch_size = 4, tuned = some),
    "Give `tuned` or `batch_size`, not both",
    class = "gpukeras_error_bad_argument"
  )
})

test_that("print and plot mark an unsound run, and recommend only a sound one", {
  skip_if_no_python()
  run <- function(precision, rate, sound, note = NULL) {
    list(
      axis = if (precision == "float32") "baseline" else "precision", precision = precision, batch_size = 32L,
      steps_per_execution = 1L, jit_compile = FALSE, samples_per_second = rate, samples = 640L,
      loss = if (sound) 0.5 else NaN, finite = sound, overflows = if (precision == "mixed_float16") 12L,
      sound = sound, stopped_early = FALSE, seconds = 2, note = note
    )
  }
  result <- list(
    trials = list(
      run("float32", 1000, TRUE), run("mixed_float16", 5000, FALSE, "unsound: the loss became NaN or infinite")
    ),
    recommended = list(precision = "float32", batch_size = 32L, steps_per_execution = 1L, jit_compile = FALSE),
    baseline = NULL, loss_samples = 640L, skipped = list(), device = "CPU:0", device_name = "CPU",
    backend = "tensorflow", batch_sizes_from = "given", seconds = 5, settings = list()
  )
  tune <- gpukeras:::new_gpukeras_tune(result, "r")
  printed <- format(tune)
  expect_true(any(grepl("mixed_float16 .* UNSOUND", printed)))
  expect_true(
    "UNSOUND: mixed_float16, batch 32, steps_per_execution 1, jit_compile off: the loss became NaN or infinite" %in%
      printed
  )
  expect_true(any(grepl(
    "^Recommended: float32, batch 32, steps_per_execution 1, jit_compile off \\(1,000 samples/s, 1.00x the baseline\\)",
    printed
  )))
  expect_identical(as.data.frame(tune)$overflows, c(NA, 12L))
  path <- withr::local_tempfile(fileext = ".png")
  grDevices::png(path)
  expect_identical(plot(tune), tune)
  grDevices::dev.off()
  expect_gt(file.size(path), 1000)
})
