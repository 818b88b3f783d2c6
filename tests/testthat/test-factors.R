# Factor predictors as an R modeler expects them (issue #32, item 1): indicator columns,
# as model.matrix(~ 0 + f) makes them, by default; integer codes on request, per column;
# the width visible and checked against the model; the encoding reused by predict(),
# gpu_dataset(like = ) and gpu_save()/gpu_load(), on both engines.

factor_data <- function(n = 60) {
  withr::with_seed(11, {
    x <- data.frame(
      income = stats::rnorm(n),
      region = factor(sample(c("north", "south", "east", "west"), n, TRUE)),
      size = factor(sample(c("S", "M", "L"), n, TRUE), levels = c("S", "M", "L"), ordered = TRUE),
      plan = sample(c("basic", "plus"), n, TRUE),
      stringsAsFactors = FALSE
    )
    y <- factor(ifelse(x$income + (x$region == "west") - (x$plan == "basic") > 0, "yes", "no"))
  })
  list(x = x, y = y)
}

# What model.matrix() makes of the same data: each factor's indicator columns, all levels,
# an NA row where the factor is NA. Subset its rows, not the data (a subset can lack a level).
indicators <- function(x) {
  one <- function(column) {
    v <- x[[column]]
    frame <- stats::model.frame(~ v, data.frame(v = if (is.factor(v)) v else factor(v)), na.action = stats::na.pass)
    unname(stats::model.matrix(~ 0 + v, frame))
  }
  cbind(x$income, one("region"), one("size"), one("plan"))
}

factor_model <- function(width, seed = 3L, units = 2L) {
  keras <- gpu_keras()
  keras$utils$set_random_seed(seed)
  model <- keras$Sequential(list(
    keras$Input(shape = list(as.integer(width))),
    keras$layers$Dense(8L, activation = "relu"),
    keras$layers$Dense(as.integer(units), activation = "softmax")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  model
}

test_that("a factor, an ordered factor and a character column become model.matrix()'s indicator columns", {
  data <- factor_data()
  encoded <- as_pipeline_data(data$x, data$y, "error")
  matrix <- core_encoded(encoded) # made by the core, from the columns
  expect_identical(dim(matrix), c(60L, 10L))
  expect_equal(unname(matrix), indicators(data$x), tolerance = 1e-6)
  expect_identical(colnames(matrix)[1:5], c("income", "region=east", "region=north", "region=south", "region=west"))
  expect_identical(colnames(matrix)[6:10], c("size=S", "size=M", "size=L", "plan=basic", "plan=plus"))
  expect_identical(encoded$encoding$inputs$x$columns$size$encoding, "one_hot")
  expect_identical(
    encoding_columns_lines(encoded$encoding),
    "10 columns: income, region (4 levels, one-hot), size (3 levels, one-hot), plan (2 levels, one-hot)"
  )
})

test_that("factors = \"codes\" keeps integer codes, for all factors or named ones", {
  data <- factor_data()
  codes <- as_pipeline_data(data$x, data$y, "error", factors = "codes")
  expect_identical(dim(core_encoded(codes)), c(60L, 4L))
  expect_identical(unname(core_encoded(codes)[, 2]), as.integer(data$x$region) - 1)
  some <- as_pipeline_data(data$x, data$y, "error", factors = c(region = "codes"))
  expect_identical(
    colnames(core_encoded(some)), c("income", "region", "size=S", "size=M", "size=L", "plan=basic", "plan=plus")
  )
  expect_identical(
    encoding_columns_lines(some$encoding),
    "7 columns: income, region (4 levels, integer codes), size (3 levels, one-hot), plan (2 levels, one-hot)"
  )
})

test_that("NA in a factor is an NA row (named, or dropped), not a row of zeros", {
  data <- factor_data(8)
  data$x$region[3] <- NA
  skip_if_no_python()
  # the core finds NA in its copy, and names the column as R gave it
  expect_error(
    gpu_dataset(data$x, data$y, batch_size = 4),
    "NA/NaN in 1 row\\(s\\) \\(first: 3\\), in x\\$region\\.($|\n)",
    class = "gpukeras_error_bad_data"
  )
  # its fields name the factor once, though it became indicator columns, and the rows
  error <- expect_error(gpu_dataset(data$x, data$y, batch_size = 4), class = "gpukeras_error_missing_values")
  expect_identical(error$column, "x$region")
  expect_identical(error$rows, 3L)
  expect_identical(error$n_rows, 1L)
  expect_identical(attr(gpu_dataset(data$x, data$y, na = "drop"), "gpukeras")$dropped_rows, 1L)
  expect_equal(
    unname(core_encoded(as_pipeline_data(data$x, data$y, "drop"))), indicators(data$x)[-3, ], tolerance = 1e-6
  )
})

test_that("`factors` is checked: its values before Python, its column names by the core, and with `like`", {
  skip_if_no_python() # the core makes the encoding
  data <- factor_data(8)
  expect_snapshot(error = TRUE, {
    gpu_dataset(data$x, data$y, factors = "onehot")
    gpu_dataset(data$x, data$y, factors = c(regio = "codes"))
    gpu_dataset(data$x, data$y, factors = c("codes", "one_hot"))
  })
  expect_error(
    gpu_dataset(
      data$x, like = structure(list(encoding = data_encoding(data$x)), class = "gpukeras_fit"), factors = "codes"
    ),
    "with `like`, the training data's encoding decides",
    class = "gpukeras_error_bad_argument"
  )
})

test_that("an encoding recorded before one-hot existed is read as integer codes", {
  skip_if_no_python() # the core makes the encoding
  data <- factor_data(8)
  path <- file.path(withr::local_tempdir(), "old.keras")
  saved <- structure(list(model = factor_model(4), encoding = data_encoding(data$x, data$y, factors = "codes")),
                     class = "gpukeras_model")
  gpu_save(saved, path)
  # as a file written before one-hot existed: version 1, no factor column names its rule
  file <- sub("\\.keras$", ".gpukeras.json", path)
  old <- jsonlite::read_json(file)
  old$version <- 1L
  old$encoding$inputs$x$columns <- lapply(old$encoding$inputs$x$columns, function(column) {
    column$encoding <- NULL
    column
  })
  jsonlite::write_json(old, file, auto_unbox = TRUE, null = "null")
  back <- suppressWarnings(gpu_load(path))$encoding # Keras: an optimizer that never stepped is not loaded
  expect_identical(back$inputs$x$columns$region$encoding, "codes")
  expect_identical(
    encoding_columns_lines(back),
    paste(
      "4 columns: income, region (3 levels, integer codes), size (3 levels, integer codes),",
      "plan (2 levels, integer codes)"
    )
  )
  expect_identical(dim(core_encoded(as_pipeline_data(data$x, NULL, "error", encoding = back))), c(8L, 4L))
})

test_that("the width shows in the dataset's and the fit's print, and a model of another width is told both", {
  skip_if_no_python()
  data <- factor_data()
  ds <- gpu_dataset(data$x, data$y, batch_size = 16, seed = 1)
  expect_true(
    "  input:   10 columns: income, region (4 levels, one-hot), size (3 levels, one-hot), plan (2 levels, one-hot)" %in%
      format(ds)
  )
  expect_snapshot(error = TRUE, gpu_fit(factor_model(4), data, epochs = 1, verbose = 0))
  expect_error(
    gpu_fit(factor_model(4), ds, epochs = 1, verbose = 0),
    "takes rows of 4 column(s), but `x` gives 10 columns",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
  fit <- gpu_fit(factor_model(10), data, epochs = 2, verbose = 0, monitor = FALSE, seed = 1)
  expect_match(format(fit), "^Encoding:       10 columns: income, region \\(4 levels, one-hot\\)", all = FALSE)
  expect_error(
    predict(structure(list(model = factor_model(4), encoding = fit$encoding), class = "gpukeras_fit"), data$x),
    "takes rows of 4 column(s)",
    fixed = TRUE,
    class = "gpukeras_error_bad_data"
  )
})

# Labels whose factor has a level no row has (issue #76 item 4): the level is kept, as R's
# factor has it, and said; a model without a unit per level is refused before training,
# by gpu_fit() and by gpu_cv()'s and gpu_search()'s workers (on JAX, the simulated-GPU run,
# as populations).
unused_level <- function(data) {
  data$y <- factor(data$y, levels = c("maybe", "no", "yes"))
  data
}

test_that("a label level no row has is kept: warned of, a unit of the output, a column of predict()", {
  skip_if_no_python()
  data <- unused_level(factor_data())
  expect_warning(
    fit <- gpu_fit(factor_model(10, units = 3), data, epochs = 1, verbose = 0, monitor = FALSE, seed = 1),
    "The labels `y` have 1 level(s) no row has: \"maybe\".",
    fixed = TRUE, class = "gpukeras_warning_empty_levels"
  )
  expect_identical(fit$encoding$y$levels, c("maybe", "no", "yes"))
  scored <- predict(fit, data$x)
  expect_identical(colnames(scored), c("maybe", "no", "yes"))
  classes <- predict(fit, data$x, type = "class")
  expect_identical(levels(classes), c("maybe", "no", "yes"))
  expect_identical(as.integer(classes), max.col(scored, ties.method = "first"))
  expect_warning(gpu_dataset(data$x, data$y, batch_size = 16), class = "gpukeras_warning_empty_levels")
  # a model of another width is refused before it trains (its optimizer took no step)
  model <- factor_model(10)
  expect_snapshot(error = TRUE, gpu_fit(model, data, epochs = 1, verbose = 0))
  expect_identical(as.integer(model$optimizer$iterations$numpy()), 0L)
  # two levels also take one unit (a sigmoid's: the width alone is checked); other widths are refused
  two <- factor_data()
  expect_no_error(check_widths(factor_model(10, units = 1), levels = levels(two$y)))
  expect_error(
    gpu_fit(factor_model(10, units = 3), two, epochs = 1, verbose = 0),
    "output has 3 unit(s), but the labels `y` have 2 levels",
    fixed = TRUE, class = "gpukeras_error_bad_data"
  )
})

test_that("NumPy features with R labels are taken: the labels' levels recorded, the features' shape checked", {
  skip_if_no_python()
  data <- factor_data()
  features <- indicators(data$x)
  fit <- gpu_fit(factor_model(ncol(features)), list(x = gpu_as_numpy(features), y = data$y),
                 epochs = 1, verbose = 0, monitor = FALSE, seed = 1)
  # the same fit as of the R matrix: the same labels, the same predictions
  by_r <- gpu_fit(factor_model(ncol(features)), list(x = features, y = data$y),
                  epochs = 1, verbose = 0, monitor = FALSE, seed = 1)
  expect_identical(fit$encoding$y$levels, c("no", "yes"))
  expect_equal(predict(fit, gpu_as_numpy(features)), predict(by_r, features), tolerance = 1e-6)
  expect_identical(levels(predict(fit, features, type = "class")), c("no", "yes"))
  # a NumPy array of another width, or not of numbers, is a classed error naming `x`
  expect_error(predict(fit, gpu_as_numpy(features[, -1])), "Each row of `x` has shape (9)", fixed = TRUE,
               class = "gpukeras_error_bad_data")
  np <- reticulate::import("numpy", convert = FALSE)
  expect_error(gpu_fit(factor_model(1), list(x = np$array(as.list(letters[1:3])), y = factor(c("a", "b", "a"))),
                       epochs = 1, verbose = 0),
               "`x` is a NumPy array of <U1: a NumPy part of R data must hold numbers", fixed = TRUE,
               class = "gpukeras_error_bad_data")
  # NA in the R labels is named as for R features; rows of a NumPy array are not dropped
  y <- data$y
  y[3] <- NA
  expect_error(gpu_fit(factor_model(ncol(features)), list(x = gpu_as_numpy(features), y = y), epochs = 1, verbose = 0),
               class = "gpukeras_error_missing_values")
  expect_error(gpu_dataset(gpu_as_numpy(features), y, na = "drop"), "cannot drop rows of `x`, a NumPy array",
               class = "gpukeras_error_bad_data")
})

test_that("gpu_cv() and gpu_search() refuse such a model in their workers, before it trains", {
  skip_if_no_python()
  data <- unused_level(factor_data())
  model_fn <- function(params = NULL) {
    keras <- gpu_keras()
    units <- if (is.null(params)) 2L else params$units # 2 for 3 levels, in both
    model <- keras$Sequential(list(keras$Input(shape = list(10L)), keras$layers$Dense(units, activation = "softmax")))
    model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
    model
  }
  refused <- function(error) {
    expect_s3_class(error, "gpukeras_error_bad_data")
    expect_match(
      conditionMessage(error$parent), "The model's output has 2 unit(s), but the labels `y` have 3 levels", fixed = TRUE
    )
  }
  expect_warning(
    cv <- expect_error(gpu_cv(model_fn, data, folds = 2, epochs = 1), class = "gpukeras_error_cv_fold"),
    class = "gpukeras_warning_empty_levels"
  )
  refused(cv)
  expect_warning(
    search <- expect_error(
      gpu_search(
        model_fn, data, space = list(units = search_choice(2L)), trials = 1, epochs = 1,
        storage = withr::local_tempdir()
      ),
      class = "gpukeras_error_search_trial"
    ),
    class = "gpukeras_warning_empty_levels"
  )
  refused(search)
})

# Trained on each engine: predictions equal the model's own on model.matrix()'s columns, a
# new level scores as a row of zeros when asked, and a later R session reloads it all.
engine_check <- quote({
  data <- factor_data()
  fit <- gpu_fit(factor_model(10), data, epochs = 2, verbose = 0, monitor = FALSE, seed = 1)
  direct <- fit$model$predict(reticulate::np_array(indicators(data$x)[1:5, ], dtype = "float32"), verbose = 0L)
  new <- data$x[1:2, ]
  new$region <- c("central", "north")
  path <- file.path(save_dir, "model.keras")
  dir.create(dirname(path))
  gpu_save(fit, path)
  list(
    backend = fit$settings$backend,
    scored = unname(predict(fit, data$x[1:5, ])),
    direct = direct,
    zero = predict(fit, new, unknown = "zero"),
    zero_direct = fit$model$predict(
      reticulate::np_array(cbind(new$income, 0, c(0, 1), 0, 0, indicators(data$x)[1:2, 6:10]), dtype = "float32"),
      verbose = 0L
    ),
    path = path
  )
})

expect_engine <- function(found, backend) {
  expect_identical(found$backend, backend)
  expect_equal(found$scored, found$direct, tolerance = 1e-6)
  expect_equal(unname(found$zero), found$zero_direct, tolerance = 1e-6)
  later <- do.call(run_in_fresh_r, list(expr = bquote({
    saved <- gpukeras::gpu_load(.(found$path))
    list(
      region = saved$encoding$inputs$x$columns$region$encoding,
      zero = unname(predict(
        saved, .(factor_data()$x[1:2, ] |> transform(region = c("central", "north"))), unknown = "zero"
      ))
    )
  }), env = c(KERAS_BACKEND = backend), timeout = 300))
  expect_identical(later$region, "one_hot")
  expect_equal(later$zero, unname(found$zero), tolerance = 1e-6)
}

test_that(paste(
  "on TensorFlow: the same predictions as on model.matrix()'s columns, through a save and a load in a fresh R process"
), {
  skip_if_no_python()
  env <- environment()
  helpers <- list(factor_data = factor_data, indicators = indicators, factor_model = factor_model)
  found <- eval(engine_check, c(helpers, save_dir = tempfile("factors-"), as.list(env)))
  expect_engine(found, "tensorflow")
})

test_that("on JAX, in a fresh R process: the same", {
  skip_if_no_python()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  found <- do.call(run_in_fresh_r, list(expr = bquote({
    factor_data <- .(factor_data)
    indicators <- .(indicators)
    factor_model <- .(factor_model)
    gpu_keras <- gpukeras::gpu_keras
    gpu_fit <- gpukeras::gpu_fit
    gpu_save <- gpukeras::gpu_save
    save_dir <- .(tempfile("factors-")) # this session's: the fresh one's goes with it
    .(engine_check)
  }), env = c(KERAS_BACKEND = "jax"), timeout = 300))
  expect_engine(found, "jax")
})
