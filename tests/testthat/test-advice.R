# Messages that name the fix, and the smaller things a new user trips on (issue #28).

test_that("gpu_fit(validation_split = ) says to split in gpu_dataset(); other unknown arguments are named", {
  expect_snapshot(gpu_fit(NULL, list(x = 1, y = 1), validation_split = 0.2), error = TRUE)
  expect_snapshot(gpu_fit(NULL, matrix(1, 2, 2), y = 1:2, shufle = TRUE), error = TRUE)
  error <- tryCatch(gpu_fit(NULL, list(x = 1, y = 1), validation_split = 0.2), error = identity)
  expect_s3_class(error, "gpukeras_error_bad_argument")
  expect_true("..." %in% not_requested) # `...` is no field of the fit request
})

test_that("gpu_fit()'s NA error names gpu_dataset(na = \"drop\"), not an `na` gpu_fit() does not have", {
  skip_if_no_python()
  data <- regression_data(20)
  data$x[3, 2] <- NA
  expect_snapshot(gpu_fit(tiny_model(), data, verbose = 0), error = TRUE)
  # Integer labels are checked in R (the core checks doubles): the same advice.
  expect_snapshot(gpu_fit(tiny_model(), list(x = matrix(1, 4, 4), y = c(1L, NA, 0L, 1L)), verbose = 0), error = TRUE)
  # gpu_dataset() has `na`: its message says to pass it.
  expect_snapshot(gpu_dataset(data$x, data$y), error = TRUE)
})
