# Device-resident training on JAX, from R: R data put on the device once, several steps per
# dispatch (the training itself is compared with Keras' fit() in python/tests/test_resident.py).

test_that("on JAX, gpu_fit() of R data trains on the device and the print says so and why", {
  skip_if_no_python()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  result <- run_in_fresh_r(
    {
      keras <- gpu_keras()
      set.seed(1)
      x <- matrix(stats::rnorm(1037 * 20), ncol = 20)
      y <- as.integer(x[, 1] + x[, 2] > 0)
      keras$utils$set_random_seed(1L)
      model <- keras$Sequential(list(
        keras$Input(shape = list(20L)),
        keras$layers$Dense(32L, activation = "relu"),
        keras$layers$Dense(2L, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
      fit <- gpu_fit(model, list(x = x, y = y), epochs = 3, batch_size = 64, seed = 1, verbose = 0,
                     validation_data = list(x[1:200, ], y[1:200]))
      list(
        path = fit$settings$data_path,
        spe = fit$settings$steps_per_execution,
        model_spe = model$steps_per_execution,
        history = fit$history,
        printed = format(fit)
      )
    },
    env = c(KERAS_BACKEND = "jax")
  )
  expect_true(result$path$resident)
  expect_match(result$path$why, "is on the device")
  expect_true(result$spe >= 1 && result$spe <= 17)
  expect_identical(result$model_spe, 1L) # the model's own setting is left as it was
  expect_identical(result$history$epoch, 1:3)
  expect_lt(result$history$loss[3], result$history$loss[1])
  expect_true(all(c("val_loss", "val_accuracy") %in% names(result$history)))
  expect_true(any(grepl("^Data: .*is on the device", result$printed)))
  expect_true(any(grepl("on the device \\(no wait by construction\\)", result$printed)))
})
