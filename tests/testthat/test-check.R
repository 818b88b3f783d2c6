# gpu_check(): run here on the real stack (one shared in-process result), and
# in fresh R processes for environments that must be set before Python starts.

test_that("library(gpukeras) does not start Python, nor load reticulate until it is used", {
  started <- run_in_fresh_r(c(
    # an R process that needs no Python (a job's supervisor) pays nothing for it
    reticulate_loaded = "reticulate" %in% loadedNamespaces(),
    matrix_loaded = "Matrix" %in% loadedNamespaces(),
    after_load = reticulate::py_available(initialize = FALSE),
    after_gpukeras_python = {
      gpukeras_python()
      reticulate::py_available(initialize = FALSE)
    }
  ))
  expect_identical(
    started,
    c(reticulate_loaded = FALSE, matrix_loaded = FALSE, after_load = FALSE, after_gpukeras_python = FALSE)
  )
})

test_that("gpu_check() returns a gpukeras_check with a verdict, reasons and advice", {
  skip_if_no_python()
  check <- shared_check()
  expect_s3_class(check, "gpukeras_check")
  expect_named(
    check,
    c(
      "verdict",
      "reasons",
      "advice",
      "stack",
      "nvml",
      "devices",
      "setup",
      "placement",
      "utilization",
      "timings",
      "repairs",
      "lines"
    )
  )
  expect_true(check$verdict %in% c("gpu_used", "gpu_available_not_used", "no_gpu"))
  expect_type(check$reasons, "character")
  expect_gt(length(check$reasons), 0)
  expect_type(check$advice, "character")
})

test_that("gpu_check() says no_gpu, and why, on a machine without an NVIDIA GPU", {
  skip_if_no_python()
  skip_if_nvidia_gpu()
  check <- shared_check()
  skip_unless_tensorflow(check)
  expect_identical(check$verdict, "no_gpu")
  expect_true(any(grepl("CPU-only TensorFlow build", check$reasons, fixed = TRUE)))
  expect_true(any(grepl("install_gpukeras(gpu = TRUE)", check$advice, fixed = TRUE)))
  expect_false(check$nvml$available)
  expect_type(check$nvml$reason, "character")
  expect_identical(check$nvml$gpus, 0L)
  expect_identical(check$devices$device, "CPU:0")
  expect_null(check$placement$speedup)
  expect_false(check$placement$on_gpu)
})

test_that("gpu_check() records the software stack", {
  skip_if_no_python()
  stack <- shared_check()$stack
  expect_true(all(c("r", "reticulate", "python", "keras", "keras_backend", "tensorflow") %in% names(stack)))
  expect_identical(stack$r, paste(R.version$major, R.version$minor, sep = "."))
  expect_identical(stack$reticulate, as.character(utils::packageVersion("reticulate")))
  expect_match(stack$python, "^3[.][0-9]+[.][0-9]+")
  expect_match(stack$keras, "^3[.]")
  expect_true(stack$keras_backend %in% c("tensorflow", "jax"))
  if (identical(stack$keras_backend, "tensorflow")) {
    expect_match(stack$tensorflow, "^2[.][0-9]+")
    expect_type(stack$is_cuda_build, "logical")
  }
})

test_that("gpu_check() ran the matmul on the CPU and read back where it ran", {
  skip_if_no_python()
  placement <- shared_check()$placement
  expect_identical(placement$size, 1024L)
  runs <- placement$runs
  expect_s3_class(runs, "data.frame")
  expect_named(runs, c("requested", "actual", "size", "median_ms", "gflops"))
  cpu <- runs[runs$requested == "CPU:0", ]
  expect_identical(nrow(cpu), 1L)
  expect_identical(cpu$actual, "CPU:0")
  expect_gt(cpu$median_ms, 0)
  expect_gt(cpu$gflops, 0)
  # The side doubles from 1024 until one multiply takes 5 ms; GFLOP/s is 2 n^3
  # flops over the median time.
  expect_true(cpu$size %in% (1024 * 2^(0:4)))
  expect_true(cpu$median_ms >= 5 || cpu$size == 16384)
  expect_equal(cpu$gflops, 2 * cpu$size^3 / (cpu$median_ms / 1000) / 1e9, tolerance = 1e-6)
})

test_that("gpu_check() lists the devices, with a CPU:0 row", {
  skip_if_no_python()
  devices <- shared_check()$devices
  expect_s3_class(devices, "data.frame")
  expect_named(devices, c(
    "device", "type", "name", "compute_capability",
    "memory_total_mib", "memory_free_mib", "nvml_index",
    "uuid", "pci_bus_id", "mig_parent", "nvml_reason"
  ))
  expect_identical(devices$device[1], "CPU:0")
  expect_identical(devices$type[1], "CPU")
  expect_gt(devices$memory_total_mib[1], 0)
})

test_that("gpu_check()'s training probe measured real throughput", {
  skip_if_no_python()
  check <- shared_check()
  u <- check$utilization
  expect_false(is.null(u))
  expect_gt(u$samples_per_second, 0)
  expect_gt(u$steps, 1)
  expect_gte(u$seconds, 0.5)
  expect_identical(u$device, if (any(check$devices$type == "GPU")) "GPU:0" else "CPU:0")
  expect_identical(u$weights_device, u$device)
  # NVML columns are kept even when there is no GPU to sample.
  expect_s3_class(u$gpus, "data.frame")
  expect_named(u$gpus, c(
    "nvml_index", "samples", "sample_hz", "utilization_mean",
    "utilization_max", "memory_used_max_mib", "power_mean_w"
  ))
  expect_true(all(c("start_runtime", "inspect", "placement", "probe") %in% names(check$timings)))
  expect_true(all(check$timings >= 0))
})

test_that("gpu_check(probe = FALSE) skips the training probe", {
  skip_if_no_python()
  check <- gpu_check(probe = FALSE)
  expect_s3_class(check, "gpukeras_check")
  expect_null(check$utilization)
  expect_false("probe" %in% names(check$timings))
  expect_identical(check$verdict, shared_check()$verdict)
  expect_true(any(grepl("not run (probe = FALSE)", format(check), fixed = TRUE)))
})

test_that("format() gives the verdict, reasons, stack and evidence as lines", {
  skip_if_no_python()
  check <- shared_check()
  lines <- format(check)
  expect_type(lines, "character")
  expect_gt(length(lines), 10)
  expect_match(lines[1], paste0("Verdict: ", check$verdict), fixed = TRUE)
  for (heading in c("Reasons:", "Stack:", "Devices:", "Training probe:")) {
    expect_true(heading %in% lines, info = heading)
  }
  expect_true(any(grepl("Placement (float32 matmul of n x n matrices, n grown per device", lines, fixed = TRUE)))
  expect_true(any(grepl(
    sprintf("CPU:0  %s CPU:0  n = %-5d", arrow(), check$placement$runs$size[1]), lines, fixed = TRUE
  )))
  expect_true(any(grepl(check$reasons[1], lines, fixed = TRUE)))
  expect_true(any(grepl(paste("Keras", check$stack$keras), lines, fixed = TRUE)))
  expect_true(any(grepl("samples/s", lines, fixed = TRUE)))
})

test_that("format() says no_gpu here", {
  skip_if_no_python()
  skip_if_nvidia_gpu()
  lines <- format(shared_check())
  expect_true(any(grepl("Verdict: no_gpu", lines, fixed = TRUE)))
  expect_true(any(grepl("GPU speed-up over CPU: n/a (no GPU run)", lines, fixed = TRUE)))
})

test_that("print() prints the report and returns its input invisibly", {
  skip_if_no_python()
  check <- shared_check()
  expect_output(printed <- withVisible(print(check)), paste0("Verdict: ", check$verdict))
  expect_false(printed$visible)
  expect_identical(printed$value, check)
  expect_output(print(check), "Placement")
})

test_that("a check on a GPU becomes data frames, printed in the core's words", {
  # The R side of a check on a GPU machine, from the plain data the Python
  # core returns there (no GPU is needed to format it); the words are the core's
  # (tools/check.py's check_lines, tested in test_check.py).
  result <- list(
    stack = list(
      python = "3.12.3", keras = "3.15.1", keras_backend = "jax", tensorflow = NULL,
      jax = "0.7.1", jax_cuda_plugin = "jax-cuda12-plugin 0.7.1", nvidia_driver = "580.65",
      cuda_driver_version = "13.0", cuda_visible_devices = NULL, os = "Linux",
      os_release = "6.8", machine = "x86_64"
    ),
    nvml = list(available = TRUE, reason = NULL, gpus = 1L),
    devices = list(
      list(device = "CPU:0", type = "CPU", name = "Xeon", compute_capability = NULL,
           memory_total_mib = 2048, memory_free_mib = 1024, nvml_index = NULL),
      list(device = "GPU:0", type = "GPU", name = "NVIDIA H100", compute_capability = "9.0",
           memory_total_mib = 81559, memory_free_mib = 80000, nvml_index = 0L)
    ),
    placement = list(
      size = 1024L,
      runs = list(
        list(requested = "GPU:0", actual = "GPU:0", median_ms = 0.05, gflops = 42949.7),
        list(requested = "CPU:0", actual = "CPU:0", median_ms = 10, gflops = 214.7)
      ),
      speedup = 200, on_gpu = TRUE
    ),
    utilization = list(
      device = "GPU:0", weights_device = "GPU:0", steps = 300L, batch_size = 2048L,
      seconds = 3.01, samples_per_second = 204000,
      gpus = list(list(
        nvml_index = 0L, samples = 30L, sample_hz = 9.9, utilization_mean = 87.4,
        utilization_max = 100, memory_used_max_mib = 2100, power_mean_w = 350
      )),
      nvml_reason = NULL,
      processes = list(
        pid = 1234L, own_memory_mib = 2048, own_sm_max = 80,
        others = list(list(pid = 4242L, memory_mib = 20480, sm_max = 40)), notes = list()
      )
    ),
    verdict = "gpu_used",
    reasons = list("a matmul ran on the GPU (GPU:0), 200.0x the CPU's speed"),
    advice = list(),
    timings = list(start_runtime = 1, inspect = 0.1, placement = 0.2, probe = 3.5),
    lines = list(stack = list("Keras 3.15.1 on jax"), devices = list("GPU:0  NVIDIA H100"),
                 placement = list("GPU speed-up over CPU: 200.0x"), probe = list("204,000 samples/s"))
  )
  check <- new_gpukeras_check(result)
  expect_s3_class(check, "gpukeras_check")
  expect_identical(check$devices$device, c("CPU:0", "GPU:0"))
  expect_identical(check$devices$compute_capability, c(NA, "9.0"))
  expect_identical(check$devices$nvml_index, c(NA, 0L))
  expect_identical(nrow(check$utilization$gpus), 1L)
  expect_identical(check$advice, character())
  lines <- format(check)
  expect_match(lines[1], "Verdict: gpu_used (the GPU is used)", fixed = TRUE)
  expect_false("Advice:" %in% lines)
  # this process's own use, and another process's apart (issue #14, item 7)
  expect_identical(check$utilization$processes$others$pid, 4242L)
  expect_identical(check$utilization$processes$notes, character())
  expect_identical(check$placement$runs$gflops, c(42949.7, 214.7))
  for (section in list(c("Stack:", "Keras 3.15.1 on jax"), c("Devices:", "GPU:0  NVIDIA H100"),
                       c("Training probe:", "204,000 samples/s"))) {
    expect_identical(lines[match(section[1], lines) + 1L], paste0("  ", section[2]))
  }
  expect_true("  GPU speed-up over CPU: 200.0x" %in% lines)
})

test_that("a check keeps the GPUs the driver sees that the backend does not use, and lists its repairs", {
  # The common case: a working driver, a CPU-only TensorFlow; and a GPU of another job.
  result <- list(
    stack = list(
      python = "3.11.7", keras = "3.15.1", keras_backend = "tensorflow", tensorflow = "2.21.0",
      tensorflow_distribution = "tensorflow-cpu", is_cuda_build = FALSE, nvidia_driver = "580.95.05",
      cuda_driver_version = "13.0", cuda_visible_devices = NULL, os = "Linux", os_release = "6.8", machine = "x86_64"
    ),
    nvml = list(available = TRUE, reason = NULL, gpus = 2L, devices = list(
      list(index = 0L, name = "NVIDIA H100 80GB HBM3", memory_total_mib = 81559, visible = TRUE, error = NULL),
      list(index = 1L, name = "GPU 1 (not readable)", memory_total_mib = NULL, visible = TRUE,
           error = "NVML has no permission to read this GPU")
    )),
    devices = list(list(device = "CPU:0", type = "CPU", name = "Xeon", compute_capability = NULL,
                        memory_total_mib = 2048, memory_free_mib = 1024, nvml_index = NULL)),
    placement = list(
      size = 1024L, runs = list(list(requested = "CPU:0", actual = "CPU:0", median_ms = 10, gflops = 214.7)),
      speedup = NULL, on_gpu = FALSE
    ),
    utilization = NULL,
    verdict = "gpu_available_not_used",
    reasons = list(paste(
      "the driver sees NVIDIA H100 80GB HBM3 (driver 580.95.05), but TensorFlow is the CPU-only build",
      "(tensorflow-cpu 2.21.0 was built without CUDA)"
    )),
    advice = list("Reinstall with GPU support: install_gpukeras(gpu = TRUE), then restart R."),
    timings = list(start_runtime = 1),
    repairs = list(list(
      id = "gpu_build",
      what = paste0(
        "Replace the CPU-only tensorflow-cpu 2.21.0 with TensorFlow's GPU build (tensorflow[and-cuda]==2.21.0) in the ",
        "Python environment in use"
      ),
      action = list(pip_uninstall = list("tensorflow-cpu"), pip_install = list("tensorflow[and-cuda]==2.21.0")),
      how = "pip uninstall -y tensorflow-cpu; pip install 'tensorflow[and-cuda]==2.21.0'", # the core's words for it
      when = NULL, needs_restart = TRUE
    )),
    lines = list(stack = list(), devices = list(), placement = list(), probe = list("not run (probe = FALSE)"))
  )
  check <- new_gpukeras_check(result)
  expect_identical(check$nvml$devices$name, c("NVIDIA H100 80GB HBM3", "GPU 1 (not readable)"))
  expect_identical(check$nvml$devices$error, c(NA, "NVML has no permission to read this GPU"))
  expect_identical(check$nvml$devices$visible, c(TRUE, TRUE))
  lines <- format(check)
  expect_match(lines[1], "Verdict: gpu_available_not_used (a GPU is available but NOT used)", fixed = TRUE)
  advice <- paste(" ", arrow(), "Reinstall with GPU support: install_gpukeras(gpu = TRUE), then restart R.")
  expect_true(advice %in% lines)
  expect_true("  not run (probe = FALSE)" %in% lines)
  # what gpu_check(fix = TRUE) would do, without doing it
  expect_identical(check$repairs$status, NA_character_)
  expect_identical(utils::tail(lines, 2), c(
    "Repairs gpu_check(fix = TRUE) can make:",
    paste(
      " ", arrow(),
      "Replace the CPU-only tensorflow-cpu 2.21.0 with TensorFlow's GPU build (tensorflow[and-cuda]==2.21.0)",
      paste0(
        "in the Python environment in use (pip uninstall -y tensorflow-cpu; pip install ",
        "'tensorflow[and-cuda]==2.21.0'; then restart R)"
      )
    )
  ))
})

test_that("gpu_check() names CUDA_VISIBLE_DEVICES when it hides every GPU", {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      check <- gpu_check(probe = FALSE)
      list(
        verdict = check$verdict,
        reasons = check$reasons,
        advice = check$advice,
        cuda_visible_devices = check$stack$cuda_visible_devices,
        device_types = check$devices$type,
        actual = check$placement$runs$actual
      )
    },
    env = c(CUDA_VISIBLE_DEVICES = "-1"),
    unset = "KERAS_BACKEND"
  )
  # With every GPU hidden the verdict is no_gpu even on a GPU machine.
  expect_identical(child$verdict, "no_gpu")
  expect_identical(child$cuda_visible_devices, "-1")
  expect_identical(child$device_types, "CPU")
  expect_identical(child$actual, "CPU:0")
  expect_true(any(grepl("CUDA_VISIBLE_DEVICES='-1' hides every GPU", child$reasons, fixed = TRUE)))
  expect_true(any(grepl("Sys.unsetenv('CUDA_VISIBLE_DEVICES')", child$advice, fixed = TRUE)))
})

test_that("gpu_check() runs on the JAX backend and says JAX is CPU-only", {
  skip_if_no_python()
  skip_if(is.null(shared_check()$stack$jax), "JAX is not installed in the Python environment")
  skip_if_nvidia_gpu()
  child <- run_in_fresh_r(
    {
      check <- gpu_check(probe_seconds = 0.5)
      list(
        verdict = check$verdict,
        reasons = check$reasons,
        keras_backend = check$stack$keras_backend,
        jax = check$stack$jax,
        actual = check$placement$runs$actual,
        samples_per_second = check$utilization$samples_per_second,
        weights_device = check$utilization$weights_device,
        lines = format(check)
      )
    },
    env = c(KERAS_BACKEND = "jax")
  )
  expect_identical(child$keras_backend, "jax")
  expect_identical(child$verdict, "no_gpu")
  expect_true(any(grepl("CPU-only JAX", child$reasons, fixed = TRUE)))
  expect_false(any(grepl("TensorFlow", child$reasons, fixed = TRUE)))
  expect_identical(child$actual, "CPU:0")
  expect_identical(child$weights_device, "CPU:0")
  expect_gt(child$samples_per_second, 0)
  expect_true(any(grepl(paste0("JAX ", child$jax, " (no CUDA plugin)"), child$lines, fixed = TRUE)))
  expect_true(any(grepl("on jax", child$lines, fixed = TRUE)))
})

test_that("gpu_check() rejects bad arguments with a classed error", {
  expect_error(gpu_check(probe = NA), "`probe` must be TRUE or FALSE, not `NA`", class = "gpukeras_error_bad_argument")
  expect_error(gpu_check(probe = "yes"), "`probe` must be TRUE or FALSE", class = "gpukeras_error_bad_argument")
  expect_error(gpu_check(probe = c(TRUE, FALSE)), "not a logical of length 2", class = "gpukeras_error_bad_argument")
  expect_error(
    gpu_check(probe_seconds = -1),
    "`probe_seconds` must be one positive number, not `-1`",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(gpu_check(probe_seconds = 0), "one positive number", class = "gpukeras_error_bad_argument")
  expect_error(gpu_check(probe_seconds = c(1, 2)), "not a numeric of length 2", class = "gpukeras_error_bad_argument")
  expect_error(gpu_check(probe_seconds = "a"), "one positive number, not `a`", class = "gpukeras_error_bad_argument")
  expect_error(gpu_check(probe_seconds = NA_real_), "one positive number", class = "gpukeras_error_bad_argument")
  expect_error(gpu_check(probe_seconds = Inf), "one positive number", class = "gpukeras_error_bad_argument")
})

test_that("a check keeps a MIG instance's parent and what NVML cannot tell", {
  result <- list(
    stack = list(
      python = "3.12.3", keras = "3.15.1", keras_backend = "jax", jax = "0.7.1",
      jax_cuda_plugin = "jax-cuda12-plugin 0.7.1", nvidia_driver = "580.65", cuda_driver_version = "13.0",
      cuda_visible_devices = NULL, os = "Linux", os_release = "6.8", machine = "x86_64"
    ),
    nvml = list(available = TRUE, reason = NULL, gpus = 1L, devices = list(
      list(index = 0L, name = "NVIDIA H100 80GB HBM3", memory_total_mib = 81559, visible = TRUE,
           in_use = TRUE, mig_instances = 2L, error = NULL)
    )),
    devices = list(
      list(device = "CPU:0", type = "CPU", name = "Xeon", memory_total_mib = 2048, memory_free_mib = 1024),
      list(device = "GPU:0", type = "GPU", name = "NVIDIA H100 80GB HBM3 MIG 3g.40gb", compute_capability = "9.0",
           memory_total_mib = 40192, memory_free_mib = 40000, nvml_index = NULL, uuid = "MIG-1234",
           mig_parent = 0L, nvml_reason = "a MIG instance")
    ),
    placement = list(size = 1024L, runs = list(), speedup = NULL, on_gpu = TRUE),
    utilization = list(
      device = "GPU:0", weights_device = "GPU:0", steps = 30L, batch_size = 2048L, seconds = 3,
      samples_per_second = 20000, gpus = list(),
      nvml_reason = "not available on MIG: NVML does not measure a MIG instance's utilization",
      processes = list(pid = 1234L, own_memory_mib = 2048, own_sm_max = NULL, others = list(),
                       notes = list("per-process utilization: not available on MIG"))
    ),
    verdict = "gpu_used",
    reasons = list("GPU utilization: not available on MIG"),
    advice = list(),
    timings = list(start_runtime = 1)
  )
  check <- new_gpukeras_check(result)
  expect_identical(check$devices$mig_parent, c(NA, 0L))
  expect_identical(check$nvml$devices$mig_instances, 2L)
  expect_identical(check$utilization$processes$notes, "per-process utilization: not available on MIG")
  expect_identical(nrow(check$utilization$gpus), 0L)
  expect_identical(nrow(check$placement$runs), 0L)
  expect_identical(check$devices$uuid, c(NA, "MIG-1234"))
})
