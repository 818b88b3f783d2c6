# Multi-worker training the way R users run it: two R sessions on 127.0.0.1,
# started by gpu_launch(), each calling gpu_strategy("multi_worker") first and then the
# same gpu_fit(). The engine's failure cases (a killed or frozen worker,
# resuming from backups) are tested with Python workers in
# python/tests/test_multiworker.py.

mark_slow()

test_that("two R workers started by gpu_launch() train the digits model in step to identical weights", {
  skip_if_no_python()
  skip_on_os("windows")
  # gpu_launch() describes the cluster to each worker (TF_CONFIG), so
  # gpu_strategy("multi_worker") needs no workers there.
  call <- fresh_r_call(
    quote({
      strategy <- gpu_strategy("multi_worker")
      keras <- gpu_keras()
      digits <- utils::read.csv(system.file("extdata", "digits.csv.gz", package = "gpukeras"), header = FALSE)
      keras$utils$set_random_seed(3L)
      model <- keras$Sequential(list(
        keras$Input(shape = list(64L)),
        keras$layers$Dense(32L, activation = "relu"),
        keras$layers$Dense(10L, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
      fit <- gpu_fit(
        model, list(x = as.matrix(digits[, 1:64]) / 16, y = digits[[65]]),
        epochs = 3, batch_size = 64, seed = 1, verbose = 0, strategy = strategy
      )
      list(
        printed_strategy = format(strategy),
        sockets = listening_sockets(),
        weights = lapply(model$get_weights(), as.vector),
        history = fit$history,
        strategy = fit$settings$strategy,
        printed = format(fit),
        wrong_option = catch_error(gpu_fit(model, list(x = as.matrix(digits[, 1:64]) / 16, y = digits[[65]]),
          step = gpu_step(steps_per_execution = 4), strategy = strategy, verbose = 0
        ))
      )
    }),
    character(), character(), list()
  )
  results <- gpu_launch(call$func, workers = 2, args = call$args, timeout = 240, quiet = TRUE)
  chief <- results[[1]]
  other <- results[[2]]
  expect_identical(
    chief$printed_strategy[1], "<gpukeras strategy> multi_worker (MultiWorkerMirroredStrategy, tensorflow): 2 replicas"
  )
  expect_match(chief$printed_strategy[3], "this is worker 0 \\(the chief\\)$")
  expect_match(other$printed_strategy[3], "this is worker 1$")
  expect_identical(chief$printed_strategy[4], "Cluster from: TF_CONFIG")
  # gpu_launch()'s private network: TensorFlow listens, but no other host or process reaches it.
  expect_match(chief$printed_strategy[5], "^Who can reach its ports: only these workers")
  for (result in results) {
    expect_gt(length(result$sockets), 0L)
    expect_true(all(vapply(result$sockets, function(s) s$private, logical(1))))
  }
  expect_identical(chief$weights, other$weights)
  expect_identical(chief$history, other$history)
  expect_identical(chief$history$epoch, 1:3)
  expect_lt(chief$history$loss[3], chief$history$loss[1])
  expect_identical(chief$strategy$global_batch_size, 64L)
  expect_identical(chief$strategy$per_replica_batch_size, 32L)
  expect_true(any(grepl(
    "^Strategy: +multi_worker over .*\\(2 replicas\\); global batch 64 = 32 per replica$", chief$printed
  )))
  expect_true(any(grepl("^Network: +only these workers", chief$printed)))
  expect_identical(chief$wrong_option$class[1], "gpukeras_error_bad_argument")
  expect_match(chief$wrong_option$message, "Multi-worker training does not take steps_per_execution = 4")
})

test_that("TensorFlow workers on 127.0.0.1 outside a private network are refused before they listen", {
  skip_if_no_python()
  skip_on_os(c("windows", "mac"))
  skip_if(
    identical(trimws(sub(":.*", "", readLines("/proc/net/dev")[-(1:2)])), "lo"),
    "this machine's network has loopback alone"
  )
  workers <- paste(sprintf("127.0.0.1:%d", free_ports(2L)), collapse = ",")
  refused <- run_in_fresh_r(
    list(
      refused = catch_error(gpu_strategy(
        "multi_worker", workers = strsplit(Sys.getenv("TEST_WORKERS"), ",")[[1]], index = 0
      )),
      sockets = listening_sockets()
    ),
    env = c(KERAS_BACKEND = "tensorflow", TEST_WORKERS = workers)
  )
  expect_identical(refused$refused$class[1:2], c("gpukeras_error_network_exposed", "gpukeras_error"))
  expect_match(refused$refused$message, "listen on every network interface")
  expect_match(refused$refused$message, "trusted_network = TRUE", fixed = TRUE)
  expect_length(refused$sockets, 0L)
})
