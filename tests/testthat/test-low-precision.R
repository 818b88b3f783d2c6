# What a GPU user gets by default (issue #58, item 1): on compute capability >= 8.0
# gpu_setup() chooses mixed_bfloat16, and a model's softmax left at the global policy then
# outputs bfloat16, which reticulate cannot convert. Every value gpukeras hands R is float32
# or float64 before it crosses: here on both engines, for a model whose output layer follows
# the global mixed_bfloat16 policy and for one built in bfloat16 throughout, through each
# verb that hands R something computed by the model. (make test's simulated-GPU run takes the
# same path through the fit, cv, search, serve and export tests, with gpu_setup()'s "auto".)
mark_slow()

low_precision_verbs <- quote({
  gpu_setup(mixed_precision = "bfloat16")
  keras <- gpu_keras()
  withr::with_seed(3, {
    x <- matrix(stats::rnorm(240 * 4), 240, 4)
    y <- factor(sample(c("a", "b", "c"), 240, TRUE))
  })
  data <- list(x = x, y = y)
  # global: the output layer follows mixed_bfloat16; whole: every layer computes in bfloat16
  build <- function(whole) {
    dtype <- if (whole) "bfloat16"
    keras$utils$set_random_seed(1L)
    model <- keras$Sequential(list(
      keras$Input(shape = 4L),
      keras$layers$Dense(8L, activation = "relu", dtype = dtype),
      keras$layers$Dense(3L, activation = "softmax", dtype = dtype)
    ))
    model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
    model
  }
  doubles <- function(value) is.double(unlist(value)) && all(is.finite(unlist(value)))
  checks <- list()
  for (kind in c("global", "whole")) {
    whole <- kind == "whole"
    fit <- suppressWarnings(gpu_fit(build(whole), data, epochs = 1, batch_size = 32, verbose = 0))
    file <- tempfile(fileext = ".csv")
    predict(fit, x, file = file)
    written <- utils::read.csv(file)
    quantized <- gpu_quantize(fit$model, data = data)
    lr <- gpu_lr_find(build(whole), data, steps = 12, batch_size = 32, seed = 1)
    # two sizes (16 and 32), not the doubling from 1: each size's figures cross the same way
    sizes <- gpu_batch_size(build(whole), data, min_batch = 16, max_batch = 32, steps = 2)
    profile <- gpu_profile(build(whole), data, steps = c(2, 4), batch_size = 32)
    checks[[kind]] <- list(
      output_dtype = fit$model$outputs[[1]]$dtype,
      predict = doubles(predict(fit, x[1:5, ])) && all(dim(predict(fit, x[1:5, ])) == c(5L, 3L)),
      class = is.factor(predict(fit, x[1:5, ], type = "class")),
      evaluate = doubles(evaluate(fit, x, y)),
      file = nrow(written) == 240L && all(vapply(written, is.numeric, logical(1))),
      history = doubles(fit$history[setdiff(names(fit$history), "epoch")]),
      report = is.list(fit$monitor) && length(fit$monitor) > 0 && doubles(fit$settings$seconds),
      quantize = doubles(quantized$metrics[c("before", "after")]) && doubles(quantized$output_max_abs_diff),
      lr_find = doubles(lr$history[c("lr", "loss", "smoothed")]),
      batch_size = doubles(stats::na.omit(sizes$trials$samples_per_second)),
      profile = doubles(profile$numbers$samples_per_second),
      # the SavedModel's served function (TensorFlow): float32 outputs, named as ever
      export = if (identical(Sys.getenv("KERAS_BACKEND"), "tensorflow")) {
        path <- tempfile("served")
        gpu_export(fit, path)
        loaded <- reticulate::import("tensorflow")$saved_model$load(path)
        served <- reticulate::py_get_item(loaded$signatures, "serving_default")
        outputs <- served$structured_outputs
        dtypes <- vapply(names(outputs), function(name) outputs[[name]]$dtype$name, character(1))
        setequal(names(dtypes), c("output", "a", "b", "c", "class")) &&
          all(dtypes[c("output", "a", "b", "c")] == "float32")
      } else {
        TRUE
      }
    )
  }
  # several outputs, each bfloat16 under the global policy; the tuner's timed trials
  input <- keras$Input(shape = 4L)
  hidden <- keras$layers$Dense(8L, activation = "relu")(input)
  two <- keras$Model(input, list(
    keras$layers$Dense(3L, activation = "softmax", name = "kind")(hidden),
    keras$layers$Dense(1L, name = "size")(hidden)
  ))
  saved <- tempfile(fileext = ".keras")
  two$save(saved)
  predicted <- predict(gpu_load(saved), x[1:4, ])
  tuned <- gpu_tune(build(FALSE), data, time_budget = 4, precisions = c("float32", "bfloat16"),
                    steps_per_execution = 1, jit_compile = TRUE, max_batch = 64)
  checks$several <- is.list(predicted) && length(predicted) == 2L && all(vapply(predicted, doubles, logical(1)))
  checks$tune <- doubles(stats::na.omit(tuned$trials$samples_per_second)) && doubles(stats::na.omit(tuned$trials$loss))
  checks
})

for (backend in c("tensorflow", "jax")) {
  test_that(sprintf("every value a bfloat16 model computes reaches R as doubles (%s)", backend), {
    skip_if_no_python()
    got <- eval(bquote(run_in_fresh_r(.(low_precision_verbs), env = c(KERAS_BACKEND = .(backend)), timeout = 420)))
    for (kind in c("global", "whole")) {
      checks <- got[[kind]]
      expect_equal(checks$output_dtype, "bfloat16", label = paste(kind, "output dtype"))
      for (verb in setdiff(names(checks), "output_dtype")) {
        expect_true(checks[[verb]], label = paste(kind, verb))
      }
    }
    expect_true(got$several)
    expect_true(got$tune)
  })
}
