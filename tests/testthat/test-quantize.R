# gpu_quantize(): an int8/int4 copy for inference from R, its size and
# accuracy report, the original untouched, and classed errors. The core's
# accounting is tested in python/tests/test_quantize.py.

test_that("gpu_quantize() checks its arguments before Python", {
  expect_error(
    gpu_quantize(1), "`model` must be a Keras 3 model, not `1`.", fixed = TRUE, class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_quantize(1, mode = 8),
    "`mode` must be one non-empty string",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_quantize(1, batch_size = -1),
    "`batch_size` must be one whole number",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_quantize(1, batch_size = 16),
    "`batch_size` is for R data in `data`",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_quantize(1, data = matrix(1, 2, 2)),
    "`data` is R data without labels.",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
})

test_that("gpu_quantize() makes a smaller int8 copy, reports size and accuracy, and leaves the model alone", {
  skip_if_no_python()
  keras <- gpu_keras()
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L)),
    keras$layers$Dense(32L, activation = "relu", name = "hidden"),
    keras$layers$Dense(3L, activation = "softmax", name = "out")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  iris_data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
  gpu_fit(model, iris_data, epochs = 5, verbose = 0, monitor = FALSE, seed = 1)
  weights_before <- model$get_weights()

  small <- gpu_quantize(model, "int8", data = iris_data, batch_size = 50)
  expect_s3_class(small, "gpukeras_quantized", exact = TRUE)
  expect_identical(small$mode, "int8")
  floats <- (4 * 32 + 32 + 32 * 3 + 3) * 4
  expect_equal(small$bytes_before, floats)
  expect_equal(small$size_before, c(float32 = floats))
  # int8 kernels + float32 scales and biases.
  expect_equal(small$size_after, c(float32 = (32 + 32 + 3 + 3) * 4, int8 = 4 * 32 + 32 * 3))
  expect_equal(small$bytes_after, sum(small$size_after))
  expect_identical(small$layers$layer, c("hidden", "out"))
  expect_identical(small$layers$quantized, c(TRUE, TRUE))
  expect_identical(c(small$layers_quantized, small$layers_kept), c(2L, 0L))
  expect_identical(small$metrics$metric, c("accuracy", "loss"))
  expect_equal(small$metrics$change, small$metrics$after - small$metrics$before)
  expect_lt(abs(small$metrics$change[1]), 0.05)
  expect_lt(small$output_max_abs_diff, 0.05)

  lines <- format(small)
  expect_match(lines[1], "^<gpukeras quantized model> int8, for inference \\((tensorflow|jax) backend\\)$")
  expect_match(
    lines[2], "^Weights: 1\\.0 KiB -> 504 B \\(2\\.1x smaller\\): float32 1\\.0 KiB -> float32 280 B \\+ int8 224 B$"
  )
  expect_identical(lines[3], "Layers:  2 quantized (Dense), 0 kept as they were")
  expect_match(lines[4], "^Metrics: accuracy [0-9.]+ -> [0-9.]+ \\([-+0-9.e]+\\); loss ")
  expect_match(lines[5], "^Outputs: differ by ")
  expect_output(print(small), "the original model is unchanged", fixed = TRUE)

  # The copy predicts; the original keeps its float32 weights.
  predicted <- small$model$predict(gpu_as_numpy(as.matrix(iris[1:5, 1:4])), verbose = 0L)
  expect_identical(dim(predicted), c(5L, 3L))
  expect_identical(small$model$layers[[1]]$kernel$dtype, "int8")
  expect_identical(model$layers[[1]]$kernel$dtype, "float32")
  expect_identical(model$layers[[1]]$dtype_policy$name, "float32")
  expect_identical(model$get_weights(), weights_before)

  # Without data: the size only. int4 packs two weights per byte, but its
  # per-channel scales, zero points and index outweigh that in layers this small.
  int4 <- gpu_quantize(model, "int4")
  expect_equal(int4$size_after[["int8"]], 4 * 32 / 2 + 32 * 4 / 2 + 32 + 3)
  expect_null(int4$metrics)
  expect_null(int4$output_max_abs_diff)
  expect_match(format(int4), "Accuracy: not measured", fixed = TRUE, all = FALSE)
})

test_that("gpu_quantize() refuses modes and models it cannot quantize for inference, with classed errors", {
  skip_if_no_python()
  keras <- gpu_keras()
  model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(2L)))
  expect_error(
    gpu_quantize(model, "float8"),
    "float8 in Keras 3 is for training",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_quantize(model, "int2"),
    "mode must be 'int8' or 'int4' (for inference).",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  conv <- keras$Sequential(list(keras$Input(shape = list(6L, 6L, 1L)), keras$layers$Conv2D(2L, 3L)))
  expect_error(gpu_quantize(conv), "has no layer Keras can quantize", fixed = TRUE, class = "gpukeras_error_bad_model")
  expect_error(
    gpu_quantize(keras$layers$Dense(2L)),
    "model must be a Keras 3 model",
    fixed = TRUE,
    class = "gpukeras_error_bad_model"
  )
  expect_error(
    gpu_quantize(model, data = list(train = 1, validation = 2)),
    "`data` is a list with names `train`, `validation`", fixed = TRUE, class = "gpukeras_error_bad_data"
  )
})
