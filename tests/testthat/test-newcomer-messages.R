# What a newcomer tripped on (issue #59, item 7): a model given where gpu_cv() wants the
# function that builds it, a character matrix, an NA in a factor column, gpu_save()'s
# start-up lines on JAX, and a character column in the encoding's print. A search's
# mismatch and its "Resumed:" line are tested with the search (test-search.R,
# python/tests/test_search.py).

# A data.frame with a character column of four values and a numeric one.
regions <- function(rows = 20) {
  data.frame(
    income = seq_len(rows) / rows,
    region = rep(c("east", "north", "south", "west"), length.out = rows),
    stringsAsFactors = FALSE
  )
}

test_that("a character column is called character in the encoding's print, also as gpu_load() reads it back", {
  skip_if_no_python() # the core makes the encoding
  encoding <- data_encoding(regions(), runif(20))
  expect_snapshot(print(encoding))
  # a factor column with the same values encodes alike (validation data, `like = `)
  as_factor <- regions()
  as_factor$region <- factor(as_factor$region)
  expect_true(core_call(
    "same_encoding", given = data_encoding(as_factor), wanted = encoding
  ))
  expect_match(format(data_encoding(as_factor)), "region <factor(4), one-hot>", fixed = TRUE, all = FALSE)
})

skip_if_no_python()

small_model <- function(width, units = 1L) {
  keras <- gpu_keras()
  model <- keras$Sequential(list(keras$Input(shape = list(as.integer(width))), keras$layers$Dense(as.integer(units))))
  model$compile(optimizer = "adam", loss = "mse")
  model
}

test_that("gpu_cv() given a model instead of the function that builds it says so", {
  model <- small_model(4)
  data <- list(x = as.matrix(iris[, 1:4]), y = iris$Sepal.Width)
  expect_snapshot(error = TRUE, gpu_cv(model, data, folds = 2))
  expect_error(
    gpu_search(model, data, space = list(units = search_int(2, 8))),
    "not a model itself",
    class = "gpukeras_error_bad_argument"
  )
})

test_that("an NA in a factor column is named once, not once per indicator column", {
  data <- regions()
  data$region[3] <- NA
  data$income[5] <- NA
  expect_snapshot(error = TRUE, gpu_fit(small_model(5), list(x = data, y = runif(20)), epochs = 1, verbose = 0))
  fit <- gpu_fit(small_model(5), list(x = regions(), y = runif(20)), epochs = 1, verbose = 0, monitor = FALSE)
  error <- tryCatch(predict(fit, data), error = identity)
  expect_match(conditionMessage(error), "in x$income, x$region.", fixed = TRUE)
})

test_that(paste(
  "gpu_save() on JAX starts no TensorFlow, so prints none of its start-up lines; gpu_load() prints a character column",
  "as such"
), {
  stderr <- withr::local_tempfile()
  call <- fresh_r_call(quote({
    data <- data.frame(income = (1:20) / 20, region = rep(c("east", "north", "south", "west"), 5))
    keras <- gpu_keras()
    model <- keras$Sequential(list(keras$Input(shape = list(5L)), keras$layers$Dense(1L)))
    model$compile(optimizer = "adam", loss = "mse")
    fit <- gpu_fit(model, list(x = data, y = (1:20) / 20), epochs = 1, verbose = 0, monitor = FALSE)
    path <- file.path(tempdir(), "regions.keras")
    gpu_save(fit, path)
    list(
      tensorflow = reticulate::py_eval("'tensorflow' in __import__('sys').modules"),
      backend = keras$backend$backend(), loaded = format(gpu_load(path))
    )
  }), c(KERAS_BACKEND = "jax"), character(), list())
  child <- callr::r(call$func, args = call$args, stderr = stderr, timeout = 180)
  expect_identical(child$backend, "jax")
  expect_false(child$tensorflow)
  said <- readLines(stderr)
  expect_identical(grep("absl|oneDNN|port.cc", said, value = TRUE), character())
  expect_match(child$loaded, "region <character, 4 values, one-hot>", fixed = TRUE, all = FALSE)
})
