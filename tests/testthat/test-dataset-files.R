# gpu_dataset() streaming files: CSV files, an image folder and TFRecord files,
# written here into temporary folders and read back through the pipeline.

# simplify = FALSE: reticulate 1.41 otherwise simplifies batches that are single arrays.
dataset_batches <- function(ds) reticulate::iterate(ds$as_numpy_iterator(), simplify = FALSE)

# Features (part 1) or labels (part 2) of every batch of one pass, stacked by row.
stacked <- function(batches, part = 1) {
  rows <- lapply(batches, `[[`, part)
  if (length(dim(rows[[1]])) <= 1L) {
    return(unlist(lapply(rows, as.vector)))
  }
  do.call(rbind, rows)
}

sort_rows <- function(m) unname(m[do.call(order, as.data.frame(m)), , drop = FALSE])

# A PNG file from an R array height x width x channels of 0..255.
write_png <- function(path, pixels) {
  tf <- reticulate::import("tensorflow")
  png <- tf$io$encode_png(tf$constant(reticulate::np_array(pixels, dtype = "uint8")))
  tf$io$write_file(path, png)
  invisible(path)
}

# A small image whose pixels say which image it is: no two are alike.
test_image <- function(number, height = 4, width = 5, channels = 3) {
  array((seq_len(height * width * channels) * 3 + number * 17) %% 256, dim = c(height, width, channels))
}

# A tf.train.Example of named features: doubles as float_list, integers as
# int64_list, raw vectors as bytes_list.
tf_example <- function(...) {
  tf <- reticulate::import("tensorflow")
  bytes <- reticulate::import_builtins(convert = FALSE)$bytes
  feature <- lapply(list(...), function(value) {
    if (is.raw(value)) {
      tf$train$Feature(bytes_list = tf$train$BytesList(value = list(bytes(value))))
    } else if (is.integer(value)) {
      tf$train$Feature(int64_list = tf$train$Int64List(value = as.list(value)))
    } else {
      tf$train$Feature(float_list = tf$train$FloatList(value = as.list(value)))
    }
  })
  tf$train$Example(features = tf$train$Features(feature = feature))
}

write_tfrecord <- function(path, examples) {
  tf <- reticulate::import("tensorflow")
  bytes <- reticulate::import_builtins(convert = FALSE)$bytes
  writer <- tf$io$TFRecordWriter(path)
  # SerializeToString() reaches R as a raw vector; the writer wants Python bytes.
  for (example in examples) writer$write(bytes(example$SerializeToString()))
  writer$close()
  invisible(path)
}

# CSV -------------------------------------------------------------------------

test_that("a CSV file streams its rows in order, the label column as int32 labels", {
  skip_if_no_python()
  dir <- withr::local_tempdir()
  df <- data.frame(a = c(1.5, 2.5, 3.5, 4.5, 5.5), b = c(-10, 20, -30, 40, 0.25), label = c(0L, 1L, 1L, 0L, 2L))
  utils::write.csv(df, file.path(dir, "train.csv"), row.names = FALSE)
  ds <- gpu_dataset(file.path(dir, "train.csv"), label = "label", batch_size = 2, shuffle = FALSE)
  expect_s3_class(ds, "gpukeras_dataset")
  expect_identical(ds$element_spec[[1]]$shape$as_list(), list(NULL, 2L))
  expect_identical(ds$element_spec[[1]]$dtype$name, "float32")
  expect_identical(ds$element_spec[[2]]$dtype$name, "int32")
  batches <- dataset_batches(ds)
  expect_length(batches, 3)
  expect_identical(batches[[1]][[1]], cbind(c(1.5, 2.5), c(-10, 20)))
  expect_identical(as.vector(batches[[1]][[2]]), c(0L, 1L))
  expect_identical(stacked(batches), unname(as.matrix(df[, c("a", "b")])))
  expect_identical(stacked(batches, 2), df$label)
  info <- attr(ds, "gpukeras")
  expect_identical(info$source, "csv")
  expect_identical(info$files, 1L)
  expect_identical(info$columns, c("a", "b"))
  expect_identical(info$label, "label")
  expect_match(format(ds)[1], "^<gpukeras_dataset> train pipeline from csv: 5 rows, 3 batches$")

  # columns = picks (and orders) the features; a decimal label is float32.
  df$score <- df$a / 4
  utils::write.csv(df, file.path(dir, "train.csv"), row.names = FALSE)
  picked <- gpu_dataset(file.path(dir, "train.csv"), label = "score", columns = c("label", "a"), shuffle = FALSE)
  expect_identical(picked$element_spec[[2]]$dtype$name, "float32")
  batch <- dataset_batches(picked)[[1]]
  expect_identical(batch[[1]], cbind(as.double(df$label), df$a))
  expect_identical(as.vector(batch[[2]]), df$score)
})

test_that("a glob over two CSV files reads every row of both, once an epoch", {
  skip_if_no_python()
  dir <- withr::local_tempdir()
  first <- data.frame(id = 1:6, x = (1:6) / 2, label = rep(0:1, 3))
  second <- data.frame(id = 7:10, x = (7:10) / 2, label = c(1L, 1L, 0L, 0L))
  utils::write.csv(first, file.path(dir, "part-1.csv"), row.names = FALSE)
  utils::write.csv(second, file.path(dir, "part-2.csv"), row.names = FALSE)
  writeLines("not, a, csv", file.path(dir, "notes.txt"))
  ds <- gpu_dataset(file.path(dir, "part-*.csv"), label = "label", batch_size = 3, seed = 1)
  expect_identical(attr(ds, "gpukeras")$files, 2L)
  batches <- dataset_batches(ds)
  features <- stacked(batches)
  labels <- stacked(batches, 2)
  expect_identical(nrow(features), 10L)
  both <- rbind(first, second)
  expect_identical(sort_rows(cbind(features, labels)), unname(as.matrix(both)))
  # The folder itself names its CSV files.
  expect_identical(nrow(stacked(dataset_batches(gpu_dataset(dir, label = "label")))), 10L)

  split <- gpu_dataset(file.path(dir, "*.csv"), label = "label", validation_split = 0.3, seed = 4)
  train_ids <- stacked(dataset_batches(split$train))[, 1]
  validation_ids <- stacked(dataset_batches(split$validation))[, 1]
  expect_length(intersect(train_ids, validation_ids), 0)
  expect_setequal(c(train_ids, validation_ids), 1:10)
  # The same every epoch, and validation keeps file order.
  expect_setequal(stacked(dataset_batches(split$validation))[, 1], validation_ids)
  expect_false(any(grepl("shuffle", attr(split$validation, "gpukeras")$steps)))
})

# `rows` rows of two features in [-1, 1] and a label a model can learn (p > q), as d.csv in
# `dir`, the same each time (seed 2); the file's path.
separable_csv <- function(dir, rows) {
  x <- withr::with_seed(2, matrix(runif(rows * 2, -1, 1), ncol = 2))
  path <- file.path(dir, "d.csv")
  utils::write.csv(data.frame(p = x[, 1], q = x[, 2], label = as.integer(x[, 1] > x[, 2])), path, row.names = FALSE)
  path
}

test_that("a Keras model trains on a streamed CSV source", {
  skip_if_no_python()
  keras <- gpu_keras()
  path <- separable_csv(withr::local_tempdir(), 256)
  ds <- gpu_dataset(path, label = "label", batch_size = 32, seed = 1)
  model <- keras$Sequential(list(keras$Input(shape = list(2L)), keras$layers$Dense(2L)))
  model$compile(
    optimizer = keras$optimizers$Adam(learning_rate = 0.05),
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE)
  )
  # The number of rows is unknown until read: Keras warns at the end of the
  # first epoch that the data "ran out", as it does for any such dataset.
  warnings <- reticulate::import("warnings")
  history <- with(warnings$catch_warnings(), {
    warnings$simplefilter("ignore")
    model$fit(ds, epochs = 3L, shuffle = FALSE, verbose = 0L)
  })
  loss <- unlist(history$history$loss)
  expect_length(loss, 3)
  expect_lt(loss[3], loss[1])
})

test_that("gpu_fit() on CSV files, whose rows are unknown until read, never runs out of data (issue #32, item 8)", {
  skip_if_no_python()
  keras <- gpu_keras()
  path <- separable_csv(withr::local_tempdir(), 200)
  for (validation_split in c(0, 0.25)) {
    ds <- gpu_dataset(path, label = "label", batch_size = 16, seed = 1, validation_split = validation_split)
    model <- keras$Sequential(list(keras$Input(shape = list(2L)), keras$layers$Dense(2L)))
    model$compile(optimizer = "adam", loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE))
    # Keras' "Your input ran out of data" (or gpukeras' warning made of it) would fail here.
    expect_no_warning(fit <- gpu_fit(model, ds, epochs = 3, verbose = 0, monitor = FALSE))
    expect_identical(fit$history$epoch, 1:3)
    expect_length(fit$history$val_loss, if (validation_split > 0) 3L else 0L)
  }
})

test_that("bad CSV sources are classed errors that name the column or the pattern", {
  skip_if_no_python()
  dir <- withr::local_tempdir()
  utils::write.csv(
    data.frame(a = 1:3, colour = c("red", "green", "blue"), label = 0:2),
    file.path(dir, "text.csv"),
    row.names = FALSE
  )
  expect_error(
    gpu_dataset(file.path(dir, "text.csv"), label = "label"),
    "Column\\(s\\) \"colour\" of '.*text.csv' hold text \\(e.g. \"red\"\\).*columns = c\\(\"a\"\\)",
    class = "gpukeras_error_bad_data"
  )
  # Leaving the text column out works.
  kept <- gpu_dataset(file.path(dir, "text.csv"), label = "label", columns = "a", shuffle = FALSE)
  expect_identical(dataset_batches(kept)[[1]][[1]], matrix(c(1, 2, 3)))
  expect_error(
    gpu_dataset(file.path(dir, "text.csv"), label = "target", columns = "a"),
    "label = \"target\" is not a column.*Columns: \"a\", \"colour\", \"label\"",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_dataset(file.path(dir, "nothing-*.csv"), label = "label"),
    "No CSV files match '.*nothing-\\*.csv'",
    class = "gpukeras_error_missing_files"
  )
  expect_error(
    gpu_dataset(file.path(dir, "no-such-folder")),
    "is not a folder, a CSV file/glob or TFRecord files",
    class = "gpukeras_error_missing_files"
  )
  # write.csv()'s default row names leave the first column without a name.
  utils::write.csv(data.frame(a = 1:3, label = 0:2), file.path(dir, "rownames.csv"))
  expect_error(
    gpu_dataset(file.path(dir, "rownames.csv"), label = "label"),
    "Column 1 of .* has no name.*row.names = FALSE",
    class = "gpukeras_error_bad_data"
  )
  other <- withr::local_tempdir()
  utils::write.csv(data.frame(a = 1, label = 0), file.path(other, "one.csv"), row.names = FALSE)
  utils::write.csv(data.frame(b = 1, label = 0), file.path(other, "two.csv"), row.names = FALSE)
  expect_error(
    gpu_dataset(file.path(other, "*.csv"), label = "label"),
    "two.csv' has the header \"b\", \"label\".*same columns",
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(file.path(dir, "text.csv"), label = 1),
    "`label` must be one non-empty string",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_dataset(file.path(dir, "text.csv"), columns = 1:2),
    "`columns` must be column names",
    class = "gpukeras_error_bad_argument"
  )
})

# Image folder ----------------------------------------------------------------

# A folder with one sub-folder per class: 3 "cats" and 2 "dogs" (numbered 1 to 5).
image_folder <- function(dir) {
  dir.create(file.path(dir, "dogs"))
  dir.create(file.path(dir, "cats"))
  for (i in 1:3) write_png(file.path(dir, "cats", sprintf("cat%d.png", i)), test_image(i))
  for (i in 4:5) write_png(file.path(dir, "dogs", sprintf("dog%d.png", i)), test_image(i))
  writeLines("not an image", file.path(dir, "cats", "README.txt"))
  dir
}

test_that("an image folder gives each image with its class (sub-folders in sorted order)", {
  skip_if_no_python()
  dir <- image_folder(withr::local_tempdir())
  ds <- gpu_dataset(dir, image_size = c(4, 5), batch_size = 4, shuffle = FALSE)
  expect_identical(ds$element_spec[[1]]$shape$as_list(), list(NULL, 4L, 5L, 3L))
  expect_identical(ds$element_spec[[1]]$dtype$name, "float32")
  expect_identical(ds$element_spec[[2]]$dtype$name, "int32")
  info <- attr(ds, "gpukeras")
  expect_identical(info$source, "image_folder")
  expect_identical(info$class_names, c("cats", "dogs"))
  expect_identical(info$class_counts, c(3L, 2L))
  expect_identical(info$rows, 5L)
  expect_identical(info$batches, 2L)
  expect_identical(info$skipped_files, 1L)
  batches <- dataset_batches(ds)
  expect_identical(stacked(batches, 2), c(0L, 0L, 0L, 1L, 1L))
  # At their own size, the pixels come back exactly, as float32 in [0, 255].
  images <- rbind(
    matrix(batches[[1]][[1]], nrow = 4),
    matrix(batches[[2]][[1]], nrow = 1)
  )
  for (i in 1:5) {
    expect_identical(array(images[i, ], dim = c(4, 5, 3)), test_image(i))
  }
  expect_output(print(ds), "train pipeline from image_folder: 5 images in 2 classes, 2 batches", fixed = TRUE)

  shuffled <- gpu_dataset(dir, image_size = c(4, 5), seed = 3)
  batch <- dataset_batches(shuffled)[[1]]
  for (r in 1:5) {
    number <- which(vapply(1:5, function(i) identical(batch[[1]][r, , , ], test_image(i)), logical(1)))
    expect_length(number, 1)
    expect_identical(as.vector(batch[[2]])[r], if (number <= 3) 0L else 1L)
  }
})

test_that(paste(
  "images without labels are scored as the training folder's were: a flat folder, or paths (issue #32, item 2)"
), {
  skip_if_no_python()
  dir <- file.path(withr::local_tempdir(), "train")
  dir.create(dir)
  image_folder(dir)
  keras <- gpu_keras()
  keras$utils$set_random_seed(2L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(2L, 3L, 3L)), keras$layers$Flatten(), keras$layers$Dense(2L, activation = "softmax")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  fit <- gpu_fit(
    model,
    gpu_dataset(dir, image_size = c(2, 3), rescale = 1 / 255, batch_size = 2),
    epochs = 1,
    verbose = 0,
    monitor = FALSE
  )
  new <- file.path(dirname(dir), "new")
  dir.create(new)
  for (i in c(5, 2)) file.copy(
    file.path(dir, c("cats/cat2.png", "dogs/dog5.png")[(i == 5) + 1]), file.path(new, sprintf("img%d.png", i))
  )
  writeLines("not an image", file.path(new, "notes.txt"))
  # The training pipeline's own images for those two files (same size, rescale), in name order.
  reference <- gpu_dataset(dir, image_size = c(2, 3), rescale = 1 / 255, shuffle = FALSE, batch_size = 5)
  pixels <- dataset_batches(reference)[[1]][[1]]
  expected <- model$predict(reticulate::np_array(pixels[c(2, 5), , , , drop = FALSE], dtype = "float32"), verbose = 0L)
  flat <- predict(fit, new)
  expect_identical(rownames(flat), file.path(new, c("img2.png", "img5.png")))
  # the folder's path ending in slashes names the rows alike (not new//img2.png)
  expect_identical(predict(fit, paste0(new, "//")), flat)
  expect_identical(colnames(flat), c("cats", "dogs"))
  expect_equal(unname(flat), expected, tolerance = 1e-6)
  paths <- file.path(new, c("img5.png", "img2.png"))
  given <- predict(fit, paths, type = "class")
  expect_identical(names(given), paths)
  expect_identical(as.character(given), as.character(predict(fit, new, type = "class"))[2:1])
  expect_error(
    predict(fit, file.path(new, "gone.png")),
    "1 image file(s) do not exist",
    fixed = TRUE,
    class = "gpukeras_error_missing_files"
  )
  expect_error(
    predict(fit, file.path(new, "notes.txt")), "not PNG, JPEG, GIF or BMP", class = "gpukeras_error_bad_image"
  )
  expect_error(
    evaluate(fit, new, c("cats", "dogs")), "image files to score have none", class = "gpukeras_error_bad_argument"
  )
  # A folder of class sub-folders is still read labelled, as training read it.
  expect_identical(dim(predict(fit, dir)), c(5L, 2L))
  # a folder of neither is told what predict() takes
  empty <- file.path(dirname(dir), "empty")
  dir.create(empty)
  writeLines("not an image", file.path(empty, "notes.txt"))
  expect_snapshot(
    error = TRUE, predict(fit, empty), transform = function(lines) gsub(dirname(dir), "<tmp>", lines, fixed = TRUE)
  )
})

# A class folder without images is kept as a factor's level no row has is (issue #76 item 4):
# a class, said by gpu_dataset(); a model without a unit for it refused before it trains.
test_that("a class folder without images is a class, warned of; a model without its unit is refused", {
  skip_if_no_python()
  dir <- image_folder(withr::local_tempdir())
  dir.create(file.path(dir, "owls"))
  tidy <- function(lines) gsub(dir, "<dir>", lines, fixed = TRUE)
  expect_snapshot(ds <- gpu_dataset(dir, image_size = c(2, 3), batch_size = 2, seed = 1), transform = tidy)
  expect_identical(attr(ds, "gpukeras")$encoding$y$levels, c("cats", "dogs", "owls"))
  keras <- gpu_keras()
  classifier <- function(units) {
    model <- keras$Sequential(list(
      keras$Input(shape = list(2L, 3L, 3L)), keras$layers$Flatten(),
      keras$layers$Dense(as.integer(units), activation = "softmax")
    ))
    model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
    model
  }
  narrow <- classifier(2)
  expect_snapshot(error = TRUE, gpu_fit(narrow, ds, epochs = 1, verbose = 0))
  expect_identical(as.integer(narrow$optimizer$iterations$numpy()), 0L)
  fit <- gpu_fit(classifier(3), ds, epochs = 1, verbose = 0, monitor = FALSE)
  expect_identical(colnames(predict(fit, file.path(dir, "cats"))), c("cats", "dogs", "owls"))
  expect_identical(levels(predict(fit, file.path(dir, "cats"), type = "class")), c("cats", "dogs", "owls"))
  # new images, labelled by the training classes, may lack some without a word
  expect_no_warning(gpu_dataset(dir, like = fit, batch_size = 2))
})

test_that("image_size resizes and color_mode = \"grayscale\" gives one channel", {
  skip_if_no_python()
  dir <- image_folder(withr::local_tempdir())
  small <- gpu_dataset(dir, image_size = c(2, 3), shuffle = FALSE)
  expect_identical(small$element_spec[[1]]$shape$as_list(), list(NULL, 2L, 3L, 3L))
  images <- dataset_batches(small)[[1]][[1]]
  expect_identical(dim(images), c(5L, 2L, 3L, 3L))
  expect_true(all(images >= 0 & images <= 255))

  gray <- gpu_dataset(dir, image_size = c(4, 5), color_mode = "grayscale", shuffle = FALSE)
  expect_identical(gray$element_spec[[1]]$shape$as_list(), list(NULL, 4L, 5L, 1L))
  expect_identical(attr(gray, "gpukeras")$channels, 1L)
  pixels <- dataset_batches(gray)[[1]][[1]]
  expect_identical(dim(pixels), c(5L, 4L, 5L, 1L))
  # Luma of the first image's colours (ITU-R 601 weights, as TensorFlow).
  expected <- apply(test_image(1), c(1, 2), function(rgb) sum(rgb * c(0.2989, 0.587, 0.114)))
  expect_equal(pixels[1, , , 1], expected, tolerance = 1e-2)

  # A gray image written with one channel reads as RGB with three equal ones.
  mono <- withr::local_tempdir()
  dir.create(file.path(mono, "only"))
  write_png(file.path(mono, "only", "gray.png"), test_image(6, channels = 1))
  rgb <- dataset_batches(gpu_dataset(mono, image_size = c(4, 5)))[[1]][[1]]
  expect_identical(dim(rgb), c(1L, 4L, 5L, 3L))
  for (channel in 1:3) expect_identical(rgb[1, , , channel], test_image(6, channels = 1)[, , 1])
})

test_that("an image folder splits into disjoint train and validation images", {
  skip_if_no_python()
  dir <- image_folder(withr::local_tempdir())
  split <- gpu_dataset(dir, image_size = c(4, 5), validation_split = 0.4, seed = 7)
  number_of <- function(batches) {
    unlist(lapply(batches, function(batch) {
      vapply(seq_len(dim(batch[[1]])[1]), function(r) {
        which(vapply(1:5, function(i) identical(batch[[1]][r, , , ], test_image(i)), logical(1)))
      }, integer(1))
    }))
  }
  train <- number_of(dataset_batches(split$train))
  validation <- number_of(dataset_batches(split$validation))
  expect_length(intersect(train, validation), 0)
  expect_setequal(c(train, validation), 1:5)
  expect_identical(number_of(dataset_batches(split$validation)), validation)
  # Counted images: both parts know their length (Keras never runs out of data).
  expect_length(validation, 2L)
  expect_identical(attr(split$train, "gpukeras")$batches, 1L)
  expect_output(
    print(split$train), "train pipeline from image_folder: 3 of 5 images in 2 classes, 1 batch", fixed = TRUE
  )
  expect_output(
    print(split$validation), "validation pipeline from image_folder: 2 of 5 images in 2 classes, 1 batch", fixed = TRUE
  )
})

test_that("augmentation runs on image folder batches", {
  skip_if_no_python()
  dir <- image_folder(withr::local_tempdir())
  ds <- gpu_dataset(dir, image_size = c(4, 5), augment = list(crop = list(height = 2, width = 2)), seed = 1)
  expect_identical(ds$element_spec[[1]]$shape$as_list(), list(NULL, 2L, 2L, 3L))
  expect_identical(dim(dataset_batches(ds)[[1]][[1]]), c(5L, 2L, 2L, 3L))
})

test_that("a file that is not an image is gpukeras_error_bad_image naming the file", {
  skip_if_no_python()
  dir <- image_folder(withr::local_tempdir())
  withr::with_seed(
    1, writeBin(c(as.raw(0), as.raw(sample(0:255, 200, replace = TRUE))), file.path(dir, "dogs", "bad.png"))
  )
  expect_error(
    gpu_dataset(dir),
    "1 file\\(s\\) in .* are not PNG, JPEG, GIF or BMP images.*dogs/bad.png.*Remove them",
    class = "gpukeras_error_bad_image"
  )
})

test_that("a PNG that cannot be decoded fails with a classed error, and R carries on", {
  skip_if_no_python()
  # The first bytes say PNG, so gpu_dataset() accepts it; decoding fails when a
  # batch is made, which gpu_dataset_benchmark() (and gpu_fit()) report as bad data.
  dir <- image_folder(withr::local_tempdir())
  png_signature <- as.raw(c(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a))
  writeBin(c(png_signature, as.raw(1:64)), file.path(dir, "dogs", "truncated.png"))
  ds <- gpu_dataset(dir, image_size = c(4, 5), batch_size = 6, shuffle = FALSE)
  expect_error(
    gpu_dataset_benchmark(ds, steps = 2),
    "The benchmark stopped at batch 1: a batch could not be made from the data.*PNG.*corrupt or truncated image",
    class = "gpukeras_error_bad_data"
  )
  unlink(file.path(dir, "dogs", "truncated.png"))
  expect_s3_class(
    gpu_dataset_benchmark(gpu_dataset(dir, image_size = c(4, 5)), steps = 2), "gpukeras_dataset_benchmark"
  )
})

test_that("missing or empty image folders and bad image options are classed errors", {
  skip_if_no_python()
  dir <- withr::local_tempdir()
  expect_error(
    gpu_dataset(file.path(dir, "photos")),
    "'.*photos' is not a folder.*one sub-folder per class",
    class = "gpukeras_error_missing_files"
  )
  expect_error(gpu_dataset(dir), "has no sub-folders", class = "gpukeras_error_missing_files")
  dir.create(file.path(dir, "empty"))
  expect_error(
    gpu_dataset(dir), "No images .* in the class folders .*\"empty\"", class = "gpukeras_error_missing_files"
  )
  expect_error(
    gpu_dataset(dir, image_size = 3), "`image_size` must be c\\(height, width\\)", class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_dataset(dir, image_size = c(0, 4)),
    "`image_size` must be c\\(height, width\\)",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_dataset(dir, color_mode = "cmyk"),
    "`color_mode` must be one of \"rgb\", \"grayscale\"",
    class = "gpukeras_error_bad_argument"
  )
})

# TFRecord --------------------------------------------------------------------

test_that("TFRecord files of tf.train.Example records round-trip their values", {
  skip_if_no_python()
  dir <- withr::local_tempdir()
  examples <- lapply(1:5, function(i) {
    tf_example(x = c(i, i / 2, -i), label = as.integer(i %% 2), name = charToRaw(sprintf("row %d", i)))
  })
  write_tfrecord(file.path(dir, "part-1.tfrecord"), examples[1:3])
  write_tfrecord(file.path(dir, "part-2.tfrecord"), examples[4:5])

  one <- gpu_dataset(file.path(dir, "part-1.tfrecord"), label = "label", shuffle = FALSE)
  spec <- one$element_spec
  expect_identical(sort(names(spec[[1]])), c("name", "x"))
  expect_identical(spec[[1]]$x$shape$as_list(), list(NULL, 3L))
  expect_identical(spec[[1]]$x$dtype$name, "float32")
  expect_identical(spec[[1]]$name$dtype$name, "string")
  expect_identical(spec[[2]]$dtype$name, "int32")
  batch <- dataset_batches(one)[[1]]
  expect_identical(batch[[1]]$x, cbind(1:3, (1:3) / 2, -(1:3)) + 0)
  expect_identical(as.vector(batch[[2]]), c(1L, 0L, 1L))
  info <- attr(one, "gpukeras")
  expect_identical(info$source, "tfrecord")
  expect_identical(info$label, "label")
  expect_identical(info$label_dtype, "int32")

  both <- gpu_dataset(file.path(dir, "*.tfrecord"), label = "label", batch_size = 2, seed = 1)
  batches <- dataset_batches(both)
  x <- do.call(rbind, lapply(batches, function(batch) batch[[1]]$x))
  y <- unlist(lapply(batches, function(batch) as.vector(batch[[2]])))
  expect_identical(sort_rows(cbind(x, y)), cbind(1:5, (1:5) / 2, -(1:5), (1:5) %% 2) + 0)

  # Without a label, every feature is in the dict; a one-value number keeps shape (1).
  unlabelled <- gpu_dataset(file.path(dir, "part-2.tfrecord"), shuffle = FALSE)
  expect_identical(sort(names(unlabelled$element_spec)), c("label", "name", "x"))
  expect_identical(unlabelled$element_spec$label$shape$as_list(), list(NULL, 1L))
  batch <- dataset_batches(unlabelled)[[1]]
  expect_identical(batch$label, matrix(c(0L, 1L)))
  expect_identical(batch$x, cbind(4:5, (4:5) / 2, -(4:5)) + 0)
})

test_that("bad TFRecord sources are classed errors", {
  skip_if_no_python()
  dir <- withr::local_tempdir()
  write_tfrecord(file.path(dir, "data.tfrecord"), list(tf_example(x = c(1, 2), label = 1L)))
  expect_error(
    gpu_dataset(file.path(dir, "data.tfrecord"), label = "target"),
    "label = \"target\" is not a feature of .*Features: \"label\", \"x\"",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_dataset(file.path(dir, "missing-*.tfrecord")),
    "No TFRecord files match '.*missing-\\*.tfrecord'",
    class = "gpukeras_error_missing_files"
  )
  writeBin(as.raw(1:100), file.path(dir, "junk.tfrecord"))
  expect_error(
    gpu_dataset(file.path(dir, "junk.tfrecord")),
    "Could not read a record from '.*junk.tfrecord'.*TFRecordWriter",
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    gpu_dataset(file.path(dir, "data.tfrecord"), y = 1),
    "`y` is for R data",
    class = "gpukeras_error_bad_argument"
  )
})
