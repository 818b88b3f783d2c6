#' Where gpu_cv()'s and gpu_search()'s fits run
#'
#' [gpu_cv()] and [gpu_search()] run each fit in a fresh worker process that
#' sees one device alone. `gpu_workers()` says which devices and how many
#' workers, as one option object: `gpu_cv(model_fn, data, workers =
#' gpu_workers(devices = c(0, 1)))`. A number is short for `gpu_workers(workers
#' = )`: `workers = 2` runs two fits at once.
#'
#' `devices = "all"` runs one worker process per GPU (on a machine without a
#' GPU, one on the CPU, or `workers` of them). `per_device = "auto"` starts
#' one per GPU and, once a fit's memory plan ([gpu_memory_plan()]) shows that
#' more fit in the GPU's memory, adds workers there (at most 4 per GPU); a
#' number fixes how many share each GPU.
#'
#' `population = "auto"`: on JAX, [gpu_cv()] trains its folds as one
#' population, one program in one worker process (see gpu_cv()'s section
#' Populations), where the folds' models are one architecture, fit the memory,
#' and gpu_cv() is given only gpu_fit() arguments a population takes
#' (`epochs`, `batch_size`, a number as `learning_rate`); otherwise, and with
#' `population = FALSE`, a process per fold. Likewise [gpu_search()] trains its
#' trials in batches, as populations (see gpu_search()'s section Populations),
#' or with `population = FALSE` each in a process of its own.
#'
#' @param devices `"all"`, or the indices of the GPUs to use ([gpu_devices()]
#'   lists them).
#' @param workers The number of worker processes; `NULL` for one per device
#'   (`per_device` of them on each GPU).
#' @param per_device Workers sharing one GPU: `"auto"` or a whole number.
#' @param population `"auto"` (the core decides: a population where it can
#'   train one) or `FALSE` (a process per fit, always).
#' @param ... Nothing: an argument it does not have is an error naming it,
#'   with the one most likely meant.
#' @return A `gpukeras_workers` option object, a list of the checked values
#'   with `format()` and `print()` methods.
#' @seealso [gpu_cv()], [gpu_search()], which take it.
#' @export
#' @examples
#' gpu_workers()
#' gpu_workers(devices = c(0, 1), per_device = 2)
#' gpu_workers(workers = 2)
#' gpu_workers(population = FALSE)
gpu_workers <- function(devices = "all", workers = NULL, per_device = "auto", population = "auto", ...) {
  check_unknown_args("gpu_workers")
  call <- current_env()
  check_devices(devices, call = call)
  workers <- check_count(workers, allow_null = TRUE, call = call)
  per_device <- check_auto_count(per_device, call = call)
  check_population(population, call = call)
  fit_option(list(devices = devices, workers = workers, per_device = per_device, population = population), "workers")
}

check_population <- function(population, call = caller_env()) {
  if (!identical(population, "auto") && !isFALSE(population)) {
    abort_bad_argument(c(sprintf("`population` must be \"auto\" or FALSE, not %s.", describe(population)),
                         "FALSE trains a process per fit; \"auto\" a population where the core can."), call = call)
  }
  population
}

# `workers` given to gpu_cv() or gpu_search(): a gpu_workers() object, or a number of
# workers (short for gpu_workers(workers = )).
check_workers <- function(workers, arg = caller_arg(workers), call = caller_env()) {
  if (inherits(workers, "gpukeras_workers")) return(workers)
  if (is_number(workers)) return(gpu_workers(workers = check_count(workers, arg = arg, call = call)))
  abort_bad_argument(sprintf("`%s` must be gpu_workers(...) or a number of workers, not %s.", arg, describe(workers)),
                     call = call)
}
