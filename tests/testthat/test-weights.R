# Class and sample weights (issue #28, item 5): gpu_fit(class_weight = ) by the
# labels' levels or class numbers, sample weights with R data and gpu_dataset(),
# in the session and in a background job; weights weigh rows as Keras' own fit()
# (python/tests/test_weights.py compares with it on every path).

# 120 rows, a quarter of them "yes".
weights_data <- function() {
  x <- matrix(sin(seq_len(480) * 0.7), ncol = 4)
  y <- factor(ifelse(seq_len(120) %% 4 == 0, "yes", "no"), levels = c("no", "yes"))
  list(x = x, y = y)
}

weights_model <- function() {
  keras <- gpu_keras()
  keras$utils$set_random_seed(3L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L)),
    keras$layers$Dense(8L, activation = "relu"),
    keras$layers$Dense(2L, activation = "softmax")
  ))
  model$compile(optimizer = keras$optimizers$SGD(learning_rate = 0.1), loss = "sparse_categorical_crossentropy")
  model
}

# The trained weights of one gpu_fit() of a fresh model.
trained_weights <- function(data, ...) {
  model <- weights_model()
  gpu_fit(model, data, epochs = 2, seed = 4, verbose = 0, monitor = FALSE, ...)
  lapply(model$get_weights(), as.vector)
}

test_that("class_weight by level name, by class number and as sample weights train alike, and not as unweighted", {
  skip_if_no_python()
  data <- weights_data()
  by_name <- trained_weights(data, batch_size = 16, class_weight = c(no = 1, yes = 5))
  by_number <- trained_weights(data, batch_size = 16, class_weight = list("0" = 1, "1" = 5))
  as_rows <- trained_weights(c(data, list(sample_weight = ifelse(data$y == "yes", 5, 1))), batch_size = 16)
  through_dataset <- trained_weights(
    gpu_dataset(data$x, data$y, sample_weight = ifelse(data$y == "yes", 5, 1), batch_size = 16, seed = 4)
  )
  unweighted <- trained_weights(data, batch_size = 16)
  equal <- trained_weights(data, batch_size = 16, class_weight = c(no = 1, yes = 1))
  expect_equal(by_number, by_name, tolerance = 1e-6)
  expect_equal(as_rows, by_name, tolerance = 1e-6)
  expect_equal(equal, unweighted, tolerance = 1e-6)
  expect_false(isTRUE(all.equal(by_name, unweighted, tolerance = 1e-4)))
  expect_length(through_dataset, length(by_name))
})

test_that("a gpu_dataset() with sample weights gives elements of three parts and class_weight refuses it", {
  skip_if_no_python()
  data <- weights_data()
  made <- gpu_dataset(data$x, data$y, sample_weight = seq_len(120) / 120, batch_size = 16)
  expect_length(reticulate::py_to_r(reticulate::py_get_attr(made, "element_spec")), 3L)
  expect_error(
    gpu_fit(weights_model(), made, class_weight = c(no = 1, yes = 2), verbose = 0),
    class = "gpukeras_error_bad_argument"
  )
})

test_that("weights that cannot be used are classed errors that say what to give", {
  skip_if_no_python()
  data <- weights_data()
  model <- weights_model()
  expect_snapshot(error = TRUE, {
    gpu_fit(model, data, class_weight = c(1, 5))
    gpu_fit(model, data, class_weight = c(no = 1, maybe = 5))
    gpu_fit(model, data, class_weight = c(no = -1, yes = 5))
    gpu_fit(model, list(x = data$x, y = as.integer(data$y) - 1L), class_weight = c(no = 1))
    gpu_fit(model, c(data, list(sample_weight = rep(1, 119))))
    gpu_fit(model, list(x = data$x, sample_weight = rep(1, 120)))
    gpu_fit(model, c(data, list(sample_weight = letters[1:3])))
    gpu_fit(model, c(data, list(sample_weight = rep(1, 120))), class_weight = c(yes = 2), verbose = 0)
    gpu_dataset(tempdir(), sample_weight = 1)
  })
})

test_that("an NA weight is an NA row: an error that names it, or dropped with gpu_dataset(na = \"drop\")", {
  skip_if_no_python()
  data <- weights_data()
  weights <- c(NA, rep(1, 119))
  expect_error(
    gpu_fit(weights_model(), c(data, list(sample_weight = weights)), verbose = 0), class = "gpukeras_error_bad_data"
  )
  made <- gpu_dataset(data$x, data$y, sample_weight = weights, na = "drop", batch_size = 16)
  expect_identical(attr(made, "gpukeras")$dropped_rows, 1L)
})

test_that("a background fit carries the sample weights and the class weights", {
  skip_if_no_python()
  mark_slow()
  data <- c(weights_data(), list(sample_weight = ifelse(weights_data()$y == "yes", 5, 1)))
  here <- trained_weights(data, batch_size = 16)
  model <- weights_model()
  job <- gpu_fit(model, data, epochs = 2, batch_size = 16, seed = 4, verbose = 0, monitor = FALSE, background = TRUE)
  gpu_job_wait(job, timeout = 240)
  expect_equal(lapply(model$get_weights(), as.vector), here, tolerance = 1e-6)
  classed <- weights_model()
  job <- gpu_fit(classed, weights_data(), epochs = 2, batch_size = 16, seed = 4, verbose = 0, monitor = FALSE,
                 class_weight = c(no = 1, yes = 5), background = TRUE)
  gpu_job_wait(job, timeout = 240)
  expect_equal(lapply(classed$get_weights(), as.vector), here, tolerance = 1e-6)
})
