#' Is the GPU used? Check with evidence
#'
#' Runs real work and says, with evidence, whether Keras training uses the GPU,
#' and if not, why and what to change. It
#' * records the software stack (R, reticulate, Python, TensorFlow or JAX,
#'   Keras, the TensorFlow build's CUDA and cuDNN versions, the NVIDIA driver)
#'   and which Python environment is in use and why (`python_chosen_by`, see
#'   [gpukeras_python()]),
#' * lists the devices the backend sees ([gpu_devices()]),
#' * multiplies two square float32 matrices on each GPU and on the CPU and
#'   reads back which device the result lives on, timing each (median of five
#'   synchronised runs after warm-up); each device's side doubles from 1024
#'   until one multiply takes at least 5 ms, so that a fast GPU is timed, not
#'   the cost of dispatching work to it,
#' * with `probe = TRUE`, trains a small model for a few seconds while a
#'   background thread samples NVML utilization and memory at 10 Hz,
#' * and gives a verdict, with the reasons found and concrete advice:
#'   `"gpu_used"`; `"gpu_available_not_used"` when a GPU is there (the
#'   backend sees it, or the driver shows it to this process) but the work did
#'   not run on it, e.g. a CPU-only TensorFlow beside a working driver;
#'   `"no_gpu"` when there is none to use (none found, or every GPU hidden by
#'   `CUDA_VISIBLE_DEVICES`).
#'
#' @param probe Also run the training probe (a few seconds).
#' @param fix Make the repairs the check finds (see "Repairs"). In an
#'   interactive session each one is asked for first ([utils::askYesNo()]);
#'   in a non-interactive one (a script, `Rscript`), `fix = TRUE` is the
#'   consent and they are made without asking. `FALSE` (default) changes
#'   nothing and lists them in `repairs`.
#' @param probe_seconds Length of the probe's steady-state training, in
#'   seconds (at most 600: a few seconds tell all there is to tell).
#' @param preset `NULL` (default), or a KerasHub preset (a name or a folder, as
#'   [gpu_text_classifier()] takes) to check that it loads: KerasHub's own
#'   preset loader reads its config and metadata (no weights), and `preset`
#'   in the result says its backbone class, tasks and parameter count, or why it
#'   does not load (then also in `advice`, with the repair). KerasHub is
#'   imported for this alone. For [gpu_report()], give it such a check.
#' @param ... Not used: an argument gpu_check() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return An object of class `gpukeras_check`: a list with `verdict`,
#'   `reasons`, `advice` (character vectors), `stack` (a named list of
#'   versions), `nvml` (whether NVIDIA's management library is available, and
#'   why not; `devices`, a data.frame of every GPU the driver sees: `index`,
#'   `name`, `memory_total_mib`, `visible` to this process, `in_use` by the
#'   backend, `mig_instances` for a GPU in MIG mode, and `error` for one NVML
#'   cannot read), `devices` (a data.frame, see [gpu_devices()]), `placement`
#'   (`runs`, a data.frame of requested device, actual device, matrix side
#'   `size`, median time and GFLOP/s; `speedup`, the fastest GPU's GFLOP/s
#'   over the CPU's), `utilization` (the
#'   probe: samples/s, the device the weights live on, `gpus`, a data.frame
#'   of NVML utilization mean/max and memory used of the whole GPU, and
#'   `processes`: this process's own `pid`, `own_memory_mib` and `own_sm_max`
#'   (its share of SM time, the most NVML sampled), the `others` using the
#'   GPU, a data.frame of `pid`, `memory_mib`, `sm_max`, and `notes` on what
#'   NVML could not tell; `NULL` without a probe) and `timings` (seconds per
#'   phase), `repairs` (a data.frame: `id`, `what` it changes, `how`: the pip
#'   command or the line and file, `needs_restart`, and `status`: `"done"`,
#'   `"declined"`, `"failed"`, `NA` without `fix`), and `lines`: the evidence
#'   in words, as `print()` shows it (`stack`, `devices`, `placement`, `probe`,
#'   `preset`); `preset`: `NULL`, or the preset checked (`preset`, `loads`,
#'   `backbone`, `tasks`, `parameters`, `problem`).
#'
#' @section Repairs:
#' `gpu_check(fix = TRUE)` acts on what it found, and says what it changed
#' (the pip command it ran and pip's answer, the line it added to a file):
#' * a CPU-only TensorFlow beside a driver that shows a GPU (Linux): pip
#'   replaces it with the GPU build (`tensorflow[and-cuda]`) at the version
#'   installed, in the Python environment in use (`stack$python_executable`).
#'   Every wheel is downloaded first (offline, nothing changes), then the CPU
#'   build is uninstalled and the GPU build installed from those wheels; if
#'   that fails, the CPU build goes back from its own wheel, and an environment
#'   still left without TensorFlow is a `gpukeras_error_repair` giving the
#'   command that restores it;
#' * nvidia-ml-py missing where the driver or the backend shows a GPU: pip
#'   installs it (the pin of [gpukeras_requirements()]) there;
#' * JAX preallocating GPU memory where [gpu_setup()] asked for memory growth
#'   after JAX had started: `XLA_PYTHON_CLIENT_PREALLOCATE=false` goes into
#'   the `.Renviron` R reads at start-up (`R_ENVIRON_USER`, else
#'   `~/.Renviron`; never one in a folder [setwd()] went to), once: the file
#'   is written beside it, read back and renamed into place, so a full disk
#'   leaves it as it was and says so; nothing else in the file changes;
#' * NumPy 2 with a reticulate before 1.38, which stops the check before it
#'   starts: pip installs the NumPy [gpukeras_requirements()] pins for this
#'   reticulate, and the check's error then says to restart;
#' * a Keras with a published way around `safe_mode` (before 3.12.1, or
#'   3.13.0-3.13.1: CVE-2025-1550, CVE-2025-9906, CVE-2025-9905,
#'   CVE-2026-1462), which gpukeras refuses (`gpukeras_error_keras_too_old`,
#'   also what `gpu_check()` says without `fix`), since [gpu_load()] of a file
#'   from elsewhere is only as safe as `safe_mode`: pip installs the Keras
#'   [gpukeras_requirements()] pins, and the check's error says to restart.
#'
#' Python and its packages are loaded once per R session, so most repairs take
#' effect after R restarts (`needs_restart`); gpukeras says so.
#'
#' A `KERAS_BACKEND` set after Python started is ignored (Keras reads it once,
#' when it starts): the check lists it among the reasons, and [gpu_setup()]
#' warns (`gpukeras_warning_backend_ignored`).
#'
#' @section Whose use is measured:
#' NVML's utilization and memory are the whole GPU's, so on a shared GPU
#' another process's work would look like this one's. Where NVML reports per
#' process (memory by process; SM share on a whole GPU, not on a MIG
#' instance), the verdict rests on this process's own figures, and other
#' processes' are listed apart. Inside a container NVML may show the host's
#' process ids; the report then says that this process's own share cannot be
#' told apart. NVML measures no utilization on a MIG instance: the report
#' says "not available on MIG", and the verdict rests on where the work ran.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   check <- gpu_check(probe_seconds = 1)
#'   check
#'   check$verdict
#' }
gpu_check <- function(probe = TRUE, probe_seconds = 3, fix = FALSE, preset = NULL, ...) {
  check_unknown_args("gpu_check")
  check_flag(probe)
  check_positive_number(probe_seconds)
  check_flag(fix)
  if (!is.null(preset)) check_string(preset)
  if (probe_seconds > 600) {
    abort_bad_argument(
      sprintf(
        "`probe_seconds` must be at most 600, not %s: a probe of a few seconds is enough.", describe(probe_seconds)
      )
    )
  }
  result <- with_stack_repair({
    core() # for why this Python, which only R knows (see gpukeras_python())
    core_call(
      "check", probe_training = probe, probe_seconds = probe_seconds, matmul_size = 1024L,
      # install_gpukeras()'s pins for a GPU machine: a repair installs the pin of the package it
      # needs (the GPU build of TensorFlow only exists on Linux)
      requirements = as.list(gpukeras_requirements(gpu = TRUE, os = "Linux")),
      symbols = list(bullet = bullet(), arrow = arrow()), renviron = renviron_path(), preset = preset,
      caller = list(
        r = paste(R.version$major, R.version$minor, sep = "."),
        reticulate = as.character(utils::packageVersion("reticulate")), python_chosen_by = the$python_chosen_by
      )
    )
  }, fix)
  check <- new_gpukeras_check(result)
  if (fix) check$repairs$status <- make_repairs(result$repairs, check$stack$python_executable)
  check
}

new_gpukeras_check <- function(result) {
  placement <- result$placement
  placement$runs <- rows_to_df(placement$runs, c("requested", "actual", "size", "median_ms", "gflops"))
  utilization <- result$utilization
  if (!is.null(utilization)) {
    utilization$gpus <- rows_to_df(utilization$gpus, c(
      "nvml_index", "samples", "sample_hz", "utilization_mean",
      "utilization_max", "memory_used_max_mib", "power_mean_w"
    ))
    if (!is.null(utilization$processes)) {
      utilization$processes$others <- rows_to_df(utilization$processes$others, c("pid", "memory_mib", "sm_max"))
      utilization$processes$notes <- as.character(unlist(utilization$processes$notes))
    }
  }
  ignored <- backend_ignored(result$stack$keras_backend)
  the$check_verdict <- result$verdict # a tracked fit's tag (gpu_track())
  check <- list(
    verdict = result$verdict, reasons = c(as.character(unlist(result$reasons)), ignored$reason),
    advice = c(as.character(unlist(result$advice)), ignored$advice), stack = result$stack,
    nvml = replace(result$nvml, "devices", list(rows_to_df(result$nvml$devices, c(
      "index", "name", "memory_total_mib", "visible", "in_use", "mig_instances", "error"
    )))), devices = rows_to_df(result$devices, device_columns),
    setup = new_gpukeras_setup(result$setup), placement = placement, utilization = utilization,
    timings = unlist(result$timings), repairs = repairs_df(result$repairs),
    lines = lapply(result$lines, function(lines) as.character(unlist(lines)))
  )
  check$preset <- result$preset # only where gpu_check(preset = ) asked
  structure(check, class = "gpukeras_check")
}

#' @export
format.gpukeras_check <- function(x, ...) {
  # the core's words (tools/check.py check_text())
  unlist(core_call(
    "check_text",
    verdict = x$verdict, reasons = as_python(x$reasons), advice = as_python(x$advice),
    lines = lapply(x$lines, as_python), setup = as_python(format(x$setup)[-1]), repairs = lapply(x$repairs, as_python),
    bullet = bullet(), arrow = arrow()
  ))
}

#' @export
print.gpukeras_check <- print_formatted
