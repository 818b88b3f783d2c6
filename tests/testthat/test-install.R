test_that("gpukeras_requirements() pins the CPU build of TensorFlow without a GPU", {
  reqs <- gpukeras_requirements(gpu = FALSE, os = "Linux")
  expect_type(reqs, "character")
  expect_length(reqs, 7)
  expect_match(reqs[1], "^tensorflow-cpu==[0-9]+[.][0-9]+[.][0-9]+$")
  # gpu_search()'s engine; the PostgreSQL driver only when asked
  expect_true(any(grepl("^optuna==[0-9.]+$", reqs)))
  expect_false(any(grepl("psycopg2", reqs)))
  expect_identical(
    gpukeras_requirements(gpu = FALSE, os = "Linux", extras = "postgresql"), c(reqs, "psycopg2-binary==2.9.13")
  )
  expect_true(any(grepl("^keras==3[.][0-9]+[.][0-9]+$", reqs)))
  expect_true(any(grepl("^numpy==[0-9]+[.][0-9]+[.][0-9]+$", reqs)))
  expect_true(any(grepl("^nvidia-ml-py==[0-9.]+$", reqs)))
  # gpu_serve()'s server
  expect_true(all(c("uvicorn", "h11") %in% sub("==.*", "", reqs)))
  # Every requirement is pinned to one version.
  expect_true(all(grepl("==", reqs, fixed = TRUE)))
  expect_identical(gpukeras_requirements(gpu = FALSE, os = "Windows"), reqs)
  expect_identical(gpukeras_requirements(), gpukeras_requirements(gpu = FALSE, os = Sys.info()[["sysname"]]))
})

test_that("gpukeras_requirements() picks NumPy by the reticulate version", {
  numpy <- function(reticulate) grep("^numpy==", gpukeras_requirements(reticulate = reticulate), value = TRUE)
  # reticulate converts NumPy 2 arrays from 1.38 on.
  expect_match(numpy("1.28"), "^numpy==1[.]26[.][0-9]+$")
  expect_match(numpy("1.37.9"), "^numpy==1[.]")
  expect_match(numpy("1.38"), "^numpy==2[.][0-9]+[.][0-9]+$")
  expect_identical(numpy(package_version("1.41.0.1")), numpy("1.38"))
  # Only NumPy depends on reticulate.
  expect_identical(
    gpukeras_requirements(reticulate = "1.28")[1:3],
    gpukeras_requirements(reticulate = "1.41")[1:3]
  )
  # By default, for the installed reticulate.
  expect_identical(gpukeras_requirements(), gpukeras_requirements(reticulate = utils::packageVersion("reticulate")))
})

test_that("the Keras required is the core's, and install_gpukeras()'s pin meets it", {
  # core/stack.py refuses a Keras with a published safe_mode bypass; R declares the same
  stack <- readLines(system.file("python", "gpukeras", "core", "stack.py", package = "gpukeras"))
  declared <- sub('^KERAS_REQUIREMENT = "(.*)"$', "\\1", grep("^KERAS_REQUIREMENT = ", stack, value = TRUE))
  expect_identical(declared, keras_requirement)
  pin <- package_version(pinned$keras)
  expect_true(pin >= "3.12.1" && !pin %in% package_version(c("3.13.0", "3.13.1")))
})

test_that("managed_requirements() declares ranges for the Keras backend in use", {
  cpu <- managed_requirements("tensorflow", gpu = FALSE, os = "Linux")
  expect_identical(cpu, c(
    "keras>=3.12.1,!=3.13.0,!=3.13.1", "nvidia-ml-py", "optuna>=4.9", "tensorflow-cpu>=2.16", "uvicorn>=0.30"
  ))
  # The same TensorFlow distribution install_gpukeras() pins, as a range.
  expect_identical(
    managed_requirements("tensorflow", gpu = TRUE, os = "Linux")[4],
    sub("==.*", ">=2.16", gpukeras_requirements(gpu = TRUE, os = "Linux")[1])
  )
  expect_identical(managed_requirements("tensorflow", gpu = FALSE, os = "Darwin")[4], "tensorflow>=2.16")
  # The JAX backend needs no TensorFlow; its CUDA build only on Linux with a GPU.
  expect_identical(
    managed_requirements("jax", gpu = TRUE, os = "Linux"),
    c(keras_requirement, "nvidia-ml-py", "optuna>=4.9", "jax[cuda12]", "filelock", "uvicorn>=0.30")
  )
  expect_identical(managed_requirements("jax", gpu = TRUE, os = "Darwin")[4], "jax")
  # An unsupported backend gets nothing for it (the core says so at first use).
  expect_identical(
    managed_requirements("torch", gpu = FALSE, os = "Linux"),
    c(keras_requirement, "nvidia-ml-py", "optuna>=4.9", "uvicorn>=0.30")
  )
})

test_that("gpukeras_requirements() picks the TensorFlow build by GPU and OS", {
  cpu <- gpukeras_requirements(gpu = FALSE, os = "Linux")
  cuda <- gpukeras_requirements(gpu = TRUE, os = "Linux")
  expect_match(cuda[1], "^tensorflow\\[and-cuda\\]==")
  # Same versions, only the distribution differs.
  expect_identical(sub("^[^=]+", "", cuda), sub("^[^=]+", "", cpu))
  expect_identical(cuda[-1], cpu[-1])
  # No tensorflow-cpu wheels and no CUDA on macOS; no GPU TensorFlow on native Windows.
  expect_match(gpukeras_requirements(gpu = FALSE, os = "Darwin")[1], "^tensorflow==")
  expect_match(gpukeras_requirements(gpu = TRUE, os = "Darwin")[1], "^tensorflow==")
  expect_match(gpukeras_requirements(gpu = TRUE, os = "Windows")[1], "^tensorflow-cpu==")
})

test_that("gpukeras_requirements() rejects a bad `gpu` or `os`", {
  expect_error(
    gpukeras_requirements(gpu = NA), "`gpu` must be TRUE or FALSE, not `NA`", class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpukeras_requirements(gpu = "x"), "`gpu` must be TRUE or FALSE, not `x`", class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpukeras_requirements(gpu = logical()), "`gpu` must be TRUE or FALSE", class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpukeras_requirements(os = NA_character_),
    "`os` must be one non-empty string",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpukeras_requirements(os = ""), "`os` must be one non-empty string", class = "gpukeras_error_bad_argument"
  )
})

test_that("install_gpukeras() rejects bad arguments before installing anything", {
  root <- withr::local_tempdir()
  withr::local_envvar(WORKON_HOME = root)
  expect_error(
    install_gpukeras("gpukeras-test-env", gpu = "yes"),
    "`gpu` must be TRUE, FALSE or NA \\(detect\\), not `yes`",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    install_gpukeras("gpukeras-test-env", gpu = c(TRUE, FALSE)),
    "`gpu` must be TRUE, FALSE or NA",
    class = "gpukeras_error_bad_argument"
  )
  expect_error(
    install_gpukeras(envname = ""), "`envname` must be one non-empty string", class = "gpukeras_error_bad_argument"
  )
  expect_error(install_gpukeras(envname = NA_character_), "`envname`", class = "gpukeras_error_bad_argument")
  expect_error(install_gpukeras(envname = c("a", "b")), "`envname`", class = "gpukeras_error_bad_argument")
  # Nothing was created.
  expect_identical(list.files(root, all.files = TRUE, no.. = TRUE), character())
})

test_that("has_nvidia_gpu() is FALSE without an NVIDIA driver", {
  skip_if(
    dir.exists("/proc/driver/nvidia") || nzchar(Sys.which("nvidia-smi")),
    "an NVIDIA driver is installed"
  )
  expect_false(has_nvidia_gpu())
})

test_that("has_nvidia_gpu() reads `nvidia-smi -L` and ignores a failing nvidia-smi", {
  skip_on_os(c("windows", "mac", "solaris"))
  skip_if(length(list.files("/proc/driver/nvidia/gpus")) > 0, "the NVIDIA kernel driver lists GPUs")
  bin <- withr::local_tempdir()
  smi <- file.path(bin, "nvidia-smi")
  withr::local_envvar(PATH = paste(bin, Sys.getenv("PATH"), sep = .Platform$path.sep))

  # What nvidia-smi prints when the driver is installed and a GPU is present.
  writeLines(c(
    "#!/bin/sh",
    "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5a3c4f2e-0000-0000-0000-000000000000)'"
  ), smi)
  Sys.chmod(smi, "0755")
  expect_true(has_nvidia_gpu())

  # What it prints (with exit status 9) when the driver is not loaded.
  writeLines(c(
    "#!/bin/sh",
    "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"",
    "exit 9"
  ), smi)
  expect_false(has_nvidia_gpu())
})
