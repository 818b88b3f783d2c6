# Versions install_gpukeras() pins. numpy < 2 because Debian bookworm's
# reticulate (1.28) predates NumPy 2 support.
pinned <- list(
  tensorflow = "2.21.0",
  keras = "3.15.1",
  nvidia_ml_py = "13.615.71",
  numpy = "1.26.4"
)

#' Python packages install_gpukeras() installs
#'
#' @param gpu `TRUE` for TensorFlow with CUDA libraries (Linux with an NVIDIA
#'   GPU), `FALSE` for the CPU-only build.
#' @param os The operating system, as `Sys.info()[["sysname"]]` names it.
#' @return A character vector of pip requirement strings with pinned versions.
#' @export
#' @examples
#' gpukeras_requirements(gpu = FALSE)
gpukeras_requirements <- function(gpu = FALSE, os = Sys.info()[["sysname"]]) {
  check_flag(gpu)
  check_string(os)
  tensorflow <- if (gpu && os == "Linux") {
    "tensorflow[and-cuda]"
  } else if (os == "Darwin") {
    "tensorflow" # no tensorflow-cpu wheels for macOS
  } else {
    "tensorflow-cpu"
  }
  c(
    paste0(tensorflow, "==", pinned$tensorflow),
    paste0("keras==", pinned$keras),
    paste0("nvidia-ml-py==", pinned$nvidia_ml_py),
    paste0("numpy==", pinned$numpy)
  )
}

# An NVIDIA GPU with a working driver: the kernel driver's device list or
# `nvidia-smi -L`.
has_nvidia_gpu <- function() {
  if (Sys.info()[["sysname"]] != "Linux") {
    return(FALSE)
  }
  if (length(list.files("/proc/driver/nvidia/gpus")) > 0) {
    return(TRUE)
  }
  smi <- Sys.which("nvidia-smi")
  if (!nzchar(smi)) {
    return(FALSE)
  }
  listed <- suppressWarnings(tryCatch(
    system2(smi, "-L", stdout = TRUE, stderr = FALSE),
    error = function(e) character()
  ))
  any(grepl("^GPU [0-9]+", listed))
}

# A Python >= 3.9 to create the virtualenv with.
find_python_starter <- function() {
  candidates <- unique(Sys.which(c("python3", "python")))
  for (python in candidates[nzchar(candidates)]) {
    ok <- suppressWarnings(tryCatch(
      system2(python, c("-c", shQuote("import sys, venv; print(sys.version_info >= (3, 9))")),
        stdout = TRUE, stderr = FALSE, env = "LD_LIBRARY_PATH="
      ),
      error = function(e) ""
    ))
    if (identical(ok, "True")) {
      return(unname(python))
    }
  }
  gpukeras_abort(
    c(
      "No Python >= 3.9 with the venv module was found on the PATH.",
      "Install one (on Debian/Ubuntu: apt-get install python3 python3-venv) or pass `python =`."
    ),
    "gpukeras_error_no_python"
  )
}

#' Install the Python environment gpukeras uses
#'
#' Creates (or updates: running it again is safe and quick) a Python
#' virtualenv with pinned versions of TensorFlow, Keras 3, nvidia-ml-py and
#' NumPy: `tensorflow[and-cuda]` on Linux when an NVIDIA GPU is present,
#' `tensorflow-cpu` otherwise. gpukeras finds this environment on first use;
#' `GPUKERAS_PYTHON` (or `RETICULATE_PYTHON`) overrides it.
#'
#' @param envname Name of the virtualenv (under reticulate's virtualenv root,
#'   usually `~/.virtualenvs`), or a path.
#' @param gpu `TRUE` to install TensorFlow with CUDA, `FALSE` for the CPU
#'   build, `NA` (default) to detect an NVIDIA GPU.
#' @param python Python used to create the virtualenv; default: the first
#'   Python >= 3.9 on the PATH.
#' @return Invisibly, a list with `envname`, `python` (the env's executable)
#'   and `packages` (the pinned requirements installed).
#' @export
#' @examples
#' \dontrun{
#' install_gpukeras()            # detect the GPU
#' install_gpukeras(gpu = FALSE) # CPU-only TensorFlow
#' }
install_gpukeras <- function(envname = default_envname(), gpu = NA, python = NULL) {
  check_string(envname)
  if (!is.logical(gpu) || length(gpu) != 1L) {
    gpukeras_abort(
      sprintf("`gpu` must be TRUE, FALSE or NA (detect), not %s.", describe(gpu)),
      "gpukeras_error_bad_argument"
    )
  }
  if (!is.null(python)) {
    check_string(python)
    if (!nzchar(Sys.which(python))) {
      gpukeras_abort(
        c(
          sprintf("`python` is '%s', which is not an executable that can be run.", python),
          "Give the path of a Python >= 3.9, or leave `python` NULL to use the first one on the PATH."
        ),
        "gpukeras_error_no_python"
      )
    }
  }
  if (is.na(gpu)) {
    gpu <- has_nvidia_gpu()
  }
  packages <- gpukeras_requirements(gpu)
  path <- virtualenv_dir(envname)
  if (!reticulate::virtualenv_exists(envname)) {
    run_python(python %||% find_python_starter(), c("-m", "venv", shQuote(path)), envname)
  }
  env_python <- reticulate::virtualenv_python(envname)
  # The CPU and CUDA builds of TensorFlow install the same module: remove the other one.
  other <- if (startsWith(packages[[1]], "tensorflow-cpu")) "tensorflow" else "tensorflow-cpu"
  run_python(env_python, c("-m", "pip", "uninstall", "-y", "-q", other), envname, quiet = TRUE)
  run_python(env_python, c("-m", "pip", "install", "--upgrade", shQuote(packages)), envname)
  message(sprintf(
    "gpukeras: Python environment '%s' is ready (%s).\nRestart R if Python was already started in this session.",
    envname, paste(packages, collapse = ", ")
  ))
  invisible(list(envname = envname, python = env_python, packages = packages))
}

# Where reticulate keeps a virtualenv of this name (a name with a slash is a path).
virtualenv_dir <- function(envname) {
  if (grepl("/", envname, fixed = TRUE)) {
    return(path.expand(envname))
  }
  root <- Sys.getenv("WORKON_HOME", unset = "~/.virtualenvs")
  path.expand(file.path(root, envname))
}

# Run Python outside R's library path: R's LD_LIBRARY_PATH can make a Python
# built with its own libpython and OpenSSL load the system's copies instead
# (seen here: pip then fails with "SSL module is not available").
run_python <- function(python, args, envname, quiet = FALSE) {
  output <- if (quiet) FALSE else ""
  status <- system2(python, args, stdout = output, stderr = output, env = "LD_LIBRARY_PATH=")
  if (!quiet && !identical(status, 0L)) {
    gpukeras_abort(
      c(
        sprintf("Setting up the Python environment '%s' failed: `%s %s` exited with status %s.",
                envname, python, paste(args, collapse = " "), status),
        "Check the network access to PyPI and the pip output above, then run install_gpukeras() again."
      ),
      "gpukeras_error_install"
    )
  }
  invisible(status)
}

`%||%` <- function(x, y) if (is.null(x)) y else x
