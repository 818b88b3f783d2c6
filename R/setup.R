#' Set up the GPU session: memory, devices, precision, threads, XLA, determinism
#'
#' Applies the settings R users are told to make before training ("enable
#' memory growth", "use mixed precision", ...) in the order they need, and
#' returns the settings actually in force, read back from TensorFlow or JAX.
#'
#' @section The ordering trap:
#' Memory growth, memory limits, visible devices, threads and logical CPU
#' devices only work before TensorFlow (or JAX) has started its devices, which
#' happens at the first model, tensor or [gpu_check()]. Call `gpu_setup()`
#' first. Called later, it succeeds silently when the asked-for state already
#' holds, and otherwise stops with a `gpukeras_error_runtime_started` error
#' naming each setting that could not be applied, changing nothing (the dtype
#' policy and `jit_compile` included): then restart R and call `gpu_setup()`
#' before anything else. A bad argument, too, is an error before anything
#' changes.
#'
#' @section With keras3 loaded:
#' keras3 (like other packages) registers reticulate load hooks that run
#' when Python imports `keras`; its hook makes a tensor, which would start
#' TensorFlow before these settings apply. `gpu_setup()` holds such hooks back
#' while it applies its settings and runs each of them once afterwards, so
#' `library(keras3); gpu_setup()` works as the first call of a session.
#' When `gpu_setup()` fails, the hooks stay held (running them would start
#' TensorFlow), so a corrected `gpu_setup()` still applies; they run when it
#' succeeds, or when the next top-level call without `gpu_setup()` completes.
#'
#' @section KERAS_BACKEND:
#' A `KERAS_BACKEND` set after Python started is ignored (Keras reads it once,
#' when it starts): `gpu_setup()` then warns
#' (`gpukeras_warning_backend_ignored`) and names the backend in use.
#'
#' @param memory_growth Grow GPU memory on demand (TensorFlow's
#'   `set_memory_growth` on every GPU in use; on JAX,
#'   `XLA_PYTHON_CLIENT_PREALLOCATE=false`) instead of taking (nearly) all of
#'   it at start. Left unset, it is `FALSE` when `memory_limit` is given.
#' @param memory_limit A hard cap in MiB: one value for all GPUs in use or one
#'   per GPU (TensorFlow: a logical device configuration; JAX: the fraction
#'   `XLA_CLIENT_MEM_FRACTION` of the GPU's memory, one value only; jaxlib
#'   before 0.7 reads `XLA_PYTHON_CLIENT_MEM_FRACTION`, which is written
#'   there instead). TensorFlow cannot combine it with `memory_growth = TRUE`,
#'   and a GPU capped once in a session cannot grow its memory later.
#' @param devices GPUs to use, by index (`0`, `c(0, 1)`) or by name
#'   (`"GPU:1"`, or `"CPU:1"` for a logical CPU device); the other GPUs are
#'   hidden. `NULL` leaves visibility as it is. See "Device numbering".
#'
#' @section Device numbering:
#' `devices` counts the GPUs CUDA lets this R session see, as TensorFlow and
#' JAX number them and as [gpu_devices()] lists them (`GPU:0`, `GPU:1`, ...),
#' which is not always `nvidia-smi`'s numbering. Under
#' `CUDA_VISIBLE_DEVICES=2,3` (as SLURM sets it for a job given
#' `nvidia-smi`'s GPUs 2 and 3) those two GPUs are `0` and `1` here, and
#' `devices = 2` is an error that says so: "`devices` counts the GPUs CUDA
#' lets this process see ... (CUDA_VISIBLE_DEVICES=2,3: GPUs 0 and 1 here are
#' nvidia-smi's 2 and 3)". Without `CUDA_VISIBLE_DEVICES`, the order is
#' `CUDA_DEVICE_ORDER`'s: when gpukeras starts Keras itself and the variable
#' is unset, it sets `PCI_BUS_ID` (`nvidia-smi`'s order); a value you set is
#' kept and followed, and so is CUDA's own default, `FASTEST_FIRST` (the
#' fastest GPU first), where keras3 started Keras first. [gpu_devices()]
#' shows which GPU each one is (`nvml_index`, `nvidia-smi`'s index, and
#' `uuid`). A MIG instance counts as one GPU.
#' @param mixed_precision `"auto"` (bfloat16 on compute capability >= 8.0,
#'   float16 on 7.x, float32 below that and on the CPU), or `"float16"`,
#'   `"bfloat16"`, `"float32"`. Sets Keras' global dtype policy for models
#'   built afterwards; with float16, Keras turns on loss scaling at compile.
#'   Left unset, a policy set outside gpukeras (e.g. by keras3's
#'   `config_set_dtype_policy()`) is kept, and `"auto"` applies otherwise.
#' @param threads Threads for TensorFlow ops: one number for both, or
#'   `c(intra = , inter = )` (threads inside one op, ops run in parallel), at
#'   most 4096; `0` lets TensorFlow choose. Not settable on JAX (reported in
#'   `notes`).
#' @param jit_compile Default XLA compilation for later gpukeras training
#'   calls: `TRUE`, `FALSE` or `"auto"`; `NULL` leaves it as it is.
#' @param cpu_devices Split the CPU into this many logical devices, to test
#'   multi-device code without GPUs; `NULL` leaves it as it is.
#' @param deterministic `TRUE` makes the backend's ops deterministic, so that the
#'   same run (same data, model, starting weights and `seed`, on the same
#'   hardware and versions) ends with the same weights, bit for bit:
#'   TensorFlow's op determinism (`tf.config.experimental.enable_op_determinism()`,
#'   which also makes tf.data keep its order and run stateful maps serially);
#'   on JAX, XLA's deterministic GPU ops (`--xla_gpu_deterministic_ops=true`,
#'   added to `XLA_FLAGS` after the flags you already have, before JAX starts).
#'   It needs a `seed` (TensorFlow refuses random ops without one once its ops
#'   are deterministic): given none, one is chosen (from the clock, R's random
#'   numbers untouched) and shown in the setup's print with the call that
#'   repeats it. What it costs (`bench/deterministic.py`: a small MLP,
#'   20-256-256-2, batch 128, each way in fresh processes, alternating
#'   rounds): on an NVIDIA H100 with JAX, training ran at 0.82 times its speed
#'   without deterministic ops (median of 6 rounds, 95 % interval 0.69-0.86;
#'   `bench/results/deterministic-NVIDIA-H100-80GB-HBM3-2026-11-26.json`),
#'   and the same seed gave bit-for-bit the same weights there; the
#'   deterministic kernels give up atomic adds and XLA's timed autotuning.
#'   On 2 CPU cores TensorFlow ran at 1.00 times its speed (12 rounds,
#'   0.97-1.30): no cost above the noise (`deterministic-cpu.json`).
#'   `FALSE` (the default) asks for nothing, and never turns off determinism
#'   that is already on (restart R for that). See "Repeatable runs".
#' @param seed A whole number: seeds Python, NumPy, the backend and Keras now
#'   (Keras' `set_random_seed()`), so models built afterwards start from the
#'   same weights in every session, and becomes [gpu_fit()]'s `seed` where
#'   that is given none. `NULL` seeds nothing, but with `deterministic = TRUE`
#'   chooses one (`seed_chosen` in the result).
#' @param workers_ahead Worker processes for the session's first [gpu_cv()] or
#'   [gpu_search()], started now in the background: `0` (the default) starts
#'   none; `"auto"` one per GPU (the workers of the default [gpu_workers()]),
#'   none where no GPU is visible; a number, that many (those of
#'   `gpu_workers(workers = )`). See "Workers started ahead".
#' @param ... Not used: an argument gpu_setup() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#'
#' @section Repeatable runs:
#' `gpu_setup(deterministic = TRUE, seed = 1)` first, then build the model and
#' call [gpu_fit()]: the weights it starts from, its data order and its
#' dropout all follow from the seed, and the ops from determinism, so running
#' the same script again gives the same weights. `gpu_fit(seed = )` seeds a fit
#' on its own (from its start); without one it uses this `seed`. The setup
#' object and a fit's `settings$deterministic` say whether the backend's ops
#' were deterministic, as the backend reports it (also when you turned it on
#' yourself: `TF_DETERMINISTIC_OPS=1`, or the XLA flag in `XLA_FLAGS`). On the
#' CPU most ops are deterministic anyway; the GPU is where determinism changes
#' results (atomic adds in reductions, autotuned kernels), and where it costs
#' most.
#'
#' @section A GPU's choices on a CPU:
#' On a GPU gpukeras' `"auto"` rules choose differently from a CPU: `gpu_setup()`
#' picks mixed bfloat16 on compute capability >= 8.0, [gpu_cv()] and
#' [gpu_search()] put their workers on the GPU and let a fit's memory plan
#' decide how many share it, [gpu_tune()] tries the GPU's precisions, and the
#' report advises for the GPU. To test a script, a package or a CI run along
#' that path where no GPU is, set the environment variable
#' `GPUKERAS_SIMULATE_GPU=true` before Python starts
#' (`Sys.setenv(GPUKERAS_SIMULATE_GPU = "true")` first in the session, or in
#' `.Renviron`): every `"auto"` then decides as on an NVIDIA GPU of compute
#' capability 9.0 with 80 GB of memory (or `GPUKERAS_SIMULATE_GPU_MIB` MiB: a
#' small one makes [gpu_fit()] choose its precision by the memory plan), while
#' the work runs on the CPU. What is
#' measured stays what it is ([gpu_check()]'s verdict, the devices, the
#' report's figures); the precision's reason, a fit's print ("Auto choices:")
#' and its report's notes say what was simulated. Worker processes and
#' background jobs inherit it. Where a GPU is visible it changes nothing.
#' `make test` runs the fit, predict, cv, search, serve, export and job tests so.
#' @section Workers started ahead:
#' [gpu_cv()] and [gpu_search()] train in worker processes, and a worker
#' starts before its first fit can: it imports Python, Keras and the backend,
#' starts the runtime on its device and applies this setup (on an H200 with
#' JAX, importing took 5.4 s and the runtime's start 2.0 s: `bench/fit_start.py`,
#' `bench/results/fit-start-NVIDIA-H200-2026-11-27.json`). After a call its
#' workers stay, as the session's spares, for the next call; `workers_ahead`
#' starts them before the first one. `gpu_setup(workers_ahead = "auto")`
#' starts one per GPU in the background (on a simulated GPU too, see "A GPU's
#' choices on a CPU") and returns at once; while you read and prepare the data
#' each loads itself, starts its runtime and compiles one small step, and the
#' first `gpu_cv()` or `gpu_search()` whose workers are on the same devices
#' (the default [gpu_workers()]; `gpu_workers(workers = n)` for
#' `workers_ahead = n`) runs its fits in them (not a search with
#' `background = TRUE`, whose workers are its own process's). Where no GPU
#' is visible `"auto"` starts none (a worker's start would take the cores the
#' session works on); a number starts that many there too. The print says what was started
#' ("workers ahead:"). On a GPU each holds its CUDA context and what its step
#' took, its memory growing on demand. They keep this setup: a later
#' `gpu_setup()` with other settings ends them, as no call could use them.
#' They end with the R session.
#' @return An object of class `gpukeras_setup`: a list with `backend`, `gpus`
#'   (GPUs in use), `memory_growth`, `memory_limit_mib`, `devices`,
#'   `cpu_devices`, `intra_op_threads`, `inter_op_threads`, `dtype_policy`,
#'   `precision_reason`, `loss_scaling`, `precision_suits_device`,
#'   `jit_compile`, `deterministic` (whether the backend's ops are
#'   deterministic, read back from it), `seed` (the session's seed, `NULL` when
#'   none was given nor chosen), `seed_chosen`, `notes`, `lines` (its print)
#'   and `workers_ahead` (the device of each worker started ahead: `"GPU 0"`,
#'   `"CPU"`; none by default).
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   # in a fresh R session, before anything else that uses Python:
#'   setup <- tryCatch(gpu_setup(), gpukeras_error_runtime_started = function(e) NULL)
#'   setup
#' }
gpu_setup <- function(memory_growth = TRUE, memory_limit = NULL, devices = NULL,
                      mixed_precision = "auto", threads = NULL, jit_compile = NULL,
                      cpu_devices = NULL, deterministic = FALSE, seed = NULL, workers_ahead = 0, ...) {
  check_unknown_args("gpu_setup")
  # As given, for gpu_fit(background = TRUE) and the workers to apply in their processes (no
  # `workers_ahead`: those start none).
  given <- mget(setdiff(as.character(names(match.call())[-1L]), "workers_ahead"))
  if (missing(memory_growth) && !is.null(memory_limit)) memory_growth <- FALSE
  check_flag(memory_growth)
  if (!is.null(memory_limit)) check_positive_numbers(memory_limit)
  # Unset, it is NULL for the core: "auto" unless a policy was set elsewhere.
  mixed_precision <- if (!missing(mixed_precision)) {
    check_choice(mixed_precision, c("auto", "float16", "bfloat16", "float32"))
  }
  threads <- check_threads(threads)
  if (!is.null(jit_compile)) check_auto_flag(jit_compile)
  cpu_devices <- check_count(cpu_devices, allow_null = TRUE)
  check_flag(deterministic)
  seed <- check_seed(seed)
  workers_ahead <- check_auto_count(workers_ahead, min = 0)
  # Deterministic ops repeat a run only from the same seeds (and TensorFlow refuses random
  # ops without one): given none, one is chosen and recorded, and the setup that background
  # fits and workers apply again carries it.
  seed_chosen <- deterministic && is.null(seed)
  if (seed_chosen) {
    seed <- chosen_seed(NULL)
    given$seed <- seed
  }
  # Checked here, not lazily inside core_call(): a bad name must fail before
  # Python starts.
  devices <- if (!is.null(devices)) device_names(devices)
  settings <- with_load_hooks_held(core_call(
    "setup", memory_growth = memory_growth,
    memory_limit_mib = if (!is.null(memory_limit)) as.list(as.numeric(memory_limit)),
    devices = as_python(devices), mixed_precision = mixed_precision,
    intra_op_threads = threads[["intra"]], inter_op_threads = threads[["inter"]], jit_compile = jit_compile,
    cpu_devices = cpu_devices, deterministic = deterministic, seed = seed,
    seed_chosen = seed_chosen
  ))
  the$setup_args <- given
  ahead <- setup_workers_ahead(workers_ahead)
  settings$lines <- append(settings$lines, ahead$line, after = length(settings$lines) - length(settings$notes))
  settings$workers_ahead <- vapply(ahead$slots, `[[`, "", "device")
  for (note in unlist(settings$notes)) {
    gpukeras_warn(note, "gpukeras_warning_not_applied")
  }
  ignored <- backend_ignored(settings$backend)
  if (!is.null(ignored)) {
    gpukeras_warn(c(paste0(ignored$reason, "."), ignored$advice), "gpukeras_warning_backend_ignored")
  }
  new_gpukeras_setup(settings)
}

new_gpukeras_setup <- function(settings) {
  settings$gpus <- as.character(unlist(settings$gpus))
  # `[<-` with list(NULL) keeps `devices` (NULL: none chosen); `$<-` would drop it.
  settings["devices"] <- list(if (!is.null(settings$devices)) as.character(unlist(settings$devices)))
  settings$memory_limit_mib <- as.numeric(unlist(settings$memory_limit_mib))
  settings$notes <- as.character(unlist(settings$notes))
  settings$lines <- as.character(unlist(settings$lines)) # the core's words (gpu/setup.py setup_lines())
  structure(settings, class = "gpukeras_setup")
}

# "GPU:1" stays; 1 becomes "GPU:1".
device_names <- function(devices, arg = "devices", call = caller_env()) {
  if (is.numeric(devices) && !anyNA(devices) && all(devices >= 0) && all(devices == round(devices))) {
    return(sprintf("GPU:%d", as.integer(devices)))
  }
  if (is.character(devices) && !anyNA(devices) && all(grepl("^(gpu|cpu|GPU|CPU):[0-9]+$", devices))) {
    return(toupper(devices))
  }
  abort_bad_argument(c(
    sprintf(
      "`%s` must be GPU indices (0, 1, ...) or names like \"GPU:0\" or \"CPU:1\", not %s.", arg, describe(devices)
    ),
    "gpu_devices() lists the devices there are."
  ), call = call)
}

check_threads <- function(threads, max_threads = 4096L, call = caller_env()) {
  if (is.null(threads)) return(list())
  # Capped: TensorFlow makes the threads of each pool when it starts, and a
  # count past R's integer range reached it as NA and aborted the R session.
  ok <- is.numeric(threads) && length(threads) %in% 1:2 && !anyNA(threads) &&
    all(threads >= 0) && all(threads == round(threads)) && all(threads <= max_threads)
  if (!ok) {
    stop_input_type(threads, sprintf(
      "one count or c(intra = , inter = ) from 0 to %d (0 lets TensorFlow choose)", max_threads
    ), "threads", call)
  }
  values <- as.integer(rep_len(threads, 2))
  names(values) <- if (length(threads) == 2 && !is.null(names(threads))) names(threads) else c("intra", "inter")
  if (!setequal(names(values), c("intra", "inter"))) {
    abort_bad_argument("`threads` names must be `intra` and `inter`.", call = call)
  }
  as.list(values)
}

#' @export
format.gpukeras_setup <- function(x, ...) x$lines

#' @export
print.gpukeras_setup <- print_formatted
