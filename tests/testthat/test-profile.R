# gpu_profile(): argument checks before Python, the core's plain data as a
# gpukeras_profile and its print, and real traces of a tiny model on the CPU
# through the Python core's profile.profile.

# What the core returns, as reticulate hands it to R (None as NULL).
profile_result <- function(gpu = FALSE) {
  list(
    logdir = "/tmp/logs", run_dir = "/tmp/logs/train",
    trace_dir = "/tmp/logs/train/plugins/profile/2026_01_01_00_00_00",
    trace_files = list(list(path = "/tmp/logs/train/plugins/profile/2026_01_01_00_00_00/vm.xplane.pb", bytes = 40441L)),
    event_files = list(list(path = "/tmp/logs/train/events.out.tfevents.1.vm.1.0.v2", bytes = 618L)),
    tensorboard = list(
      command = "tensorboard --logdir /tmp/logs", note = "Not installed in this Python: pip install tensorboard"
    ),
    steps = list(start = 2L, stop = 4L, trained = 4L),
    numbers = list(
      step_time_mean_ms = 2.2118, step_time_sd_ms = 1.1896, samples_per_second = 7233.9,
      input_wait_share = 0.2972, input_verdict = "highly input-bound", steps_timed = 3L,
      input_wait_method = "next(iterator) timed inside train_function (tensorflow backend)"
    ),
    trace = list(
      steps = list(2L, 3L, 4L), step_time_mean_ms = 2.2062, span_ms = 6.63,
      input_ms = 0.21, input_share = 0.0317, input_verdict = "not input-bound",
      devices = if (gpu) list(list(plane = "/device:GPU:0", events = 1234L, busy_ms = 5.5, busy_share = 0.83)) else
        list(),
      parsed = TRUE, note = if (!gpu) "no device plane in the trace: it holds host (CPU) activity only"
    ),
    scalars = list(step = c(1, 2, 3, 4), loss = c(4.7, 6.6, 7.2, 7.5), mae = list(1.9, 2.1, NULL, 2.2)),
    scalars_source = "event files", backend = "tensorflow",
    settings = list(
      batch_size = 16L,
      steps_per_execution = 1L,
      jit_compile = FALSE,
      dtype_policy = "float32",
      device = if (gpu) "GPU:0" else "CPU:0",
      data = "arrays"
    )
  )
}

test_that("arguments are checked before Python, with classed errors", {
  data <- regression_data(64)
  for (steps in list(c(0, 2), c(3, 2), c(1.5, 2), 2, c(1, 2, 3), "1,2", c(NA, 2), NULL)) {
    expect_error(
      gpu_profile(NULL, data, steps = steps), "^`steps` must be two whole numbers c\\(start, stop\\)",
      class = "gpukeras_error_bad_argument"
    )
  }
  expect_error(
    gpu_profile(NULL, data, logdir = 3), "`logdir` must be one non-empty string", class = "gpukeras_error_bad_argument"
  )
  expect_error(gpu_profile(NULL, data, logdir = ""), class = "gpukeras_error_bad_argument")
  expect_error(gpu_profile(NULL, data, batch_size = 0), "`batch_size`", class = "gpukeras_error_bad_argument")
  expect_error(gpu_profile(NULL, data, verbose = 3), "`verbose`", class = "gpukeras_error_bad_argument")
  expect_error(gpu_profile(NULL), "`data` is missing", class = "gpukeras_error_bad_argument")
  expect_error(gpu_profile(NULL, iris), "without labels", class = "gpukeras_error_bad_data")
  expect_error(
    gpu_profile(NULL, data), "`model` must be a compiled Keras 3 model", class = "gpukeras_error_bad_argument"
  )
  expect_identical(check_step_range(c(10, 20)), c(10L, 20L))
})

test_that("the core's plain data becomes a gpukeras_profile with data.frames", {
  skip_if_no_python()
  profile <- new_gpukeras_profile(profile_result())
  expect_s3_class(profile, "gpukeras_profile")
  expect_identical(
    profile$trace_files,
    data.frame(path = "/tmp/logs/train/plugins/profile/2026_01_01_00_00_00/vm.xplane.pb", bytes = 40441L)
  )
  expect_identical(profile$trace$steps, 2:4)
  expect_identical(names(profile$trace$devices), c("plane", "events", "busy_ms", "busy_share"))
  expect_identical(nrow(profile$trace$devices), 0L)
  expect_identical(profile$scalars, data.frame(step = 1:4, loss = c(4.7, 6.6, 7.2, 7.5), mae = c(1.9, 2.1, NA, 2.2)))
  gpu <- new_gpukeras_profile(profile_result(gpu = TRUE))
  expect_identical(gpu$trace$devices$busy_share, 0.83)
})

test_that("print shows the range, the step timer's numbers, the trace, the files and the command", {
  skip_if_no_python()
  withr::local_options(width = 120)
  text <- format(new_gpukeras_profile(profile_result()))
  expect_identical(text[1:5], c(
    "<gpukeras profile> steps 2-4 on CPU:0 (tensorflow, float32)",
    "Throughput:     7,234 samples/s; step 2.21 ms (sd 1.19 ms)",
    "Input pipeline: highly input-bound (waiting for input 29.7% of step time)",
    "Trace:          steps 2-4 found; host step 2.21 ms",
    "  input: 3.2% of the traced steps in tf.data's iterator ops (0.21 ms): not input-bound"
  ))
  expect_identical(text[6], "                no device plane in the trace: it holds host (CPU) activity only")
  expect_true("Trace files:    /tmp/logs/train/plugins/profile/2026_01_01_00_00_00/vm.xplane.pb (39.5 KiB)" %in% text)
  expect_true("Scalars:        loss, mae for 4 steps (from event files)" %in% text)
  expect_true("Open with:      tensorboard --logdir /tmp/logs" %in% text)
  expect_identical(utils::tail(text, 1), "                Not installed in this Python: pip install tensorboard")
  expect_output(expect_invisible(print(new_gpukeras_profile(profile_result()))), "steps 2-4 found")

  gpu <- format(new_gpukeras_profile(profile_result(gpu = TRUE)))
  expect_true("  /device:GPU:0 busy 83.0% of the traced steps (5.50 ms, 1,234 events)" %in% gpu)
  unread <- profile_result()
  unread$trace <- list(parsed = FALSE, note = "the profiler wrote no .xplane.pb file", steps = list(), devices = list())
  unread$trace_files <- list()
  text <- format(new_gpukeras_profile(unread))
  expect_true("Trace:          not read (the profiler wrote no .xplane.pb file)" %in% text)
  expect_true("Trace files:    none" %in% text)
})

test_that("a real profile writes a trace of the range and event files, and reads them back; twice", {
  skip_if_no_python()
  logdir <- withr::local_tempdir()
  model <- tiny_model()
  before <- model$get_weights()
  profile <- gpu_profile(model, regression_data(64), steps = c(2, 4), logdir = logdir, batch_size = 16)
  expect_s3_class(profile, "gpukeras_profile")
  expect_identical(profile$logdir, normalizePath(logdir))
  expect_identical(unlist(profile$steps), c(start = 2L, stop = 4L, trained = 4L))
  expect_true(any(endsWith(profile$trace_files$path, ".xplane.pb")))
  files <- rbind(profile$trace_files, profile$event_files)
  expect_true(all(file.exists(files$path)))
  expect_identical(as.numeric(file.size(files$path)), as.numeric(files$bytes))
  expect_true(all(files$bytes > 0))
  expect_true(startsWith(profile$trace_dir, file.path(normalizePath(logdir), "train", "plugins", "profile")))
  expect_true(profile$trace$parsed)
  expect_identical(profile$trace$steps, 2:4)
  if (identical(profile$backend, "tensorflow")) {
    expect_true(profile$trace$input_share > 0 && profile$trace$input_share < 1)
    expect_output(print(profile), "input: .* of the traced steps in tf.data's iterator ops")
  }
  numbers <- profile$numbers
  expect_identical(as.integer(numbers$steps_timed), 3L)
  expect_gt(numbers$step_time_mean_ms, 0)
  expect_gt(numbers$samples_per_second, 0)
  expect_true(numbers$input_wait_share >= 0 && numbers$input_wait_share <= 1)
  expect_identical(profile$scalars$step, 1:4) # one value per step
  expect_true(all(is.finite(profile$scalars$loss)))
  expect_identical(profile$tensorboard$command, paste("tensorboard --logdir", normalizePath(logdir)))
  expect_false(isTRUE(all.equal(before, model$get_weights()))) # it trained
  expect_output(print(profile), "steps 2-4 found")

  again <- gpu_profile(tiny_model(), regression_data(64), steps = c(1, 2), logdir = logdir, batch_size = 16)
  expect_identical(again$trace$steps, 1:2)
  expect_false(again$trace_dir == profile$trace_dir)
  expect_identical(nrow(again$event_files), 1L)
})

test_that("a logdir that cannot be written and an uncompiled model are classed errors from the core", {
  skip_if_no_python()
  file <- withr::local_tempfile()
  writeLines("not a folder", file)
  expect_error(
    gpu_profile(tiny_model(), regression_data(64), steps = c(1, 2), logdir = file.path(file, "logs")),
    "cannot be written to", class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_profile(tiny_model(compile = FALSE), regression_data(64), steps = c(1, 2)),
    "not compiled", class = "gpukeras_error_model_not_compiled"
  )
  dataset <- gpu_dataset(regression_data(64)$x, regression_data(64)$y, batch_size = 16)
  expect_error(
    gpu_profile(tiny_model(), dataset, steps = c(1, 2), batch_size = 16),
    "a dataset makes its own batches", class = "gpukeras_error_bad_argument"
  )
})

test_that("print shows the size of each of several trace files", {
  skip_if_no_python()
  result <- profile_result()
  result$trace_files <- list(
    list(path = "a.xplane.pb", bytes = 3e6),
    list(path = "b.xplane.pb", bytes = 2048L)
  )
  text <- format(new_gpukeras_profile(result))
  expect_true("Trace files:    a.xplane.pb (2.9 MiB)" %in% text)
  expect_true("                b.xplane.pb (2.0 KiB)" %in% text)
})
