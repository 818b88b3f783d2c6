# gpu_cv()'s folds as one population on JAX: each fold the same as a separate gpu_fit() of
# its rows with its seed (held-out metrics and history within 1e-5 on a CPU), folds of
# unequal size exact, and a process per fold where the models differ or populations are off.

# One fresh R process on JAX for the file's two tests that need one (and its workers, kept
# as the session's spares between them).
jax_r <- shared_fresh_r()

test_that("on JAX the folds train as one population, each the same as its own gpu_fit(); turned off, a process each", {
  mark_slow()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  result <- jax_r({
    made <- tempfile() # a line for each model_fn() call, the worker's too
    model_fn <- function() {
      cat("made\n", file = made, append = TRUE)
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = 4), keras$layers$Dense(8, activation = "relu"), keras$layers$Dropout(0.2),
        keras$layers$Dense(3, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
      model
    }
    # 149 rows in 3 folds: training rows of unequal counts, last batches of several sizes
    data <- list(x = as.matrix(iris[-1, 1:4]), y = iris$Species[-1])
    cv <- gpu_cv(model_fn, data, folds = 3, epochs = 2, batch_size = 16, learning_rate = 0.01, seed = 5)
    built <- length(readLines(made))
    by_hand <- lapply(seq_along(cv$folds), function(i) {
      held <- cv$folds[[i]]
      train <- setdiff(seq_len(149), held)
      keras <- gpu_keras()
      keras$utils$set_random_seed(cv$seeds[i])
      fit <- gpu_fit(model_fn(), list(x = data$x[train, ], y = data$y[train]),
        validation_data = list(x = data$x[held, ], y = data$y[held]), seed = cv$seeds[i],
        epochs = 2, batch_size = 16, learning_rate = 0.01, verbose = 0
      )
      list(metrics = evaluate(fit, data$x[held, ], data$y[held], batch_size = 16), history = as.data.frame(fit$history))
    })
    off <- gpu_cv(model_fn, data, folds = 3, epochs = 2, batch_size = 16, learning_rate = 0.01, seed = 5,
                  workers = gpu_workers(population = FALSE))
    # an LSTM's starting bias is no initializer's of its layer: the worker makes each fold's
    # model after the first, and the second fold's differs (4 units, not 8): not one architecture
    calls <- 0
    differing_fn <- function() {
      calls <<- calls + 1
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = 4), keras$layers$Reshape(c(2L, 2L)), keras$layers$LSTM(if (calls == 3) 4 else 8),
        keras$layers$Dense(3, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
      model
    }
    differing <- gpu_cv(differing_fn, data, folds = 3, epochs = 1, batch_size = 16, seed = 5)
    list(
      cv = unclass(cv), text = format(cv), by_hand = by_hand, off = unclass(off), differing = unclass(differing),
      built = built
    )
  }, env = c(KERAS_BACKEND = "jax"), timeout = 400)
  cv <- result$cv
  expect_identical(cv$trained, "population")
  expect_match(result$text[2], sprintf("as one population in a worker process: 3 on %s", worker_device()), fixed = TRUE)
  expect_identical(lengths(cv$folds), c(50L, 50L, 49L))
  # one model made for the 3 folds: the others' starting states drawn from their seeds
  expect_identical(result$built, 1L)
  for (i in 1:3) {
    hand <- result$by_hand[[i]]
    expect_equal(cv$metrics$loss[i], unname(hand$metrics[["loss"]]), tolerance = 1e-5)
    expect_equal(cv$metrics$accuracy[i], unname(hand$metrics[["accuracy"]]), tolerance = 1e-5)
    # the history per fold, its validation on the fold's held-out rows too
    expect_setequal(names(cv$history[[i]]), c("epoch", "loss", "accuracy", "val_loss", "val_accuracy"))
    expect_equal(cv$history[[i]][names(hand$history)], hand$history, tolerance = 1e-5)
  }
  expect_identical(dim(cv$predictions), c(149L, 3L))
  expect_false(anyNA(cv$predictions))

  off <- result$off
  expect_identical(off$trained, "processes")
  expect_match(off$trained_why, "population = FALSE", fixed = TRUE)
  expect_equal(off$metrics, cv$metrics, tolerance = 1e-5)
  expect_equal(off$predictions, cv$predictions, tolerance = 1e-5)
  # a process per fold, as before, validates nothing during training: the population's
  # history has its columns, and the held-out rows' after each epoch
  for (i in 1:3) expect_equal(off$history[[i]], cv$history[[i]][names(off$history[[i]])], tolerance = 1e-5)

  differing <- result$differing
  expect_identical(differing$trained, "processes")
  expect_match(differing$trained_why, "model 2's variables differ")
  expect_identical(nrow(differing$metrics), 3L)
})

test_that("gpu_workers(population = FALSE) turns populations off, whatever the backend", {
  decided <- cv_population_plan(gpu_workers(population = FALSE), list(epochs = 2), list(track = NULL))
  expect_false(decided$population)
  expect_match(decided$reason, "population = FALSE", fixed = TRUE)
})

test_that("a model that refuses the data fails its population as it fails a fit: a classed error, in its words", {
  mark_slow()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  result <- jax_r({
    model_fn <- function() {
      keras <- gpu_keras()
      model <- keras$Sequential(list(keras$Input(shape = 7), keras$layers$Dense(1)))
      model$compile(optimizer = "adam", loss = "mse")
      model
    }
    data <- list(x = matrix(seq_len(13 * 20) / 260, 20, 13), y = seq_len(20) / 20)
    tryCatch(
      gpu_cv(model_fn, data, folds = 2, epochs = 1, batch_size = 8, seed = 1, workers = 1),
      error = identity
    )
  }, env = c(KERAS_BACKEND = "jax"), timeout = 300)
  expect_s3_class(result, "gpukeras_error_bad_data")
  expect_s3_class(result, "gpukeras_error_cv_fold")
  expect_snapshot(raise_again(result), error = TRUE)
})
