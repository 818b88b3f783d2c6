# gpu_setup(): every setting needs a runtime that has not started, so each
# check runs in a fresh R process (run_in_fresh_r()) and reads back what
# TensorFlow or JAX reports there. Several checks share one child: starting
# TensorFlow costs seconds.

test_that("check_threads() takes one count for both, or c(intra = , inter = ) in any order", {
  expect_identical(check_threads(NULL), list())
  expect_identical(check_threads(3), list(intra = 3L, inter = 3L))
  expect_identical(check_threads(0), list(intra = 0L, inter = 0L))
  expect_identical(check_threads(c(2, 1)), list(intra = 2L, inter = 1L))
  expect_identical(check_threads(c(intra = 2, inter = 1)), list(intra = 2L, inter = 1L))
  expect_identical(check_threads(c(inter = 1, intra = 2)), list(intra = 2L, inter = 1L)[c("inter", "intra")])
  expect_error(check_threads(-1), "`threads` must be one count", class = "gpukeras_error_bad_argument")
  expect_error(check_threads(1.5), "not `1.5`", class = "gpukeras_error_bad_argument")
  expect_error(check_threads(1:3), "a integer of length 3", class = "gpukeras_error_bad_argument")
  expect_error(check_threads(NA_real_), class = "gpukeras_error_bad_argument")
  expect_error(check_threads("2"), class = "gpukeras_error_bad_argument")
  expect_error(
    check_threads(c(a = 1, b = 2)), "`threads` names must be `intra` and `inter`", class = "gpukeras_error_bad_argument"
  )
})

test_that("a gpukeras_setup's R vectors come from the core's lists, and it prints the core's lines", {
  # The lines themselves: python/tests/test_setup.py (setup_lines()).
  setup <- new_gpukeras_setup(list(
    backend = "jax", gpus = list("GPU:0", "GPU:1"), memory_limit_mib = list(512, 2048),
    devices = list("GPU:0", "GPU:1"), notes = list("a note"),
    lines = list("<gpukeras setup> jax backend", "  memory limit:    512 MiB, 2.0 GiB")
  ))
  expect_s3_class(setup, "gpukeras_setup")
  expect_identical(setup$gpus, c("GPU:0", "GPU:1"))
  expect_identical(setup$devices, c("GPU:0", "GPU:1"))
  expect_identical(setup$memory_limit_mib, c(512, 2048))
  expect_identical(format(setup), c("<gpukeras setup> jax backend", "  memory limit:    512 MiB, 2.0 GiB"))
  expect_output(expect_invisible(print(setup)), "memory limit:    512 MiB, 2.0 GiB", fixed = TRUE)
})

test_that("bad gpu_setup() arguments are gpukeras_error_bad_argument errors raised before Python starts", {
  child <- run_in_fresh_r({
    errors <- list(
      mixed_precision = catch_error(gpu_setup(mixed_precision = "float8")),
      threads_negative = catch_error(gpu_setup(threads = -1)),
      threads_names = catch_error(gpu_setup(threads = c(a = 1, b = 2))),
      jit_compile = catch_error(gpu_setup(jit_compile = "yes")),
      cpu_devices = catch_error(gpu_setup(cpu_devices = 0)),
      memory_limit = catch_error(gpu_setup(memory_limit = -5)),
      devices_tpu = catch_error(gpu_setup(devices = "TPU:0")),
      devices_na = catch_error(gpu_setup(devices = NA)),
      devices_negative = catch_error(gpu_setup(devices = -1)),
      memory_growth = catch_error(gpu_setup(memory_growth = NA)),
      deterministic_word = catch_error(gpu_setup(deterministic = "yes", seed = 1)),
      deterministic_na = catch_error(gpu_setup(deterministic = NA, seed = 1)),
      seed = catch_error(gpu_setup(seed = 1.5))
    )
    list(errors = errors, started = reticulate::py_available(initialize = FALSE))
  })
  expect_false(child$started)
  errors <- child$errors
  for (name in names(errors)) {
    expect_identical(
      errors[[name]]$class,
      c("gpukeras_error_bad_argument", "gpukeras_error", "rlang_error", "error", "condition"),
      label = name
    )
  }
  expect_match(
    errors$mixed_precision$message,
    "`mixed_precision` must be one of \"auto\", \"float16\", \"bfloat16\", \"float32\", not `float8`.",
    fixed = TRUE
  )
  expect_match(errors$threads_negative$message, "`threads` must be one count or c(intra = , inter = )", fixed = TRUE)
  expect_match(errors$threads_negative$message, "not `-1`", fixed = TRUE)
  expect_match(errors$threads_names$message, "`threads` names must be `intra` and `inter`.", fixed = TRUE)
  expect_match(errors$jit_compile$message, "`jit_compile` must be TRUE, FALSE or \"auto\", not `yes`.", fixed = TRUE)
  expect_match(errors$cpu_devices$message, "`cpu_devices` must be one whole number >= 1, not `0`.", fixed = TRUE)
  expect_match(errors$memory_limit$message, "`memory_limit` must be positive numbers, not `-5`.", fixed = TRUE)
  expect_match(
    errors$devices_tpu$message,
    "`devices` must be GPU indices (0, 1, ...) or names like \"GPU:0\" or \"CPU:1\", not `TPU:0`.",
    fixed = TRUE
  )
  expect_match(errors$devices_tpu$message, "gpu_devices() lists the devices there are.", fixed = TRUE)
  expect_match(errors$devices_na$message, "not `NA`", fixed = TRUE)
  expect_match(errors$devices_negative$message, "not `-1`", fixed = TRUE)
  expect_match(errors$memory_growth$message, "`memory_growth` must be TRUE or FALSE, not `NA`.", fixed = TRUE)
  expect_match(errors$deterministic_word$message, "`deterministic` must be TRUE or FALSE, not `yes`.", fixed = TRUE)
  expect_match(errors$deterministic_na$message, "`deterministic` must be TRUE or FALSE, not `NA`.", fixed = TRUE)
  expect_match(errors$seed$message, "`seed` must be one whole number >= 0, not `1.5`.", fixed = TRUE)
})

test_that("gpu_setup() with defaults returns a gpukeras_setup that matches what TensorFlow reports", {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      setup <- gpu_setup()
      tf <- reticulate::import("tensorflow")
      keras <- reticulate::import("keras")
      visible <- NULL
      printed <- utils::capture.output(visible <- withVisible(print(setup))$visible)
      in_force <- list(
        intra = tf$config$threading$get_intra_op_parallelism_threads(),
        inter = tf$config$threading$get_inter_op_parallelism_threads(),
        cpus = length(tf$config$list_logical_devices("CPU")),
        gpus = length(tf$config$list_logical_devices("GPU")),
        policy = keras$config$dtype_policy()$name
      )
      # The checks below are raised before anything is applied.
      both <- catch_error(gpu_setup(memory_growth = TRUE, memory_limit = 1024))
      device_index <- catch_error(gpu_setup(devices = 0))
      device_name <- catch_error(gpu_setup(devices = "GPU:0"))
      limit_warnings <- list()
      limit_error <- catch_error(withCallingHandlers(
        limit_setup <- gpu_setup(memory_limit = 1024),
        warning = function(w) {
          limit_warnings[[length(limit_warnings) + 1]] <<- list(class = class(w), message = conditionMessage(w))
          invokeRestart("muffleWarning")
        }
      ))
      list(
        class = class(setup),
        names = names(setup),
        fields = unclass(setup),
        format = format(setup),
        printed = printed,
        visible = visible,
        in_force = in_force,
        both = both,
        device_index = device_index,
        device_name = device_name,
        limit_error = limit_error,
        limit_warnings = limit_warnings,
        limit_setup = if (is.null(limit_error)) unclass(limit_setup)
      )
    },
    env = c(KERAS_BACKEND = "tensorflow")
  )
  expect_identical(child$class, "gpukeras_setup")
  expect_named(child$fields, c(
    "backend", "gpus", "memory_growth", "memory_limit_mib", "cpu_devices", "intra_op_threads",
    "inter_op_threads", "devices", "dtype_policy", "precision_reason", "loss_scaling",
    "precision_suits_device", "jit_compile", "deterministic", "seed", "notes", "lines", "seed_chosen", "workers_ahead"
  ), ignore.order = TRUE)
  fields <- child$fields
  # no worker started ahead unless asked for (workers_ahead = 0)
  expect_identical(fields$workers_ahead, character())
  expect_identical(fields$backend, "tensorflow")
  # Threads and logical CPUs are left as TensorFlow has them, and read back.
  expect_identical(fields$intra_op_threads, child$in_force$intra)
  expect_identical(fields$inter_op_threads, child$in_force$inter)
  expect_identical(fields$intra_op_threads, 0L)
  expect_identical(fields$inter_op_threads, 0L)
  expect_identical(fields$cpu_devices, child$in_force$cpus)
  expect_identical(fields$cpu_devices, 1L)
  expect_identical(length(fields$gpus), child$in_force$gpus)
  expect_null(fields$devices)
  expect_identical(fields$dtype_policy, child$in_force$policy)
  expect_identical(fields$jit_compile, "auto")
  expect_identical(fields$notes, character())
  expect_false(fields$deterministic)
  expect_null(fields$seed)
  expect_false(fields$seed_chosen)
  expect_false(fields$loss_scaling)
  expect_true(fields$precision_suits_device)

  expect_length(child$format, 10)
  expect_identical(child$format[1], "<gpukeras setup> tensorflow backend")
  expect_match(child$format[2:10], "^  [a-zA-Z_ ]+: +\\S")
  expect_identical(child$format[8], "  threads:         intra-op 0, inter-op 0 (0 = TensorFlow chooses)")
  expect_identical(child$format[9], "  jit_compile:     auto")
  expect_identical(child$format[10], "  deterministic:   no")
  expect_identical(child$printed, child$format)
  expect_false(child$visible)

  # memory_growth and memory_limit together: TensorFlow cannot do both.
  expect_identical(child$both$class[1], "gpukeras_error_bad_argument")
  expect_match(
    child$both$message, "memory_growth = TRUE and memory_limit cannot be combined in TensorFlow", fixed = TRUE
  )
  expect_match(child$both$message, "Pass memory_growth = FALSE with memory_limit", fixed = TRUE)
  expect_null(child$both$python_traceback)

  skip_if_nvidia_gpu()
  # "auto" on the CPU: float32, and the reason says so.
  expect_identical(fields$dtype_policy, "float32")
  expect_match(fields$precision_reason, "CPU", fixed = TRUE)
  expect_identical(fields$gpus, character())
  expect_null(fields$memory_growth)
  expect_identical(fields$memory_limit_mib, numeric())
  expect_match(child$format[7], "^  precision:       float32 \\(no GPU: mixed precision does not speed up the CPU\\)$")
  expect_false(grepl("no speed-up on this device", child$format[7], fixed = TRUE))
  expect_identical(child$format[2], "  GPUs in use:     none")
  expect_identical(child$format[3], "  memory growth:   n/a (no GPU)")

  # A GPU that does not exist: a classed error listing the devices there are.
  for (error in list(child$device_index, child$device_name)) {
    expect_identical(
      error$class, c("gpukeras_error_unknown_device", "gpukeras_error", "rlang_error", "error", "condition")
    )
    expect_match(error$message, "No such device: GPU:0. Devices here: CPU:0.", fixed = TRUE)
    expect_match(error$message, "gpu_devices() lists them", fixed = TRUE)
  }

  # memory_limit alone (memory_growth becomes FALSE): nothing to cap without a GPU.
  expect_null(child$limit_error)
  expect_length(child$limit_warnings, 1)
  expect_identical(
    child$limit_warnings[[1]]$class,
    c("gpukeras_warning_not_applied", "gpukeras_warning", "rlang_warning", "warning", "condition")
  )
  expect_match(
    child$limit_warnings[[1]]$message, "memory_limit: no GPU in use, so there is nothing to cap", fixed = TRUE
  )
  expect_identical(child$limit_setup$notes, "memory_limit: no GPU in use, so there is nothing to cap")
  expect_identical(child$limit_setup$memory_limit_mib, numeric())
})

test_that(paste(
  "gpu_setup(deterministic = TRUE, seed = ): two gpu_fit()s of the same model give the same weights, and say so"
), {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      setup <- gpu_setup(deterministic = TRUE, seed = 1)
      keras <- gpu_keras()
      tf <- reticulate::import("tensorflow")
      x <- matrix(stats::rnorm(256 * 4), ncol = 4)
      data <- list(x = x, y = as.vector(x %*% c(1, -2, 0.5, 3)))
      # The same model each time: built from the same seed (its weights and Dropout's generator).
      trained <- function(...) {
        keras$utils$set_random_seed(0L)
        model <- keras$Sequential(list(
          keras$Input(shape = list(4L)),
          keras$layers$Dense(16L, activation = "relu"),
          keras$layers$Dropout(0.2),
          keras$layers$Dense(1L)
        ))
        model$compile(optimizer = "adam", loss = "mse")
        fit <- gpu_fit(model, data, epochs = 2, batch_size = 32, verbose = 0, monitor = FALSE, ...)
        list(weights = model$get_weights(), settings = fit$settings[c("deterministic", "seed")], format = format(fit))
      }
      list(
        setup = unclass(setup),
        format = format(setup),
        first = trained(seed = 2),
        second = trained(seed = 2),
        unseeded = trained(),
        # TensorFlow's own reading (not exported: read as gpukeras' core does)
        op_determinism = reticulate::import("tensorflow.python.framework.config")$is_op_determinism_enabled()
      )
    },
    env = c(KERAS_BACKEND = "tensorflow")
  )
  expect_true(child$setup$deterministic)
  expect_identical(child$setup$seed, 1L)
  expect_true("  deterministic:   yes, seed 1" %in% child$format)
  expect_true(child$op_determinism)

  expect_identical(child$first$weights, child$second$weights)
  expect_identical(child$first$settings, list(deterministic = TRUE, seed = 2L))
  expect_true(any(grepl("seed 2, deterministic ops", child$first$format, fixed = TRUE)))
  # Without a seed of its own, gpu_fit() takes the setup's.
  expect_identical(child$unseeded$settings, list(deterministic = TRUE, seed = 1L))
  expect_false(identical(child$unseeded$weights, child$first$weights))
})

test_that("gpu_setup(deterministic = TRUE) without a seed chooses one, shows how to repeat it, and hands it on", {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      set.seed(5)
      before <- .Random.seed
      setup <- gpu_setup(deterministic = TRUE)
      keras <- gpu_keras()
      model <- keras$Sequential(list(keras$Input(shape = 2L), keras$layers$Dense(1L)))
      model$compile(optimizer = "sgd", loss = "mse")
      fit <- gpu_fit(model, list(x = matrix(1:8, 4), y = 1:4), epochs = 1, verbose = 0, monitor = FALSE)
      list(
        setup = unclass(setup), format = format(setup), r_random_kept = identical(.Random.seed, before),
        handed_on = gpukeras:::the$setup_args, fit = fit$settings[c("deterministic", "seed")],
        op_determinism = reticulate::import("tensorflow.python.framework.config")$is_op_determinism_enabled()
      )
    },
    env = c(KERAS_BACKEND = "tensorflow")
  )
  seed <- child$setup$seed
  expect_true(is.integer(seed) && length(seed) == 1L && seed >= 0L)
  expect_true(child$setup$seed_chosen)
  expect_true(child$op_determinism)
  expect_true(sprintf(
    "  deterministic:   yes, seed %d (chosen: gpu_setup(deterministic = TRUE, seed = %d) repeats it)", seed, seed
  ) %in% child$format)
  expect_true(child$r_random_kept)
  # background fits and gpu_cv()/gpu_search() workers apply the setup again: with this seed
  expect_identical(child$handed_on$seed, seed)
  expect_identical(child$fit, list(deterministic = TRUE, seed = seed))
})

test_that(paste(
  "gpu_setup() after the runtime started: is silent when nothing changes, else changes nothing and says what to do"
), {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      first <- gpu_setup(threads = 2)
      tf <- reticulate::import("tensorflow")
      threads_now <- function() {
        c(
          intra = tf$config$threading$get_intra_op_parallelism_threads(),
          inter = tf$config$threading$get_inter_op_parallelism_threads()
        )
      }
      before_start <- threads_now()
      keras <- gpu_keras()
      model <- keras$Sequential(list(keras$Input(shape = list(3L)), keras$layers$Dense(2L)))
      output <- model(tf$ones(list(1L, 3L)))
      late <- catch_error(gpu_setup(threads = 3, mixed_precision = "bfloat16"))
      policy_after_error <- keras$config$dtype_policy()$name
      threads_after_error <- threads_now()
      late_cpus <- catch_error(gpu_setup(threads = 2, cpu_devices = 2))
      caught <- list()
      again_error <- catch_error(withCallingHandlers(
        again <- gpu_setup(threads = 2),
        warning = function(w) {
          caught[[length(caught) + 1]] <<- conditionMessage(w)
          invokeRestart("muffleWarning")
        }
      ))
      list(
        first = unclass(first)[c("intra_op_threads", "inter_op_threads")],
        before_start = before_start,
        late = late,
        policy_after_error = policy_after_error,
        threads_after_error = threads_after_error,
        late_cpus = late_cpus,
        again_error = again_error,
        again_warnings = caught,
        again = if (is.null(again_error)) unclass(again)[c("intra_op_threads", "inter_op_threads", "dtype_policy")],
        policy_at_end = keras$config$dtype_policy()$name
      )
    },
    env = c(KERAS_BACKEND = "tensorflow")
  )
  # threads = 2 is both thread counts, as TensorFlow reports them.
  expect_identical(child$before_start, c(intra = 2L, inter = 2L))
  expect_identical(child$first, list(intra_op_threads = 2L, inter_op_threads = 2L))

  late <- child$late
  expect_identical(
    late$class, c("gpukeras_error_runtime_started", "gpukeras_error", "rlang_error", "error", "condition")
  )
  expect_match(late$message, "TensorFlow has already started in this session", fixed = TRUE)
  expect_match(late$message, "threads (intra-op): asked 3, in force 2", fixed = TRUE)
  expect_match(late$message, "threads (inter-op): asked 3, in force 2", fixed = TRUE)
  expect_match(late$message, "Restart R and call gpu_setup() first, before anything else", fixed = TRUE)
  expect_match(late$message, "Nothing was changed.", fixed = TRUE)
  expect_false(grepl("Physical devices cannot be modified", late$message, fixed = TRUE))
  expect_false(grepl("Traceback", late$message, fixed = TRUE))
  expect_null(late$python_traceback)
  # A refused setup changes nothing, the dtype policy included.
  expect_identical(child$policy_after_error, "float32")
  expect_identical(child$threads_after_error, c(intra = 2L, inter = 2L))

  expect_identical(child$late_cpus$class[1], "gpukeras_error_runtime_started")
  expect_match(child$late_cpus$message, "cpu_devices: asked 2, in force 1", fixed = TRUE)
  expect_false(grepl("threads", child$late_cpus$message, fixed = TRUE))

  # The state asked for already holds: no error, no warning.
  expect_null(child$again_error)
  expect_identical(child$again_warnings, list())
  expect_identical(child$again$intra_op_threads, 2L)
  expect_identical(child$again$inter_op_threads, 2L)
  skip_if_nvidia_gpu()
  expect_identical(child$again$dtype_policy, "float32")
  expect_identical(child$policy_at_end, "float32")
})

test_that("on JAX, threads cannot be set: a gpukeras_warning_not_applied warning and a note", {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      core()
      if (!reticulate::py_module_available("jax")) {
        list(jax = FALSE)
      } else {
        caught <- list()
        setup <- withCallingHandlers(
          gpu_setup(threads = 2, memory_limit = 1024, cpu_devices = 2, devices = "CPU:1"),
          warning = function(w) {
            caught[[length(caught) + 1]] <<- list(class = class(w), message = conditionMessage(w))
            invokeRestart("muffleWarning")
          }
        )
        jax <- reticulate::import("jax")
        keras <- gpu_keras()
        layer <- with_gpu_device("CPU:1", {
          layer <- keras$layers$Dense(2L)
          layer$build(list(NULL, 3L))
          layer
        })
        list(
          jax = TRUE,
          setup = unclass(setup),
          format = format(setup),
          warnings = caught,
          cpus = length(jax$devices("cpu")),
          kernel_devices = reticulate::py_str(layer$kernel$value$devices()),
          unknown = catch_error(with_gpu_device("GPU:3", NULL))
        )
      }
    },
    env = c(KERAS_BACKEND = "jax")
  )
  if (!isTRUE(child$jax)) {
    skip("JAX is not installed in gpukeras' Python")
  }
  setup <- child$setup
  expect_identical(setup$backend, "jax")
  expect_null(setup$intra_op_threads)
  expect_null(setup$inter_op_threads)
  expect_true("  threads:         not settable on JAX" %in% child$format)
  thread_note <- "threads: JAX has no per-process op-thread settings; not applied"
  expect_true(thread_note %in% setup$notes)
  expect_true(paste("  note:", thread_note) %in% child$format)
  classes <- vapply(child$warnings, function(w) w$class[1], "")
  messages <- vapply(child$warnings, function(w) w$message, "")
  expect_true(all(classes == "gpukeras_warning_not_applied"))
  expect_true(thread_note %in% messages)
  # Two logical CPU devices, as JAX reports them, and a layer placed on the second.
  expect_identical(setup$cpu_devices, 2L)
  expect_identical(child$cpus, 2L)
  expect_identical(setup$devices, "CPU:1")
  expect_match(child$kernel_devices, "CpuDevice(id=1)", fixed = TRUE)
  expect_identical(child$unknown$class[1], "gpukeras_error_unknown_device")
  expect_match(child$unknown$message, "Devices here: CPU:0, CPU:1", fixed = TRUE)
  skip_if_nvidia_gpu()
  expect_identical(messages, c(thread_note, "memory_limit: no GPU in use, so there is nothing to cap"))
})
