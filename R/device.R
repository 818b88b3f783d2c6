#' Run code with models and ops placed on one device
#'
#' The withr idiom around `keras.device()`: layers, weights and ops created
#' inside go to `device`. `with_gpu_device()` scopes a block of code;
#' `local_gpu_device()` scopes the rest of the calling function. A device that
#' does not exist is a `gpukeras_error_unknown_device` error listing the ones
#' that do (plain `keras.device()` fails later, deep inside the backend).
#'
#' @param device A device name (`"GPU:0"`, `"CPU:0"`, `"CPU:1"` for a logical
#'   CPU device made by `gpu_setup(cpu_devices = )`) or a GPU index (`0`).
#' @param code Code to run on `device`.
#' @param .local_envir The environment whose exit ends the scope.
#' @param ... Not used: an argument these functions do not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return `with_gpu_device()`: the value of `code`. `local_gpu_device()`:
#'   the device name, invisibly.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   layer <- with_gpu_device("CPU:0", {
#'     layer <- keras$layers$Dense(4L)
#'     layer$build(list(NULL, 3L))
#'     layer
#'   })
#'   layer$kernel$value$device
#' }
with_gpu_device <- function(device, code, ...) {
  check_unknown_args("with_gpu_device")
  scope <- enter_device_scope(device)
  on.exit(exit_device_scope(scope), add = TRUE)
  force(code)
}

#' @rdname with_gpu_device
#' @export
local_gpu_device <- function(device, .local_envir = parent.frame(), ...) {
  check_unknown_args("local_gpu_device", "with_gpu_device")
  scope <- enter_device_scope(device)
  withr::defer(exit_device_scope(scope), envir = .local_envir)
  invisible(scope$name)
}

enter_device_scope <- function(device, call = caller_env()) {
  if (length(device) != 1L) {
    abort_bad_argument(sprintf("`device` must be one device, not %s.", describe(device)), call = call)
  }
  name <- device_names(device, "device", call = call)
  context <- core_call("device_scope", device = name, error_call = call)
  context$`__enter__`()
  list(name = name, context = context)
}

exit_device_scope <- function(scope) scope$context$`__exit__`(NULL, NULL, NULL)
