# gpu_memory_plan(): the R side (argument checks before Python, the core's plain
# data as a gpukeras_memory_plan, print and plot) and closed-form plans of a
# small MLP on the CPU, on TensorFlow here and on JAX in a fresh R process.

# What the core returns, as reticulate hands it to R (None as NULL).
plan_core_result <- function(gpu = FALSE) {
  list(
    parts = list(
      list(part = "optimizer slots", mib = 2), list(part = "activations: dense", mib = 1.5),
      list(part = "parameters", mib = 1), list(part = "gradients", mib = 1),
      list(part = "input batch", mib = 0.5)
    ),
    total_mib = 6, batch_size = 32L, fixed_mib = 4, per_sample_mib = 2 / 32,
    largest_batch = if (gpu) 163776L, largest_batch_reason = if (!gpu) "no GPU: the plan is for a GPU's memory",
    device = if (gpu) "GPU:0" else "CPU:0", device_name = if (gpu) "NVIDIA H100 80GB HBM3" else "AMD EPYC",
    free_mib = if (gpu) 10240, free_source = if (gpu) "the driver (NVML)",
    backend = "tensorflow", dtype_policy = "float32",
    optimizer = list(name = "Adam", counted = "by type: 2 x the trainable weights"),
    uncounted = if (gpu) list("input batch", "block") else list(),
    method = "layer outputs (an estimate)",
    lines = list("<gpukeras memory plan> batch 32", "  part memory share"), plot_title = "Memory plan: batch 32"
  )
}

test_that("the core's result becomes a gpukeras_memory_plan, printed in the core's words", {
  plan <- new_gpukeras_memory_plan(plan_core_result())
  expect_s3_class(plan, "gpukeras_memory_plan")
  expect_identical(names(plan$parts), c("part", "mib"))
  expect_identical(plan$parts$part[1], "optimizer slots")
  expect_identical(plan$largest_batch, NA_integer_)
  expect_identical(plan$free_mib, NA_real_)
  expect_identical(plan$uncounted, character())
  expect_identical(plan$method_note, NA_character_)
  # the lines are the core's (tools/memory_plan.py's plan_lines, tested in test_memory_plan.py)
  expect_identical(format(plan), c("<gpukeras memory plan> batch 32", "  part memory share"))
  expect_output(expect_identical(print(plan), plan), "part memory share", fixed = TRUE)
})

test_that("plot() draws the parts as bars and returns the plan", {
  plan <- new_gpukeras_memory_plan(plan_core_result())
  path <- withr::local_tempfile(fileext = ".png")
  grDevices::png(path, width = 700, height = 500)
  device <- grDevices::dev.cur()
  drawn <- tryCatch(plot(plan), finally = grDevices::dev.off(device))
  expect_identical(drawn, plan)
  expect_gt(file.size(path), 1000)
})

test_that("bad arguments are classed errors naming the argument, before Python starts", {
  expect_error(gpu_memory_plan("model", 32), class = "gpukeras_error_bad_argument", regexp = "`model` must be")
  fake <- structure(list(), class = "python.builtin.object")
  for (bad in list(0, 2.5, -1, "32", c(16, 32), NA)) {
    expect_error(gpu_memory_plan(fake, bad), class = "gpukeras_error_bad_argument", regexp = "`batch_size` must be")
  }
  expect_error(
    gpu_memory_plan(fake, 32, device = 1), class = "gpukeras_error_bad_argument", regexp = "`device` must be"
  )
  for (bad in list(0, 2.5, "512", c(8, 16))) {
    expect_error(
      gpu_memory_plan(fake, 32, sequence_length = bad),
      class = "gpukeras_error_bad_argument", regexp = "`sequence_length` must be"
    )
  }
})

test_that("sequence_length counts the input batch and the activations a sequence model leaves open", {
  keras <- gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = list(NULL), dtype = "int32"),
    keras$layers$Embedding(100L, 8L, name = "embedding"),
    keras$layers$GlobalAveragePooling1D(name = "pooled"),
    keras$layers$Dense(2L, name = "out")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  open <- gpu_memory_plan(model, 4)
  expect_true(all(c("input batch", "embedding") %in% open$uncounted))
  plan <- gpu_memory_plan(model, 4, sequence_length = 10)
  expect_false(any(c("input batch", "embedding") %in% plan$uncounted))
  part <- function(name) plan$parts$mib[plan$parts$part == name]
  expect_equal(part("input batch"), 4 * 10 * 4 / 2^20)
  expect_equal(part("activations: embedding"), 4 * 10 * 8 * 4 / 2^20)
  expect_equal(part("activations: out"), 4 * 2 * 4 / 2^20)
})

# The closed-form plans: a compiled MLP 100-256-10 with Adam, at batch 32 and 64,
# and with every layer in mixed_float16. Self-contained, as it also runs in a
# fresh R process.
plan_facts <- quote({
  keras <- gpukeras::gpu_keras()
  mlp <- function(dtype = NULL) {
    model <- keras$Sequential(list(
      keras$Input(shape = list(100L)),
      keras$layers$Dense(256L, activation = "relu", dtype = dtype),
      keras$layers$Dense(10L, dtype = dtype)
    ))
    model$compile(optimizer = "adam", loss = "mse")
    model
  }
  model <- mlp()
  list(
    parameters = model$count_params(),
    plan = gpukeras::gpu_memory_plan(model, 32),
    double = gpukeras::gpu_memory_plan(model, 64),
    mixed = gpukeras::gpu_memory_plan(mlp("mixed_float16"), 32)
  )
})

expect_closed_form <- function(facts, backend) {
  part <- function(plan, name) plan$parts$mib[plan$parts$part == name]
  activations <- function(plan) sum(plan$parts$mib[startsWith(plan$parts$part, "activations: ")])
  plan <- facts$plan
  expect_identical(plan$backend, backend)
  expect_identical(plan$method, if (backend == "jax") "XLA's compiled step" else "layer outputs (an estimate)")
  expect_equal(part(plan, "parameters"), facts$parameters * 4 / 2^20)
  expect_equal(part(plan, "gradients"), facts$parameters * 4 / 2^20)
  expect_equal(part(plan, "optimizer slots"), 2 * part(plan, "parameters"))
  expect_equal(activations(plan), (256 + 10) * 4 * 32 / 2^20)
  expect_equal(plan$total_mib, sum(plan$parts$mib))
  expect_false(is.unsorted(rev(plan$parts$mib)))
  expect_match(format(plan)[1], sprintf("^<gpukeras memory plan> batch 32 on [A-Z]+:0 .*%s", backend))
  expect_match(plan$plot_title, "^Memory plan: batch 32 on [A-Z]+:0, [0-9.]+ [KM]iB in all$")
  expect_equal(activations(facts$double), 2 * activations(plan))
  expect_equal(part(facts$double, "parameters"), part(plan, "parameters"))
  expect_equal(activations(facts$mixed), activations(plan) / 2)
  expect_equal(part(facts$mixed, "parameters"), part(plan, "parameters"))
  if (!startsWith(plan$device, "GPU")) {
    expect_identical(plan$largest_batch, NA_integer_)
    expect_match(plan$largest_batch_reason, "^no GPU")
  }
}

test_that("closed form on TensorFlow: float32 parameters at 4 bytes, Adam's 2 slots, activations by batch and dtype", {
  skip_if_no_python()
  expect_closed_form(eval(plan_facts), "tensorflow")
})

test_that("closed form on JAX, in a fresh R process", {
  skip_if_no_python()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  facts <- eval(bquote(run_in_fresh_r(.(plan_facts), env = c(KERAS_BACKEND = "jax"))))
  expect_closed_form(facts, "jax")
})

test_that("a Python object that is not a built, compiled Keras model is a classed error from the core", {
  skip_if_no_python()
  not_a_model <- reticulate::r_to_py(list(1, 2))
  expect_error(
    gpu_memory_plan(not_a_model, 32), class = "gpukeras_error_bad_model", regexp = "model must be a Keras 3 model"
  )
  keras <- gpu_keras()
  unbuilt <- keras$Sequential(list(keras$layers$Dense(1L)))
  expect_error(gpu_memory_plan(unbuilt, 32), class = "gpukeras_error_model_not_compiled")
  unbuilt$compile(optimizer = "adam", loss = "mse")
  expect_error(gpu_memory_plan(unbuilt, 32), class = "gpukeras_error_bad_model", regexp = "not built")
  expect_error(gpu_memory_plan(unbuilt, 32, device = "GPU:99"), class = "gpukeras_error_bad_model")
})

test_that("a device that does not exist is a classed error naming the devices there are", {
  skip_if_no_python()
  keras <- gpu_keras()
  model <- keras$Sequential(list(keras$Input(shape = list(3L)), keras$layers$Dense(1L)))
  model$compile(optimizer = "sgd", loss = "mse")
  expect_error(
    gpu_memory_plan(model, 8, device = "GPU:99"), class = "gpukeras_error_unknown_device", regexp = "No such device"
  )
  expect_identical(gpu_memory_plan(model, 8, device = "cpu:0")$device, "CPU:0")
})
