# predict(fit, newdata, file = ) (issue #36, item 3): predictions written to a CSV file
# batch by batch, equal to predict(fit, newdata) row for row, and nothing under `file`
# after a failure part way. The core's writer is tested in python/tests/test_predict_file.py;
# that memory stays flat is measured by bench/predict_file.R.

# A small classifier fitted on `x` (a data.frame or matrix) with labels `y`.
file_fit <- function(x, y, width) {
  keras <- gpu_keras()
  keras$utils$set_random_seed(4L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(as.integer(width))),
    keras$layers$Dense(8L, activation = "relu"),
    keras$layers$Dense(3L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  gpu_fit(model, list(x = x, y = y), epochs = 1, verbose = 0, monitor = FALSE, seed = 1)
}

read_predictions <- function(path, ...) utils::read.csv(path, check.names = FALSE, ...)

# The temporary files predict() leaves in `dir` (none, when all is well).
temp_files <- function(dir) list.files(dir, pattern = "[.]tmp-", all.files = TRUE)

test_that("a data.frame with factors: the file holds predict()'s rows, names and classes in order", {
  skip_if_no_python()
  data <- withr::with_seed(1, data.frame(
    size = stats::rnorm(90), colour = factor(sample(c("red", "green", "blue"), 90, TRUE)),
    shape = sample(c("round", "square"), 90, TRUE)
  ))
  label <- factor(ifelse(data$size > 0.5, "big", ifelse(data$colour == "red", "red one", "other")))
  fit <- file_fit(data, label, 6)
  new <- data[c(5, 80, 3, 41, 17, 60, 2), ]
  new$size[3] <- NA # left out with na = "drop": an NA row, as predict() gives
  dir <- withr::local_tempdir()
  path <- file.path(dir, "predictions.csv")

  shown <- withVisible(predict(fit, new, batch_size = 2, na = "drop", type = "class", file = path))
  expect_false(shown$visible)
  written <- shown$value
  expect_s3_class(written, "gpukeras_predictions_file")
  expect_identical(written$path, normalizePath(path))
  expect_identical(c(written$rows, written$columns), c(7L, 5L))
  expect_match(format(written)[2], "7 rows x 5 columns, written batch by batch", fixed = TRUE)
  expect_output(print(written), "read.csv(", fixed = TRUE)

  back <- read_predictions(path, row.names = "row")
  expected <- predict(fit, new, na = "drop")
  expect_identical(names(back), c(levels(label), "class"))
  expect_identical(rownames(back), rownames(new))
  expect_equal(as.matrix(back[levels(label)]), expected, tolerance = 1e-6)
  expect_identical(back$class, as.character(predict(fit, new, na = "drop", type = "class")))
  expect_identical(temp_files(dir), character())

  # overwrite = TRUE replaces it; without, it is refused (before Python: see the sweep)
  predict(fit, new[1:2, ], na = "drop", file = path, overwrite = TRUE)
  expect_identical(nrow(read_predictions(path)), 2L)
  expect_error(predict(fit, new, file = path), "already exists", class = "gpukeras_error_bad_argument")
})

test_that("a matrix, and the same rows as a CSV gpu_dataset(), give the file predict() gives", {
  skip_if_no_python()
  x <- withr::with_seed(2, matrix(stats::rnorm(4 * 300), ncol = 4, dimnames = list(NULL, c("a", "b", "c", "d"))))
  fit <- file_fit(x, as.integer(x[, 1] > 0) + as.integer(x[, 2] > 1), 4)
  dir <- withr::local_tempdir()
  expected <- predict(fit, x)

  predict(fit, x, batch_size = 7, file = file.path(dir, "matrix.csv"))
  from_matrix <- read_predictions(file.path(dir, "matrix.csv"))
  expect_identical(names(from_matrix), paste0("prediction_", 1:3)) # numeric labels name no level
  expect_equal(unname(as.matrix(from_matrix)), unname(expected), tolerance = 1e-6)

  utils::write.csv(x, file.path(dir, "new.csv"), row.names = FALSE)
  ds <- gpu_dataset(file.path(dir, "new.csv"), batch_size = 32, shuffle = FALSE)
  # read without its in-memory cache (gpu_dataset()'s default), which would hold every row
  expect_match(format(ds), "steps:   cache -> ", fixed = TRUE, all = FALSE)
  expect_false(any(grepl("cache", format(without_memory_cache(ds)))))
  predict(fit, ds, type = "class", file = file.path(dir, "from-csv.csv"))
  from_csv <- read_predictions(file.path(dir, "from-csv.csv"))
  expect_equal(unname(as.matrix(from_csv[1:3])), unname(predict(fit, ds)), tolerance = 1e-6)
  expect_equal(unname(as.matrix(from_csv[1:3])), unname(expected), tolerance = 1e-6)
  expect_identical(from_csv$class, predict(fit, x, type = "class"))

  # A value that cannot be read in a later row: an error, no file and no temporary file
  lines <- readLines(file.path(dir, "new.csv"))
  lines[250] <- "0.5,oops,1,2"
  writeLines(lines, file.path(dir, "bad.csv"))
  bad <- gpu_dataset(file.path(dir, "bad.csv"), batch_size = 32, shuffle = FALSE)
  target <- file.path(dir, "out.csv")
  expect_error(predict(fit, bad, file = target), "Nothing was written", class = "gpukeras_error_bad_data")
  expect_false(file.exists(target))
  # an existing file replaced only once every row is written: a failure leaves it as it was
  writeLines("kept", target)
  expect_error(
    predict(fit, bad, file = target, overwrite = TRUE), "could not be made", class = "gpukeras_error_bad_data"
  )
  expect_identical(readLines(target), "kept")
  expect_identical(temp_files(dir), character())
})

test_that("an image folder, as a path and as a gpu_dataset(), gives predict()'s rows with their paths", {
  skip_if_no_python()
  tf <- reticulate::import("tensorflow")
  save_png <- function(path, pixels) {
    tf$io$write_file(
      path, tf$io$encode_png(tf$constant(reticulate::np_array(pixels, dtype = "uint8")))
    )
  }
  train <- withr::local_tempdir()
  for (class in c("cats", "dogs", "owls")) {
    dir.create(file.path(train, class))
    for (i in 1:2) save_png(
      file.path(train, class, sprintf("%d.png", i)), array((seq_len(60) * i * 7 + nchar(class) * 31) %% 256, c(4, 5, 3))
    )
  }
  keras <- gpu_keras()
  keras$utils$set_random_seed(2L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L, 5L, 3L)), keras$layers$Flatten(),
    keras$layers$Dense(3L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  fit <- gpu_fit(
    model,
    gpu_dataset(train, image_size = c(4, 5), rescale = 1 / 255, shuffle = FALSE),
    epochs = 1,
    verbose = 0,
    monitor = FALSE
  )

  new <- withr::local_tempdir()
  for (i in 1:5) save_png(
    file.path(new, sprintf("img%d.png", i)), array((seq_len(60) * 11 + i * 23) %% 256, c(4, 5, 3))
  )
  out <- withr::local_tempdir()
  predict(fit, new, batch_size = 2, file = file.path(out, "images.csv"))
  back <- read_predictions(file.path(out, "images.csv"))
  expected <- predict(fit, new)
  expect_identical(names(back), c("path", "cats", "dogs", "owls"))
  expect_identical(back$path, rownames(expected))
  expect_equal(unname(as.matrix(back[-1])), unname(expected), tolerance = 1e-6)

  labelled <- gpu_dataset(train, shuffle = FALSE, like = fit)
  predict(fit, labelled, file = file.path(out, "labelled.csv"))
  expect_equal(
    unname(as.matrix(read_predictions(file.path(out, "labelled.csv")))),
    unname(predict(fit, labelled)),
    tolerance = 1e-6
  )
  expect_identical(temp_files(out), character())
})
