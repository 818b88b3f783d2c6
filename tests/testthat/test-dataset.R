# gpu_dataset() from R data: values read back from the pipeline, element
# specs, splits, shuffling, augmentation, maps, training, printing, and every
# bad input as a classed error.

# One pass over a dataset as R values: a list of batches, each an array, a
# list (x, y), or named lists for the inputs of a multi-input model.
# simplify = FALSE: reticulate 1.41 otherwise simplifies batches that are single arrays.
dataset_batches <- function(ds) reticulate::iterate(ds$as_numpy_iterator(), simplify = FALSE)

# The features (or the labels) of every batch of one pass, stacked by row.
stacked <- function(batches, part = 1) {
  rows <- lapply(batches, function(batch) if (is.list(batch)) batch[[part]] else batch)
  if (is.null(dim(rows[[1]])) || length(dim(rows[[1]])) == 1L) {
    return(unlist(lapply(rows, as.vector)))
  }
  do.call(rbind, rows)
}

sort_rows <- function(m) unname(m[do.call(order, as.data.frame(m)), , drop = FALSE])

spec_dtypes <- function(ds) vapply(ds$element_spec, function(spec) spec$dtype$name, character(1))

# rbind for arrays of any rank, along the first dimension.
abind_rows <- function(...) {
  parts <- list(...)
  dims <- dim(parts[[1]])
  rows <- sum(vapply(parts, function(part) dim(part)[1], integer(1)))
  flat <- do.call(rbind, lapply(parts, function(part) matrix(part, nrow = dim(part)[1])))
  array(flat, dim = c(rows, dims[-1]))
}

batch_rows <- function(batches) {
  vapply(
    batches, function(batch) NROW(if (is.list(batch)) batch[[1]] else batch), integer(1)
  )
}

test_that("a matrix arrives with its rows intact: one epoch holds exactly the input rows", {
  skip_if_no_python()
  x <- cbind(a = seq(0.5, 50, by = 0.5), b = -(1:100), c = (1:100) %% 7)
  ds <- gpu_dataset(x, batch_size = 16, seed = 1)
  expect_s3_class(ds, "gpukeras_dataset")
  expect_s3_class(ds, "tensorflow.python.data.ops.dataset_ops.DatasetV2")
  expect_identical(ds$element_spec$dtype$name, "float32")
  expect_identical(ds$element_spec$shape$as_list(), list(NULL, 3L))
  batches <- dataset_batches(ds)
  expect_identical(batch_rows(batches), c(rep(16L, 6), 4L))
  seen <- stacked(batches)
  # Shuffled (the chance of the input order is 1/100!), yet the same rows.
  expect_false(identical(unname(seen), unname(x)))
  expect_identical(sort_rows(seen), sort_rows(x))
  info <- attr(ds, "gpukeras")
  expect_identical(info$rows, 100L)
  expect_identical(info$batches, 7L)
  expect_identical(info$source, "arrays")
  expect_identical(info$role, "train")
})

test_that("a 3-d array keeps R's index semantics through a shuffled pipeline", {
  skip_if_no_python()
  n <- 12
  x <- array(seq_len(n * 3 * 4) * 0.25, dim = c(n, 3, 4))
  ds <- gpu_dataset(x, seq_len(n), batch_size = 5, seed = 3)
  expect_identical(unname(spec_dtypes(ds)), c("float32", "int32"))
  batches <- dataset_batches(ds)
  ids <- stacked(batches, 2)
  expect_setequal(ids, seq_len(n))
  features <- do.call(abind_rows, lapply(batches, `[[`, 1))
  expect_identical(dim(features), c(as.integer(n), 3L, 4L))
  # Batch row r carries label ids[r]: its element [r, j, k] is x[ids[r], j, k].
  for (r in seq_len(n)) {
    expect_identical(features[r, , ], x[ids[r], , ])
  }
  expect_identical(features[5, 2, 3], x[ids[5], 2, 3])
})

test_that("a 4-d image array is read back element for element without shuffling", {
  skip_if_no_python()
  x <- array(seq_len(6 * 5 * 4 * 3), dim = c(6, 5, 4, 3)) / 8
  ds <- gpu_dataset(x, batch_size = 4, shuffle = FALSE)
  expect_identical(ds$element_spec$shape$as_list(), list(NULL, 5L, 4L, 3L))
  batches <- dataset_batches(ds)
  expect_length(batches, 2)
  expect_identical(dim(batches[[1]]), c(4L, 5L, 4L, 3L))
  expect_identical(dim(batches[[2]]), c(2L, 5L, 4L, 3L))
  expect_identical(batches[[1]], x[1:4, , , , drop = FALSE])
  expect_identical(batches[[2]], x[5:6, , , , drop = FALSE])
  expect_identical(batches[[2]][2, 4, 1, 3], x[6, 4, 1, 3])
})

test_that("labels get the right dtype: factors and integers int32 (0-based codes), doubles and logicals float32", {
  skip_if_no_python()
  x <- matrix(as.double(1:8), ncol = 2)
  species <- factor(c("setosa", "virginica", "versicolor", "setosa"))
  ds <- gpu_dataset(x, species, shuffle = FALSE)
  expect_identical(unname(spec_dtypes(ds)), c("float32", "int32"))
  expect_identical(stacked(dataset_batches(ds), 2), c(0L, 2L, 1L, 0L))
  expect_identical(attr(ds, "gpukeras")$vocabulary, list(y = c("setosa", "versicolor", "virginica")))

  expect_identical(unname(spec_dtypes(gpu_dataset(x, 4:1))), c("float32", "int32"))
  doubles <- gpu_dataset(x, c(0.5, 1.5, 2.5, 3.5), shuffle = FALSE)
  expect_identical(unname(spec_dtypes(doubles)), c("float32", "float32"))
  expect_identical(stacked(dataset_batches(doubles), 2), c(0.5, 1.5, 2.5, 3.5))
  logicals <- gpu_dataset(x, c(TRUE, FALSE, FALSE, TRUE), shuffle = FALSE)
  expect_identical(unname(spec_dtypes(logicals)), c("float32", "float32"))
  expect_identical(stacked(dataset_batches(logicals), 2), c(1, 0, 0, 1))
  # Character labels are encoded like a factor.
  letters_ds <- gpu_dataset(x, c("b", "a", "b", "c"), shuffle = FALSE)
  expect_identical(stacked(dataset_batches(letters_ds), 2), c(1L, 0L, 1L, 2L))
  expect_identical(attr(letters_ds, "gpukeras")$vocabulary$y, c("a", "b", "c"))
  # A one-hot label matrix stays a matrix.
  onehot <- gpu_dataset(x, diag(4), shuffle = FALSE)
  expect_identical(onehot$element_spec[[2]]$shape$as_list(), list(NULL, 4L))
  expect_identical(stacked(dataset_batches(onehot), 2), diag(4))
  # An integer feature matrix is float32 all the same.
  expect_identical(gpu_dataset(matrix(1:8, ncol = 2))$element_spec$dtype$name, "float32")
})

test_that(paste(
  "a data.frame: numeric and logical columns as they are, factor and character columns as indicator columns, or codes"
), {
  skip_if_no_python()
  df <- data.frame(
    size = c(1.5, 2.5, 3.5, 4.5),
    colour = c("red", "blue", "red", "green"),
    grade = factor(c("low", "high", "mid", "low"), levels = c("low", "mid", "high")),
    ok = c(TRUE, FALSE, TRUE, TRUE),
    count = 4:1,
    stringsAsFactors = FALSE
  )
  ds <- gpu_dataset(df, shuffle = FALSE)
  expect_identical(ds$element_spec$shape$as_list(), list(NULL, 9L))
  expect_identical(ds$element_spec$dtype$name, "float32")
  rows <- stacked(dataset_batches(ds))
  expect_identical(
    unname(rows),
    cbind(
      c(1.5, 2.5, 3.5, 4.5),
      unname(stats::model.matrix(~ 0 + colour, df)),
      unname(stats::model.matrix(~ 0 + grade, df)),
      c(1, 0, 1, 1),
      c(4, 3, 2, 1)
    )
  )
  coded <- gpu_dataset(df, shuffle = FALSE, factors = "codes")
  expect_identical(coded$element_spec$shape$as_list(), list(NULL, 5L))
  expect_identical(
    unname(stacked(dataset_batches(coded))),
    cbind(c(1.5, 2.5, 3.5, 4.5), c(2, 0, 2, 1), c(0, 2, 1, 0), c(1, 0, 1, 1), c(4, 3, 2, 1))
  )
  vocabulary <- attr(ds, "gpukeras")$vocabulary
  expect_identical(vocabulary, list(colour = c("blue", "green", "red"), grade = c("low", "mid", "high")))
})

test_that("a named list of inputs gives a dict element with every input", {
  skip_if_no_python()
  image <- array(seq_len(5 * 2 * 2 * 1), dim = c(5, 2, 2, 1))
  table <- data.frame(kind = c("x", "y", "x", "z", "y"), value = c(0.1, 0.2, 0.3, 0.4, 0.5))
  ds <- gpu_dataset(list(image = image, table = table), factor(c("p", "q", "p", "p", "q")), shuffle = FALSE)
  spec <- ds$element_spec
  expect_identical(sort(names(spec[[1]])), c("image", "table"))
  expect_identical(spec[[1]]$image$shape$as_list(), list(NULL, 2L, 2L, 1L))
  expect_identical(spec[[1]]$table$shape$as_list(), list(NULL, 4L)) # kind's 3 indicator columns, value
  expect_identical(spec[[1]]$image$dtype$name, "float32")
  expect_identical(spec[[2]]$dtype$name, "int32")
  batch <- dataset_batches(ds)[[1]]
  expect_identical(batch[[1]]$image, image + 0)
  expect_equal(
    unname(batch[[1]]$table), cbind(c(1, 0, 1, 0, 0), c(0, 1, 0, 0, 1), c(0, 0, 0, 1, 0), table$value), tolerance = 1e-7
  )
  expect_identical(as.vector(batch[[2]]), c(0L, 1L, 0L, 0L, 1L))
  expect_identical(attr(ds, "gpukeras")$vocabulary, list(kind = c("x", "y", "z"), y = c("p", "q")))
  expect_match(paste(format(ds), collapse = "\n"), "'image': TensorSpec(shape=(None, 2, 2, 1)", fixed = TRUE)
})

test_that("validation_split holds out round(n * split) rows, disjoint from train and the same for a seed", {
  skip_if_no_python()
  n <- 53
  df <- data.frame(id = seq_len(n), value = seq_len(n) / 4)
  split <- gpu_dataset(df, batch_size = 8, validation_split = 0.3, seed = 11)
  expect_named(split, c("train", "validation"))
  expect_s3_class(split$train, "gpukeras_dataset")
  expect_s3_class(split$validation, "gpukeras_dataset")
  train <- stacked(dataset_batches(split$train))
  validation <- stacked(dataset_batches(split$validation))
  expect_identical(nrow(validation), as.integer(round(n * 0.3)))
  expect_identical(nrow(train), as.integer(n - round(n * 0.3)))
  expect_length(intersect(train[, 1], validation[, 1]), 0)
  expect_identical(sort_rows(rbind(train, validation)), unname(as.matrix(df)))
  # Validation rows are not shuffled: in their original order, every epoch.
  expect_identical(validation[, 1], sort(validation[, 1]))
  expect_identical(stacked(dataset_batches(split$validation)), validation)
  expect_identical(attr(split$train, "gpukeras")$rows, 37L)
  expect_identical(attr(split$validation, "gpukeras")$rows, 16L)
  expect_identical(attr(split$train, "gpukeras")$batches, 5L)
  expect_identical(attr(split$validation, "gpukeras")$batches, 2L)
  expect_identical(attr(split$validation, "gpukeras")$role, "validation")
  expect_false(any(grepl("shuffle", attr(split$validation, "gpukeras")$steps)))

  again <- gpu_dataset(df, batch_size = 8, validation_split = 0.3, seed = 11)
  expect_identical(stacked(dataset_batches(again$validation)), validation)
  other <- gpu_dataset(df, batch_size = 8, validation_split = 0.3, seed = 12)
  expect_false(identical(stacked(dataset_batches(other$validation))[, 1], validation[, 1]))
})

test_that("validation data is neither shuffled nor augmented", {
  skip_if_no_python()
  n <- 10
  images <- array(0, dim = c(n, 3, 4, 1))
  for (i in seq_len(n)) images[i, , , 1] <- matrix(seq_len(12) + 100 * i, 3, 4)
  split <- gpu_dataset(
    images, seq_len(n),
    batch_size = 4, seed = 5, validation_split = 0.5,
    augment = list(flip_horizontal = list(), flip_vertical = list())
  )
  expect_false(any(grepl("augment|shuffle", attr(split$validation, "gpukeras")$steps)))
  expect_true(any(grepl(
    "augment (flip_horizontal, flip_vertical, parallel)", attr(split$train, "gpukeras")$steps, fixed = TRUE
  )))
  batches <- dataset_batches(split$validation)
  ids <- stacked(batches, 2)
  expect_length(ids, 5)
  expect_identical(ids, sort(ids))
  features <- do.call(abind_rows, lapply(batches, `[[`, 1))
  expect_identical(features, images[ids, , , , drop = FALSE])
})

test_that("batch_size and drop_remainder set the batch shapes and counts", {
  skip_if_no_python()
  x <- matrix(as.double(1:20), ncol = 2)
  kept <- gpu_dataset(x, batch_size = 4, shuffle = FALSE)
  expect_identical(batch_rows(dataset_batches(kept)), c(4L, 4L, 2L))
  expect_identical(kept$element_spec$shape$as_list(), list(NULL, 2L))
  expect_identical(attr(kept, "gpukeras")$batches, 3L)
  dropped <- gpu_dataset(x, batch_size = 4, shuffle = FALSE, drop_remainder = TRUE)
  batches <- dataset_batches(dropped)
  expect_identical(batch_rows(batches), c(4L, 4L))
  expect_identical(stacked(batches), x[1:8, ])
  expect_identical(dropped$element_spec$shape$as_list(), c(4L, 2L))
  expect_identical(attr(dropped, "gpukeras")$batches, 2L)
  expect_warning(whole <- gpu_dataset(x, batch_size = 1000, shuffle = FALSE), class = "gpukeras_warning_batch_size")
  expect_identical(batch_rows(dataset_batches(whole)), 10L)
})

test_that("shuffle = FALSE keeps row order; a seed makes shuffling reproducible, reshuffled every epoch", {
  skip_if_no_python()
  x <- matrix(as.double(1:40), ncol = 1)
  ordered <- gpu_dataset(x, batch_size = 7, shuffle = FALSE)
  expect_identical(stacked(dataset_batches(ordered)), x)
  expect_identical(stacked(dataset_batches(ordered)), x)
  expect_false(any(grepl("shuffle", attr(ordered, "gpukeras")$steps)))

  first <- gpu_dataset(x, batch_size = 7, seed = 42)
  second <- gpu_dataset(x, batch_size = 7, seed = 42)
  first_epochs <- list(stacked(dataset_batches(first)), stacked(dataset_batches(first)))
  second_epochs <- list(stacked(dataset_batches(second)), stacked(dataset_batches(second)))
  expect_identical(first_epochs, second_epochs)
  expect_false(identical(first_epochs[[1]], first_epochs[[2]]))
  expect_false(identical(first_epochs[[1]], x))
  expect_identical(sort(first_epochs[[2]][, 1]), x[, 1])
  other <- stacked(dataset_batches(gpu_dataset(x, batch_size = 7, seed = 43)))
  expect_false(identical(other, first_epochs[[1]]))
})

test_that("NA/NaN: the error names the columns and first rows; na = \"drop\" drops exactly those rows", {
  skip_if_no_python()
  df <- data.frame(a = c(1, NA, 3, 4, NaN, 6, 7), b = c(1, 2, 3, NA, 5, 6, 7), c = 1:7)
  y <- c(10, 20, 30, 40, 50, 60, NA)
  expect_error(
    gpu_dataset(df, y),
    "NA/NaN in 4 row\\(s\\) \\(first: 2, 4, 5, 7\\), in x\\$a, x\\$b, y\\..*na = \"drop\"",
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(matrix(c(1, 2, NA, 4, 5, 6), 3)),
    "1 row\\(s\\) \\(first: 3\\), in x\\$column 1",
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(matrix(1:6, 3), factor(c("a", NA, "b"))),
    "first: 2\\), in y\\.",
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(array(c(1:5, NaN, 7:24), dim = c(3, 2, 4))),
    "first: 3\\), in x\\.",
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(data.frame(g = c("u", NA, "v"))),
    "first: 2\\), in x\\$g",
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(list(left = matrix(1:4, 2), right = cbind(p = c(1, NA)))),
    "first: 2\\), in right\\$p",
    class = "gpukeras_error_bad_data"
  )

  ds <- gpu_dataset(df, y, na = "drop", shuffle = FALSE)
  batch <- dataset_batches(ds)[[1]]
  expect_identical(unname(batch[[1]]), cbind(c(1, 3, 6), c(1, 3, 6), c(1, 3, 6)))
  expect_identical(as.vector(batch[[2]]), c(10, 30, 60))
  expect_identical(attr(ds, "gpukeras")$dropped_rows, 4L)
  expect_identical(attr(ds, "gpukeras")$rows, 3L)
  expect_match(format(ds), "dropped 4 row\\(s\\) with NA", all = FALSE)
  expect_error(
    gpu_dataset(matrix(c(NA, 1, 2, NaN), 2), na = "drop"),
    "Every row has an NA",
    class = "gpukeras_error_bad_data"
  )
})

test_that("bad R data is a classed error that says what to do", {
  expect_error(
    gpu_dataset(matrix(1:6, 3), 1:2),
    "x and y must have the same number of rows, not x: 3, y: 2.*one label per row",
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(list(a = matrix(1:6, 3), b = matrix(1:4, 2))),
    "a: 3, b: 2",
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(matrix(letters[1:6], 3)),
    "`x` is a character matrix: features must be numbers.*data.frame",
    class = "gpukeras_error_bad_data"
  )
  expect_error(gpu_dataset(letters[1:6]), "`x` is a character vector", class = "gpukeras_error_bad_data")
  expect_error(gpu_dataset(matrix(numeric(), 0, 3)), "The data has no rows", class = "gpukeras_error_bad_data")
  expect_error(gpu_dataset(numeric()), "The data has no rows", class = "gpukeras_error_bad_data")
  expect_error(gpu_dataset(data.frame(a = numeric())), "The data has no rows", class = "gpukeras_error_bad_data")
  expect_error(gpu_dataset(data.frame()), "The data.frame `x` has no columns", class = "gpukeras_error_bad_data")
  expect_error(
    gpu_dataset(data.frame(a = 1:3, when = Sys.Date() + 0:2)),
    "unsupported type in `x`: when \\(Date\\).*as.numeric\\(\\)",
    class = "gpukeras_error_bad_data"
  )
  listed <- data.frame(a = 1:3)
  listed$l <- list(1, 2, 3)
  expect_error(gpu_dataset(listed), "l \\(list\\)", class = "gpukeras_error_bad_data")
  expect_error(gpu_dataset(data.frame(z = 1:2 + 1i)), "z \\(complex\\)", class = "gpukeras_error_bad_data")
  expect_error(gpu_dataset(list(matrix(1:6, 3))), "must be a named list", class = "gpukeras_error_bad_data")
  expect_error(gpu_dataset(list()), "must be a named list", class = "gpukeras_error_bad_data")
  expect_error(
    gpu_dataset(factor(c("a", "b"))), "`x` must be a numeric matrix.*not a factor", class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(matrix(1:6, 3), list(1, 2, 3)),
    "`y` must be a numeric, logical, factor or character vector.*not a list",
    class = "gpukeras_error_bad_data"
  )
  expect_error(gpu_dataset(matrix(1:6, 3), matrix(c("a", "b", "c"))), "`y` must be", class = "gpukeras_error_bad_data")
  skip_if_no_python()
  expect_error(
    gpu_dataset(matrix(1:6, 3), validation_split = 0.1),
    "validation_split = 0.1 of 3 rows leaves no training or no validation rows",
    class = "gpukeras_error_bad_argument"
  )
})

test_that("arguments are checked with classed errors before any work", {
  m <- matrix(as.double(1:6), 3)
  bad <- function(..., pattern) expect_error(gpu_dataset(m, ...), pattern, class = "gpukeras_error_bad_argument")
  bad(batch_size = 0, pattern = "`batch_size` must be one whole number >= 1, not `0`")
  bad(batch_size = 2.5, pattern = "`batch_size` must be one whole number >= 1")
  bad(validation_split = 1, pattern = "`validation_split` must be one number in \\[0, 1\\), not `1`")
  bad(validation_split = -0.1, pattern = "`validation_split` must be one number in \\[0, 1\\)")
  bad(augment = list(1), pattern = "`augment` must be a named list of presets.*flip_horizontal = list\\(\\)")
  bad(augment = "flip_horizontal", pattern = "`augment` must be a named list of presets")
  bad(prefetch = -1, pattern = "`prefetch` must be \"auto\" or a number of batches >= 0, not `-1`")
  bad(prefetch = "lots", pattern = "`prefetch` must be")
  bad(cache = 3, pattern = "`cache` must be TRUE, FALSE or a file path, not `3`")
  bad(cache = NA, pattern = "`cache` must be TRUE, FALSE or a file path")
  bad(map = 3, pattern = "`map` must be a function \\(R or Python\\), not `3`")
  bad(seed = -1, pattern = "`seed` must be one whole number >= 0, not `-1`")
  bad(seed = 1.5, pattern = "`seed` must be one whole number >= 0")
  bad(to_device = "TPU:0", pattern = "`to_device` must be GPU indices.*\"GPU:0\".*not `TPU:0`")
  bad(shuffle = NA, pattern = "`shuffle` must be TRUE or FALSE")
  bad(drop_remainder = "yes", pattern = "`drop_remainder` must be TRUE or FALSE")
  bad(deterministic = 1, pattern = "`deterministic` must be TRUE or FALSE")
  bad(na = "keep", pattern = "`na` must be one of \"error\", \"drop\"")
  # Files take their labels from `label`, never from `y`.
  expect_error(
    gpu_dataset(tempdir(), y = 1:3),
    "`y` is for R data; with files, name the label column or feature with `label`",
    class = "gpukeras_error_bad_argument"
  )
  skip_if_no_python()
  bad(
    augment = list(zoom = list()),
    pattern = paste0(
      "Unknown augment preset\\(s\\): zoom. Presets: flip_horizontal, flip_vertical, brightness, contrast, crop, ",
      "rotation"
    )
  )
  bad(augment = list(crop = list()), pattern = "augment preset 'crop' \\(RandomCrop\\) rejected its parameters.*height")
})

test_that("augment = flip_horizontal flips images left to right, seeded, inside the pipeline", {
  skip_if_no_python()
  # One asymmetric image: flipped, it is the same image with its columns reversed.
  image <- array(0, dim = c(1, 3, 5, 2))
  image[1, , , 1] <- matrix(1:15, 3, 5)
  image[1, , , 2] <- matrix(101:115, 3, 5)
  flipped <- image[, , 5:1, , drop = FALSE]
  ds <- gpu_dataset(image, augment = list(flip_horizontal = list()), seed = 9)
  expect_match(format(ds), "augment (flip_horizontal, parallel)", fixed = TRUE, all = FALSE)
  seen <- character()
  for (epoch in 1:30) {
    out <- dataset_batches(ds)[[1]]
    seen <- c(seen, if (identical(out, image)) "original" else if (identical(out, flipped)) "flipped" else "other")
    if (all(c("original", "flipped") %in% seen)) break
  }
  expect_false("other" %in% seen)
  expect_true("flipped" %in% seen)
  expect_true("original" %in% seen)
  # The same seed gives the same flips.
  again <- gpu_dataset(image, augment = list(flip_horizontal = list()), seed = 9)
  replay <- vapply(seq_along(seen), function(i) identical(dataset_batches(again)[[1]], flipped), logical(1))
  expect_identical(replay, seen == "flipped")
})

test_that("augment = crop cuts every image to (height, width), a window of the original", {
  skip_if_no_python()
  n <- 3
  images <- array(as.double(seq_len(n * 6 * 7 * 2)), dim = c(n, 6, 7, 2))
  ds <- gpu_dataset(images, seq_len(n), augment = list(crop = list(height = 4, width = 3)), seed = 2)
  expect_identical(ds$element_spec[[1]]$shape$as_list(), list(NULL, 4L, 3L, 2L))
  batch <- dataset_batches(ds)[[1]]
  expect_identical(dim(batch[[1]]), c(as.integer(n), 4L, 3L, 2L))
  windows <- expand.grid(top = 0:2, left = 0:4)
  for (r in seq_len(n)) {
    original <- images[batch[[2]][r], , , ]
    found <- vapply(seq_len(nrow(windows)), function(w) {
      identical(batch[[1]][r, , , ], original[windows$top[w] + 1:4, windows$left[w] + 1:3, ])
    }, logical(1))
    expect_true(any(found))
  }
})

test_that("every augment preset runs together on image batches, keeping shape and dtype", {
  skip_if_no_python()
  images <- array(runif(4 * 8 * 8 * 3, 0, 1), dim = c(4, 8, 8, 3))
  ds <- gpu_dataset(
    images,
    augment = list(
      flip_horizontal = list(), flip_vertical = list(), brightness = list(factor = 0.1, value_range = c(0, 1)),
      contrast = list(factor = 0.2), rotation = list(factor = 0.05), crop = list(height = 6, width = 6)
    ),
    seed = 4
  )
  expect_identical(ds$element_spec$dtype$name, "float32")
  out <- dataset_batches(ds)[[1]]
  expect_identical(dim(out), c(4L, 6L, 6L, 3L))
  expect_true(all(is.finite(out)))
})

test_that("an R map using TensorFlow ops is traced into the graph and applied to every element", {
  skip_if_no_python()
  tf <- reticulate::import("tensorflow")
  x <- matrix(as.double(1:12), ncol = 3)
  y <- c(1, 0, 1, 0)
  ds <- gpu_dataset(x, y, map = function(x, y) list(tf$multiply(x, 2), y), shuffle = FALSE)
  expect_identical(attr(ds, "gpukeras")$steps[1:2], c("map (parallel)", "cache"))
  for (epoch in 1:2) {
    batch <- dataset_batches(ds)[[1]]
    expect_identical(batch[[1]], x * 2)
    expect_identical(as.vector(batch[[2]]), y)
  }
  features_only <- gpu_dataset(x, map = function(x) tf$add(x, 0.5), shuffle = FALSE, cache = FALSE)
  expect_identical(dataset_batches(features_only)[[1]], x + 0.5)
  expect_false("cache" %in% attr(features_only, "gpukeras")$steps)
  # A Python callable works the same way.
  python_map <- tf$autograph$experimental$do_not_convert(reticulate::py_eval("lambda x, y: (x - 1.0, y * 10.0)"))
  batch <- dataset_batches(gpu_dataset(x, y, map = python_map, shuffle = FALSE))[[1]]
  expect_identical(batch[[1]], x - 1)
  expect_identical(as.vector(batch[[2]]), y * 10)
})

test_that("a map that fails to trace is gpukeras_error_bad_map saying to use TensorFlow ops", {
  skip_if_no_python()
  x <- matrix(as.double(1:6), 3)
  # R's own matrix() cannot take a symbolic tensor, whatever reticulate's version
  # (reticulate 1.41 traces `x * 2` into TensorFlow's multiply, 1.28 does not).
  error <- tryCatch(gpu_dataset(x, c(1, 2, 3), map = function(x, y) list(matrix(x, 2), y)), error = identity)
  expect_s3_class(error, "gpukeras_error_bad_map")
  expect_s3_class(error, "gpukeras_error")
  expect_match(conditionMessage(error), "failed when tf.data traced it into a graph", fixed = TRUE)
  expect_match(conditionMessage(error), "cannot coerce type 'environment'", fixed = TRUE)
  expect_match(conditionMessage(error), "tf$multiply(x, 2)", fixed = TRUE)
  expect_false(grepl("Traceback", conditionMessage(error), fixed = TRUE))
  expect_error(
    gpu_dataset(x, map = function(x) stop("no such column")),
    "no such column.*must use TensorFlow ops",
    class = "gpukeras_error_bad_map"
  )
  # R is still fine afterwards.
  expect_identical(dataset_batches(gpu_dataset(x, shuffle = FALSE))[[1]], x)
})

test_that("to_device, prefetch, cache and deterministic show in the steps and keep the values", {
  skip_if_no_python()
  tf <- reticulate::import("tensorflow")
  x <- matrix(as.double(1:10), ncol = 2)
  on_cpu <- gpu_dataset(x, shuffle = FALSE, to_device = "CPU:0")
  expect_identical(utils::tail(attr(on_cpu, "gpukeras")$steps, 1), "prefetch to CPU:0")
  expect_identical(dataset_batches(on_cpu)[[1]], x)
  plain <- gpu_dataset(x, shuffle = FALSE, prefetch = 0, deterministic = FALSE)
  expect_identical(attr(plain, "gpukeras")$steps, c("rows in order", "gather batches (32, parallel)"))
  expect_identical(attr(plain, "gpukeras")$to_device, "none")
  expect_identical(dataset_batches(plain)[[1]], x)
  expect_identical(utils::tail(attr(gpu_dataset(x, prefetch = 3), "gpukeras")$steps, 1), "prefetch (3)")
  cache_file <- file.path(withr::local_tempdir(), "elements")
  cached <- gpu_dataset(x, map = function(x) tf$add(x, 1), cache = cache_file, shuffle = FALSE)
  expect_true(sprintf("cache (%s)", cache_file) %in% attr(cached, "gpukeras")$steps)
  expect_identical(dataset_batches(cached)[[1]], x + 1)
  expect_true(file.exists(paste0(cache_file, ".index")))
  expect_identical(dataset_batches(cached)[[1]], x + 1)
})

test_that("a Keras model trains on a gpu_dataset(), and on a split with validation_data", {
  skip_if_no_python()
  keras <- gpu_keras()
  withr::local_seed(1)
  x <- matrix(runif(512 * 2, -1, 1), ncol = 2)
  y <- factor(ifelse(x[, 1] + 2 * x[, 2] > 0, "up", "down"))
  new_model <- function() {
    model <- keras$Sequential(list(keras$Input(shape = list(2L)), keras$layers$Dense(2L)))
    model$compile(
      optimizer = keras$optimizers$Adam(learning_rate = 0.05),
      loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE),
      metrics = list("accuracy")
    )
    model
  }
  history <- new_model()$fit(gpu_dataset(x, y, batch_size = 32, seed = 1), epochs = 4L, shuffle = FALSE, verbose = 0L)
  loss <- unlist(history$history$loss)
  expect_length(loss, 4)
  expect_true(all(is.finite(loss)))
  expect_lt(loss[4], loss[1])

  split <- gpu_dataset(x, y, batch_size = 32, seed = 1, validation_split = 0.25)
  history <- new_model()$fit(
    split$train, validation_data = split$validation, epochs = 4L, shuffle = FALSE, verbose = 0L
  )
  loss <- unlist(history$history$loss)
  val_loss <- unlist(history$history$val_loss)
  expect_length(val_loss, 4)
  expect_lt(loss[4], loss[1])
  expect_lt(val_loss[4], val_loss[1])
  expect_gt(unlist(history$history$val_accuracy)[4], 0.8)
})

test_that("print and format show the source, rows, batches, element spec, steps and vocabulary", {
  skip_if_no_python()
  df <- data.frame(a = c(1, 2, NA, 4, 5, 6, 7, 8, 9, 10, 11), g = rep_len(c("u", "v"), 11))
  ds <- gpu_dataset(df, factor(rep(c("no", "yes", "maybe"), length.out = 11)), batch_size = 4, seed = 1, na = "drop")
  lines <- format(ds)
  expect_length(lines, 6)
  expect_identical(lines[1], "<gpukeras_dataset> train pipeline from arrays: 10 rows, 3 batches")
  expect_identical(
    lines[2],
    paste0(
      "  element: (TensorSpec(shape=(None, 3), dtype=tf.float32, name=None), TensorSpec(shape=(None,), ",
      "dtype=tf.int32, name=None))"
    )
  )
  expect_identical(
    lines[3], "  steps:   shuffle rows each epoch -> gather batches (4, parallel) -> prefetch (autotune)"
  )
  expect_identical(lines[4], "  vocabulary: g (2 levels), y (3 levels)")
  expect_identical(lines[5], "  input:   3 columns: a, g (2 levels, one-hot)")
  expect_identical(lines[6], "  dropped 1 row(s) with NA")
  expect_output(print(ds), "<gpukeras_dataset> train pipeline from arrays: 10 rows, 3 batches", fixed = TRUE)
  expect_output(print(ds), "vocabulary: g (2 levels), y (3 levels)", fixed = TRUE)
  capture.output(shown <- withVisible(print(ds)))
  expect_false(shown$visible)
  expect_identical(shown$value, ds)

  split <- gpu_dataset(matrix(as.double(1:40), ncol = 2), validation_split = 0.25, batch_size = 8, seed = 2)
  expect_output(print(split$train), "train pipeline from arrays: 15 rows, 2 batches", fixed = TRUE)
  expect_output(print(split$validation), "validation pipeline from arrays: 5 rows, 1 batch", fixed = TRUE)
  expect_output(
    print(split$validation),
    "steps:   rows in order -> gather batches (8, parallel) -> prefetch (autotune)",
    fixed = TRUE
  )
  expect_false(any(grepl("vocabulary|dropped", format(split$train))))
})

test_that("gpu_dataset_benchmark() times the pipeline alone: batches/s and elements/s", {
  skip_if_no_python()
  ds <- gpu_dataset(matrix(runif(64 * 4), ncol = 4), batch_size = 16, seed = 1)
  result <- gpu_dataset_benchmark(ds, steps = 20)
  expect_s3_class(result, "gpukeras_dataset_benchmark")
  expect_named(result, c("steps", "seconds", "batches_per_second", "elements_per_second"))
  expect_identical(result$steps, 20L)
  expect_gt(result$seconds, 0)
  expect_gt(result$batches_per_second, 0)
  expect_equal(result$batches_per_second, 20 / result$seconds)
  # Every batch is full (64 rows in batches of 16, repeated): 16 elements a batch.
  expect_equal(result$elements_per_second, 16 * result$batches_per_second)
  expect_match(
    format(result),
    "^<gpukeras pipeline benchmark> [0-9,.]+ batches/s, [0-9,]+ elements/s \\(20 batches in [0-9.]+ s\\)$"
  )
  expect_output(print(result), "<gpukeras pipeline benchmark>", fixed = TRUE)
  capture.output(shown <- withVisible(print(result)))
  expect_false(shown$visible)
  expect_identical(shown$value, result)
  # Any tf.data.Dataset will do.
  tf <- reticulate::import("tensorflow")
  plain <- tf$data$Dataset$range(100L)$batch(10L)
  expect_identical(gpu_dataset_benchmark(plain, steps = 5)$steps, 5L)
  expect_error(
    gpu_dataset_benchmark(ds, steps = 0), "`steps` must be one whole number >= 1", class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_dataset_benchmark(matrix(1:4, 2)),
    "`dataset` must be a gpu_dataset\\(\\) or tf.data.Dataset",
    class = "gpukeras_error_bad_argument"
  )
})

test_that("with augment = crop, validation elements have the cropped (height, width) too", {
  skip_if_no_python()
  images <- array(runif(20 * 6 * 7 * 2), dim = c(20, 6, 7, 2))
  split <- gpu_dataset(
    images, rep(0:1, 10), augment = list(crop = list(height = 4, width = 3)), validation_split = 0.2, seed = 1
  )
  expect_identical(split$train$element_spec[[1]]$shape$as_list(), list(NULL, 4L, 3L, 2L))
  expect_identical(split$validation$element_spec[[1]]$shape$as_list(), list(NULL, 4L, 3L, 2L))
})

test_that("R data reaches the batches as it did through np_array(): the same values in the same order", {
  skip_if_no_python()
  set.seed(5)
  x <- matrix(stats::rnorm(300), 100)
  y <- sample(0:4, 100, replace = TRUE)
  before <- function(...) {
    core_call(
      "dataset_from_arrays",
      x = reticulate::np_array(x, dtype = "float32", order = "C"),
      y = reticulate::np_array(y, dtype = "int32", order = "C"), batch_size = 16L, seed = 7L, ...
    )
  }
  expect_identical(dataset_batches(gpu_dataset(x, y, batch_size = 16, seed = 7)), dataset_batches(before()$dataset))
  split <- gpu_dataset(x, y, batch_size = 16, seed = 7, validation_split = 0.3)
  old <- before(validation_split = 0.3)
  expect_identical(dataset_batches(split$train), dataset_batches(old$dataset))
  expect_identical(dataset_batches(split$validation), dataset_batches(old$validation))
})

test_that("the recipe a background fit carries holds the pipeline's own float32 copy, not R's doubles", {
  skip_if_no_python()
  x <- matrix(as.double(1:40), 20)
  for (split in c(0, 0.25)) {
    made <- gpu_dataset(x, 1:20, batch_size = 4, seed = 1, validation_split = split)
    arrays <- attr(if (split) made$train else made, "gpukeras_recipe")$arrays
    expect_identical(reticulate::py_to_r(arrays$x$dtype$name), "float32")
    expect_identical(reticulate::py_to_r(arrays$y$dtype$name), "int32")
    expect_identical(reticulate::py_to_r(arrays$x$astype("float64")), x) # every row, split or not
  }
})
