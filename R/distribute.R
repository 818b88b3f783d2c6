#' Choose how training is spread over devices and machines
#'
#' A strategy for [gpu_fit()]`(strategy = )`, built on each backend's own
#' distribution engine: TensorFlow's `tf.distribute` (`OneDeviceStrategy`,
#' `MirroredStrategy`, `MultiWorkerMirroredStrategy`) or, on JAX, Keras'
#' `DataParallel`. Under a mirrored strategy every device holds a copy of the
#' model (a replica); each step splits the batch over the replicas and
#' averages their gradients, so all copies stay identical.
#'
#' @section Which batch is which:
#' `batch_size` (in [gpu_fit()] or [gpu_dataset()]) is the *global* batch:
#' the rows of one step over all replicas. Each replica gets `batch_size /
#' replicas` rows. So a run on 4 GPUs with `batch_size = 256` takes the same
#' steps as one GPU with 256, each GPU doing a quarter of the work; to keep
#' every GPU as busy as one GPU with 256 rows, give `256 * 4`. The result's
#' `settings$strategy` reports both numbers.
#'
#' @section Models built outside the strategy:
#' A model trains under a strategy only if its variables were made in the
#' strategy's scope. [gpu_fit()] handles a model built and compiled the usual
#' way: it makes a copy in the scope (same layers, weights, compile settings
#' and optimizer state), trains the copy, and puts the trained weights and
#' optimizer state back into your model, also when training stops with an
#' error. Models Keras cannot clone (subclassed models) must be built and
#' compiled inside [with_gpu_strategy()], which also saves the copy.
#'
#' @section Several machines:
#' `type = "multi_worker"` runs one R (or Python) process per machine, each
#' calling the same code with the same `workers` and its own `index` (0 is the
#' chief, which writes backups). It sets `TF_CONFIG` from them. With `workers`
#' `NULL` the cluster is read from the environment: an existing `TF_CONFIG`
#' (as [gpu_launch()] sets on one machine), else a SLURM step with several
#' tasks (`srun Rscript train.R`: the step's nodes, tasks filling them in
#' order, ports from 8888 or `GPUKERAS_PORT_BASE` up on each node), else Open
#' MPI ranks on one node; the print says which. It must be called before
#' the backend starts (like [gpu_setup()]): first thing in the session.
#'
#' @section Who can reach the workers:
#' Neither engine authenticates the processes that connect to its ports.
#' TensorFlow's servers listen on every network interface of the worker's
#' machine, whatever host `workers` names (TensorFlow has no setting for it):
#' a process that reaches the port can run code in the worker. So workers
#' that are all on this machine (`127.0.0.1`) are refused, with an error of
#' class `gpukeras_error_network_exposed`, unless their network has loopback
#' alone (as [gpu_launch()] gives them) or `trusted_network = TRUE` (or the
#' environment variable `GPUKERAS_TRUSTED_NETWORK=true`) says that every host
#' that can reach this machine is trusted. On JAX the coordinator listens on
#' the first worker's address and Gloo on each worker's own address (on
#' loopback for workers on this machine). For workers on several machines
#' the print says what listens where and gives the firewall rules that let
#' only the workers in; `NCCL_SOCKET_IFNAME` is set to `lo` for workers on
#' loopback unless you set it. See the vignette's "Who can reach the
#' workers".
#'
#' On TensorFlow it makes a `MultiWorkerMirroredStrategy`. On JAX it joins
#' the workers with `jax.distributed` (the first worker's address is the
#' coordinator; on CPUs the workers exchange through Gloo) and makes Keras'
#' `DataParallel` over every worker's devices; [gpu_fit()] then runs Keras'
#' own `fit()`, so the monitor, schedules and callbacks work as in one
#' process. Every worker reads the same seeded data pipeline and keeps its
#' share of each global batch, so `batch_size` means what it means on
#' TensorFlow; every batch must be whole (rows a multiple of `batch_size`, or
#' `gpu_dataset(drop_remainder = TRUE)`), and arrays need TensorFlow
#' installed for the pipeline. Training starts from the chief's weights;
#' with `gpu_fit(backup = gpu_backup(dir))` on storage all workers see, the chief alone
#' writes the backups, and all workers started again resume from them. When
#' a worker dies, the others stop with an error of class
#' `gpukeras_error_worker_lost` (measured: 0.2 s later on one machine), and
#' in any case JAX ends every worker within 10 s of the lost one's last
#' heartbeat; restart all of them.
#' See `vignette("distributed", package = "gpukeras")`.
#'
#' @param type `"auto"` (mirrored when more than one GPU is visible or several
#'   `devices` are named, multi-worker when `workers` are given, else one
#'   device), `"one_device"`, `"mirrored"` or `"multi_worker"`.
#' @param devices Devices to train on, by GPU index (`c(0, 1)`) or name
#'   (`"GPU:0"`, or `"CPU:1"` for a logical CPU device from
#'   `gpu_setup(cpu_devices = )`); `NULL` for the default: the first GPU (else
#'   the CPU) for one device, every GPU (else every logical CPU device) for
#'   mirrored.
#' @param workers For `"multi_worker"`: every worker's `"host:port"`, the same
#'   vector on every machine; `NULL` reads the cluster from the environment
#'   (`TF_CONFIG`, SLURM or Open MPI; see "Several machines").
#' @param index For `"multi_worker"`: this worker's position in `workers`,
#'   counted from 0.
#' @param trusted_network For `"multi_worker"`: `TRUE` to say that every host
#'   that can reach this machine may reach the workers' ports (see "Who can
#'   reach the workers"); needed on TensorFlow for workers on loopback outside
#'   [gpu_launch()]'s private network.
#' @param ... Not used: an argument gpu_strategy() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return An object of class `gpukeras_strategy`: a list with `strategy` (the
#'   Python object, for [gpu_fit()]), `type`, `backend`, `engine` (the class
#'   doing the work), `replicas`, `devices`, `workers`, `index`,
#'   `is_chief` and `network` (who can reach this worker's ports: `reach`, and
#'   `firewall`, the iptables rules that keep other hosts out).
#' @seealso [gpu_fit()], [with_gpu_strategy()], [gpu_setup()] (`cpu_devices`
#'   to try mirrored training on a machine without GPUs).
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   strategy <- gpu_strategy()
#'   strategy
#' }
gpu_strategy <- function(type = c("auto", "one_device", "mirrored", "multi_worker"),
                         devices = NULL, workers = NULL, index = NULL,
                         trusted_network = FALSE, ...) {
  check_unknown_args("gpu_strategy")
  if (missing(type)) type <- "auto"
  check_flag(trusted_network)
  check_choice(type, c("auto", "one_device", "mirrored", "multi_worker"))
  if (!is.null(devices)) devices <- device_names(devices)
  if (!is.null(workers)) {
    ok <- is.character(workers) && length(workers) >= 1 && !anyNA(workers) &&
      all(grepl("^[^:[:space:]]+:[0-9]+$", workers))
    if (!ok) {
      abort_bad_argument(sprintf("`workers` must be \"host:port\" strings, one per worker, not %s.", describe(workers)))
    }
  }
  if (!is.null(index)) {
    if (!is_whole_number(index, 0, .Machine$integer.max)) {
      abort_bad_argument(
        sprintf(
          "`index` must be one whole number >= 0 (this worker's place in `workers`, from 0), not %s.", describe(index)
        )
      )
    }
    index <- as.integer(index)
    if (!is.null(workers) && index >= length(workers)) {
      abort_bad_argument(
        sprintf(
          "`index` is %d, but `workers` names %d worker(s): give this worker's place in `workers`, from 0 to %d.",
          index, length(workers), length(workers) - 1L
        )
      )
    }
  }
  made <- core_call(
    "strategy", type = type, devices = if (!is.null(devices)) as.list(devices),
    workers = if (!is.null(workers)) as.list(workers), index = index, trusted_network = trusted_network
  )
  structure(c(list(strategy = made$strategy), made$plan, list(lines = unlist(made$lines))), class = "gpukeras_strategy")
}

#' Build a model inside a strategy's scope
#'
#' Layers, weights and the optimizer created inside are made for `strategy`
#' (mirrored over its devices), so [gpu_fit()] trains the model as it is,
#' without the copy it otherwise makes. Needed for models Keras cannot clone
#' (subclassed models); build *and* compile the model inside.
#'
#' @param strategy A [gpu_strategy()].
#' @param code Code that builds and compiles the model.
#' @param ... Not used: an argument with_gpu_strategy() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return The value of `code`.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   strategy <- gpu_strategy("one_device")
#'   model <- with_gpu_strategy(strategy, {
#'     model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(1L)))
#'     model$compile(optimizer = "sgd", loss = "mse")
#'     model
#'   })
#' }
with_gpu_strategy <- function(strategy, code, ...) {
  check_unknown_args("with_gpu_strategy")
  strategy <- strategy_object(strategy)
  context <- core_call("strategy_scope", strategy = strategy)
  context$`__enter__`()
  on.exit(context$`__exit__`(NULL, NULL, NULL), add = TRUE)
  force(code)
}

# The Python strategy of a gpukeras_strategy, or a strategy the user made in
# Python (tf$distribute$MirroredStrategy(), keras$distribution$DataParallel()).
strategy_object <- function(strategy, call = caller_env()) {
  if (inherits(strategy, "gpukeras_strategy")) return(strategy$strategy)
  if (inherits(strategy, "python.builtin.object")) return(strategy)
  abort_bad_argument(
    sprintf("`strategy` must be a gpu_strategy() (or a tf.distribute strategy), not %s.", describe(strategy)),
    call = call
  )
}

#' @export
format.gpukeras_strategy <- function(x, ...) x$lines

#' @export
print.gpukeras_strategy <- print_formatted
