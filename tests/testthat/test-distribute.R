test_that("bad gpu_strategy() arguments are classed errors raised before Python starts", {
  child <- run_in_fresh_r({
    list(
      type = catch_error(gpu_strategy("ring")),
      devices = catch_error(gpu_strategy(devices = "TPU:0")),
      workers = catch_error(gpu_strategy("multi_worker", workers = c("localhost", "b:1"))),
      index = catch_error(gpu_strategy("multi_worker", workers = "a:1", index = -1)),
      fit_strategy = catch_error(gpu_fit(NULL, list(x = matrix(1, 2, 2), y = 1:2), strategy = "mirrored")),
      scope = catch_error(with_gpu_strategy(list(), 1)),
      started = reticulate::py_available(initialize = FALSE)
    )
  })
  expect_false(child$started)
  expect_bad <- function(error, pattern) {
    expect_identical(
      error$class, c("gpukeras_error_bad_argument", "gpukeras_error", "rlang_error", "error", "condition")
    )
    expect_match(error$message, pattern)
  }
  expect_bad(child$type, "^`type` must be one of \"auto\", \"one_device\", \"mirrored\", \"multi_worker\", not `ring`")
  expect_bad(child$devices, "^`devices` must be GPU indices")
  expect_bad(child$workers, "^`workers` must be \"host:port\" strings")
  expect_bad(child$index, "^`index` must be one whole number >= 0")
  expect_bad(child$fit_strategy, "^`strategy` must be a gpu_strategy\\(\\)")
  expect_bad(child$scope, "^`strategy` must be a gpu_strategy\\(\\)")
})

test_that("mirrored over two logical CPUs matches one device for the same batches, and says which batch is which", {
  skip_if_no_python()
  child <- run_in_fresh_r({
    gpu_setup(cpu_devices = 2)
    keras <- gpu_keras()
    new_model <- function() {
      keras$utils$set_random_seed(2L)
      model <- keras$Sequential(list(
        keras$Input(shape = list(4L)),
        keras$layers$Dense(8L, activation = "relu"),
        keras$layers$Dense(3L, activation = "softmax")
      ))
      model$compile(
        optimizer = keras$optimizers$SGD(learning_rate = 0.1),
        loss = "sparse_categorical_crossentropy", metrics = list("accuracy")
      )
      model
    }
    x <- scale(as.matrix(iris[, 1:4]))
    batches <- function() gpu_dataset(x, iris$Species, batch_size = 30, shuffle = FALSE)
    single <- new_model()
    one <- gpu_fit(single, batches(), epochs = 4, verbose = 0)
    strategy <- gpu_strategy("mirrored")
    replicated <- new_model()
    two <- gpu_fit(replicated, batches(), epochs = 4, verbose = 0, strategy = strategy)
    inside <- with_gpu_strategy(strategy, new_model())
    gpu_fit(inside, batches(), epochs = 4, verbose = 0, strategy = strategy)
    difference <- function(a, b) max(mapply(function(u, v) max(abs(u - v)), a$get_weights(), b$get_weights()))
    list(
      printed_strategy = format(strategy),
      replicas = strategy$replicas,
      settings = two$settings$strategy,
      printed_fit = format(two),
      loss_one = one$history$loss,
      loss_two = two$history$loss,
      difference = difference(single, replicated),
      inside_difference = difference(single, inside),
      unknown = catch_error(gpu_strategy(devices = "CPU:5")),
      no_workers = catch_error(gpu_strategy("mirrored", workers = "127.0.0.1:2222", index = 0))
    )
  })
  expect_identical(child$printed_strategy, c(
    "<gpukeras strategy> mirrored (MirroredStrategy, tensorflow): 2 replicas",
    "Devices: CPU:0, CPU:1"
  ))
  expect_identical(child$settings$global_batch_size, 30L)
  expect_identical(child$settings$per_replica_batch_size, 15L)
  expect_true(any(grepl(
    "^Strategy: +mirrored over CPU:0, CPU:1 \\(2 replicas\\); global batch 30 = 15 per replica$",
    child$printed_fit
  )))
  expect_lt(child$difference, 1e-5)
  expect_lt(child$inside_difference, 1e-5)
  expect_equal(child$loss_two, child$loss_one, tolerance = 1e-5)
  expect_lt(child$loss_two[4], child$loss_two[1])
  expect_identical(child$unknown$class[1], "gpukeras_error_unknown_device")
  expect_match(child$unknown$message, "^No such device: CPU:5. Devices here: CPU:0, CPU:1")
  expect_identical(child$no_workers$class[1], "gpukeras_error_bad_argument")
  expect_match(child$no_workers$message, "workers and index are for type = \"multi_worker\"")
})
