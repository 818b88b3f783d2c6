# gpu_lr_find(): the learning-rate range test on a copy of the model.

mark_slow()

digits_data <- function() {
  digits <- utils::read.csv(system.file("extdata", "digits.csv.gz", package = "gpukeras"), header = FALSE)
  list(x = as.matrix(digits[, 1:64]) / 16, y = digits[[65]])
}

digits_mlp <- function(learning_rate = 1e-3) {
  keras <- gpu_keras()
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(64L)),
    keras$layers$Dense(32L, activation = "relu"),
    keras$layers$Dense(10L, activation = "softmax")
  ))
  model$compile(
    optimizer = keras$optimizers$Adam(learning_rate),
    loss = "sparse_categorical_crossentropy",
    metrics = list("accuracy")
  )
  model
}

test_that("gpu_lr_find() suggests a rate in the range, leaves the model alone, and prints and plots", {
  skip_if_no_python()
  data <- digits_data()
  model <- digits_mlp()
  before <- lapply(model$get_weights(), as.vector)
  found <- gpu_lr_find(model, data, min_lr = 1e-5, max_lr = 10, steps = 60, seed = 1)
  expect_s3_class(found, "gpukeras_lr_find")
  expect_named(found$history, c("lr", "loss", "smoothed"))
  expect_gte(nrow(found$history), 20)
  expect_true(all(diff(found$history$lr) > 0))
  expect_named(found$suggested, c("valley", "steepest", "minimum"))
  expect_true(found$lr >= 1e-5 && found$lr <= 10)
  expect_identical(lapply(model$get_weights(), as.vector), before)
  printed <- format(found)
  expect_match(printed[1], "^<gpukeras lr_find> \\d+ of 60 steps, learning rate 1e-05 to 1e\\+01 \\(Adam, ")
  expect_match(printed[3], "^Suggested: .* \\(valley\\); steepest .*; minimum/10 ")
  path <- withr::local_tempfile(fileext = ".png")
  grDevices::png(path)
  expect_identical(plot(found), found)
  grDevices::dev.off()
  expect_gt(file.size(path), 1000)

  # Training at the suggested rate converges.
  trained <- digits_mlp(found$lr)
  fit <- gpu_fit(trained, data, epochs = 5, batch_size = 32, seed = 1, verbose = 0, monitor = FALSE)
  expect_lt(utils::tail(fit$history$loss, 1), fit$history$loss[1])
  expect_gt(utils::tail(fit$history$accuracy, 1), 0.85)
})

test_that("bad input to gpu_lr_find() gets a classed error before Python starts", {
  cases <- list(
    list(args = list(min_lr = 0), message = "`min_lr` must be one positive number"),
    list(args = list(min_lr = 1, max_lr = 0.5), message = "`max_lr` \\(0.5\\) must be greater than `min_lr` \\(1\\)"),
    list(args = list(steps = 5), message = "`steps` must be a whole number >= 10"),
    list(args = list(stop_factor = 1), message = "`stop_factor` must be greater than 1"),
    list(args = list(smoothing = 1), message = "`smoothing` must be one number in \\[0, 1\\)"),
    list(args = list(seed = -1), message = "`seed` must be one whole number >= 0")
  )
  for (case in cases) {
    expect_error(
      do.call(gpu_lr_find, c(list(model = NULL, data = list(x = matrix(1:4, 2), y = 1:2)), case$args)),
      case$message,
      class = "gpukeras_error_bad_argument"
    )
  }
  expect_error(gpu_lr_find(NULL), "`data` is missing", class = "gpukeras_error_bad_argument")
})
