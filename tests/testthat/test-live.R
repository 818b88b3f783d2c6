# The live line: in a non-interactive run (Rscript, a log), each epoch's line
# gives the host CPU and the input wait beside the loss.

test_that("a non-interactive gpu_fit() prints the monitor's figures in each epoch's line", {
  skip_if_no_python()
  call <- fresh_r_call(
    quote({
      keras <- gpu_keras()
      model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(1L)))
      model$compile(optimizer = "adam", loss = "mse")
      x <- matrix(stats::runif(2000), ncol = 4)
      fit <- gpu_fit(model, list(x = x, y = x %*% 1:4), epochs = 2, batch_size = 50, seed = 1)
      names(fit$history)
    }),
    character(), character(), list()
  )
  log <- withr::local_tempfile(fileext = ".log")
  columns <- callr::r(call$func, args = call$args, stdout = log, stderr = log, timeout = 180)
  lines <- grep("^10/10 - ", readLines(log), value = TRUE)
  expect_length(lines, 2L)
  expect_true(all(grepl(" - loss: [0-9.]+ - cpu_%: [0-9.]+ - input_wait_%: [0-9.]+", lines)))
  expect_identical(columns, c("epoch", "loss"))
})
