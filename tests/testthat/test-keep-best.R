# gpu_backup(keep_best = , monitor = ) and gpu_step(ema = ) from R: the checks, and what a fit
# says it kept (python/tests/test_keep_best.py kills and resumes a real training process).

test_that("keep_best, monitor and ema are checked before Python starts", {
  expect_snapshot(error = TRUE, {
    gpu_backup(NULL, keep_best = 2)
    gpu_backup(tempdir(), keep_best = 0)
    gpu_backup(tempdir(), keep_best = 2, monitor = 3)
    gpu_step(ema = 1)
  })
  expect_snapshot(print(gpu_backup("/runs/a", keep_best = 3, monitor = "val_accuracy")))
})

test_that("a fit keeps the k best (averaged) models and says so", {
  skip_if_no_python()
  local_tracking_off()
  dir <- file.path(tempfile("best-"), "run")
  x <- as.matrix(iris[, 1:4])
  rows <- c(1:40, 51:90, 101:140)
  fit <- gpu_fit(
    iris_model_fn(), list(x = x[rows, ], y = iris$Species[rows]), epochs = 4, batch_size = 16, seed = 1,
    validation_data = list(x = x[-rows, ], y = iris$Species[-rows]), verbose = 0, monitor = FALSE,
    backup = gpu_backup(dir, keep_best = 2, monitor = "val_accuracy"), step = gpu_step(ema = 0.9)
  )
  best <- fit$settings$best
  expect_equal(best$mode, "max")
  expect_length(best$best, 2L)
  values <- vapply(best$best, function(b) b$value, numeric(1))
  expect_equal(values[1], max(fit$history$val_accuracy))
  expect_true(all(file.exists(vapply(best$best, function(b) b$path, character(1)))))
  expect_setequal(list.files(dir), c("gpukeras-best.json", vapply(best$best, function(b) b$file, character(1))))
  expect_equal(fit$settings$ema, 0.9)
  shown <- format(fit)
  expect_true(any(grepl("moving average (ema 0.9)", shown, fixed = TRUE)))
  expect_true(any(grepl("2 by val_accuracy", shown, fixed = TRUE)))
  loaded <- gpu_load(best$best[[1]]$path)
  expect_s3_class(loaded, "gpukeras_model")
})

test_that("gpu_fit(ema = ) is gpu_step(ema = ): the same averaged weights, no warning, never both", {
  skip_if_no_python()
  local_tracking_off()
  data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
  fitted <- function(...) {
    gpu_keras()$utils$set_random_seed(4L) # the same first weights for both
    gpu_fit(iris_model_fn(), data, epochs = 2, batch_size = 32, seed = 1, verbose = 0, monitor = FALSE, ...)
  }
  expect_no_warning(short <- fitted(ema = 0.9))
  long <- fitted(step = gpu_step(ema = 0.9))
  expect_equal(short$settings$ema, 0.9)
  expect_equal(lapply(short$model$get_weights(), as.vector), lapply(long$model$get_weights(), as.vector))
  expect_snapshot(error = TRUE, gpu_fit(iris_model_fn(), data, step = gpu_step(), ema = 0.9))
})
