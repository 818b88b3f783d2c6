# Finding and starting the Python core. Python starts at the first call that
# needs it, never at library(gpukeras), so GPU settings can still be applied.

the <- new.env(parent = emptyenv())

default_envname <- function() getOption("gpukeras.envname", "r-gpukeras")

#' Where gpukeras looks for Python
#'
#' In order: the `GPUKERAS_PYTHON` environment variable, `RETICULATE_PYTHON`,
#' then the virtualenv made by [install_gpukeras()] (named by the option
#' `gpukeras.envname`, default `"r-gpukeras"`).
#'
#' When none of these is set or found, the first call that needs Python lets
#' reticulate choose, from reticulate 1.41 on: usually the environment
#' reticulate manages for the Python packages that R packages declare with
#' `reticulate::py_require()`. gpukeras declares its needs there when it is
#' loaded (Keras 3, nvidia-ml-py and the package of the Keras backend that
#' `KERAS_BACKEND` names then), as keras3 does, so the two share one
#' environment. `RETICULATE_USE_MANAGED_VENV=no` turns this off; with an older
#' reticulate, [install_gpukeras()] is the fix. A Python already started in
#' the R session (by another package) is used whatever these say: there is
#' one per session.
#' [gpu_check()] says which environment is in use and why
#' (`stack$python_chosen_by`).
#'
#' @param ... Not used: an argument gpukeras_python() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return The path of the Python executable gpukeras will use, or `NULL` when
#'   none of the above is set or found.
#' @export
#' @examples
#' gpukeras_python()
gpukeras_python <- function(...) {
  check_unknown_args("gpukeras_python")
  explicit_python()$python
}

# The Python named for gpukeras, and why: list(python =, chosen_by =), or NULL
# when none is named.
explicit_python <- function(call = caller_env()) {
  for (variable in c("GPUKERAS_PYTHON", "RETICULATE_PYTHON")) {
    value <- Sys.getenv(variable)
    # reticulate >= 1.41 reads RETICULATE_PYTHON=managed as "the environment I manage".
    if (variable == "RETICULATE_PYTHON" && value == "managed" && has_py_require()) return(NULL)
    if (nzchar(value)) {
      if (!file.exists(value)) {
        gpukeras_abort(c(
          sprintf("%s is set to '%s', which does not exist.", variable, value),
          "Unset it, or point it to a Python with TensorFlow and Keras 3 (install_gpukeras() makes one)."
        ), "gpukeras_error_no_python_env", call = call)
      }
      return(list(python = value, chosen_by = variable))
    }
  }
  envname <- default_envname()
  if (reticulate::virtualenv_exists(envname)) {
    return(list(
      python = reticulate::virtualenv_python(envname),
      chosen_by = sprintf("the virtualenv '%s' made by install_gpukeras()", envname)
    ))
  }
  NULL
}

# reticulate >= 1.41: R packages declare their Python needs with py_require().
has_py_require <- function() "py_require" %in% getNamespaceExports("reticulate")

# May reticulate choose the environment when none is named for gpukeras? From
# 1.41 on it finds one or makes the one it manages for py_require(), unless
# the user turned that off.
reticulate_may_choose <- function() {
  has_py_require() &&
    !tolower(Sys.getenv("RETICULATE_USE_MANAGED_VENV")) %in% c("false", "0", "no")
}

# Where py_require() exists, declare what gpukeras needs in the environment
# reticulate manages (called from .onLoad; Python is not started).
declare_python_requirements <- function() {
  if (has_py_require()) {
    py_require <- getExportedValue("reticulate", "py_require")
    py_require(managed_requirements())
  }
  invisible()
}

# Why reticulate's Python was the one it chose: its managed environment, or
# what its discovery found first (a variable, VIRTUAL_ENV, a venv in the
# working directory, ...).
reticulate_choice <- function() {
  config <- reticulate::py_config()
  if (isTRUE(config$ephemeral)) {
    "the environment reticulate manages (py_require())"
  } else if (!is.null(config$forced)) {
    sprintf("reticulate's choice (%s)", config$forced)
  } else {
    "reticulate's choice"
  }
}

# Start Python for gpukeras; returns why this Python was chosen.
start_python <- function(call = caller_env()) {
  explicit <- explicit_python(call)
  if (is.null(explicit) && !reticulate_may_choose()) {
    gpukeras_abort(c(
      "No Python environment for gpukeras was found.",
      sprintf("Run install_gpukeras() once (it creates the virtualenv '%s'), then restart R.", default_envname()),
      "Or set GPUKERAS_PYTHON to a Python with TensorFlow >= 2.16 and Keras 3.",
      if (has_py_require()) "Or unset RETICULATE_USE_MANAGED_VENV to let reticulate make one."
    ), "gpukeras_error_no_python_env", call = call)
  }
  started <- tryCatch({
    if (is.null(explicit)) {
      reticulate::py_config()
    } else {
      # RETICULATE_PYTHON would win over use_python(): keep it out while
      # the Python chosen here starts.
      withr::with_envvar(c(RETICULATE_PYTHON = NA), {
        reticulate::use_python(explicit$python, required = TRUE)
        reticulate::py_config()
      })
    }
    TRUE
  }, error = function(e) conditionMessage(e))
  if (!isTRUE(started)) {
    gpukeras_abort(c(
      if (is.null(explicit)) {
        sprintf("reticulate could not start a Python for gpukeras: %s", started)
      } else {
        sprintf("Python at '%s' could not be started: %s", explicit$python, started)
      },
      "Run install_gpukeras() to (re)build the environment, then restart R."
    ), "gpukeras_error_python_start", call = call)
  }
  if (is.null(explicit)) reticulate_choice() else explicit$chosen_by
}

# reticulate < 1.38 cannot convert NumPy 2 arrays (they fail later, blaming
# the dtype or as a raw exception): say so before the core starts. NumPy's
# version is read from its metadata, without importing it.
check_numpy_supported <- function(call = caller_env()) {
  reticulate <- utils::packageVersion("reticulate")
  if (reticulate_supports_numpy2(reticulate)) return(invisible())
  metadata <- reticulate::import("importlib.metadata")
  numpy <- tryCatch(metadata$version("numpy"), error = function(e) NULL)
  if (is.null(numpy) || as.integer(sub("[^0-9].*", "", numpy)) < 2L) return(invisible())
  gpukeras_abort(c(
    sprintf(paste0(
      "NumPy %s is installed in the Python at '%s', but reticulate %s cannot convert NumPy 2 arrays (reticulate ",
      "supports NumPy 2 from %s on)."
    ), numpy, reticulate::py_config()$python, reticulate, reticulate_numpy2),
    sprintf(paste0(
      "Run install_gpukeras() again (it installs NumPy %s for this reticulate; in another environment, `pip ",
      "install 'numpy<2'` there), then restart R."
    ), pinned$numpy_before_2),
    sprintf("Or upgrade reticulate to %s or later.", reticulate_numpy2)
  ), "gpukeras_error_numpy_version", call = call)
}

# Whether Python has imported `module`; never starts Python.
python_module_loaded <- function(module) {
  if (!reticulate::py_available(initialize = FALSE)) return(FALSE)
  modules <- reticulate::import("sys", convert = FALSE)$modules
  reticulate::py_to_r(modules$`__contains__`(module))
}

# What a worker needs of a user's Python objects: a module's name, the module made
# again from it, and whether a value is a Keras model (it has fit()). Here, so that no
# other R file imports a module or reads a model's attributes.
python_module_name <- function(module) reticulate::py_to_r(reticulate::py_get_attr(module, "__name__"))
python_module <- function(name) reticulate::import(name)
is_keras_model <- function(x) inherits(x, "python.builtin.object") && reticulate::py_has_attr(x, "fit")

# The bridge module of the Python core, importing it (and starting Python) on
# first use.
core <- function(call = caller_env()) {
  if (!is.null(the$bridge)) return(the$bridge)
  if (!reticulate::py_available(initialize = FALSE)) {
    the$python_chosen_by <- start_python(call)
  } else if (is.null(the$python_chosen_by)) {
    the$python_chosen_by <- sprintf("already started in this R session: %s", reticulate_choice())
  }
  check_numpy_supported(call)
  reticulate::import_from_path("gpukeras", system.file("python", package = "gpukeras"))
  bridge <- reticulate::import("gpukeras.bridge")
  # JAX's compiled programs kept for later sessions, where JAX starts (gpu_compile_cache()):
  # a bad option is an error at every call until it is mended
  cache <- compile_cache_choice(call)
  core_answer("compile_cache_choose", list(folder = cache$folder, max_bytes = cache$max_bytes), bridge, call)
  the$bridge <- bridge
  # R ends without finalizing Python, whose exit handlers would leave a JAX
  # cluster with the other workers (a chief gone first ends them) and delete
  # the files TensorFlow's autograph writes to the temp folder.
  reg.finalizer(the, function(e) {
    try(track_flush(wait = 5, ending = TRUE), silent = TRUE) # tracked runs sent, or kept
    try(core_call("leave_cluster"), silent = TRUE)
    try(core_call("remove_autograph_files"), silent = TRUE)
  }, onexit = TRUE)
  the$bridge
}

# The core's warnings (the bridge's `warnings`: Python's during a core call; or a verb's
# result's own, as fit's and gpu_dataset()'s: class and message each, the message one line or
# several), as classed R warnings rather than lines on stderr; each once; none of the classes
# in `skip`; of the user's `call` where given.
raise_core_warnings <- function(warnings, skip = NULL, call = NULL) {
  for (said in unique(warnings)) {
    if (said$class %in% skip) next
    gpukeras_warn(as.character(unlist(said$message)), paste0("gpukeras_warning_", said$class), call = call)
  }
}

# A value R checked, in the Python type the core takes: `x` (an R vector) reaches Python as a
# list whatever its length (reticulate makes one string of a single one), or with
# `int_keys` as a dict keyed by its names as whole numbers (R's names are text). The
# value stays an R vector until it is sent.
as_python <- function(x, int_keys = FALSE) {
  if (is.null(x)) return(NULL)
  structure(x, class = if (int_keys) "gpukeras_py_int_dict" else "gpukeras_py_list")
}

#' @exportS3Method reticulate::r_to_py
r_to_py.gpukeras_py_list <- function(x, convert = FALSE) {
  reticulate::r_to_py(as.list(unclass(x)), convert = convert)
}

#' @exportS3Method reticulate::r_to_py
r_to_py.gpukeras_py_int_dict <- function(x, convert = FALSE) {
  values <- unclass(x)
  reticulate::py_dict(as.list(as.integer(names(values))), unname(as.list(values)), convert = convert)
}

# Call the core's verb `target` with named arguments. A Python error becomes a
# classed R condition raised in the name of `error_call` (the user's call);
# its traceback is kept on the condition (`python_traceback`) but never printed.
core_call <- function(target, ..., error_call = caller_env()) {
  core_answer(target, list(...), core(error_call), error_call)
}

# Call the core's verb `target` as core_call() does, leaving its value in Python as the core
# made it: for a value R only hands on (the memory-mapped arrays of a job or a worker, which
# converting would copy into R; gpu_as_numpy()'s array, of any dtype).
core_call_python <- function(target, ..., error_call = caller_env()) {
  core(error_call)
  if (is.null(the$bridge_python)) the$bridge_python <- reticulate::import("gpukeras.bridge", convert = FALSE)
  core_answer(target, list(...), the$bridge_python, error_call, python = TRUE)
}

core_answer <- function(target, args, bridge, error_call, python = FALSE) {
  result <- bridge$call(target, lapply(args, function(arg) {
    if (inherits(arg, "gpukeras_handover")) unclass(arg) else arg
  }), python = python)
  if (inherits(result, "python.builtin.object")) {
    # the answer converted, but for its value
    value <- result$pop("value", NULL)
    result <- c(reticulate::py_to_r(result), list(value = value))
  }
  raise_core_warnings(result$warnings)
  if (isTRUE(result$ok)) return(result$value)
  # an out-of-memory error comes with its memory plan: what took the memory, what would fit;
  # a failure that is not the user's says so (bridge.py call())
  message <- c(result$message, unlist(result$details))
  # an error the core names precisely (core/errors.py's DataFieldsError) has classes and fields
  fields <- lapply(result$fields, function(field) if (is.list(field)) unlist(field) else field)
  rlang::inject(gpukeras_abort(
    message, unlist(result$r_classes) %||% result$r_class, !!!fields,
    python_traceback = result$traceback, plan = result$plan, call = error_call
  ))
}

#' The Keras module of gpukeras' Python environment
#'
#' Starts Python and Keras (checking that the stack is supported: Keras 3,
#' TensorFlow >= 2.16 or JAX) and returns the `keras` Python module, for
#' building models when the keras3 R package is not installed.
#'
#' It is Keras' own Python API, reached through reticulate, which gives an R
#' number such as `64` to Python as the float `64.0`, where Keras wants
#' integers for units, filters, kernel sizes and shapes. So, as the keras3
#' package's R functions do, a call through `gpu_keras()` converts a
#' whole-number double to an integer for an argument Keras declares with an
#' integer default (`strides = 1`, `patience = 0`, `axis = -1`) or that is a
#' count, size or seed (`units`, `filters`, `kernel_size`, `seed`, ...), and a
#' shape (`shape = 8`, `shape = c(28, 28)`) to a tuple of integers:
#' `keras$layers$Dense(64)` and `keras$Input(shape = 8)` work. Numbers with a
#' fraction, and arguments Keras declares with a float default
#' (`learning_rate`, `rate`), are passed as they are. Classes that take no
#' such argument (`keras$layers$Layer`, `keras$Model`) are Keras' own, to
#' subclass. Methods of the objects made (`model$fit()`) are Keras' own: train
#' with [gpu_fit()].
#'
#' @param ... Not used: an argument gpu_keras() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return The `keras` Python module, as a reticulate object whose modules,
#'   classes and functions are Keras' own (with the conversion above).
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   keras$`__version__`
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = 64),
#'     keras$layers$Dense(10, activation = "softmax")
#'   ))
#' }
gpu_keras <- function(...) {
  check_unknown_args("gpu_keras")
  core_call("start")
  core_call("keras_api")
}
