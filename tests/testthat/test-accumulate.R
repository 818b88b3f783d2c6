# gpu_fit(accumulate = ): its checks (classed errors that say what to give) and a real
# accumulated fit on the CPU, whose weights are those of the large batch. The Python
# tests (test_accumulate.py) compare the engines' weights in detail.

test_that("accumulate must be a whole number or \"auto\", before Python starts", {
  data <- regression_data(64)
  expect_snapshot(error = TRUE, gpu_fit("not a model", data, batch_size = 64, accumulate = 0))
  expect_snapshot(error = TRUE, gpu_fit("not a model", data, batch_size = 64, accumulate = "some"))
  expect_error(gpu_fit("not a model", data, accumulate = 1.5), class = "gpukeras_error_bad_argument")
})

test_that("accumulate needs a batch_size it divides, and \"auto\" needs R data", {
  skip_if_no_python()
  data <- regression_data(64)
  expect_snapshot(error = TRUE, gpu_fit(tiny_model(), data, accumulate = 4, verbose = 0))
  expect_snapshot(error = TRUE, gpu_fit(tiny_model(), data, batch_size = 64, accumulate = 3, verbose = 0))
  dataset <- gpu_dataset(data$x, data$y, batch_size = 16)
  expect_snapshot(error = TRUE, gpu_fit(tiny_model(), dataset, accumulate = "auto", verbose = 0))
})

test_that("batch 64 as 4 micro-batches of 16 trains to the weights of batch 64", {
  skip_if_no_python()
  data <- regression_data(256)
  plain <- tiny_model()
  gpu_fit(plain, data, epochs = 2, batch_size = 64, seed = 2, verbose = 0, monitor = FALSE)
  accumulated <- tiny_model()
  fit <- gpu_fit(accumulated, data, epochs = 2, batch_size = 64, accumulate = 4, seed = 2, verbose = 0, monitor = FALSE)
  relative <- mapply(
    function(a, b) max(abs(a - b)) / max(abs(a)),
    plain$get_weights(), accumulated$get_weights()
  )
  expect_lt(max(relative), 1e-5)
  expect_equal(fit$settings$batch_size, 64)
  expect_equal(fit$settings$micro_batch_size, 16)
  expect_equal(fit$settings$accumulate, 4)
  expect_equal(fit$settings$steps_per_epoch, 16)
  expect_match(format(fit), "accumulate 4 \\(micro-batch 16\\)", all = FALSE)
  # the optimizer is the user's again
  expect_null(accumulated$optimizer$gradient_accumulation_steps)
  expect_equal(length(accumulated$optimizer$variables), length(plain$optimizer$variables))
})

test_that("accumulate = \"auto\" on the CPU is 1, and the settings say why", {
  skip_if_no_python()
  skip_if_nvidia_gpu()
  fit <- gpu_fit(tiny_model(), regression_data(64), batch_size = 32, accumulate = "auto", verbose = 0, monitor = FALSE)
  expect_equal(fit$settings$accumulate, 1)
  expect_match(fit$settings$accumulate_reason, "^auto: 1, no memory plan to split by \\(no GPU")
  expect_match(format(fit), "Accumulate: +auto: 1", all = FALSE)
})

test_that("remat = TRUE recomputes while training: the same weights, and print() says which mode", {
  skip_if_no_python()
  data <- regression_data(128)
  plain <- tiny_model()
  gpu_fit(plain, data, epochs = 2, batch_size = 32, seed = 2, verbose = 0, monitor = FALSE)
  recomputed <- tiny_model()
  fit <- gpu_fit(
    recomputed, data, epochs = 2, batch_size = 32, seed = 2, verbose = 0, monitor = FALSE, step = gpu_step(remat = TRUE)
  )
  expect_equal(lapply(recomputed$get_weights(), as.vector), lapply(plain$get_weights(), as.vector), tolerance = 1e-6)
  expect_true(fit$settings$remat %in% c("full", "activations"))
  expect_output(print(fit), sprintf("rematerialized (%s)", fit$settings$remat), fixed = TRUE)
})
