# gpu_as_numpy() returns a NumPy array that reticulate does not convert back
# on access; these read its attributes and values as R values.
py_value <- function(x) reticulate::py_to_r(x)
dtype_of <- function(a) py_value(a$dtype$name)
shape_of <- function(a) unlist(py_value(a$shape))

test_that("gpu_as_numpy() keeps a matrix's shape and R's indexing", {
  skip_if_no_python()
  x <- matrix(1:6, nrow = 2)
  a <- gpu_as_numpy(x)
  expect_s3_class(a, "numpy.ndarray")
  expect_identical(dtype_of(a), "int32")
  expect_identical(shape_of(a), c(2L, 3L))
  # R's x[i, j] is Python's a[i - 1, j - 1].
  expect_identical(py_value(a$item(1L, 2L)), x[2, 3])
  expect_identical(py_value(a$item(0L, 1L)), x[1, 2])
  expect_true(py_value(a$flags$c_contiguous))
  expect_identical(py_value(a), x)
})

test_that("gpu_as_numpy() keeps a 3-d array's index semantics", {
  skip_if_no_python()
  x <- array(seq_len(24) * 1.5, dim = c(2, 3, 4))
  a <- gpu_as_numpy(x)
  expect_identical(dtype_of(a), "float32")
  expect_identical(shape_of(a), c(2L, 3L, 4L))
  expect_identical(py_value(a$item(1L, 2L, 3L)), x[2, 3, 4])
  expect_identical(py_value(a$item(1L, 0L, 2L)), x[2, 1, 3])
  expect_identical(py_value(a$item(0L, 2L, 1L)), x[1, 3, 2])
  expect_true(py_value(a$flags$c_contiguous))
  expect_identical(py_value(a$astype("float64")), x)
})

test_that("gpu_as_numpy() picks float32 for doubles and int32 for integers", {
  skip_if_no_python()
  doubles <- gpu_as_numpy(c(0.5, 2, -3))
  expect_identical(dtype_of(doubles), "float32")
  expect_identical(shape_of(doubles), 3L)
  expect_identical(as.vector(py_value(doubles$astype("float64"))), c(0.5, 2, -3))
  expect_identical(dtype_of(gpu_as_numpy(1:3)), "int32")
  logicals <- gpu_as_numpy(c(TRUE, FALSE))
  expect_identical(dtype_of(logicals), "float32")
  expect_identical(as.vector(py_value(logicals$astype("float64"))), c(1, 0))
  expect_identical(dtype_of(gpu_as_numpy(1:3, dtype = "float64")), "float64")
  expect_identical(dtype_of(gpu_as_numpy(c(1, 2), dtype = "int32")), "int32")
})

test_that("gpu_as_numpy() turns a factor into int32 codes starting at 0", {
  skip_if_no_python()
  f <- factor(c("b", "a", "c", "a"))
  a <- gpu_as_numpy(f)
  expect_identical(dtype_of(a), "int32")
  expect_identical(as.vector(py_value(a)), c(1L, 0L, 2L, 0L))
  expect_identical(as.vector(py_value(a)), as.integer(f) - 1L)
})

test_that("gpu_as_numpy() output trains a Keras 3 model", {
  skip_if_no_python()
  keras <- gpu_keras()
  x <- matrix(seq(-1, 1, length.out = 64), ncol = 4)
  y <- factor(rep(c("no", "yes"), 8))
  model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(2L)))
  model$compile(
    optimizer = "sgd",
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE)
  )
  history <- model$fit(gpu_as_numpy(x), gpu_as_numpy(y), epochs = 2L, batch_size = 8L, verbose = 0L)
  loss <- unlist(history$history$loss)
  expect_length(loss, 2)
  expect_true(all(is.finite(loss)))
})

test_that("gpu_as_numpy() rejects data it cannot convert, with the position of an NA", {
  expect_error(
    gpu_as_numpy(c(1, 2, NA, 4, NaN)),
    "`x` has 2 NA/NaN value\\(s\\), the first at position 3",
    class = "gpukeras_error_bad_data"
  )
  expect_error(gpu_as_numpy(matrix(c(1, NA), 1)), "first at position 2", class = "gpukeras_error_bad_data")
  expect_error(gpu_as_numpy(factor(c("a", NA))), "first at position 2", class = "gpukeras_error_bad_data")
  expect_error(
    gpu_as_numpy(c("a", "b")),
    "`x` must be a numeric vector, matrix or array, not a character of length 2.*factor codes",
    class = "gpukeras_error_bad_data"
  )
  expect_error(gpu_as_numpy(numeric()), "`x` is empty", class = "gpukeras_error_bad_data")
  expect_error(gpu_as_numpy(matrix(numeric(), 0, 3)), "`x` is empty", class = "gpukeras_error_bad_data")
  expect_error(
    gpu_as_numpy(data.frame(a = 1:2, b = 3:4)),
    "not a data.frame of length 2",
    class = "gpukeras_error_bad_data"
  )
  expect_error(gpu_as_numpy(list(1, 2)), "not a list of length 2", class = "gpukeras_error_bad_data")
  expect_error(gpu_as_numpy(NULL), "not NULL", class = "gpukeras_error_bad_data")
  expect_error(gpu_as_numpy(1i), "must be a numeric", class = "gpukeras_error_bad_data")
})

test_that("gpu_as_numpy() rejects a bad dtype with a classed error", {
  expect_error(
    gpu_as_numpy(1:3, dtype = 32), "`dtype` must be one non-empty string", class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_as_numpy(1:3, dtype = ""), "`dtype` must be one non-empty string", class = "gpukeras_error_bad_argument"
  )
  skip_if_no_python()
  expect_error(
    gpu_as_numpy(1:3, dtype = "float33"),
    "could not be converted to NumPy dtype 'float33'.*not understood",
    class = "gpukeras_error_bad_argument"
  )
})

test_that("the hand-over is one aligned, C-contiguous copy the core makes: float32 features, int32 or float32 labels", {
  skip_if_no_python()
  np <- reticulate::import("numpy", convert = FALSE)
  is_handed_over <- function(a, dtype) {
    expect_identical(dtype_of(a), dtype)
    expect_true(py_value(a$flags$c_contiguous))
    expect_identical(py_value(a$ctypes$data) %% 64, 0) # TensorFlow's tensors can share it
  }
  x <- matrix(seq(0.25, 15, by = 0.25), nrow = 20)
  data <- to_numpy(as_pipeline_data(x, 1:20, "error"))
  is_handed_over(data$x, "float32")
  expect_identical(py_value(data$x$astype("float64")), x)
  expect_false(py_value(np$shares_memory(data$x, reticulate::r_to_py(x)))) # a copy, not R's memory
  is_handed_over(data$y, "int32")
  expect_identical(shape_of(data$y), 20L)
  expect_identical(as.vector(py_value(data$y)), 1:20)

  images <- array(as.double(1:120), c(5, 4, 3, 2))
  inputs <- list(images = images, counts = matrix(1:10, 5), flags = matrix(c(TRUE, FALSE), 5, 2))
  data <- to_numpy(as_pipeline_data(inputs, c(0.5, 1, 1.5, 2, 2.5), "error"))
  expect_named(data$x, names(inputs))
  for (name in names(inputs)) is_handed_over(data$x[[name]], "float32")
  expect_identical(py_value(data$x$images$item(1L, 2L, 0L, 1L)), images[2, 3, 1, 2])
  expect_identical(py_value(data$x$counts$astype("float64")), matrix(as.double(1:10), 5))
  expect_identical(py_value(data$x$flags$astype("float64")), matrix(c(1, 0), 5, 2))
  is_handed_over(data$y, "float32")
  expect_identical(as.vector(py_value(data$y$astype("float64"))), c(0.5, 1, 1.5, 2, 2.5))
  is_handed_over(to_numpy(as_pipeline_data(x, factor(rep(c("a", "b"), 10)), "error"))$y, "int32")
  is_handed_over(to_numpy(as_pipeline_data(x, rep(c(TRUE, FALSE), 10), "error"))$y, "float32")
  expect_null(to_numpy(as_pipeline_data(x, NULL, "error"))$y)
})

test_that("NA is found in the core's copy and named by column, with its rows in the error's fields", {
  skip_if_no_python()
  x <- matrix(seq_len(40) / 4, 10, dimnames = list(NULL, c("a", "b", "c", "d")))
  x[c(4, 7), "c"] <- NA
  data <- as_pipeline_data(x, seq(0.5, 5, by = 0.5), "error")
  expect_identical(data$check_missing$columns, list(x = c("a", "b", "c", "d"))) # how the core names them
  error <- expect_error(
    to_numpy(data), "NA/NaN in 2 row\\(s\\) \\(first: 4, 7\\), in x\\$c\\.", class = "gpukeras_error_missing_values"
  )
  expect_identical(list(error$column, error$rows, error$n_rows), list("x$c", c(4L, 7L), 2L))
  expect_s3_class(error, "gpukeras_error_bad_data")
  expect_error(
    to_numpy(as_pipeline_data(x[, -3], c(1:9, NaN), "error")),
    "\\(first: 10\\), in y\\.",
    class = "gpukeras_error_missing_values"
  )
  expect_error( # in a pipeline's copy too, split or not
    gpu_dataset(x, 1:10, validation_split = 0.3, seed = 1),
    "NA/NaN in 2 row\\(s\\) \\(first: 4, 7\\), in x\\$c\\.", class = "gpukeras_error_missing_values"
  )
  # R's integers, logicals and integer labels: their NA (not a NaN in a float32 copy) found by the core too
  expect_error(
    to_numpy(as_pipeline_data(matrix(c(1:3, NA), 2), 1:2, "error")), "\\(first: 2\\), in x\\$column 2\\.",
    class = "gpukeras_error_missing_values"
  )
  expect_error(
    to_numpy(as_pipeline_data(matrix(c(TRUE, NA), 2), 1:2, "error")), "\\(first: 2\\), in x\\$column 1\\.",
    class = "gpukeras_error_missing_values"
  )
  expect_error(
    to_numpy(as_pipeline_data(x[, -3], c(1L, NA, 3:10), "error")), "\\(first: 2\\), in y\\.",
    class = "gpukeras_error_missing_values"
  )
  dropped <- to_numpy(as_pipeline_data(x, 1:10, "drop")) # the core drops the rows with NA as it takes them
  expect_identical(as.vector(reticulate::py_to_r(dropped$y)), c(1:3, 5:6, 8:10))
  expect_identical(count_rows(dropped$x), 8L)
  expect_equal(reticulate::py_to_r(dropped$x), x[c(1:3, 5:6, 8:10), ], tolerance = 1e-6, ignore_attr = TRUE)
  expect_identical(attr(gpu_dataset(x, 1:10, na = "drop"), "gpukeras")$dropped_rows, 2L)
})

test_that("Inf, -Inf and doubles beyond float32's range are found in the core's copy and named, whatever na says", {
  skip_if_no_python()
  x <- matrix(seq_len(40) / 4, 10, dimnames = list(NULL, c("a", "b", "c", "d")))
  x[4, "b"] <- Inf
  x[7, "d"] <- 1e300
  for (na in c("error", "drop")) {
    expect_error(
      to_numpy(as_pipeline_data(x, seq(0.5, 5, by = 0.5), na)),
      paste0(
        "Inf, -Inf or values beyond float32's range \\(about 3.4e\\+38\\) in 2 row\\(s\\) \\(first: 4, 7\\), in ",
        "x\\$b, x\\$d\\."
      ),
      class = "gpukeras_error_bad_data"
    )
  }
  expect_error(
    gpu_dataset(x[, c("a", "c")], c(1:9, -Inf)), "\\(first: 10\\), in y\\.", class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(x[, c("a", "c")], 1:10, validation_split = 0.3, seed = 1, sample_weight = c(1, 3e38 * 10, rep(1, 8))),
    "\\(first: 2\\), in sample_weight\\.", class = "gpukeras_error_bad_data"
  )
  edge <- x[, c("a", "c")]
  edge[1, 1] <- -3.4e38 # within float32's range: kept
  expect_s3_class(gpu_dataset(edge, 1:10), "gpukeras_dataset")
})

test_that("a fit and a prediction refuse infinite values before training, naming rows and columns", {
  skip_if_no_python()
  keras <- gpu_keras()
  model <- keras$Sequential(list(keras$Input(shape = list(2L)), keras$layers$Dense(1L)))
  model$compile(optimizer = "sgd", loss = "mse")
  x <- cbind(income = c(1, 2, Inf, 4), age = 1:4)
  expect_snapshot(error = TRUE, gpu_fit(model, list(x = x, y = c(1, 2, 3, 4)), epochs = 1, verbose = 0))
  fit <- gpu_fit(model, list(x = x[-3, ], y = c(1, 2, 4)), epochs = 1, verbose = 0)
  expect_error(
    predict(fit, rbind(x[-3, ], c(income = -1e39, age = 1))),
    "\\(first: 4\\), in x\\$income\\.",
    class = "gpukeras_error_bad_data"
  )
})
