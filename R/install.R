# Versions install_gpukeras() pins. NumPy depends on reticulate: see
# numpy_requirement().
pinned <- list(
  tensorflow = "2.21.0",
  keras = "3.15.1",
  nvidia_ml_py = "13.615.71",
  # 2.2.6: the newest NumPy with wheels for every Python TensorFlow 2.21
  # supports (3.10 to 3.13; NumPy 2.3 and later need 3.11).
  numpy = "2.2.6",
  # gpu_search()'s engine (its RDB storage brings SQLAlchemy and Alembic).
  optuna = "5.0.0",
  # gpu_serve()'s HTTP server (inst/python/gpukeras/serve/server.py): uvicorn on h11.
  uvicorn = "0.54.0",
  h11 = "0.16.0",
  # PostgreSQL storage for gpu_search(), only with extras = "postgresql".
  psycopg2_binary = "2.9.13",
  # gpu_export(format = "onnx"), only with extras = "onnx": Keras' ONNX export (tf2onnx
  # on TensorFlow), the onnx library it writes with, and onnxruntime to run and check
  # the result. Installed beside TensorFlow 2.21 they change no package it needs
  # (protobuf stays; measured with pip on Python 3.11). onnxruntime 1.32 needs Python >= 3.11.
  onnx = "1.23.2",
  onnxruntime = "1.32.0",
  tf2onnx = "1.17.0",
  # MLflow's client, only with extras = "tracking" (gpu_track()): mlflow-skinny, the client
  # without the server (mlflow 3.18 needs an mlflow-skinny 3.18.0 PyPI does not have). Its
  # SQLite store for a folder uses the SQLAlchemy and Alembic Optuna brings.
  mlflow_skinny = "3.17.2",
  # KerasHub, only with extras = "hub" (pretrained models: gpu_text_classifier()). keras-hub 0.32
  # needs Keras >= 3.15 and pins kagglesdk 0.1.28, which kagglehub 1.0.2 accepts (1.0.3 needs
  # kagglesdk >= 0.1.38). tensorflow-text is TensorFlow's (2.21.0's symbols are missing from
  # TensorFlow 2.21.0: "undefined symbol: icudt77_dat"; 2.21.1 loads). Measured with pip on
  # Python 3.11 beside tensorflow-cpu 2.21.0, JAX 0.7.1 and NumPy 1.26.4: nothing installed changes.
  keras_hub = "0.32.0",
  tensorflow_text = "2.21.1",
  kagglehub = "1.0.2",
  kagglesdk = "0.1.28",
  sentencepiece = "0.2.1",
  tokenizers = "0.23.3",
  regex = "2026.11.19",
  # For reticulate < 1.38, which predates NumPy 2 (Debian bookworm's is 1.28).
  numpy_before_2 = "1.26.4"
)

# The Keras gpukeras needs: none of the releases with a published way around safe_mode,
# which gpu_load() relies on (CVE-2025-1550 before 3.9, CVE-2025-9906 before 3.11,
# CVE-2025-9905 before 3.11.3, CVE-2026-1462 before 3.12.1 and in 3.13.0-3.13.1). The core
# checks the same requirement (core/stack.py's KERAS_REQUIREMENT) where Keras is found.
keras_requirement <- "keras>=3.12.1,!=3.13.0,!=3.13.1"

# The first reticulate that converts arrays to and from NumPy 2.
reticulate_numpy2 <- "1.38"

# Does this reticulate version work with NumPy 2?
reticulate_supports_numpy2 <- function(reticulate) package_version(reticulate) >= reticulate_numpy2

#' Python packages install_gpukeras() installs
#'
#' NumPy is chosen by the reticulate that is installed: NumPy 2 where
#' reticulate is 1.38 or later, NumPy 1.26 below (older reticulate cannot
#' convert NumPy 2 arrays).
#'
#' @param gpu `TRUE` for TensorFlow with CUDA libraries (Linux with an NVIDIA
#'   GPU), `FALSE` for the CPU-only build.
#' @param os The operating system, as `Sys.info()[["sysname"]]` names it.
#' @param reticulate The reticulate version the environment is for; default:
#'   the installed one.
#' @param extras Optional parts: `"postgresql"` adds the PostgreSQL driver
#'   (psycopg2-binary) that [gpu_search()] needs for a study stored in a
#'   PostgreSQL database; `"onnx"` adds onnx, onnxruntime and tf2onnx, for
#'   `gpu_export(format = "onnx")`; `"tracking"` adds MLflow's client
#'   (mlflow-skinny), for [gpu_track()]; `"hub"` adds KerasHub with tensorflow-text,
#'   kagglehub, sentencepiece and tokenizers, for [gpu_text_classifier()].
#' @param ... Not used: an argument gpukeras_requirements() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return A character vector of pip requirement strings with pinned versions:
#'   TensorFlow, Keras, nvidia-ml-py, NumPy, Optuna ([gpu_search()]'s
#'   engine), uvicorn and h11 ([gpu_serve()]'s server), then the
#'   extras.
#' @export
#' @examples
#' gpukeras_requirements(gpu = FALSE)
#' gpukeras_requirements(gpu = FALSE, reticulate = "1.28")
gpukeras_requirements <- function(gpu = FALSE, os = Sys.info()[["sysname"]],
                                  reticulate = utils::packageVersion("reticulate"), extras = character(), ...) {
  check_unknown_args("gpukeras_requirements")
  check_flag(gpu)
  check_string(os)
  # one version: a package_version or a string such as "1.41.0"
  if (length(reticulate) != 1L || !(is.character(reticulate) || inherits(reticulate, "package_version")) ||
    is.na(package_version(reticulate, strict = FALSE))) {
    stop_input_type(reticulate, "one version such as \"1.41.0\"")
  }
  extras <- check_extras(extras)
  numpy <- if (reticulate_supports_numpy2(reticulate)) "numpy" else "numpy_before_2"
  c(
    paste0(tensorflow_distribution(gpu, os), "==", pinned$tensorflow),
    pins("keras", "nvidia_ml_py", numpy, "optuna", "uvicorn", "h11"),
    if ("postgresql" %in% extras) pins("psycopg2_binary"),
    if ("onnx" %in% extras) pins("onnx", "onnxruntime", "tf2onnx"),
    if ("tracking" %in% extras) pins("mlflow_skinny"),
    # KerasHub's, with what it and its tokenizers need (no tensorflow-text for Windows, as
    # keras-hub asks for none there)
    if ("hub" %in% extras) {
      pins("kagglehub", "kagglesdk", "sentencepiece", "tokenizers", "regex", "keras_hub",
           if (os != "Windows") "tensorflow_text")
    }
  )
}

# "name==version" for each of `pinned`'s names, as pip spells it ("nvidia-ml-py"; NumPy for an
# older reticulate is "numpy").
pins <- function(...) {
  names <- c(...)
  paste0(chartr("_", "-", sub("_before_2", "", names, fixed = TRUE)), "==", unlist(pinned[names]))
}

# Requirements installed with `pip install --no-deps`: tensorflow-text requires the `tensorflow`
# distribution, which pip would install over tensorflow-cpu's (the same module, other files),
# and keras-hub requires tensorflow-text. Both run on the TensorFlow the first requirement installs.
no_deps_requirements <- c("keras-hub", "tensorflow-text")

check_extras <- function(extras, call = caller_env()) {
  if (!is.character(extras) || anyNA(extras) || !all(extras %in% c("postgresql", "onnx", "tracking", "hub"))) {
    stop_input_type(extras, paste0(
      "character(), or any of \"postgresql\" (the driver for gpu_search()'s PostgreSQL storage), ",
      "\"onnx\" (gpu_export(format = \"onnx\")), \"tracking\" (MLflow's client for gpu_track()) and ",
      "\"hub\" (KerasHub's pretrained models for gpu_text_classifier())"
    ), "extras", call)
  }
  unique(extras)
}

# What gpukeras declares with reticulate::py_require() (reticulate >= 1.41)
# for the environment reticulate manages: the supported ranges, not
# install_gpukeras()'s pins, so that what other packages declare (keras3 pins
# its own TensorFlow) can be met in the same environment. Only what the Keras
# backend in use needs; NumPy 2 is fine with this reticulate.
managed_requirements <- function(backend = Sys.getenv("KERAS_BACKEND", "tensorflow"),
                                 gpu = has_nvidia_gpu(), os = Sys.info()[["sysname"]]) {
  linux_gpu <- gpu && os == "Linux"
  c(
    keras_requirement,
    "nvidia-ml-py",
    "optuna>=4.9",
    switch(backend,
      # >= 2.16: the first TensorFlow that runs Keras 3 (stack.py's MIN_TENSORFLOW).
      tensorflow = paste0(tensorflow_distribution(gpu, os), ">=2.16"),
      # filelock: the bound on JAX's compilation cache (gpu_compile_cache())
      jax = c(if (linux_gpu) "jax[cuda12]" else "jax", "filelock")
      # Other backends are not supported: the core says so at first use.
    ),
    "uvicorn>=0.30"
  )
}

# The TensorFlow distribution for this machine: they all install the same
# `tensorflow` module.
tensorflow_distribution <- function(gpu, os) {
  if (gpu && os == "Linux") {
    "tensorflow[and-cuda]"
  } else if (os == "Darwin") {
    "tensorflow" # no tensorflow-cpu wheels for macOS
  } else {
    "tensorflow-cpu"
  }
}

# An NVIDIA GPU with a working driver: the kernel driver's device list or
# `nvidia-smi -L`.
has_nvidia_gpu <- function() {
  if (Sys.info()[["sysname"]] != "Linux") return(FALSE)
  if (length(list.files("/proc/driver/nvidia/gpus")) > 0) return(TRUE)
  smi <- Sys.which("nvidia-smi")
  if (!nzchar(smi)) return(FALSE)
  listed <- suppressWarnings(tryCatch(
    system2(smi, "-L", stdout = TRUE, stderr = FALSE),
    error = function(e) character()
  ))
  any(grepl("^GPU [0-9]+", listed))
}

# A Python >= 3.9 to create the virtualenv with.
find_python_starter <- function(call = caller_env()) {
  candidates <- unique(Sys.which(c("python3", "python")))
  for (python in candidates[nzchar(candidates)]) {
    ok <- suppressWarnings(tryCatch(
      system2(python, c("-c", shQuote("import sys, venv; print(sys.version_info >= (3, 9))")),
        stdout = TRUE, stderr = FALSE, env = python_run_env
      ),
      error = function(e) ""
    ))
    if (identical(ok, "True")) return(unname(python))
  }
  gpukeras_abort(c(
    "No Python >= 3.9 with the venv module was found on the PATH.",
    "Install one (on Debian/Ubuntu: apt-get install python3 python3-venv) or pass `python =`."
  ), "gpukeras_error_no_python", call = call)
}

#' Install the Python environment gpukeras uses
#'
#' Creates (or updates: running it again is safe and quick) a Python
#' virtualenv with pinned versions of TensorFlow, Keras 3, nvidia-ml-py,
#' NumPy and Optuna ([gpukeras_requirements()]): `tensorflow[and-cuda]` on Linux when an
#' NVIDIA GPU is present, `tensorflow-cpu` otherwise; NumPy 2 where the
#' installed reticulate is 1.38 or later, NumPy 1.26 below. gpukeras finds
#' this environment on first use; `GPUKERAS_PYTHON` (or `RETICULATE_PYTHON`)
#' overrides it, and it overrides an environment managed by reticulate (see
#' [gpukeras_python()]).
#'
#' @param envname Name of the virtualenv (under reticulate's virtualenv root,
#'   usually `~/.virtualenvs`), or a path.
#' @param gpu `TRUE` to install TensorFlow with CUDA, `FALSE` for the CPU
#'   build, `NA` (default) to detect an NVIDIA GPU.
#' @param python Python used to create the virtualenv; default: the first
#'   Python >= 3.9 on the PATH.
#' @param extras Optional parts, as [gpukeras_requirements()] takes them:
#'   `"postgresql"` for [gpu_search()] studies in a PostgreSQL database,
#'   `"onnx"` for `gpu_export(format = "onnx")`, `"tracking"` for [gpu_track()],
#'   `"hub"` for KerasHub's pretrained models ([gpu_text_classifier()]).
#' @param ... Not used: an argument install_gpukeras() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return Invisibly, a list with `envname`, `python` (the env's executable)
#'   and `packages` (the pinned requirements installed).
#' @export
#' @examples
#' \dontrun{
#' install_gpukeras()            # detect the GPU
#' install_gpukeras(gpu = FALSE) # CPU-only TensorFlow
#' }
install_gpukeras <- function(envname = default_envname(), gpu = NA, python = NULL, extras = character(), ...) {
  check_unknown_args("install_gpukeras")
  check_string(envname)
  extras <- check_extras(extras)
  if (!is.logical(gpu) || length(gpu) != 1L) {
    stop_input_type(gpu, "TRUE, FALSE or NA (detect)")
  }
  if (!is.null(python)) {
    check_string(python)
    if (!nzchar(Sys.which(python))) {
      gpukeras_abort(c(
        sprintf("`python` is '%s', which is not an executable that can be run.", python),
        "Give the path of a Python >= 3.9, or leave `python` NULL to use the first one on the PATH."
      ), "gpukeras_error_no_python")
    }
  }
  if (is.na(gpu)) gpu <- has_nvidia_gpu()
  packages <- gpukeras_requirements(gpu, extras = extras)
  path <- virtualenv_dir(envname)
  if (!reticulate::virtualenv_exists(envname)) {
    run_python(python %||% find_python_starter(), c("-m", "venv", shQuote(path)), envname)
  }
  env_python <- reticulate::virtualenv_python(envname)
  # The CPU and CUDA builds of TensorFlow install the same module: remove the other one.
  other <- if (startsWith(packages[[1]], "tensorflow-cpu")) "tensorflow" else "tensorflow-cpu"
  run_python(env_python, c("-m", "pip", "uninstall", "-y", "-q", other), envname, quiet = TRUE)
  no_deps <- sub("==.*", "", packages) %in% no_deps_requirements
  run_python(env_python, c("-m", "pip", "install", "--upgrade", shQuote(packages[!no_deps])), envname)
  if (any(no_deps)) {
    run_python(env_python, c("-m", "pip", "install", "--upgrade", "--no-deps", shQuote(packages[no_deps])), envname)
  }
  cli::cli_alert_success("gpukeras: Python environment {.val {envname}} is ready ({.pkg {packages}}).")
  cli::cli_alert_info("Restart R if Python was already started in this session.")
  invisible(list(envname = envname, python = env_python, packages = packages))
}

# Where reticulate keeps a virtualenv of this name (a name with a slash is a path).
virtualenv_dir <- function(envname) {
  if (grepl("/", envname, fixed = TRUE)) return(path.expand(envname))
  root <- Sys.getenv("WORKON_HOME", unset = "~/.virtualenvs")
  path.expand(file.path(root, envname))
}

# Python runs outside R's library path (`system2(env = python_run_env)`): R's
# LD_LIBRARY_PATH can make a Python built with its own libpython and OpenSSL
# load the system's copies instead (seen here: pip then fails with "SSL module
# is not available").
python_run_env <- "LD_LIBRARY_PATH="

run_python <- function(python, args, envname, quiet = FALSE, call = caller_env()) {
  output <- if (quiet) FALSE else ""
  status <- system2(python, args, stdout = output, stderr = output, env = python_run_env)
  if (!quiet && !identical(status, 0L)) {
    gpukeras_abort(c(
      sprintf("Setting up the Python environment '%s' failed: `%s %s` exited with status %s.",
              envname, python, paste(args, collapse = " "), status),
      "Check the network access to PyPI and the pip output above, then run install_gpukeras() again."
    ), "gpukeras_error_install", call = call)
  }
  invisible(status)
}
