# What a newcomer reads in three results (issue #32, item 8): gpu_lr_find() when the loss
# never turned up, the weights of a fit and which losses they reach, and a short or CPU
# run's input verdict as a note.

# gpu_lr_find() ---------------------------------------------------------------------

# The core's plain data for a ramp of 20 steps from 1e-7 to 10 that ended as `how` says,
# with the lines the core writes for it.
lr_find_result <- function(how) {
  lr <- 10^seq(-7, 1, length.out = 20)
  base <- list(
    lr = lr, loss = seq(2, 1, length.out = 20), smoothed = seq(2, 1, length.out = 20),
    settings = list(min_lr = 1e-7, max_lr = 10, steps = 20L, optimizer = "Adam", backend = "tensorflow")
  )
  found <- switch(how,
    still_falling = c(base, list(
      suggested = list(valley = NULL, steepest = NULL, minimum = NULL),
      stopped = "ran all 20 steps; the loss never diverged, nor rose after its lowest",
      diverged = FALSE,
      advice = paste(
        "The loss never diverged up to max_lr = 10 and did not rise after its lowest, so the curve has no point",
        "where it turns up to read a rate against: no rate is suggested. Run it again with a higher max_lr",
        "(e.g. max_lr = 100) or more steps (e.g. steps = 40)."
      )
    )),
    turned_up = c(base, list(
      suggested = list(valley = 0.0041, steepest = 0.0169, minimum = 0.043), recommended = 0.0041,
      stopped = "ran all 20 steps; the loss rose after its lowest, short of diverging (4 x it)",
      diverged = FALSE, advice = NULL
    ))
  )
  c(found, list(lines = core_call("lr_find_lines", found = found)))
}

test_that("gpu_lr_find()'s print says when the loss never turned up, suggests nothing and what to change", {
  skip_if_no_python()
  still <- new_gpukeras_lr_find(lr_find_result("still_falling"))
  expect_identical(still$suggested, c(valley = NA_real_, steepest = NA_real_, minimum = NA_real_))
  expect_identical(still$lr, NA_real_)
  expect_false(still$diverged)
  expect_snapshot(print(still))
  # A curve that rose after its lowest, short of diverging, keeps its suggestions.
  turned <- new_gpukeras_lr_find(lr_find_result("turned_up"))
  expect_null(turned$advice)
  expect_identical(turned$lr, 0.0041)
  expect_snapshot(print(turned))
})

test_that("a real ramp whose rates are too small to teach suggests nothing and advises a higher max_lr", {
  mark_slow()
  skip_if_no_python()
  keras <- gpu_keras()
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(3L, activation = "softmax")))
  model$compile(optimizer = "sgd", loss = "sparse_categorical_crossentropy")
  # Every step trains on all 150 rows: the loss moves only by what rates this small teach.
  found <- gpu_lr_find(model, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
    min_lr = 1e-7, max_lr = 1e-4, steps = 12, batch_size = 150, seed = 1
  )
  expect_false(found$diverged)
  expect_true(all(is.na(found$suggested)))
  expect_identical(found$lr, NA_real_)
  expect_identical(nrow(found$history), 12L)
  # Lines 2 on: the first names the backend.
  expect_snapshot(writeLines(format(found)[-1]))
})

# Weights ---------------------------------------------------------------------------

iris_model <- function() {
  keras <- gpu_keras()
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(3L, activation = "softmax")))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  model
}

weights_lines <- function(fit) {
  lines <- format(fit)
  at <- grep("^Weights: ", lines)
  lines[at + 0:1]
}

test_that("class weights are in the print and settings, with the note that validation is not weighted", {
  mark_slow()
  skip_if_no_python()
  x <- as.matrix(iris[, 1:4])
  fit <- gpu_fit(iris_model(), list(x = x, y = iris$Species),
    validation_data = list(x = x, y = iris$Species), class_weight = c(setosa = 1, versicolor = 2, virginica = 5),
    epochs = 1, batch_size = 50, seed = 1, verbose = 0, monitor = FALSE
  )
  weights <- fit$settings$weights
  expect_identical(weights$training, "class_weight")
  expect_identical(weights$validation, "none")
  expect_identical(unlist(weights$class_weight), c("0" = 1, "1" = 2, "2" = 5))
  expect_snapshot(writeLines(weights_lines(fit)))
})

test_that(paste(
  "sample weights split with gpu_dataset(validation_split = ) weigh both losses; without validation weights, only",
  "training"
), {
  mark_slow()
  skip_if_no_python()
  x <- as.matrix(iris[, 1:4])
  w <- ifelse(iris$Species == "virginica", 5, 1)
  split <- gpu_dataset(x, iris$Species, sample_weight = w, validation_split = 0.2, batch_size = 30, seed = 1)
  both <- gpu_fit(iris_model(), split, epochs = 1, seed = 1, verbose = 0, monitor = FALSE)
  expect_identical(both$settings$weights$validation, "sample_weight")
  expect_snapshot(writeLines(weights_lines(both)))

  alone <- gpu_fit(iris_model(), list(x = x, y = iris$Species, sample_weight = w),
    validation_data = list(x = x, y = iris$Species), epochs = 1, batch_size = 50, seed = 1, verbose = 0, monitor = FALSE
  )
  expect_identical(alone$settings$weights$training, "sample_weight")
  expect_identical(alone$settings$weights$validation, "none")
  expect_snapshot(writeLines(weights_lines(alone)))

  plain <- gpu_fit(
    iris_model(), list(x = x, y = iris$Species), epochs = 1, batch_size = 50, seed = 1, verbose = 0, monitor = FALSE
  )
  expect_null(plain$settings$weights)
  expect_false(any(grepl("^Weights: ", format(plain))))
})

# The input verdict of a short or CPU run -------------------------------------------

test_that("a note prints under Notes, apart from the advice", {
  monitor <- list(
    samples_per_second = 5000, step_time_mean_ms = 2, step_time_sd_ms = 0.5,
    input_wait_share = 0.3, input_verdict = "highly input-bound",
    gpu_not_measured = "no GPU in use", host_cpu_percent_mean = 80,
    advice = list("No GPU was used: training ran on the CPU. gpu_check() tells why no GPU is visible."),
    notes = list(paste(
      "Training waits for input 30 % of the step time (highly input-bound) on the CPU: the host both prepares",
      "the batches and runs the model, so this wait is CPU time shared between them, not a GPU left idle.",
      "Not advice to change the batch size or the pipeline; judge the input on a GPU run."
    ))
  )
  fit <- new_gpukeras_fit(list(epoch = 1, loss = 0.5), monitor, NULL, list(backend = "tensorflow", seconds = 1.2))
  expect_identical(fit$monitor$notes, unlist(monitor$notes))
  lines <- format(fit)
  expect_snapshot(writeLines(lines[grep("^Advice:", lines):length(lines)]))
  # no notes, no Notes line
  monitor$notes <- list()
  expect_false(any(grepl("^Notes:", format(new_gpukeras_fit(list(epoch = 1, loss = 0.5), monitor, NULL, list())))))
})

test_that("a real fit on the CPU never advises changing the batch for its input wait", {
  mark_slow()
  skip_if_no_python()
  skip_if_nvidia_gpu() # on a GPU a long enough fit's verdict is advice
  data <- regression_data(640)
  fit <- gpu_fit(tiny_model(), data, batch_size = 16, epochs = 1, verbose = 0)
  m <- fit$monitor
  expect_false(any(grepl("batch_size|waits for input", m$advice)))
  bound <- m$input_verdict %in% c("highly input-bound", "moderately input-bound")
  # an input-bound verdict is a note; any other verdict gives none
  expect_identical(length(m$notes), as.integer(bound))
  if (bound) expect_match(m$notes, "on the CPU: the host both prepares the batches", fixed = TRUE)
})
