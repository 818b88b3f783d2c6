# Finding and starting the Python core. Python starts at the first call that
# needs it, never at library(gpukeras), so GPU settings can still be applied.

the <- new.env(parent = emptyenv())

default_envname <- function() {
  getOption("gpukeras.envname", "r-gpukeras")
}

#' Where gpukeras looks for Python
#'
#' In order: the `GPUKERAS_PYTHON` environment variable, `RETICULATE_PYTHON`,
#' then the virtualenv made by [install_gpukeras()] (named by the option
#' `gpukeras.envname`, default `"r-gpukeras"`).
#'
#' @return The path of the Python executable gpukeras will use, or `NULL` when
#'   none is found (then [install_gpukeras()] is the fix).
#' @export
#' @examples
#' gpukeras_python()
gpukeras_python <- function() {
  for (variable in c("GPUKERAS_PYTHON", "RETICULATE_PYTHON")) {
    value <- Sys.getenv(variable)
    if (nzchar(value)) {
      if (!file.exists(value)) {
        gpukeras_abort(
          c(
            sprintf("%s is set to '%s', which does not exist.", variable, value),
            "Unset it, or point it to a Python with TensorFlow and Keras 3 (install_gpukeras() makes one)."
          ),
          "gpukeras_error_no_python_env"
        )
      }
      return(value)
    }
  }
  envname <- default_envname()
  if (reticulate::virtualenv_exists(envname)) {
    return(reticulate::virtualenv_python(envname))
  }
  NULL
}

# The bridge module of the Python core, importing it (and starting Python) on
# first use.
core <- function() {
  if (!is.null(the$bridge)) {
    return(the$bridge)
  }
  if (!reticulate::py_available(initialize = FALSE)) {
    python <- gpukeras_python()
    if (is.null(python)) {
      gpukeras_abort(
        c(
          "No Python environment for gpukeras was found.",
          sprintf(
            "Run install_gpukeras() once (it creates the virtualenv '%s'), then restart R.",
            default_envname()
          ),
          "Or set GPUKERAS_PYTHON to a Python with TensorFlow >= 2.16 and Keras 3."
        ),
        "gpukeras_error_no_python_env"
      )
    }
    started <- tryCatch(
      {
        reticulate::use_python(python, required = TRUE)
        reticulate::py_config()
        TRUE
      },
      error = function(e) conditionMessage(e)
    )
    if (!isTRUE(started)) {
      gpukeras_abort(
        c(
          sprintf("Python at '%s' could not be started: %s", python, started),
          "Run install_gpukeras() to rebuild the environment, then restart R."
        ),
        "gpukeras_error_python_start"
      )
    }
  }
  reticulate::import_from_path("gpukeras", system.file("python", package = "gpukeras"))
  the$bridge <- reticulate::import("gpukeras.bridge")
  # R ends without finalizing Python, whose exit handlers would delete the
  # files TensorFlow's autograph writes to the temp folder.
  reg.finalizer(the, function(e) try(core_call("runtime.remove_autograph_files"), silent = TRUE),
                onexit = TRUE)
  the$bridge
}

# Call `gpukeras.<target>` in the core with named arguments. A Python error
# becomes a classed R condition; its traceback is kept on the condition
# (`python_traceback`) but never printed.
core_call <- function(target, ...) {
  result <- core()$call(target, list(...))
  if (isTRUE(result$ok)) {
    return(result$value)
  }
  message <- result$message
  if (identical(result$r_class, "gpukeras_error_python")) {
    message <- c(
      sprintf("The Python core failed in %s: %s", target, message),
      "This is not something you did wrong: please report it with the output of gpu_check()."
    )
  }
  gpukeras_abort(
    message,
    result$r_class,
    python_traceback = result$traceback
  )
}

#' The Keras module of gpukeras' Python environment
#'
#' Starts Python and Keras (checking that the stack is supported: Keras 3,
#' TensorFlow >= 2.16 or JAX) and returns the `keras` Python module, for
#' building models when the keras3 R package is not installed.
#'
#' @return The `keras` Python module (a reticulate module object).
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   keras$`__version__`
#' }
gpu_keras <- function() {
  core_call("runtime.start")
  reticulate::import("keras")
}
