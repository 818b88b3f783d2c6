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
  expect_error(gpu_as_numpy(1:3, dtype = 32), "`dtype` must be one non-empty string", class = "gpukeras_error_bad_argument")
  expect_error(gpu_as_numpy(1:3, dtype = ""), "`dtype` must be one non-empty string", class = "gpukeras_error_bad_argument")
  skip_if_no_python()
  expect_error(
    gpu_as_numpy(1:3, dtype = "float33"),
    "could not be converted to NumPy dtype 'float33'.*not understood",
    class = "gpukeras_error_bad_argument"
  )
})
