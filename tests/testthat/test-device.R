# Device scopes (with_gpu_device(), local_gpu_device()) and gpu_setup()'s
# device settings. Logical CPU devices need a runtime that has not started, so
# those checks run in a fresh R process.

test_that("device_names() turns GPU indices into names and rejects anything else", {
  expect_identical(device_names(0), "GPU:0")
  expect_identical(device_names(c(0, 1)), c("GPU:0", "GPU:1"))
  expect_identical(device_names(2L), "GPU:2")
  expect_identical(device_names("GPU:1"), "GPU:1")
  expect_identical(device_names(c("cpu:1", "gpu:0")), c("CPU:1", "GPU:0"))
  for (bad in list("TPU:0", "GPU", "GPU:-1", "0", NA, NA_character_, -1, 1.5, TRUE, list(0))) {
    expect_error(
      device_names(bad),
      "must be GPU indices (0, 1, ...) or names like",
      fixed = TRUE,
      class = "gpukeras_error_bad_argument"
    )
  }
  expect_error(device_names("TPU:0", "device"), "^`device` must be", class = "gpukeras_error_bad_argument")
})

test_that("with_gpu_device() and local_gpu_device() reject a malformed device before Python starts", {
  child <- run_in_fresh_r({
    ran <- FALSE
    list(
      two = catch_error(with_gpu_device(c("CPU:0", "CPU:1"), ran <- TRUE)),
      none = catch_error(with_gpu_device(character(), ran <- TRUE)),
      name = catch_error(with_gpu_device("TPU:0", ran <- TRUE)),
      local = catch_error(local_gpu_device(NA)),
      ran = ran,
      started = reticulate::py_available(initialize = FALSE)
    )
  })
  expect_false(child$started)
  expect_false(child$ran)
  for (error in child[c("two", "none", "name", "local")]) {
    expect_identical(
      error$class, c("gpukeras_error_bad_argument", "gpukeras_error", "rlang_error", "error", "condition")
    )
  }
  expect_match(child$two$message, "`device` must be one device, not a character of length 2.", fixed = TRUE)
  expect_match(child$none$message, "`device` must be one device", fixed = TRUE)
  expect_match(child$name$message, "`device` must be GPU indices", fixed = TRUE)
  expect_match(child$name$message, "not `TPU:0`", fixed = TRUE)
})

test_that("with_gpu_device() on a device that does not exist is a classed error listing the devices there are", {
  skip_if_no_python()
  ran <- FALSE
  error <- tryCatch(with_gpu_device("GPU:3", ran <- TRUE), error = identity)
  expect_false(ran)
  expect_identical(
    class(error), c("gpukeras_error_unknown_device", "gpukeras_error", "rlang_error", "error", "condition")
  )
  expect_match(conditionMessage(error), "No such device: 'GPU:3'. Devices here: ", fixed = TRUE)
  expect_match(conditionMessage(error), "CPU:0", fixed = TRUE)
  expect_match(conditionMessage(error), "gpu_devices() lists them", fixed = TRUE)
  expect_null(error$python_traceback)
  expect_error(
    with_gpu_device(7, NULL), "No such device: 'GPU:7'", fixed = TRUE, class = "gpukeras_error_unknown_device"
  )
  scoped <- function() {
    local_gpu_device("CPU:9")
    "not reached"
  }
  expect_error(scoped(), "No such device: 'CPU:9'", fixed = TRUE, class = "gpukeras_error_unknown_device")
})

test_that("with_gpu_device() returns the value of its code and places layers there", {
  skip_if_no_python()
  keras <- gpu_keras()
  layer <- with_gpu_device("CPU:0", {
    layer <- keras$layers$Dense(2L)
    layer$build(list(NULL, 3L))
    layer
  })
  expect_identical(with_gpu_device("cpu:0", 1 + 1), 2)
  skip_unless_tensorflow(shared_check())
  expect_match(layer$kernel$value$device, "device:CPU:0$")
})

test_that(paste(
  "gpu_setup(cpu_devices = 2, devices = \"CPU:1\", threads = c(intra = 2, inter = 1)) holds in TensorFlow, and scopes",
  "place layers on CPU:1"
), {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      setup <- gpu_setup(cpu_devices = 2, devices = "CPU:1", threads = c(intra = 2, inter = 1))
      tf <- reticulate::import("tensorflow")
      keras <- gpu_keras()
      kernel_device <- function() {
        layer <- keras$layers$Dense(2L)
        layer$build(list(NULL, 3L))
        layer$kernel$value$device
      }
      in_local_cpu0 <- function() {
        scope <- local_gpu_device("CPU:0")
        c(scope = scope, kernel = kernel_device())
      }
      in_local_cpu1 <- function() {
        local_gpu_device("cpu:1")
        kernel_device()
      }
      nested <- with_gpu_device("CPU:1", c(
        before = kernel_device(),
        in_function = in_local_cpu0()[["kernel"]],
        after_function = kernel_device()
      ))
      returns_scope <- function() withVisible(local_gpu_device("CPU:1"))
      local_returned <- returns_scope()
      failed <- catch_error(with_gpu_device("CPU:1", stop("inside the scope")))
      list(
        setup = unclass(setup),
        format = format(setup),
        in_force = list(
          intra = tf$config$threading$get_intra_op_parallelism_threads(),
          inter = tf$config$threading$get_inter_op_parallelism_threads(),
          cpus = vapply(tf$config$list_logical_devices("CPU"), function(d) d$name, "")
        ),
        unscoped = kernel_device(),
        nested = nested,
        local_scope_name = in_local_cpu0()[["scope"]],
        in_local_cpu1 = in_local_cpu1(),
        after_local_cpu1 = kernel_device(),
        local_returned = local_returned,
        failed = failed,
        after_failure = kernel_device(),
        unknown = catch_error(with_gpu_device("GPU:3", NULL)),
        unknown_setup = catch_error(gpu_setup(devices = "CPU:2"))
      )
    },
    env = c(KERAS_BACKEND = "tensorflow")
  )
  setup <- child$setup
  # Threads, as TensorFlow reports them.
  expect_identical(setup$intra_op_threads, 2L)
  expect_identical(setup$inter_op_threads, 1L)
  expect_identical(child$in_force$intra, 2L)
  expect_identical(child$in_force$inter, 1L)
  expect_true("  threads:         intra-op 2, inter-op 1 (0 = TensorFlow chooses)" %in% child$format)
  # Two logical CPU devices, and CPU:1 chosen among them.
  expect_identical(setup$cpu_devices, 2L)
  expect_match(child$in_force$cpus, "device:CPU:[01]$")
  expect_length(child$in_force$cpus, 2)
  expect_true("  CPU devices:     2 logical" %in% child$format)
  expect_identical(setup$devices, "CPU:1")
  expect_true("  devices chosen:  CPU:1" %in% child$format)

  # Outside any scope, TensorFlow's default device.
  expect_match(child$unscoped, "device:CPU:0$")
  # with_gpu_device() places the layer; local_gpu_device() scopes only its
  # function: after it returns, the outer scope (CPU:1) holds again.
  expect_match(child$nested[["before"]], "device:CPU:1$")
  expect_match(child$nested[["in_function"]], "device:CPU:0$")
  expect_match(child$nested[["after_function"]], "device:CPU:1$")
  expect_identical(child$local_scope_name, "CPU:0")
  expect_match(child$in_local_cpu1, "device:CPU:1$")
  expect_match(child$after_local_cpu1, "device:CPU:0$")
  expect_identical(child$local_returned, list(value = "CPU:1", visible = FALSE))
  # An error inside the scope still ends it.
  expect_match(child$failed$message, "inside the scope", fixed = TRUE)
  expect_match(child$after_failure, "device:CPU:0$")

  expect_identical(child$unknown$class[1], "gpukeras_error_unknown_device")
  expect_match(child$unknown$message, "No such device: 'GPU:3'. Devices here: CPU:0, CPU:1.", fixed = TRUE)
  expect_identical(child$unknown_setup$class[1], "gpukeras_error_unknown_device")
  expect_match(child$unknown_setup$message, "No such device: CPU:2.", fixed = TRUE)
  expect_match(child$unknown_setup$message, "CPU:0, CPU:1", fixed = TRUE)
})
