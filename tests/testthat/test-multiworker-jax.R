# Multi-worker training on JAX the way R users run it: two R sessions on 127.0.0.1,
# started by gpu_launch(), each calling gpu_strategy("multi_worker") first and then the
# same gpu_fit(). A killed worker and the match with one process are tested with Python
# workers in python/tests/test_jax_multiworker.py.

mark_slow()

test_that("two R workers on JAX started by gpu_launch() train in step to identical weights", {
  skip_if_no_python()
  skip_on_os("windows")
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  call <- fresh_r_call(
    quote({
      strategy <- gpu_strategy("multi_worker")
      keras <- gpu_keras()
      digits <- utils::read.csv(system.file("extdata", "digits.csv.gz", package = "gpukeras"), header = FALSE)
      digits <- digits[1:1792, ] # 28 whole batches of 64: every batch splits over the workers
      # Each worker builds its model from its own seed: training starts from the chief's weights.
      keras$utils$set_random_seed(as.integer(Sys.getenv("GPUKERAS_WORKER_INDEX")) + 3L)
      model <- keras$Sequential(list(
        keras$Input(shape = list(64L)),
        keras$layers$Dense(32L, activation = "relu"),
        keras$layers$Dense(10L, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
      data <- list(x = as.matrix(digits[, 1:64]) / 16, y = digits[[65]])
      fit <- gpu_fit(model, data, epochs = 2, batch_size = 64, seed = 1, verbose = 0, strategy = strategy)
      list(
        printed_strategy = format(strategy),
        sockets = listening_sockets(),
        weights = lapply(model$get_weights(), as.vector),
        history = fit$history,
        strategy = fit$settings$strategy,
        uneven = catch_error(gpu_fit(model, list(x = data$x[1:100, ], y = data$y[1:100]),
          batch_size = 64, strategy = strategy, verbose = 0
        ))
      )
    }),
    c(KERAS_BACKEND = "jax"), character(), list()
  )
  results <- gpu_launch(call$func, workers = 2, args = call$args, timeout = 240, quiet = TRUE)
  chief <- results[[1]]
  other <- results[[2]]
  expect_identical(chief$printed_strategy[1], "<gpukeras strategy> multi_worker (DataParallel, jax): 2 replicas")
  expect_match(chief$printed_strategy[3], "this is worker 0 \\(the chief\\)$")
  expect_match(other$printed_strategy[3], "this is worker 1$")
  expect_identical(chief$printed_strategy[4], "Cluster from: TF_CONFIG (worker 0 of 2)")
  expect_match(chief$printed_strategy[5], "^Who can reach its ports: only these workers")
  for (result in results) {
    expect_gt(length(result$sockets), 0L)
    # In gpu_launch()'s private network, and bound to loopback besides.
    expect_true(all(vapply(result$sockets, function(s) s$private && s$loopback, logical(1))))
  }
  expect_identical(chief$weights, other$weights)
  expect_identical(chief$history, other$history)
  expect_identical(chief$history$epoch, 1:2)
  expect_lt(chief$history$loss[2], chief$history$loss[1])
  expect_identical(chief$strategy$global_batch_size, 64L)
  expect_identical(chief$strategy$per_replica_batch_size, 32L)
  expect_identical(chief$uneven$class[1], "gpukeras_error_bad_argument")
  expect_match(chief$uneven$message, "a last one of 36 rows")
})
