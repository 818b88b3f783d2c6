# Scoring new data (issue #28, item 1): predict() and evaluate() of a
# gpukeras_fit encode new data as the training data was (levels matched by
# name, columns by name, the NA rule), gpu_dataset(like = ) does the same for
# pipelines, and gpu_save()/gpu_load() carry the encoding to a later session.
# The core's verbs are tested in python/tests/test_predict.py.

# Training data with a factor and a character column, and a label factor.
scoring_data <- function(n = 240) {
  withr::with_seed(3, {
    x <- data.frame(
      size = stats::rnorm(n),
      colour = factor(sample(c("blue", "green", "red"), n, TRUE)),
      shape = sample(c("round", "square"), n, TRUE),
      stringsAsFactors = FALSE
    )
    y <- factor(ifelse(x$size + 2 * (x$colour == "red") - (x$shape == "round") > 0, "big", "small"))
  })
  list(x = x, y = y)
}

scoring_fit <- local({
  fit <- NULL
  function() {
    if (is.null(fit)) {
      keras <- gpu_keras()
      keras$utils$set_random_seed(7L)
      model <- keras$Sequential(list(
        keras$Input(shape = list(6L)), # size, colour's 3 indicator columns, shape's 2
        keras$layers$Dense(16L, activation = "relu"),
        keras$layers$Dense(2L, activation = "softmax", dtype = "float32")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
      fit <<- gpu_fit(model, scoring_data(), epochs = 3, verbose = 0, monitor = FALSE, seed = 1)
    }
    fit
  }
})

test_that("scoring checks its arguments before Python", {
  empty <- structure(list(model = NULL), class = "gpukeras_fit")
  expect_error(predict(empty), "`newdata` is missing", class = "gpukeras_error_bad_argument")
  expect_error(predict(empty, data.frame(a = 1)), "holds no model", class = "gpukeras_error_bad_argument")
  expect_error(evaluate(empty, data.frame(a = 1)), "`y` is missing", class = "gpukeras_error_bad_argument")
  expect_error(
    predict(empty, data.frame(a = 1), type = "prob"), "`type` must be one of", class = "gpukeras_error_bad_argument"
  )
  expect_error(gpu_save(empty, "model.h5"), "`path` must end in .keras", class = "gpukeras_error_bad_argument")
  expect_error(
    gpu_save(1, "model.keras"),
    "`object` must be a gpu_fit() result",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_dataset(matrix(1, 2, 2), like = 1),
    "`like` must be a gpu_dataset()",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  tabular <- structure(
    list(encoding = encoding_from_plain(list(inputs = list(x = list(type = "array", shape = 1L, names = "a"))))),
    class = "gpukeras_fit"
  )
  expect_error(
    gpu_dataset("data/*.csv", like = tabular),
    "`like` was trained on R data, not an image folder",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_dataset("data/*.csv", like = empty),
    "`like` has no record of how its data was encoded",
    class = "gpukeras_error_bad_argument"
  )
  if (!isNamespaceLoaded("keras3")) {
    expect_error(
      evaluate(1), "evaluate() scores a gpu_fit() result", fixed = TRUE, class = "gpukeras_error_bad_argument"
    )
  }
})

test_that("the encoding is recorded from the training data and kept on the dataset and the fit", {
  skip_if_no_python() # the core makes the encoding
  data <- scoring_data(20)
  encoding <- data_encoding(data$x, data$y)
  expect_s3_class(encoding, "gpukeras_encoding")
  expect_identical(names(encoding$inputs$x$columns), c("size", "colour", "shape"))
  expect_identical(
    encoding$inputs$x$columns$colour, list(type = "factor", levels = c("blue", "green", "red"), encoding = "one_hot")
  )
  expect_identical(encoding$inputs$x$columns$shape$levels, c("round", "square"))
  expect_identical(encoding$y$levels, c("big", "small"))
  expect_identical(
    attr(gpu_dataset(data$x, data$y), "gpukeras")$vocabulary,
    list(colour = c("blue", "green", "red"), shape = c("round", "square"), y = c("big", "small"))
  )
  expect_match(format(encoding), "colour <factor(3), one-hot>", fixed = TRUE, all = FALSE)

  ds <- gpu_dataset(data$x, data$y, shuffle = FALSE)
  expect_identical(attr(ds, "gpukeras")$encoding, encoding)
  expect_identical(scoring_fit()$encoding, data_encoding(scoring_data()$x, scoring_data()$y))
})

test_that("the same rows scored among other levels, in another order, get the same predictions", {
  skip_if_no_python()
  fit <- scoring_fit()
  data <- scoring_data()
  rows <- c(5, 17, 60, 101, 200)
  reference <- predict(fit, data$x[rows, ])
  expect_identical(dim(reference), c(5L, 2L))
  expect_identical(colnames(reference), c("big", "small"))

  # The same rows among others whose levels differ: factor levels in another
  # order with an unused one, character columns as factors, columns reordered,
  # an extra column, rows shuffled.
  others <- data.frame(size = c(0.3, -1), colour = c("green", "green"), shape = c("square", "square"))
  mixed <- rbind(others, data$x[rows, ])
  mixed$colour <- factor(mixed$colour, levels = c("red", "yellow", "green", "blue"))
  mixed$shape <- factor(mixed$shape, levels = c("square", "round"))
  mixed$id <- seq_len(nrow(mixed))
  order <- c(7, 1, 4, 2, 6, 3, 5)
  mixed <- mixed[order, c("id", "shape", "colour", "size")]
  scored <- predict(fit, mixed)
  at <- match(3:7, mixed$id)
  expect_equal(unname(scored[at, ]), unname(reference), tolerance = 1e-6)

  # The encoded numbers themselves are the training levels' indicator columns.
  encoded <- core_encoded(as_pipeline_data(mixed, NULL, "error", encoding = fit$encoding))
  expect_identical(
    colnames(encoded), c("size", "colour=blue", "colour=green", "colour=red", "shape=round", "shape=square")
  )
  expect_identical(
    unname(encoded[, 2:4]),
    unname(model.matrix(
      ~ 0 + colour, transform(mixed, colour = factor(as.character(colour), levels = c("blue", "green", "red")))
    ))[, , drop = FALSE] + 0
  )

  # And a later R session, from the saved files, scores them the same way.
  dir <- withr::local_tempdir()
  path <- file.path(dir, "scoring.keras")
  gpu_save(fit, path)
  later <- do.call(run_in_fresh_r, list(expr = bquote({
    saved <- gpu_load(.(path))
    list(
      raw = predict(saved, .(mixed)),
      class = as.character(predict(saved, .(mixed), type = "class")),
      scores = evaluate(saved, .(mixed[at, ]), .(data$y[rows]))
    )
  }), timeout = 300))
  expect_equal(later$raw, scored, tolerance = 1e-6)
  expect_identical(later$class, as.character(predict(fit, mixed, type = "class")))
  expect_equal(later$scores, evaluate(fit, mixed[at, ], data$y[rows]), tolerance = 1e-6)
})

test_that("gpu_dataset(like = ) encodes new data as training did; a dataset of its own levels is refused", {
  skip_if_no_python()
  fit <- scoring_fit()
  data <- scoring_data()
  new <- data.frame(size = c(1, 2), colour = c("red", "red"), shape = c("round", "square"))
  own <- gpu_dataset(new, shuffle = FALSE)
  # The silent bug of issue #28: on its own, "red" is code 0 here, code 2 in training.
  expect_identical(attr(own, "gpukeras")$vocabulary$colour, "red")
  expect_error(
    predict(fit, own),
    "gpu_dataset(..., like = <the training dataset or fit>)",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )

  like <- gpu_dataset(new, shuffle = FALSE, like = fit)
  expect_identical(attr(like, "gpukeras")$encoding$inputs, fit$encoding$inputs)
  expect_identical(attr(like, "gpukeras")$vocabulary$colour, c("blue", "green", "red"))
  # the pipeline keeps the factor's codes; as the model sees them, its indicator columns
  np <- reticulate::import("numpy", convert = FALSE)
  arrays <- attr(like, "gpukeras_recipe")$arrays
  expect_equal(reticulate::py_to_r(np$asarray(arrays$x))[, 2:4], rbind(c(0, 0, 1), c(0, 0, 1)))
  expect_equal(predict(fit, like), predict(fit, new), tolerance = 1e-6)
  expect_error(predict(fit, gpu_dataset(new, like = fit)), "shuffle = FALSE", class = "gpukeras_error_bad_argument")
  expect_error(
    predict(fit, "new/"), "the model was not trained on an image folder", class = "gpukeras_error_bad_argument"
  )
  # like = a training dataset works as like = the fit.
  train <- gpu_dataset(data$x, data$y, shuffle = FALSE)
  expect_equal(
    reticulate::py_to_r(np$asarray(attr(gpu_dataset(new, shuffle = FALSE, like = train), "gpukeras_recipe")$arrays$x)),
    reticulate::py_to_r(np$asarray(arrays$x))
  )
  # Labels too: by name, with the fit's levels.
  labelled <- gpu_dataset(new, factor(c("small", "big"), levels = c("small", "big")), shuffle = FALSE, like = fit)
  expect_equal(as.vector(reticulate::py_to_r(attr(labelled, "gpukeras_recipe")$arrays$y)), c(1, 0))
  expect_equal(evaluate(fit, labelled), evaluate(fit, new, c("small", "big")), tolerance = 1e-6)
})

test_that("new levels are an error naming them, or all-zero indicator columns when asked", {
  skip_if_no_python()
  fit <- scoring_fit()
  new <- data.frame(size = c(1, 2, 3), colour = c("red", "purple", "mauve"), shape = "round")
  error <- tryCatch(predict(fit, new), error = identity)
  expect_s3_class(error, "gpukeras_error_new_levels")
  expect_identical(error$column, "x$colour")
  expect_identical(error$levels, c("purple", "mauve"))
  expect_match(
    conditionMessage(error), "`x$colour` has level(s) not seen in training: \"purple\", \"mauve\"", fixed = TRUE
  )
  expect_match(
    conditionMessage(error),
    "give unknown = \"zero\" to score them with every indicator column of that factor 0",
    fixed = TRUE
  )
  expect_error(gpu_dataset(new, like = fit), class = "gpukeras_error_new_levels")
  expect_error(
    evaluate(fit, new[1, ], "huge"),
    "`y` has level(s) not seen in training: \"huge\"",
    fixed = TRUE,
    class = "gpukeras_error_new_levels"
  )
  # "code" would feed a Dense model the number of an invented level: refused for one-hot
  expect_error(
    predict(fit, new, unknown = "code"), "unknown = \"zero\"", fixed = TRUE, class = "gpukeras_error_new_levels"
  )

  zeroed <- gpu_dataset(new, like = fit, unknown = "zero", shuffle = FALSE)
  np <- reticulate::import("numpy", convert = FALSE)
  zeroed_x <- reticulate::py_to_r(np$asarray(attr(zeroed, "gpukeras_recipe")$arrays$x))
  expect_equal(zeroed_x[, 2:4], rbind(c(0, 0, 1), 0, 0))
  expect_identical(dim(predict(fit, new, unknown = "zero")), c(3L, 2L))
})

test_that("a factor of integer codes (factors = \"codes\") gets the reserved code when asked", {
  skip_if_no_python()
  data <- scoring_data()
  keras <- gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = list(3L)), keras$layers$Dense(2L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  fit <- gpu_fit(model, gpu_dataset(data$x, data$y, factors = "codes"), epochs = 1, verbose = 0, monitor = FALSE)
  expect_identical(fit$encoding$inputs$x$columns$colour$encoding, "codes")
  new <- data.frame(size = c(1, 2, 3), colour = c("red", "purple", "mauve"), shape = "round")
  error <- expect_error(predict(fit, new), class = "gpukeras_error_new_levels")
  expect_match(
    conditionMessage(error), "give unknown = \"code\" to score them with the reserved code length(levels)", fixed = TRUE
  )
  coded <- gpu_dataset(new, like = fit, unknown = "code", shuffle = FALSE)
  expect_equal(reticulate::py_to_r(attr(coded, "gpukeras_recipe")$arrays$x)[, 2], c(2, 3, 3))
  expect_identical(dim(predict(fit, new, unknown = "code")), c(3L, 2L))
  expect_error(
    predict(fit, new, unknown = "zero"), "unknown = \"code\"", fixed = TRUE, class = "gpukeras_error_new_levels"
  )
})

test_that("columns, types and shapes that do not match training are classed errors", {
  skip_if_no_python()
  fit <- scoring_fit()
  expect_error(
    predict(fit, data.frame(size = 1, colour = "red")),
    "lacks column(s) the model was trained on: shape",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    predict(fit, data.frame(size = "1", colour = "red", shape = "round")),
    "`x$size` is not numeric (character); in training it was numeric.",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    predict(fit, data.frame(size = 1, colour = 2, shape = "round")),
    "`x$colour` is numeric (numeric); in training it was a factor.",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    predict(fit, matrix(1, 2, 3)),
    "`x` must be a data.frame, as in training",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
  expect_error(
    predict(fit, list(a = data.frame(size = 1))),
    "the model was trained on one input",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
})

test_that("matrices are matched by column name and shape; NA follows the rule asked for", {
  skip_if_no_python()
  data <- regression_data(64)
  colnames(data$x) <- c("a", "b", "c", "d")
  fit <- gpu_fit(tiny_model(), data, epochs = 1, verbose = 0, monitor = FALSE, seed = 1)
  expect_identical(fit$encoding$inputs$x$names, c("a", "b", "c", "d"))
  reference <- predict(fit, data$x[1:4, ], batch_size = 3)
  expect_equal(predict(fit, data$x[1:4, c("d", "b", "a", "c")]), reference, tolerance = 1e-6)
  expect_equal(predict(fit, as.data.frame(data$x[1:4, 4:1])), reference, tolerance = 1e-6)
  expect_equal(predict(fit, unname(data$x[1:4, ])), unname(reference), tolerance = 1e-6)
  expect_error(
    predict(fit, matrix(1, 2, 3)),
    "has shape (3); the model was trained on rows of shape (4)",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
  # Keras' own answer, in any batch size.
  model_output <- keras_predict(fit$model, reticulate::np_array(data$x, dtype = "float32"), verbose = 0L)
  expect_equal(unname(predict(fit, data$x, batch_size = 5)), model_output, tolerance = 1e-6)
  scores <- evaluate(fit, data$x, data$y)
  expect_named(scores, c("loss", "mae"), ignore.order = TRUE)
  keras_scores <- fit$model$evaluate(
    reticulate::np_array(data$x, dtype = "float32"),
    reticulate::np_array(data$y, dtype = "float32"),
    verbose = 0L,
    return_dict = TRUE
  )
  expect_equal(scores[["loss"]], keras_scores$loss, tolerance = 1e-5)

  holed <- data$x[1:4, ]
  holed[2, "c"] <- NA
  expect_error(
    predict(fit, holed), "NA/NaN in 1 row(s) (first: 2), in x$c", fixed = TRUE, class = "gpukeras_error_bad_data"
  )
  error <- expect_error(predict(fit, holed), class = "gpukeras_error_missing_values")
  expect_identical(list(error$column, error$rows, error$n_rows), list("x$c", 2L, 1L))
  padded <- predict(fit, holed, na = "drop")
  expect_identical(dim(padded), c(4L, 1L))
  expect_true(is.na(padded[2, 1]))
  expect_equal(padded[-2, , drop = FALSE], reference[-2, , drop = FALSE], tolerance = 1e-6)
  expect_equal(
    evaluate(fit, holed, data$y[1:4], na = "drop"),
    evaluate(fit, data$x[-2, ][1:3, ], data$y[c(1, 3, 4)]),
    tolerance = 1e-6
  )
})

test_that("type = \"class\" gives the training labels' levels", {
  skip_if_no_python()
  fit <- scoring_fit()
  data <- scoring_data()
  classes <- predict(fit, data$x, type = "class")
  expect_s3_class(classes, "factor")
  expect_identical(levels(classes), c("big", "small"))
  raw <- predict(fit, data$x)
  expect_identical(as.character(classes), colnames(raw)[max.col(raw, "first")])
  expect_true(paste(
    "Encoding:       6 columns: size, colour (3 levels, one-hot), shape (2 levels, one-hot); classes big, small;",
    "predict(fit, newdata) and gpu_save() encode new data the same way"
  ) %in% format(fit))
  accuracy <- mean(classes == data$y)
  expect_equal(evaluate(fit, data$x, data$y)[["accuracy"]], accuracy, tolerance = 1e-6)
})

test_that("gpu_save() writes the two files alone and refuses to overwrite; gpu_load() reads them back", {
  skip_if_no_python()
  fit <- scoring_fit()
  dir <- withr::local_tempdir()
  writeLines("keep me", file.path(dir, "notes.txt"))
  path <- file.path(dir, "model.keras")
  written <- gpu_save(fit, path)
  expect_identical(
    sort(list.files(dir, all.files = TRUE, no.. = TRUE)), c("model.gpukeras.json", "model.keras", "notes.txt")
  )
  expect_identical(
    unlist(written), c(model = normalizePath(path), encoding = normalizePath(file.path(dir, "model.gpukeras.json")))
  )
  expect_error(gpu_save(fit, path), "overwrite = TRUE", class = "gpukeras_error_bad_argument")
  writeLines("{}", file.path(dir, "other.gpukeras.json"))
  expect_error(
    gpu_save(fit, file.path(dir, "other.keras")),
    "other.gpukeras.json already exists",
    class = "gpukeras_error_bad_argument"
  )
  expect_false(file.exists(file.path(dir, "other.keras")))
  gpu_save(fit, path, overwrite = TRUE)
  expect_identical(readLines(file.path(dir, "notes.txt")), "keep me")

  saved <- gpu_load(path)
  expect_s3_class(saved, "gpukeras_model")
  expect_identical(saved$encoding, fit$encoding)
  expect_match(format(saved), "colour <factor(3), one-hot>", fixed = TRUE, all = FALSE)
  data <- scoring_data()
  expect_equal(predict(saved, data$x), predict(fit, data$x), tolerance = 1e-6)
  expect_identical(attr(gpu_dataset(data$x[1:3, ], like = saved), "gpukeras")$encoding$inputs, fit$encoding$inputs)
  # A Keras model saves without an encoding; loaded, it takes numbers.
  gpu_save(fit$model, file.path(dir, "bare.keras"))
  bare <- gpu_load(file.path(dir, "bare.keras"))
  expect_null(bare$encoding)
  expect_match(format(bare), "no encoding saved", all = FALSE)
  expect_error(gpu_load(file.path(dir, "none.keras")), "there is no file", class = "gpukeras_error_bad_argument")

  # A fit read back with readRDS() has lost its Python model.
  rds <- file.path(dir, "fit.rds")
  saveRDS(fit, rds)
  expect_error(
    predict(readRDS(rds), data$x),
    if (reticulate::py_is_null_xptr(readRDS(rds)$model)) "gpu_save" else NA,
    class = if (reticulate::py_is_null_xptr(readRDS(rds)$model)) "gpukeras_error_bad_argument"
  )
})

test_that("evaluate() methods reach keras3's generic when keras3 masks gpukeras'", {
  # A stand-in for keras3: a namespace with its own evaluate() generic, loaded
  # after the hook is set, as library(keras3) after library(gpukeras) would.
  lib <- withr::local_tempdir()
  source <- file.path(withr::local_tempdir(), "gpukerasmask")
  dir.create(file.path(source, "R"), recursive = TRUE)
  writeLines(
    c(
      "Package: gpukerasmask",
      "Version: 0.0.1",
      "Title: Mask",
      "Description: Mask.",
      "License: MIT",
      "Authors@R: person('a', role = c('aut', 'cre'), email = 'a@b.c')"
    ),
    file.path(source, "DESCRIPTION")
  )
  writeLines(c("export(evaluate)"), file.path(source, "NAMESPACE"))
  writeLines("evaluate <- function(object, ...) UseMethod(\"evaluate\")", file.path(source, "R", "evaluate.R"))
  out <- system2(
    file.path(R.home("bin"), "R"),
    c("CMD", "INSTALL", "--no-test-load", "-l", shQuote(lib), shQuote(source)),
    stdout = TRUE,
    stderr = TRUE
  )
  withr::local_libpaths(lib, action = "prefix")
  register_on_load("gpukerasmask", "evaluate", "gpukeras_fit", evaluate.gpukeras_fit)
  on.exit({
    setHook(packageEvent("gpukerasmask", "onLoad"), NULL, "replace")
    if (isNamespaceLoaded("gpukerasmask")) unloadNamespace("gpukerasmask")
  }, add = TRUE)
  masked <- getExportedValue("gpukerasmask", "evaluate")
  empty <- structure(list(model = NULL), class = "gpukeras_fit")
  expect_error(masked(empty, data.frame(a = 1), 1), "holds no model", class = "gpukeras_error_bad_argument")
})

# A PNG file from an R array height x width x channels of 0..255.
write_test_png <- function(path, pixels) {
  tf <- reticulate::import("tensorflow")
  tf$io$write_file(path, tf$io$encode_png(tf$constant(reticulate::np_array(pixels, dtype = "uint8"))))
}

# An image folder: `counts` images per class, each image's pixels its own.
write_image_folder <- function(dir, counts) {
  number <- 0
  for (class in names(counts)) {
    dir.create(file.path(dir, class), recursive = TRUE)
    for (i in seq_len(counts[[class]])) {
      number <- number + 1
      pixels <- array((seq_len(4 * 5 * 3) * 3 + number * 17) %% 256, c(4, 5, 3))
      write_test_png(file.path(dir, class, sprintf("%s%d.png", class, i)), pixels)
    }
  }
  dir
}

test_that(paste(
  "images: the pixel range is printed and rescale changes it; classes are the vocabulary and label new folders"
), {
  skip_if_no_python()
  expect_error(
    gpu_dataset(matrix(1, 2, 2), rescale = 1 / 255),
    "`rescale` is for image folders",
    class = "gpukeras_error_bad_argument"
  )
  dir <- write_image_folder(withr::local_tempdir(), c(cats = 3, dogs = 2, owls = 1))
  ds <- gpu_dataset(dir, image_size = c(4, 5), shuffle = FALSE)
  info <- attr(ds, "gpukeras")
  expect_identical(info$vocabulary, list(y = c("cats", "dogs", "owls")))
  expect_identical(info$encoding$y$levels, c("cats", "dogs", "owls"))
  expect_identical(info$encoding$inputs$x$shape, c(4L, 5L, 3L))
  expect_output(print(ds), "classes: cats, dogs, owls", fixed = TRUE)
  expect_output(print(ds), "pixels:  float32 in [0, 255] (rescale = 1/255 reads them in [0, 1])", fixed = TRUE)
  pixels <- reticulate::iterate(ds$as_numpy_iterator(), simplify = FALSE)[[1]][[1]]
  scaled <- gpu_dataset(dir, image_size = c(4, 5), shuffle = FALSE, rescale = 1 / 255)
  expect_output(print(scaled), "pixels:  float32 in [0, 1] (rescale = 0.003922)", fixed = TRUE)
  expect_equal(
    reticulate::iterate(scaled$as_numpy_iterator(), simplify = FALSE)[[1]][[1]], pixels / 255, tolerance = 1e-6
  )

  keras <- gpu_keras()
  keras$utils$set_random_seed(2L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L, 5L, 3L)),
    keras$layers$Flatten(),
    keras$layers$Dense(3L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  fit <- gpu_fit(model, scaled, epochs = 1, verbose = 0, monitor = FALSE)
  expect_match(fit$settings$data, "6 images", fixed = TRUE)
  expect_false(grepl("rows", fit$settings$data))
  expect_true(any(startsWith(format(fit), "Encoding:       classes cats, dogs, owls;")))
  expect_identical(fit$encoding$images, list(image_size = c(4L, 5L), color_mode = "rgb", rescale = 1 / 255))

  # A folder of new images lacking a class: read as in training (size, rescale), labelled by the training classes.
  new <- write_image_folder(withr::local_tempdir(), c(owls = 1, dogs = 1))
  scoring <- gpu_dataset(new, shuffle = FALSE, like = fit)
  expect_identical(attr(scoring, "gpukeras")$class_names, c("cats", "dogs", "owls"))
  labels <- unlist(lapply(reticulate::iterate(scoring$as_numpy_iterator(), simplify = FALSE), `[[`, 2))
  expect_identical(labels, c(1L, 2L))
  expect_equal(
    evaluate(fit, scoring)[["loss"]],
    evaluate(fit, gpu_dataset(new, image_size = c(4, 5), rescale = 1 / 255, shuffle = FALSE, like = fit))[["loss"]]
  )
  expect_error(predict(fit, ds), "image settings", class = "gpukeras_error_bad_data") # the same classes, not rescaled
  expect_equal(predict(fit, new), predict(fit, scoring), tolerance = 1e-6) # the folder itself
  classes <- predict(fit, scoring, type = "class")
  expect_identical(levels(classes), c("cats", "dogs", "owls"))
  # The same images as an R array score the same.
  array_images <- reticulate::iterate(scoring$as_numpy_iterator(), simplify = FALSE)[[1]][[1]]
  expect_equal(predict(fit, array_images), predict(fit, scoring), tolerance = 1e-6)
  # Pixels in 0-255 given to a model trained on rescaled ones: scored as they are, with a warning that says
  # how to scale.
  expect_warning(
    predict(fit, array_images * 255),
    "predict(fit, newdata * 0.003922)",
    fixed = TRUE,
    class = "gpukeras_warning_pixel_range"
  )
  # A class the training folder did not have.
  odd <- write_image_folder(withr::local_tempdir(), c(cats = 1, bats = 1))
  error <- tryCatch(gpu_dataset(odd, like = fit), error = identity)
  expect_s3_class(error, "gpukeras_error_new_levels")
  expect_identical(error$levels, "bats")
  # The image settings survive gpu_save()/gpu_load().
  path <- file.path(withr::local_tempdir(), "images.keras")
  gpu_save(fit, path)
  expect_identical(gpu_load(path)$encoding, fit$encoding)
  expect_match(format(gpu_load(path)), "images: 4 x 5, rgb, pixels in [0, 1]", fixed = TRUE, all = FALSE)
  # The prediction service applies the same rule: predict()'s answer, and its warning in the answer, where a
  # client reads it.
  settings <- serve_settings(fit, NULL, 10, 32, "error", NULL, NULL, current_env())
  served <- core_call("serve_service", model = fit$model, encoding = fit$encoding, settings = settings)
  ask <- function(pixels) {
    body <- charToRaw(as.character(jsonlite::toJSON(pixels, digits = NA)))
    headers <- list(`content-type` = "application/json", `content-length` = as.character(length(body)))
    answer <- core_call("serve_answer", served = served, method = "POST", path = "/predict", query = "",
                        headers = headers, body = body)
    c(list(status = as.integer(answer$status)), jsonlite::fromJSON(answer$body))
  }
  raw <- ask(array_images * 255)
  expect_identical(raw$status, 200L)
  expect_equal(
    unname(as.matrix(raw$predictions)), unname(suppressWarnings(predict(fit, array_images * 255))), tolerance = 1e-6
  )
  expect_match(raw$warnings, "trained on pixels in [0, 1]: its predictions would mean little.", fixed = TRUE)
  expect_null(ask(array_images)$warnings)
})

test_that("several inputs are matched by name; without a recorded encoding, factor columns are refused", {
  skip_if_no_python()
  keras <- gpu_keras()
  keras$utils$set_random_seed(4L)
  shop <- keras$Input(shape = list(4L), name = "shop") # size, colour's 3 indicator columns
  weather <- keras$Input(shape = list(3L), name = "weather")
  joined <- keras$layers$Concatenate()(list(shop, weather))
  model <- keras$Model(inputs = list(shop = shop, weather = weather), outputs = keras$layers$Dense(1L)(joined))
  model$compile(optimizer = "adam", loss = "mse")
  data <- scoring_data(60)
  x <- list(
    shop = data$x[c("size", "colour")],
    weather = matrix(stats::runif(180), 60, dimnames = list(NULL, c("sun", "rain", "wind")))
  )
  fit <- gpu_fit(model, list(x = x, y = data$x$size), epochs = 1, verbose = 0, monitor = FALSE)
  expect_identical(names(fit$encoding$inputs), c("shop", "weather"))
  reference <- predict(fit, x)
  reordered <- list(weather = x$weather[, c("wind", "sun", "rain")], shop = x$shop[c("colour", "size")])
  reordered$shop$colour <- factor(reordered$shop$colour, levels = c("red", "green", "blue"))
  expect_equal(predict(fit, reordered), reference, tolerance = 1e-6)
  expect_error(
    predict(fit, x$shop),
    "The new data has one input; the model was trained on the inputs `shop`, `weather`.",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )

  numpy <- lapply(regression_data(32), gpu_as_numpy)
  numbers <- gpu_fit(tiny_model(), numpy, verbose = 0, monitor = FALSE)
  expect_null(numbers$encoding)
  expect_identical(dim(predict(numbers, regression_data(32)$x)), c(32L, 1L))
  expect_error(
    predict(numbers, data.frame(a = 1, b = "x", c = 1, d = 1)),
    "factor or character columns (b), but the model's training encoding is not known",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
})

test_that("a background fit scores new data as the session's own fit does", {
  skip_if_no_python()
  keras <- gpu_keras()
  keras$utils$set_random_seed(9L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(6L)),
    keras$layers$Dense(2L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  data <- scoring_data(80)
  job <- gpu_fit(model, data, epochs = 1, seed = 1, verbose = 0, monitor = FALSE, background = TRUE)
  fit <- gpu_job_wait(job, timeout = 240)
  expect_identical(fit$encoding, data_encoding(data$x, data$y))
  new <- data.frame(shape = c("square", "round"), colour = c("red", "blue"), size = c(1, -1))
  # size; colour blue, green, red; shape round, square
  indicators <- reticulate::np_array(cbind(new$size, c(0, 1), 0, c(1, 0), c(0, 1), c(1, 0)), dtype = "float32")
  expect_equal(unname(predict(fit, new)), keras_predict(model, indicators, verbose = 0L), tolerance = 1e-6)
})

test_that("gpu_fit()'s validation data is encoded as its training data", {
  skip_if_no_python()
  keras <- gpu_keras()
  keras$utils$set_random_seed(6L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(6L)),
    keras$layers$Dense(2L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  data <- scoring_data(120)
  # Validation rows with red alone: on its own, red would be code 0 there.
  red <- data$x$colour == "red"
  validation <- list(x = data$x[red, ], y = data$y[red])
  validation$x$colour <- droplevels(validation$x$colour)
  fit <- gpu_fit(model, data, validation_data = validation, epochs = 2, verbose = 0, monitor = FALSE, seed = 1)
  scores <- evaluate(fit, validation$x, validation$y)
  expect_equal(fit$history$val_loss[2], scores[["loss"]], tolerance = 1e-5)
  expect_error(
    gpu_fit(model, data, validation_data = gpu_dataset(validation$x, validation$y), verbose = 0),
    "`validation_data` is a gpu_dataset() encoded otherwise than the training data", fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
  like <- gpu_dataset(validation$x, validation$y, like = fit, shuffle = FALSE)
  again <- gpu_fit(model, data, validation_data = like, epochs = 1, verbose = 0, monitor = FALSE)
  expect_equal(again$history$val_loss[1], evaluate(again, validation$x, validation$y)[["loss"]], tolerance = 1e-5)
})

test_that("a malformed encoding file beside a model is a bad model that says what is wrong (issue #32, item 7)", {
  skip_if_no_python()
  dir <- withr::local_tempdir()
  path <- file.path(dir, "shops.keras")
  gpu_save(scoring_fit(), path)
  sidecar <- file.path(dir, "shops.gpukeras.json")
  json <- reticulate::import("json", convert = FALSE)
  document <- json$loads(paste(readLines(sidecar, warn = FALSE), collapse = "\n"))
  columns <- document$`__getitem__`("encoding")$`__getitem__`("inputs")$`__getitem__`("x")$`__getitem__`("columns")
  columns$`__getitem__`("colour")$`__setitem__`("levels", list("blue", "blue", "red"))
  writeLines(reticulate::py_to_r(json$dumps(document)), sidecar)
  expect_snapshot(
    error = TRUE, gpu_load(path), transform = function(x) gsub("'[^']*shops.gpukeras.json'", "'<file>'", x)
  )
  writeLines("{not json", sidecar)
  expect_error(gpu_load(path), "is not valid JSON", class = "gpukeras_error_bad_model")
})

test_that("an argument predict() and evaluate() do not have is an error that says which was meant, never ignored", {
  fit <- structure(list(), class = "gpukeras_fit")
  expect_snapshot(error = TRUE, {
    predict(fit, matrix(1, 2, 2), batchsize = 64)
    predict(fit, matrix(1, 2, 2), tpye = "class", colour = "red")
    evaluate(fit, matrix(1, 2, 2), y = 1:2, batch_sise = 8)
  })
  expect_error(
    predict(fit, matrix(1, 2, 2), batchsize = 64), "Did you mean `batch_size`", class = "gpukeras_error_bad_argument"
  )
})
