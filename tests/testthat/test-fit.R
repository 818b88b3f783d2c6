# gpu_fit(): the R side (argument checks before Python, turning the core's
# plain data into a gpukeras_fit, printing and plotting it) and real training
# of tiny models on the CPU through the Python core's fit.fit.

# What the core returns, as reticulate hands it to R (None as NULL).
core_result <- function(gpu = FALSE) {
  list(
    history = list(epoch = c(1, 2, 3), loss = c(2.5, 1.25, 0.75), val_loss = list(3, NULL, 1), mae = c(1.2, 0.9, 0.6)),
    monitor = list(
      samples_per_second = 123456.7, wall_samples_per_second = 61728.4,
      step_time_mean_ms = 3.14159, step_time_sd_ms = 0.5,
      input_wait_share = 0.031, input_verdict = "not input-bound",
      gpu_utilization_mean = if (gpu) 87.4, gpu_utilization_p95 = if (gpu) 99,
      gpu_memory_used_max_mib = if (gpu) 2048, host_cpu_percent_mean = 143.2,
      flops_per_step = if (gpu) 1e9, achieved_tflops = if (gpu) 1.5, mfu = if (gpu) 0.25,
      advice = if (gpu) list("Raise the batch size to 256.", "Use mixed precision.") else list("Train on a GPU.")
    ),
    timeline = list(
      gpu = if (gpu) {
        list(
          time_s = c(0, 0.1, 0.2, 0, 0.1, 0.2), nvml_index = c(0, 0, 0, 1, 1, 1),
          utilization = c(10, 90, 95, 0, 50, 60), memory_used_mib = c(500, 1500, 2048, 100, 200, 300),
          power_w = c(100, 300, 310, 50, 60, 70)
        )
      } else {
        list()
      },
      host = list(list(time_s = 0, cpu_percent = 120), list(time_s = 0.5, cpu_percent = 166.4))
    ),
    settings = list(
      epochs = 3L, batch_size = 32L, steps_per_epoch = 8L, jit_compile = FALSE, steps_per_execution = 1L,
      learning_rate = list(
        schedule = "exponential", initial = 0.01, decay_steps = 10L, decay_rate = 0.5, staircase = FALSE
      ),
      clipnorm = 1, clipvalue = NULL, global_clipnorm = NULL, backup_dir = NULL, backup_freq = NULL,
      resumed_from = NULL, seed = 3L, backend = "tensorflow", device = if (gpu) list("GPU:0", "GPU:1") else "CPU:0",
      dtype_policy = "float32", data = "250 rows of R data in batches of 32", monitor = TRUE, seconds = 2.345
    )
  )
}

from_core <- function(result) {
  new_gpukeras_fit(result$history, result$monitor, result$timeline, result$settings)
}

expect_png <- function(code) {
  path <- withr::local_tempfile(fileext = ".png")
  grDevices::png(path, width = 800, height = 900)
  device <- grDevices::dev.cur()
  tryCatch(code, finally = grDevices::dev.off(device))
  expect_true(file.exists(path))
  expect_gt(file.size(path), 1000)
}

test_that("the core's plain data becomes a history data.frame, a monitor list and timeline data.frames", {
  fit <- from_core(core_result())
  expect_s3_class(fit, "gpukeras_fit")
  expect_identical(names(fit), c("history", "monitor", "timeline", "settings", "model", "encoding"))
  expect_identical(
    fit$history,
    data.frame(epoch = 1:3, loss = c(2.5, 1.25, 0.75), val_loss = c(3, NA, 1), mae = c(1.2, 0.9, 0.6))
  )
  expect_identical(as.data.frame(fit), fit$history)
  expect_identical(fit$monitor$advice, "Train on a GPU.")
  expect_null(fit$monitor$gpu_utilization_mean)
  expect_identical(names(fit$timeline), c("gpu", "host"))
  expect_identical(names(fit$timeline$gpu), c("time_s", "nvml_index", "utilization", "memory_used_mib", "power_w"))
  expect_identical(nrow(fit$timeline$gpu), 0L)
  expect_identical(fit$timeline$host, data.frame(time_s = c(0, 0.5), cpu_percent = c(120, 166.4)))

  gpu <- from_core(core_result(gpu = TRUE))
  expect_identical(gpu$timeline$gpu$nvml_index, c(0L, 0L, 0L, 1L, 1L, 1L))
  expect_identical(gpu$timeline$gpu$memory_used_mib, c(500, 1500, 2048, 100, 200, 300))
  expect_null(from_core(modifyList(core_result(), list(monitor = NULL)))$monitor)
  expect_identical(nrow(new_gpukeras_fit(list(), NULL, NULL, list())$history), 0L)
})

test_that("print shows the history tail, throughput, the input verdict, GPU 'not measured' on the CPU and advice", {
  withr::local_options(width = 120)
  fit <- from_core(core_result())
  text <- format(fit)
  expect_identical(text[1:3], c(
    "<gpukeras fit> 3 epochs on CPU:0 (tensorflow, float32) in 2.3 s",
    "Data:           250 rows of R data in batches of 32",
    "History:"
  ))
  expect_true(any(grepl("^ +epoch +loss +val_loss +mae$", text)))
  expect_true(any(grepl("^ +2 +1.25 +NA +0.9$", text)))
  throughput <- which(text == "Throughput:     123,457 samples/s; step 3.14 ms (sd 0.50 ms)")
  expect_length(throughput, 1)
  expect_identical(
    text[throughput + 1],
    "                61,728 samples/s over the epochs' wall time (compiling and stalls included)"
  )
  expect_true("Input pipeline: not input-bound (waiting for input 3.1% of step time)" %in% text)
  expect_true("GPU:            not measured (no GPU)" %in% text)
  expect_true("Host CPU:       mean 143%" %in% text)
  expect_false(any(grepl("MFU|Compute", text)))
  expect_identical(utils::tail(text, 4), c(
    "Advice:", paste(" ", arrow(), "Train on a GPU."),
    "Settings:       8 steps per epoch, steps_per_execution 1, jit_compile FALSE, clipnorm 1, seed 3",
    "Learning rate:  exponential: 0.01 x 0.5^(step / 10)"
  ))
  expect_output(expect_invisible(print(fit)), "not input-bound")

  # A wait over 5 % of a short step, but shorter than taking a ready batch takes.
  result <- core_result()
  result$monitor[c("input_wait_share", "input_wait_mean_ms", "fetch_floor_ms")] <- list(0.074, 0.09, 0.13)
  expect_true(paste(
    "Input pipeline: not input-bound (waiting for input 7.4% of step time,",
    "0.09 ms a step: less than the 0.13 ms taking a ready batch takes)"
  ) %in% format(from_core(result)))

  result <- core_result(gpu = TRUE)
  result$monitor$gpu_not_measured <- NULL
  result$monitor[c("peak_tflops", "peak_source")] <- list(6, "datasheet")
  result$settings[c("learning_rate", "backup_dir", "resumed_from")] <- list(
    0.001, "/tmp/backups", list(epoch = 2L, batches_done = 1234L)
  )
  gpu <- format(from_core(result), n = 2)
  expect_identical(gpu[1], "<gpukeras fit> 3 epochs on GPU:0, GPU:1 (tensorflow, float32) in 2.3 s")
  expect_true("History (last 2 of 3 epochs):" %in% gpu)
  expect_false(any(grepl("^ +1 +2.5", gpu)))
  expect_true("GPU:            utilization mean 87%, p95 99%; memory used up to 2.0 GiB" %in% gpu)
  expect_true("Compute:        1.5 TFLOP/s achieved; peak 6 TFLOP/s (datasheet); MFU 25.0%" %in% gpu)
  expect_true(paste(" ", arrow(), "Use mixed precision.") %in% gpu)
  expect_true("Learning rate:  0.001 (constant)" %in% gpu)
  expect_true("Backups:        /tmp/backups (resumed in epoch 2, after 1,234 batches)" %in% gpu)

  result$monitor$gpu_utilization_mean <- NULL
  result$monitor$gpu_not_measured <- "NVML is not installed"
  expect_true("GPU:            not measured (NVML is not installed)" %in% format(from_core(result)))

  off <- format(from_core(modifyList(core_result(), list(monitor = NULL))))
  expect_true("Monitor: off (monitor = FALSE)" %in% off)
})

test_that("a run on several GPUs prints each GPU's figures and the imbalance between them", {
  withr::local_options(width = 120)
  result <- core_result(gpu = TRUE)
  result$monitor$gpus <- list(
    list(device = "GPU:0", name = "NVIDIA H100 80GB HBM3", nvml_index = 0L, utilization_mean = 95,
         utilization_p95 = 99, memory_used_max_mib = 30720, power_mean_w = 600),
    list(device = "GPU:1", name = "NVIDIA H100 80GB HBM3", nvml_index = 1L, utilization_mean = 40,
         utilization_p95 = 52, memory_used_max_mib = 20480, power_mean_w = 300),
    list(device = "GPU:2", name = "NVIDIA H100 80GB HBM3", nvml_index = NULL, utilization_mean = NULL)
  )
  result$monitor[c("gpu_utilization_imbalance", "gpu_memory_imbalance_mib")] <- list(55, 10240)
  text <- format(from_core(result))
  at <- which(text == "GPU:            utilization mean 87%, p95 99%; memory used up to 2.0 GiB")
  expect_identical(text[at + 1:4], c(
    "                GPU:0 (NVIDIA H100 80GB HBM3): utilization mean 95%, p95 99%; memory used up to 30.0 GiB",
    "                GPU:1 (NVIDIA H100 80GB HBM3): utilization mean 40%, p95 52%; memory used up to 20.0 GiB",
    "                GPU:2 (NVIDIA H100 80GB HBM3): not measured",
    "                imbalance: 55 points of utilization, 10.0 GiB of memory between the busiest and the idlest GPU"
  ))
  # One GPU: no per-GPU lines, the GPU line says it all.
  result$monitor$gpus <- result$monitor$gpus[1]
  result$monitor[c("gpu_utilization_imbalance", "gpu_memory_imbalance_mib")] <- list(NULL, NULL)
  expect_false(any(grepl("GPU:0 \\(|imbalance", format(from_core(result)))))
})

test_that("other Keras schedules are shown by class and config", {
  rate_line <- function(rate) {
    result <- core_result()
    result$settings$learning_rate <- rate
    grep("^Learning rate: ", format(from_core(result)), value = TRUE)
  }
  expect_identical(
    rate_line(list(
      schedule = "PolynomialDecay", initial_learning_rate = 0.1, decay_steps = 100L, cycle = FALSE, name = NULL
    )),
    "Learning rate:  PolynomialDecay(initial_learning_rate = 0.1, decay_steps = 100, cycle = FALSE)"
  )
  expect_identical(
    rate_line(unclass(lr_cyclical(0.001, 0.01, 5))),
    "Learning rate:  cyclical: triangular between 0.001 and 0.01, half a cycle every 5 steps"
  )
})

test_that("plot() draws the metrics, and the GPU timeline when there are GPU samples, into a file", {
  expect_png(expect_identical(plot(from_core(core_result())), from_core(core_result())))
  expect_png(plot(from_core(core_result(gpu = TRUE))))
  expect_png(plot(from_core(core_result(gpu = TRUE)), metrics = "mae", timeline = FALSE))
  one_epoch <- from_core(modifyList(core_result(), list(history = list(epoch = 1, loss = 0.5))))
  expect_png(plot(one_epoch))
  expect_error(
    plot(from_core(core_result()), metrics = "accuracy"),
    "`metrics` must name history columns",
    class = "gpukeras_error_bad_argument"
  )
  empty <- new_gpukeras_fit(list(), NULL, NULL, list())
  expect_error(plot(empty), "nothing to plot", class = "gpukeras_error_bad_argument")
})

test_that("bad arguments are classed errors raised before Python starts", {
  child <- run_in_fresh_r({
    data <- list(x = matrix(1, 2, 2), y = 1:2)
    list(
      epochs = catch_error(gpu_fit(NULL, data, epochs = 0)),
      batch_size = catch_error(gpu_fit(NULL, data, batch_size = 2.5)),
      steps = catch_error(gpu_fit(NULL, data, step = gpu_step(steps_per_execution = "many"))),
      jit = catch_error(gpu_fit(NULL, data, step = gpu_step(jit_compile = NA))),
      old_steps = catch_error(suppressWarnings(gpu_fit(NULL, data, steps_per_execution = "many"))),
      moved = catch_error(gpu_fit(NULL, data, backup_dir = "b")),
      step = catch_error(gpu_fit(NULL, data, step = 4)),
      learning_rate = catch_error(gpu_fit(NULL, data, learning_rate = -1)),
      schedule = catch_error(gpu_fit(NULL, data, learning_rate = lr_cyclical(0.1, 0.01, 5))),
      clipnorm = catch_error(gpu_fit(NULL, data, clipnorm = 0)),
      clipvalue = catch_error(gpu_fit(NULL, data, clipvalue = "1")),
      monitor = catch_error(gpu_fit(NULL, data, monitor = "yes")),
      backup_dir = catch_error(gpu_fit(NULL, data, backup = gpu_backup(c("a", "b")))),
      backup_freq = catch_error(gpu_fit(NULL, data, backup = gpu_backup("b", every = 0))),
      callbacks = catch_error(gpu_fit(NULL, data, callbacks = function(epoch) NULL)),
      seed = catch_error(gpu_fit(NULL, data, seed = -1)),
      verbose = catch_error(gpu_fit(NULL, data, verbose = 3)),
      no_data = catch_error(gpu_fit(NULL)),
      matrix = catch_error(gpu_fit(NULL, matrix(1, 2, 2))),
      names = catch_error(gpu_fit(NULL, list(features = 1, labels = 2))),
      path = catch_error(gpu_fit(NULL, list(x = "data/*.csv"))),
      validation = catch_error(gpu_fit(NULL, data, validation_data = 42)),
      model = catch_error(gpu_fit("my_model", data)),
      started = reticulate::py_available(initialize = FALSE)
    )
  })
  expect_false(child$started)
  expect_bad <- function(error, pattern, class = "gpukeras_error_bad_argument") {
    expect_identical(error$class, c(class, "gpukeras_error", "rlang_error", "error", "condition"))
    expect_match(error$message, pattern)
  }
  expect_bad(child$epochs, "^`epochs` must be one whole number >= 1, not `0`")
  expect_bad(child$batch_size, "^`batch_size` must be \"auto\", one whole number >= 1 or NULL, not `2.5`")
  expect_bad(child$steps, "^`steps_per_execution` must be \"auto\" or one whole number >= 1, not `many`")
  expect_bad(child$jit, "^`jit_compile` must be TRUE, FALSE or \"auto\", not `NA`")
  expect_bad(child$learning_rate, "^`learning_rate` must be one positive number or a schedule, not `-1`")
  expect_bad(child$schedule, "^`high` \\(0.01\\) must be greater than `low` \\(0.1\\)")
  expect_bad(child$clipnorm, "^`clipnorm` must be one positive number")
  expect_bad(child$clipvalue, "^`clipvalue` must be one positive number")
  expect_bad(child$monitor, "^`monitor` must be TRUE or FALSE")
  expect_bad(child$old_steps, "^`steps_per_execution` must be \"auto\" or one whole number >= 1, not `many`")
  expect_bad(child$moved, "^gpu_fit\\(\\) has no argument `backup_dir` any more: give backup = gpu_backup\\(dir = \\)")
  expect_bad(child$step, "^`step` must be gpu_step\\(...\\) or NULL, not `4`")
  expect_bad(child$backup_dir, "^`dir` must be one non-empty string")
  expect_bad(child$backup_freq, "^`every` must be \"epoch\" or one whole number >= 1, not `0`")
  expect_bad(child$callbacks, "R functions cannot be callbacks")
  expect_bad(child$seed, "^`seed` must be one whole number >= 0, not `-1`")
  expect_bad(child$verbose, "^`verbose` must be \"auto\", 0, 1 or 2, not `3`")
  expect_bad(child$no_data, "^`data` is missing")
  expect_bad(
    child$matrix,
    paste0(
      "^`data` is R data without labels[.]\n[^ ]+ Give `data` as a gpu_dataset\\(\\), or R data as list\\(x = ",
      "features, y = labels\\)"
    ),
    "gpukeras_error_bad_data"
  )
  expect_bad(
    child$names,
    "^`data` is a list with names `features`, `labels`, which gpu_fit\\(\\) cannot read",
    "gpukeras_error_bad_data"
  )
  expect_bad(child$path, "^`data\\$x` must be R data", "gpukeras_error_bad_data")
  expect_bad(child$validation, "^`validation_data` is R data without labels", "gpukeras_error_bad_data")
  expect_bad(child$model, "^`model` must be a compiled Keras 3 model, not `my_model`")
})

test_that("fit_data() reads datasets, splits and R data in their accepted forms", {
  r <- fit_data(list(matrix(1, 2, 2), 1:2), "data")
  expect_identical(r, list(kind = "r", x = matrix(1, 2, 2), y = 1:2, sample_weight = NULL))
  expect_identical(
    fit_data(list(x = matrix(1, 2, 2)), "data"), list(kind = "r", x = matrix(1, 2, 2), y = NULL, sample_weight = NULL)
  )
  weighted <- list(kind = "r", x = matrix(1, 2, 2), y = 1:2, sample_weight = c(1, 3))
  expect_identical(fit_data(list(matrix(1, 2, 2), 1:2, c(1, 3)), "data"), weighted)
  expect_identical(fit_data(list(sample_weight = c(1, 3), y = 1:2, x = matrix(1, 2, 2)), "data"), weighted)
  inputs <- list(x = list(a = matrix(1, 2, 2), b = data.frame(v = 1:2)), y = 1:2)
  expect_identical(fit_data(inputs, "data")$x, inputs$x)
  expect_error(fit_data(list(x = 1, y = 2, z = 3), "data"), "names `x`, `y`, `z`", class = "gpukeras_error_bad_data")
  expect_error(fit_data("data.csv", "data"), "`data` cannot be `data.csv`", class = "gpukeras_error_bad_data")
  expect_identical(resolve_verbose("auto"), if (interactive()) 1L else 2L)
  expect_identical(resolve_verbose(0), 0L)
  expect_identical(check_auto_count(4), 4L)
  expect_identical(check_learning_rate(lr_exponential(0.1, 10, 0.5)), unclass(lr_exponential(0.1, 10, 0.5)))
  expect_identical(check_learning_rate(1L), 1)
})

test_that("a tiny model trains on R data: the loss falls, the history has every epoch and metric", {
  skip_if_no_python()
  model <- tiny_model()
  data <- regression_data()
  fit <- gpu_fit(model, data, epochs = 5, batch_size = 32, seed = 1, verbose = 0)
  expect_s3_class(fit, "gpukeras_fit")
  history <- fit$history
  expect_identical(history$epoch, 1:5)
  expect_true(all(c("loss", "mae") %in% names(history)))
  expect_true(all(is.finite(history$loss)))
  expect_lt(history$loss[5], history$loss[1] / 2)
  # The model was trained in place: its predictions now beat predicting the mean.
  predicted <- keras_predict(model, gpu_as_numpy(data$x), verbose = 0L)
  expect_lt(mean((predicted - data$y)^2), stats::var(data$y) / 2)

  monitor <- fit$monitor
  expect_gt(monitor$samples_per_second, 0)
  expect_gt(monitor$wall_samples_per_second, 0)
  expect_gt(monitor$step_time_mean_ms, 0)
  expect_gte(monitor$input_wait_share, 0)
  expect_lte(monitor$input_wait_share, 1)
  expect_true(monitor$input_verdict %in% c("not input-bound", "moderately input-bound", "highly input-bound"))
  expect_type(monitor$advice, "character")
  expect_identical(fit$settings$data, "256 rows of R data in batches of 32")
  expect_identical(fit$settings$data_kind, "arrays")
  expect_identical(fit$settings$batch_size, 32L)
  expect_identical(fit$settings$epochs, 5L)
  expect_identical(fit$settings$verbose, 0L)

  text <- format(fit)
  expect_match(text[1], "^<gpukeras fit> 5 epochs")
  expect_true(any(grepl("^Throughput: +[0-9,]+ samples/s; step [0-9.]+ ms", text)))
  expect_true(any(grepl("^ +[0-9,]+ samples/s over the epochs' wall time", text)))
  expect_true(any(grepl("^Input pipeline: ", text)))
  expect_png(plot(fit))
})

test_that("without a GPU the report says GPU utilization was not measured, and the timeline has no GPU rows", {
  skip_if_no_python()
  skip_if_nvidia_gpu()
  fit <- gpu_fit(tiny_model(), regression_data(64), epochs = 2, batch_size = 16, verbose = 0)
  expect_null(fit$monitor$gpu_utilization_mean)
  expect_null(fit$monitor$mfu)
  expect_identical(nrow(fit$timeline$gpu), 0L)
  # a simulated GPU is one in use, which NVML cannot watch
  why <- if (simulating_gpu()) "no GPU to watch" else "no GPU in use"
  expect_true(sprintf("GPU:            not measured (%s)", why) %in% format(fit))
})

test_that("a gpu_dataset() with a validation split trains, with val_ metrics each epoch", {
  skip_if_no_python()
  data <- regression_data(200)
  split <- gpu_dataset(data$x, data$y, batch_size = 20, validation_split = 0.25, seed = 2)
  fit <- gpu_fit(tiny_model(), split, epochs = 4, verbose = 0)
  history <- fit$history
  expect_identical(history$epoch, 1:4)
  expect_true(all(c("loss", "mae", "val_loss", "val_mae") %in% names(history)))
  expect_true(all(is.finite(history$val_loss)))
  expect_lt(history$val_loss[4], history$val_loss[1])
  expect_match(fit$settings$data, "gpu_dataset\\(\\) train pipeline from arrays: 150 rows")
  expect_match(fit$settings$validation_data, "validation pipeline from arrays: 50 rows")
  expect_png(plot(fit))

  # The same pipelines given separately; R validation data beside a dataset.
  separate <- gpu_fit(tiny_model(), split$train, validation_data = split$validation, epochs = 1, verbose = 0)
  expect_true("val_loss" %in% names(separate$history))
  mixed <- gpu_fit(
    tiny_model(), split$train, validation_data = list(x = data$x[1:50, ], y = data$y[1:50]), epochs = 1, verbose = 0
  )
  expect_true("val_loss" %in% names(mixed$history))

  expect_error(
    gpu_fit(tiny_model(), split, validation_data = split$validation),
    "holds a validation pipeline", class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_fit(tiny_model(), split$train, batch_size = 64),
    "`batch_size` is for R data: a dataset makes its own batches", class = "gpukeras_error_bad_argument"
  )
})

test_that("monitor = FALSE trains without a report", {
  skip_if_no_python()
  fit <- gpu_fit(tiny_model(), regression_data(64), epochs = 2, monitor = FALSE, verbose = 0)
  expect_null(fit$monitor)
  expect_identical(fit$history$epoch, 1:2)
  expect_true("Monitor: off (monitor = FALSE)" %in% format(fit))
})

test_that("an uncompiled model is a classed error from the core, not a Python traceback", {
  skip_if_no_python()
  error <- tryCatch(gpu_fit(tiny_model(compile = FALSE), regression_data(32), verbose = 0), error = identity)
  expect_s3_class(error, "gpukeras_error")
  expect_false(inherits(error, "gpukeras_error_python"))
  expect_match(conditionMessage(error), "compile", ignore.case = TRUE)
  expect_false(grepl("Traceback", conditionMessage(error), fixed = TRUE))
})

test_that("the same seed and starting weights give the same history", {
  skip_if_no_python()
  data <- regression_data(128)
  first <- tiny_model(seed = 7)
  second <- tiny_model(seed = 7)
  a <- gpu_fit(first, data, epochs = 3, batch_size = 16, seed = 11, verbose = 0)
  b <- gpu_fit(second, data, epochs = 3, batch_size = 16, seed = 11, verbose = 0)
  expect_equal(a$history$loss, b$history$loss, tolerance = 1e-6)
})

test_that("learning-rate schedules and clipping reach the optimizer and training still works", {
  skip_if_no_python()
  data <- regression_data(128)
  schedules <- list(
    lr_warmup_cosine(peak = 0.02, warmup_steps = 4, decay_steps = 40),
    lr_exponential(initial = 0.02, decay_steps = 8, decay_rate = 0.9),
    lr_cyclical(low = 0.001, high = 0.02, step_size = 4, mode = "triangular2")
  )
  for (schedule in schedules) {
    model <- tiny_model()
    fit <- gpu_fit(model, data, epochs = 3, batch_size = 16, learning_rate = schedule, clipnorm = 1, verbose = 0)
    expect_true(all(is.finite(fit$history$loss)), info = schedule$schedule)
    expect_lt(fit$history$loss[3], fit$history$loss[1])
    expect_true(
      inherits(model$optimizer$learning_rate, "python.builtin.object") ||
        inherits(
          model$optimizer$`_learning_rate`, "keras.src.optimizers.schedules.learning_rate_schedule.LearningRateSchedule"
        ),
      info = schedule$schedule
    )
    expect_equal(model$optimizer$clipnorm, 1)
  }
  constant <- tiny_model()
  gpu_fit(constant, data, epochs = 1, learning_rate = 0.005, clipvalue = 0.5, verbose = 0)
  expect_equal(as.numeric(constant$optimizer$learning_rate$numpy()), 0.005, tolerance = 1e-6)
  expect_equal(constant$optimizer$clipvalue, 0.5)
})

test_that("verbose = \"auto\" in a non-interactive run writes a line or two per epoch, not a progress-bar flood", {
  skip_if_no_python()
  log <- withr::local_tempfile(fileext = ".log")
  errors <- withr::local_tempfile(fileext = ".log")
  path <- getNamespaceInfo("gpukeras", "path")
  callr::r(
    function(path, source_tree) {
      if (source_tree) {
        utils::getFromNamespace("load_all", "pkgload")(path, quiet = TRUE, helpers = FALSE)
      } else {
        library("gpukeras", lib.loc = dirname(path), character.only = TRUE)
      }
      keras <- gpu_keras()
      model <- keras$Sequential(list(keras$Input(shape = list(2L)), keras$layers$Dense(1L)))
      model$compile(optimizer = "sgd", loss = "mse")
      x <- matrix(stats::runif(2000), ncol = 2)
      stopifnot(!interactive())
      fit <- gpu_fit(model, list(x = x, y = x %*% c(1, -1)), epochs = 4, batch_size = 10)
      cat("verbose:", fit$settings$verbose, "\n")
    },
    args = list(path = path, source_tree = is_source_tree(path)),
    stdout = log, stderr = errors, timeout = 180
  )
  # Python writes straight to the process's stdout, so the log file holds what
  # a batch job's log would.
  output <- readLines(log, warn = FALSE)
  text <- paste(output, collapse = "\n")
  expect_identical(utils::tail(output, 1), "verbose: 2 ")
  expect_identical(grep("^Epoch [1-4]/4$", output), c(1L, 3L, 5L, 7L))
  # Keras prints a loss below 1e-3 as 1.2345e-04; the live figures follow it.
  expect_length(grep("^100/100 - .* - loss: [0-9.e+-]+ - cpu_%: [0-9.]+ - input_wait_%: [0-9.]+$", output), 4)
  # Four epochs of 100 batches: two lines each, no per-batch lines and no
  # carriage-return, backspace or colour redraws (what verbose = 1 writes).
  expect_length(output, 2 * 4 + 1)
  expect_false(grepl("[\b\r\033]", text))
})

test_that("Keras callbacks reach fit(): EarlyStopping ends training early", {
  skip_if_no_python()
  keras <- gpu_keras()
  stop_early <- keras$callbacks$EarlyStopping(monitor = "loss", patience = 0L, min_delta = 1e9)
  fit <- gpu_fit(tiny_model(), regression_data(64), epochs = 10, callbacks = stop_early, verbose = 0)
  expect_identical(fit$history$epoch, 1:2)
})

test_that("R data for a two-input model: a named list of a matrix and a data.frame with a factor", {
  skip_if_no_python()
  keras <- gpu_keras()
  keras$utils$set_random_seed(3L)
  numbers <- keras$Input(shape = list(3L), name = "numbers")
  table <- keras$Input(shape = list(4L), name = "table") # kind's 3 indicator columns, size
  joined <- keras$layers$Concatenate()(list(numbers, table))
  output <- keras$layers$Dense(1L)(keras$layers$Dense(8L, activation = "relu")(joined))
  model <- keras$Model(inputs = list(numbers = numbers, table = table), outputs = output)
  model$compile(optimizer = keras$optimizers$Adam(learning_rate = 0.02), loss = "mse")
  n <- 120
  withr::with_seed(4, {
    x <- matrix(stats::rnorm(n * 3), ncol = 3)
    kind <- factor(sample(c("low", "mid", "high"), n, replace = TRUE), levels = c("low", "mid", "high"))
    size <- stats::runif(n)
  })
  y <- x[, 1] - x[, 2] + as.integer(kind) + size
  fit <- gpu_fit(
    model, list(x = list(numbers = x, table = data.frame(kind = kind, size = size)), y = y),
    epochs = 6, batch_size = 12, seed = 1, verbose = 0
  )
  expect_identical(fit$history$epoch, 1:6)
  expect_lt(fit$history$loss[6], fit$history$loss[1] / 2)
  expect_identical(fit$settings$data, "120 rows of R data in batches of 12")
})

test_that("NA in R data is a classed error that says how to drop the rows, before training", {
  skip_if_no_python()
  data <- regression_data(20)
  data$x[3, 2] <- NA
  error <- tryCatch(gpu_fit(tiny_model(), data, verbose = 0), error = identity)
  expect_s3_class(error, "gpukeras_error_bad_data")
  expect_match(conditionMessage(error), "NA/NaN in 1 row(s) (first: 3)", fixed = TRUE)
  expect_match(
    conditionMessage(error),
    "let gpu_dataset() drop them: gpu_fit(model, gpu_dataset(x, y, na = \"drop\"))",
    fixed = TRUE
  )
})

test_that("under mixed precision gpu_fit() warns once about a float16 softmax output, and trains", {
  # float16 and TensorFlow set by hand in a fresh R: the simulated GPU's auto choices do not reach it
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      gpu_setup(mixed_precision = "float16")
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = list(4L)),
        keras$layers$Dense(8L, activation = "relu"),
        keras$layers$Dense(3L, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
      data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
      warnings <- list()
      record <- function(w) {
        warnings[[length(warnings) + 1]] <<- class(w)
        invokeRestart("muffleWarning")
      }
      first <- withCallingHandlers(gpu_fit(model, data, epochs = 1, verbose = 0), warning = record)
      second <- withCallingHandlers(gpu_fit(model, data, epochs = 1, verbose = 0), warning = record)
      list(warnings = warnings, policy = first$settings$dtype_policy, loss = c(first$history$loss, second$history$loss))
    },
    env = c(KERAS_BACKEND = "tensorflow")
  )
  output_warnings <- Filter(function(classes) "gpukeras_warning_output_precision" %in% classes, child$warnings)
  expect_length(output_warnings, 1)
  expect_identical(child$policy, "mixed_float16")
  expect_true(all(is.finite(child$loss)))
})

test_that("NumPy arrays from gpu_as_numpy() are taken as they are", {
  skip_if_no_python()
  data <- regression_data(60)
  fit <- gpu_fit(
    tiny_model(), list(x = gpu_as_numpy(data$x), y = gpu_as_numpy(data$y)),
    epochs = 2, batch_size = 20, verbose = 0
  )
  expect_identical(fit$history$epoch, 1:2)
  expect_identical(fit$settings$data, "60 rows of NumPy arrays in batches of 20")
})

test_that(paste(
  "a tf.data dataset made elsewhere (as tfdatasets makes it) is described, and an unbatched one is a clear error"
), {
  skip_if_no_python()
  data <- regression_data(256)
  tf <- reticulate::import("tensorflow")
  slices <- tf$data$Dataset$from_tensor_slices(reticulate::tuple(gpu_as_numpy(data$x), gpu_as_numpy(data$y)))
  # tfdatasets gives its datasets the R class "tf_dataset" in front of the Python ones.
  as_tfdatasets <- function(dataset) structure(dataset, class = c("tf_dataset", class(dataset)))
  model <- tiny_model()
  fit <- gpu_fit(model, as_tfdatasets(slices$batch(32L)), epochs = 1, verbose = 0)
  expect_identical(fit$settings$data, "tf.data dataset (tfdatasets): 8 batches of (None, 4) float32, (None,) float32")
  expect_true(
    "Data:           tf.data dataset (tfdatasets): 8 batches of (None, 4) float32, (None,) float32" %in%
      format(fit)
  )
  filtered <- slices$batch(64L)$filter(function(x, y) TRUE)
  expect_identical(
    describe_fit_data(list(kind = "python"), filtered, NULL),
    "tf.data dataset: batches not known of (None, 4) float32, (None,) float32"
  )
  expect_identical(dim(keras_predict(model, gpu_as_numpy(data$x[1:3, ]), verbose = 0L)), c(3L, 1L))

  expect_error(
    gpu_fit(model, as_tfdatasets(slices), verbose = 0),
    "`data` gives single examples (shape (4,)), but the model takes batches (shape (None, 4)): batch the dataset first",
    fixed = TRUE, class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_fit(model, slices$batch(32L), validation_data = slices, verbose = 0),
    "`validation_data` gives single examples", fixed = TRUE, class = "gpukeras_error_bad_data"
  )
})

test_that(paste(
  "gpu_fit() calls the core once to train: R data's encoding is made first (once), then R data is handed over,",
  "and the data described, in the fit's call"
), {
  skip_if_no_python()
  model <- tiny_model()
  data <- regression_data(64)
  gpu_keras()
  seen <- new.env()
  seen$verbs <- character()
  suppressMessages(trace(
    "core_call", where = asNamespace("gpukeras"), print = FALSE,
    tracer = bquote(assign("verbs", c(get("verbs", envir = .(seen)), target), envir = .(seen)))
  ))
  on.exit(suppressMessages(untrace("core_call", where = asNamespace("gpukeras"))), add = TRUE)
  fit <- gpu_fit(model, data, epochs = 1, batch_size = 16, verbose = 0, monitor = FALSE)
  expect_identical(seen$verbs, c("data_encoding", "fit"))
  expect_identical(fit$settings$data, "64 rows of R data in batches of 16")
  dataset <- gpu_dataset(data$x, data$y, batch_size = 16)
  seen$verbs <- character()
  fit <- gpu_fit(model, dataset, epochs = 1, verbose = 0, monitor = FALSE)
  expect_identical(seen$verbs, "fit")
})
