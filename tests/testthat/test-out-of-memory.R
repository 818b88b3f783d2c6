# An allocation failure during gpu_fit() (issue #26, item 2): the R error is classed
# (gpukeras_error_out_of_memory), says what took the memory and which changes would fit,
# carries the plan, and the session and the model live on. The failure is a double: a
# Keras callback raising TensorFlow's own ResourceExhaustedError with its own text in a
# real fit (the Python tests do the same for JAX's XlaRuntimeError).

exhausting_callback <- function() {
  main <- reticulate::py_run_string(paste(
    "import keras, tensorflow as tf",
    "class Exhausted(keras.callbacks.Callback):",
    "    def on_train_batch_begin(self, batch, logs=None):",
    "        if batch == 2:",
    paste0(
      "            raise tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating tensor with ",
      "shape[64,65536] RESOURCE_EXHAUSTED: Out of memory')"
    ),
    sep = "\n"
  ))
  main$Exhausted()
}

test_that("an allocation failure in gpu_fit() is classed, carries the plan, and the model trains on", {
  skip_if_no_python()
  skip_if_not(identical(gpu_keras()$backend$backend(), "tensorflow"), "the Keras backend is not tensorflow")
  model <- tiny_model()
  data <- regression_data(256)
  expect_snapshot(
    error = TRUE,
    gpu_fit(
      model,
      data,
      batch_size = 64,
      callbacks = exhausting_callback(),
      step = gpu_step(steps_per_execution = 1),
      verbose = 0,
      monitor = FALSE
    ),
    # layer names are numbered by how many layers the session made before (dense_16)
    transform = function(lines) gsub("(dense)_[0-9]+", "\\1", gsub("[0-9.]+ (KiB|MiB)", "<size>", lines))
  )
  error <- tryCatch(
    gpu_fit(
      model,
      data,
      batch_size = 64,
      callbacks = exhausting_callback(),
      step = gpu_step(steps_per_execution = 1),
      verbose = 0,
      monitor = FALSE
    ),
    gpukeras_error_out_of_memory = function(e) e
  )
  expect_s3_class(error, "gpukeras_error")
  expect_equal(error$plan$batch_size, 64)
  expect_setequal(
    vapply(error$plan$changes, function(row) row$change, character(1)),
    c("a smaller batch", "mixed precision", "accumulation", "rematerialization")
  )
  fit <- gpu_fit(model, data, batch_size = 64, verbose = 0, monitor = FALSE)
  expect_s3_class(fit, "gpukeras_fit")
  expect_true(all(is.finite(predict(fit, data$x))))
})
