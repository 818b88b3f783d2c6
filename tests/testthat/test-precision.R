# Mixed precision: gpu_setup(mixed_precision = ) verified in built models'
# dtypes (in fresh R processes: the policy is process-wide), and
# gpu_precision_check() on a model's output layer.

test_that(paste(
  "gpu_setup(mixed_precision = \"float16\"): float16 compute, float32 weights, loss scaling, and the output check"
), {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      collect_warnings <- function(code) {
        found <- list()
        value <- withCallingHandlers(code, warning = function(w) {
          found[[length(found) + 1]] <<- list(class = class(w), message = conditionMessage(w))
          invokeRestart("muffleWarning")
        })
        list(value = value, warnings = found)
      }
      setup <- gpu_setup(mixed_precision = "float16")
      keras <- gpu_keras()
      dense <- keras$layers$Dense(4L)
      dense$build(list(NULL, 3L))
      model <- keras$Sequential(list(
        keras$Input(shape = list(3L)),
        keras$layers$Dense(4L, activation = "relu"),
        keras$layers$Dense(2L, activation = "softmax", name = "probabilities")
      ))
      model$compile(optimizer = "adam", loss = "categorical_crossentropy")
      safe <- keras$Sequential(list(
        keras$Input(shape = list(3L)),
        keras$layers$Dense(4L, activation = "relu"),
        keras$layers$Dense(2L, activation = "softmax", dtype = "float32")
      ))
      list(
        setup = unclass(setup),
        printed = utils::capture.output(print(setup)),
        policy = keras$config$dtype_policy()$name,
        dense = c(
          compute = dense$compute_dtype,
          variable = dense$variable_dtype,
          kernel = dense$kernel$dtype
        ),
        optimizer = class(model$optimizer),
        first = collect_warnings(gpu_precision_check(model)),
        second = collect_warnings(gpu_precision_check(model)),
        safe = collect_warnings(gpu_precision_check(safe)),
        safe_output = safe$layers[[2]]$compute_dtype
      )
    },
    env = c(KERAS_BACKEND = "tensorflow")
  )
  setup <- child$setup
  expect_identical(setup$dtype_policy, "mixed_float16")
  expect_identical(child$policy, "mixed_float16")
  expect_true(setup$loss_scaling)
  expect_match(setup$precision_reason, "^asked for mixed_float16")
  expect_identical(child$dense, c(compute = "float16", variable = "float32", kernel = "float32"))
  expect_true("keras.src.optimizers.loss_scale_optimizer.LossScaleOptimizer" %in% child$optimizer)
  precision_line <- grep("^  precision:", child$printed, value = TRUE)
  expect_length(precision_line, 1)
  expect_match(precision_line, "mixed_float16, loss scaling (asked for mixed_float16", fixed = TRUE)

  # A softmax computed in float16: one warning with the fix, then silence.
  first <- child$first
  expect_length(first$warnings, 1)
  expect_identical(
    first$warnings[[1]]$class,
    c("gpukeras_warning_output_precision", "gpukeras_warning", "rlang_warning", "warning", "condition")
  )
  expect_match(
    first$warnings[[1]]$message, "The output layer 'probabilities' computes its softmax in float16", fixed = TRUE
  )
  expect_match(first$warnings[[1]]$message, "dtype = \"float32\"", fixed = TRUE)
  expect_identical(first$value, first$warnings[[1]]$message)
  expect_identical(child$second$warnings, list())
  expect_identical(child$second$value, first$value)
  # A float32 output layer is fine.
  expect_identical(child$safe_output, "float32")
  expect_null(child$safe$value)
  expect_identical(child$safe$warnings, list())

  skip_if_nvidia_gpu()
  expect_false(setup$precision_suits_device)
  expect_match(setup$precision_reason, "on the CPU it gives no speed-up", fixed = TRUE)
  expect_match(precision_line, "[no speed-up on this device]", fixed = TRUE)
})

test_that("gpu_setup(mixed_precision = \"bfloat16\"): bfloat16 compute, no loss scaling, and gpu_check() shows it", {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      setup <- gpu_setup(mixed_precision = "bfloat16")
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = list(3L)),
        keras$layers$Dense(2L, activation = "sigmoid")
      ))
      model$compile(optimizer = "adam", loss = "binary_crossentropy")
      layer <- model$layers[[1]]
      warned <- NULL
      finding <- withCallingHandlers(
        gpu_precision_check(model),
        gpukeras_warning_output_precision = function(w) {
          warned <<- conditionMessage(w)
          invokeRestart("muffleWarning")
        }
      )
      check <- gpu_check(probe = FALSE)
      list(
        setup = unclass(setup),
        dtypes = c(compute = layer$compute_dtype, variable = layer$variable_dtype),
        optimizer = class(model$optimizer),
        warned = warned,
        finding = finding,
        check_setup = unclass(check$setup),
        check_format = format(check)
      )
    },
    env = c(KERAS_BACKEND = "tensorflow")
  )
  expect_identical(child$setup$dtype_policy, "mixed_bfloat16")
  expect_false(child$setup$loss_scaling)
  expect_identical(child$dtypes, c(compute = "bfloat16", variable = "float32"))
  expect_false("keras.src.optimizers.loss_scale_optimizer.LossScaleOptimizer" %in% child$optimizer)
  expect_match(child$warned, "computes its sigmoid in bfloat16", fixed = TRUE)
  expect_identical(child$finding, child$warned)

  # gpu_check() reports the setup in force.
  expect_identical(child$check_setup$dtype_policy, "mixed_bfloat16")
  lines <- child$check_format
  section <- which(lines == "Setup (gpu_setup()):")
  expect_length(section, 1)
  precision_line <- grep("^  precision:", lines, value = TRUE)
  expect_length(precision_line, 1)
  expect_gt(match(precision_line, lines), section)
  expect_match(precision_line, "^  precision: +mixed_bfloat16 \\(asked for mixed_bfloat16")
  expect_false(grepl("loss scaling", precision_line, fixed = TRUE))
  for (setting in c("memory growth:", "memory limit:", "threads:", "jit_compile:")) {
    expect_true(any(startsWith(lines[-seq_len(section)], paste0("  ", setting))), label = setting)
  }
  skip_if_nvidia_gpu()
  expect_match(precision_line, "no speed-up", fixed = TRUE)
  expect_false(child$check_setup$precision_suits_device)
})

test_that("gpu_precision_check() needs a Keras model", {
  expect_error(
    gpu_precision_check(1),
    "`model` must be a Keras 3 model, not `1`.",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_precision_check(list(1, 2)), "not a list of length 2", fixed = TRUE, class = "gpukeras_error_bad_argument"
  )
  expect_error(gpu_precision_check(NULL), "not NULL", fixed = TRUE, class = "gpukeras_error_bad_argument")
  skip_if_no_python()
  keras <- gpu_keras()
  expect_error(
    gpu_precision_check(keras$layers$Dense(1L)),
    "model must be a Keras 3 model with layers, not a Dense.",
    fixed = TRUE, class = "gpukeras_error_bad_argument"
  )
})

test_that("gpu_precision_check() warns once per model for a low-precision output layer, whatever the global policy", {
  skip_if_no_python()
  keras <- gpu_keras()
  build <- function(dtype) {
    keras$Sequential(list(
      keras$Input(shape = list(4L)),
      keras$layers$Dense(3L, activation = "sigmoid", dtype = dtype)
    ))
  }
  model <- build("mixed_bfloat16")
  expect_warning(
    finding <- gpu_precision_check(model),
    "computes its sigmoid in bfloat16",
    class = "gpukeras_warning_output_precision"
  )
  expect_match(finding, "Activation(\"sigmoid\")", fixed = TRUE)
  expect_no_warning(again <- gpu_precision_check(model))
  expect_identical(again, finding)
  # Another model with the same problem warns again.
  expect_warning(gpu_precision_check(build("mixed_float16")), "in float16", class = "gpukeras_warning_output_precision")
  expect_no_warning(expect_null(gpu_precision_check(build("float32"))))
  expect_invisible(gpu_precision_check(build("float32")))
})
