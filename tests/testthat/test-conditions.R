# The errors of each exported verb as the user sees them: the call they made,
# the message and its bullets (?gpukeras-conditions). All are raised before
# Python is needed, so the snapshots hold with or without a Python environment.

rows <- list(x = matrix(as.double(1:8), 4), y = c(0, 1, 0, 1))

test_that("gpu_fit()'s errors name gpu_fit() and say what to do", {
  expect_snapshot(error = TRUE, gpu_fit(NULL, rows, epochs = 0))
  expect_snapshot(error = TRUE, gpu_fit(NULL, rows$x, rows$y))
  expect_snapshot(error = TRUE, gpu_fit(NULL, rows$x))
  expect_snapshot(error = TRUE, gpu_fit(NULL, rows, clipnorm = 1, clipvalue = 1))
  expect_snapshot(error = TRUE, gpu_fit(NULL, rows, backup = gpu_backup(NULL, signals = "SIGFOO")))
  expect_snapshot(error = TRUE, gpu_fit(NULL, rows, callbacks = function(epoch) NULL))
})

test_that("gpu_dataset()'s errors", {
  expect_snapshot(error = TRUE, gpu_dataset(rows$x, rows$y, batch_size = 0))
  expect_snapshot(error = TRUE, gpu_dataset(iris, label = "Species"))
  expect_snapshot(error = TRUE, gpu_dataset(matrix(letters[1:4], 2)))
  expect_snapshot(error = TRUE, gpu_dataset(rows$x, 1:3))
  expect_snapshot(error = TRUE, gpu_dataset("/nonexistent/gpukeras-data"))
})

test_that("the errors of the verbs that tune and measure", {
  expect_snapshot(error = TRUE, gpu_check(probe = NA))
  expect_snapshot(error = TRUE, gpu_tune(NULL, rows, time_budget = -1))
  expect_snapshot(error = TRUE, gpu_batch_size(NULL, rows, min_batch = 64, max_batch = 32))
  expect_snapshot(error = TRUE, gpu_lr_find(NULL, rows, min_lr = 1, max_lr = 0.1))
  expect_snapshot(error = TRUE, gpu_profile(NULL, rows, steps = c(5, 2)))
  expect_snapshot(error = TRUE, gpu_quantize(NULL, mode = "int8", batch_size = 8))
  expect_snapshot(error = TRUE, gpu_audit(NULL, batch_size = 0))
  expect_snapshot(error = TRUE, gpu_precision_check("my_model"))
  expect_snapshot(error = TRUE, gpu_dataset_benchmark(rows, steps = 2))
})

test_that("the errors of setup, devices, strategies and workers", {
  expect_snapshot(error = TRUE, gpu_setup(memory_limit = -1))
  expect_snapshot(error = TRUE, gpu_setup(threads = c(intra = 2, other = 1)))
  expect_snapshot(error = TRUE, gpu_strategy("mirrored", devices = "TPU:0"))
  expect_snapshot(error = TRUE, with_gpu_device(c("GPU:0", "GPU:1"), 1))
  expect_snapshot(error = TRUE, gpu_launch(function() 1, workers = 0))
  expect_snapshot(error = TRUE, gpu_job_status("not a job"))
})

test_that("the errors of the schedules, conversion and installation", {
  expect_snapshot(error = TRUE, lr_warmup_cosine(peak = -1, warmup_steps = 10, decay_steps = 100))
  expect_snapshot(error = TRUE, lr_cyclical(0.1, 0.01, step_size = 100))
  expect_snapshot(error = TRUE, gpu_as_numpy(c("a", "b")))
  expect_snapshot(error = TRUE, gpukeras_requirements(reticulate = "one"))
})

test_that("an error raised deep in a helper carries the user's call, not the helper's", {
  # gpu_fit() -> read_training_data() -> fit_data()
  error <- tryCatch(gpu_fit(NULL, rows$x), error = identity)
  expect_s3_class(error, "gpukeras_error_bad_data")
  expect_equal(rlang::call_name(error$call), "gpu_fit")
  # gpu_dataset() -> pipeline_options() -> check_count()
  error <- tryCatch(gpu_dataset(rows$x, rows$y, batch_size = 0), error = identity)
  expect_equal(rlang::call_name(error$call), "gpu_dataset")
  # gpu_dataset() -> as_pipeline_data() -> its encode() closure -> check_feature_array()
  error <- tryCatch(gpu_dataset(list(a = rows$x, b = matrix(letters[1:8], 4)), rows$y), error = identity)
  expect_s3_class(error, "gpukeras_error_bad_data")
  expect_equal(rlang::call_name(error$call), "gpu_dataset")
  # gpu_strategy() -> device_names(); with_gpu_strategy() -> strategy_object()
  expect_equal(rlang::call_name(tryCatch(gpu_strategy(devices = -1), error = identity)$call), "gpu_strategy")
  expect_equal(rlang::call_name(tryCatch(with_gpu_strategy("mirrored", 1), error = identity)$call), "with_gpu_strategy")
  # The argument is named as the user wrote it.
  expect_match(conditionMessage(tryCatch(gpu_check(probe_seconds = -1), error = identity)), "^`probe_seconds` must be")
})

test_that("an error from the Python core carries the call of the verb that reached it through helpers", {
  skip_if_no_python()
  # with_gpu_device() -> enter_device_scope() -> core_call("device_scope")
  error <- tryCatch(with_gpu_device("GPU:97", 1), error = identity)
  expect_s3_class(error, "gpukeras_error_unknown_device")
  expect_equal(rlang::call_name(error$call), "with_gpu_device")
})
