# Messages that name the fix, and the smaller things a new user trips on (issue #28).

test_that("gpu_fit(validation_split = ) says to split in gpu_dataset(); other unknown arguments are named", {
  expect_snapshot(gpu_fit(NULL, list(x = 1, y = 1), validation_split = 0.2), error = TRUE)
  expect_snapshot(gpu_fit(NULL, matrix(1, 2, 2), y = 1:2, shufle = TRUE), error = TRUE)
  error <- tryCatch(gpu_fit(NULL, list(x = 1, y = 1), validation_split = 0.2), error = identity)
  expect_s3_class(error, "gpukeras_error_bad_argument")
  expect_true("..." %in% not_requested) # `...` is no field of the fit request
})

test_that("a misspelt gpu_fit() argument gets \"did you mean\"", {
  expect_snapshot(gpu_fit(NULL, list(x = 1, y = 1), class_weights = list(`0` = 1), batchSize = 8), error = TRUE)
  error <- tryCatch(gpu_fit(NULL, list(x = 1, y = 1), learnig_rate = 0.1), error = identity)
  expect_s3_class(error, "gpukeras_error_bad_argument")
  expect_match(conditionMessage(error), "Did you mean `learning_rate` for `learnig_rate`?", fixed = TRUE)
  expect_identical(closest_argument("learningrate", names(formals(gpu_fit))), "learning_rate")
  expect_identical(closest_argument("shufle", names(formals(gpu_fit))), character())
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

test_that(paste(
  "class numbers under categorical_crossentropy name sparse_categorical_crossentropy; binary_crossentropy warns on",
  "labels outside 0/1"
), {
  skip_if_no_python()
  keras <- gpu_keras()
  classifier <- function(loss, units = 3L, activation = "softmax") {
    keras$utils$set_random_seed(1L)
    model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(units, activation = activation)))
    model$compile(optimizer = "adam", loss = loss)
    model
  }
  data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
  expect_snapshot(gpu_fit(classifier("categorical_crossentropy"), data, verbose = 0), error = TRUE)
  expect_error(
    gpu_fit(classifier("categorical_crossentropy"), gpu_dataset(data$x, data$y), verbose = 0),
    "sparse_categorical_crossentropy", class = "gpukeras_error_bad_data"
  )
  binary <- classifier("binary_crossentropy", 1L, "sigmoid")
  expect_snapshot(fit <- gpu_fit(binary, list(x = data$x, y = as.integer(iris$Species)), verbose = 0, monitor = FALSE))
  expect_warning(
    fit <- gpu_fit(binary, list(x = data$x, y = as.integer(iris$Species)), verbose = 0, monitor = FALSE),
    class = "gpukeras_warning_labels"
  )
  expect_identical(fit$history$epoch, 1L)
  # two levels are coded 0 and 1: no warning
  two <- droplevels(iris$Species[1:100])
  expect_no_warning(gpu_fit(binary, list(x = data$x[1:100, ], y = two), verbose = 0, monitor = FALSE))
})

test_that("?gpu_keras and the README build models with R's whole numbers, as keras3 does", {
  skip_if_no_python()
  keras <- gpu_keras()
  # R's 64 reaches Python as 64.0; through gpu_keras() Keras gets 64, and 64L still works
  model <- keras$Sequential(list(keras$Input(shape = 64), keras$layers$Dense(10)))
  expect_identical(model$output_shape, list(NULL, 10L))
  model <- keras$Sequential(list(keras$Input(shape = list(64L)), keras$layers$Dense(10L)))
  expect_identical(model$output_shape, list(NULL, 10L))
  help <- paste(as.character(tools::Rd_db("gpukeras")[["gpu_keras.Rd"]]), collapse = "")
  expect_match(help, "keras$layers$Dense(64)", fixed = TRUE)
  readme <- test_path("..", "..", "README.md")
  skip_if_not(file.exists(readme), "the README is not in the installed package")
  expect_match(paste(readLines(readme), collapse = "\n"), "keras$layers$Dense(100, activation", fixed = TRUE)
})

test_that("a separate gpu_dataset() given as validation_data is described as validation", {
  skip_if_no_python()
  data <- regression_data(64)
  fit <- gpu_fit(
    tiny_model(), gpu_dataset(data$x, data$y, batch_size = 16, seed = 1),
    validation_data = gpu_dataset(data$x[1:32, ], data$y[1:32], batch_size = 16),
    verbose = 0, monitor = FALSE
  )
  expect_match(fit$settings$data, "^gpu_dataset\\(\\) train pipeline from arrays: 64 rows")
  expect_match(fit$settings$validation_data, "^gpu_dataset\\(\\) validation pipeline from arrays: 32 rows")
})

test_that("print(tune) keeps one line a run at 80 columns, and says below the table which runs stopped early", {
  skip_if_no_python()
  run <- function(axis, precision = "float32", batch_size = 64L, spe = 1L, rate = 12345, stopped = FALSE, note = NULL) {
    list(
      axis = axis, precision = precision, batch_size = batch_size, steps_per_execution = spe, jit_compile = FALSE,
      samples_per_second = rate, samples = 1000L, loss = if (!stopped) 0.5, finite = TRUE, sound = TRUE,
      stopped_early = stopped, seconds = 2, note = note, data = "host"
    )
  }
  result <- list(
    trials = list(
      run("baseline"),
      run(
        "precision",
        "mixed_bfloat16",
        rate = 5000,
        stopped = TRUE,
        note = "stopped early: under 50% of the best rate so far"
      ),
      run("batch_size", batch_size = 1024L, rate = 1234567),
      run("steps_per_execution", batch_size = 1024L, spe = 23L, rate = 2345678)
    ),
    recommended = list(precision = "float32", batch_size = 1024L, steps_per_execution = 23L, jit_compile = FALSE),
    baseline = NULL, loss_samples = 1000L, skipped = list(), device = "CPU:0", device_name = "CPU",
    backend = "tensorflow", batch_sizes_from = "given", seconds = 30, settings = list()
  )
  tune <- gpukeras:::new_gpukeras_tune(result, "r")
  # plot(tune): the margins hold the longest bar label and rate ("2,500,000")
  path <- withr::local_tempfile(fileext = ".pdf")
  grDevices::pdf(path)
  expect_identical(plot(tune), tune)
  in_lines <- function(text) max(graphics::strwidth(text, units = "inches")) / graphics::par("csi")
  margins <- tune_plot_margins(c("bfloat16 b1024 s23 xla", "float32 b16384 s128 xla"), "2,500,000")
  expect_gt(margins[1], in_lines("float32 b16384 s128 xla"))
  expect_gt(margins[2], in_lines("2,500,000") + 1)
  grDevices::dev.off()
  expect_snapshot(print(tune))
  lines <- withr::with_options(list(width = 80), format(tune))
  expect_false(any(trimws(lines) == ""))
  expect_length(grep("^ +(baseline|precision|batch|spe) ", lines), 4)
})

test_that("a background job's progress shows logged values as a fit in the R session does (Keras' 4 decimals)", {
  status <- list(
    epoch = 1, epochs = 2, batch = 5, steps = 23, sample = list(logs = list(accuracy = 0.716968, loss = 0.00001234))
  )
  skip_if_no_python()
  expect_identical(
    gpukeras:::core_call("job_sample_line", status = status), "epoch 1/2, batch 5/23; accuracy 0.7170, loss 1.2340e-05"
  )
  # The epoch lines come from the core's progress callback (train/job.py) as it writes them.
  dir <- withr::local_tempdir()
  model <- tiny_model() # starts the core, whose module makes the callback
  progress <- gpukeras:::core_call(
    "job_progress_callback", job_dir = dir, attempt = 1L, batch_size = 10L, nvml_indices = list()
  )
  data <- regression_data(40)
  history <- model$fit(
    gpu_as_numpy(data$x), gpu_as_numpy(data$y), batch_size = 10L, epochs = 1L, verbose = 0L, callbacks = list(progress)
  )
  job <- new.env()
  job$dir <- dir
  job$verbose <- 2
  job$epochs_shown <- 0
  job$spec <- list(fit = list(epochs = 1))
  printed <- utils::capture.output(gpukeras:::show_job_progress(job, list()))
  logged <- history$history
  expect_identical(printed, sprintf("Epoch 1/1: loss %.4f, mae %.4f", logged$loss[[1]], logged$mae[[1]]))
})

test_that("plot(fit) draws the host CPU load the timeline sampled, on a CPU too", {
  skip_if_no_python()
  fit <- gpu_fit(tiny_model(), regression_data(256), epochs = 2, batch_size = 16, verbose = 0)
  expect_gt(nrow(fit$timeline$host), 0)
  titles <- function(...) {
    path <- withr::local_tempfile(fileext = ".png")
    grDevices::png(path)
    on.exit(grDevices::dev.off())
    grDevices::dev.control("enable")
    plot(fit, ...)
    # the strings drawn (titles, labels) in the device's display list
    unlist(lapply(grDevices::recordPlot()[[1]], function(call) Filter(is.character, call[[2]])))
  }
  expect_true("Host CPU load" %in% titles())
  expect_false("Host CPU load" %in% titles(timeline = FALSE))
})
