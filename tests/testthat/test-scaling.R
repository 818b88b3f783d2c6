# gpu_scaling() (issue #27, item 3): one device against two logical CPU devices, in a fresh
# R process (gpu_setup(cpu_devices = 2) must come before Python starts).

test_that("gpu_scaling() on two logical CPU devices: efficiency from the runs, advice below 0.8, print and plot", {
  skip_if_no_python()
  mark_slow()
  out <- run_in_fresh_r({
    gpu_setup(cpu_devices = 2)
    keras <- gpu_keras()
    keras$utils$set_random_seed(1L)
    model <- keras$Sequential(list(
      keras$Input(shape = list(4L)),
      keras$layers$Dense(16L, activation = "relu"),
      keras$layers$Dense(3L, activation = "softmax")
    ))
    model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
    before <- lapply(model$get_weights(), as.vector)
    data <- list(x = as.matrix(iris[rep(1:150, 4), 1:4]), y = iris$Species[rep(1:150, 4)])
    scaling <- gpu_scaling(model, data, batch_size = 32, rounds = 1)
    pdf(NULL)
    plot(scaling)
    dev.off()
    list(
      scaling = unclass(scaling), text = format(scaling),
      unchanged = identical(before, lapply(model$get_weights(), as.vector))
    )
  }, timeout = 400)
  s <- out$scaling
  expect_identical(s$replicas, 2L)
  expect_identical(s$devices, c("CPU:0", "CPU:1"))
  expect_identical(s$runs$devices, c(1L, 2L))
  best <- s$runs$samples_per_second
  expect_equal(s$efficiency, best[2] / (2 * best[1]))
  expect_identical(s$per_replica_batch_size, 16L)
  expect_identical(length(s$advice) > 0, s$efficiency < 0.8)
  expect_match(out$text[1], sprintf("efficiency %.2f", s$efficiency), fixed = TRUE)
  expect_true(out$unchanged)
})

test_that("gpu_scaling() refuses what it cannot measure, naming the argument", {
  expect_snapshot(error = TRUE, {
    gpu_scaling("model", list(x = matrix(1, 4, 4), y = 1:4), devices = "GPU:0")
    gpu_scaling("model", list(x = matrix(1, 4, 4), y = 1:4), epochs = 1)
    gpu_scaling("model", list(x = matrix(1, 4, 4), y = 1:4), batch_size = 0)
  })
})
