#' Start several R worker processes on this machine, for multi-worker training
#'
#' `gpu_launch()` starts `workers` R processes on 127.0.0.1, each with the
#' cluster described to it the way TensorFlow reads it (`TF_CONFIG`: every
#' worker's `host:port`, on free ports, and this worker's index), so that
#' `gpu_strategy("multi_worker")` with no `workers` joins the others. It shows
#' their output as it comes, each line headed by the worker's index, waits
#' for all of them, and returns each worker's result. When one fails or dies,
#' the others are stopped at once and the error says which worker and why.
#'
#' It is for trying multi-worker code on one machine and for tests; on a
#' cluster, start one R process per worker with its scheduler instead.
#'
#' @param worker A function, called in each worker (its arguments from
#'   `args`; a formal named `index` also gets the worker's index, 0 for the
#'   first, the chief), or the path of an R script, run with Rscript (it finds
#'   its index in the environment variable `GPUKERAS_WORKER_INDEX`).
#' @param workers How many worker processes to start (>= 1).
#' @param args A list of arguments for `worker` (when it is a function).
#' @param timeout Seconds to wait for all workers (`Inf`: no limit); past it,
#'   they are stopped and an error of class `gpukeras_error_timeout` says so.
#' @param quiet `TRUE` to keep the workers' output (it is returned in the
#'   `"output"` attribute of the result) instead of showing it.
#' @return A list with one element per worker, in index order: the value the
#'   function returned (`NULL` for a script). Its attribute `"output"` holds
#'   each worker's lines of output, in the same order.
#' @seealso [gpu_strategy()] for `type = "multi_worker"`.
#' @export
#' @examples
#' results <- gpu_launch(function(index) index * 10, workers = 2, quiet = TRUE)
#' unlist(results)
#' \dontrun{
#' # Each worker joins the cluster gpu_launch() describes, and trains in step:
#' gpu_launch(function() {
#'   library(gpukeras)
#'   strategy <- gpu_strategy("multi_worker")
#'   # ... build and compile a model, then
#'   # gpu_fit(model, data, strategy = strategy)
#' }, workers = 2)
#' }
gpu_launch <- function(worker, workers = 2L, args = list(), timeout = Inf, quiet = FALSE) {
  script <- is.character(worker) && length(worker) == 1L && !is.na(worker)
  if (!is.function(worker) && !script) {
    gpukeras_abort(
      sprintf("`worker` must be a function or the path of an R script, not %s.", describe(worker)),
      "gpukeras_error_bad_argument"
    )
  }
  if (script && !file.exists(worker)) {
    gpukeras_abort(
      sprintf("The R script '%s' does not exist (a relative path starts at %s).", worker, getwd()),
      "gpukeras_error_bad_argument"
    )
  }
  check_count(workers)
  if (!is.list(args)) {
    gpukeras_abort(sprintf("`args` must be a list, not %s.", describe(args)), "gpukeras_error_bad_argument")
  }
  if (!(is.numeric(timeout) && length(timeout) == 1L && !is.na(timeout) && timeout > 0)) {
    gpukeras_abort(sprintf("`timeout` must be a number of seconds > 0 (or Inf), not %s.", describe(timeout)), "gpukeras_error_bad_argument")
  }
  check_flag(quiet)

  addresses <- sprintf("127.0.0.1:%d", free_ports(workers))
  # The workers' temp folder: what a stopped worker leaves there (TensorFlow's autograph
  # files, say) goes when the launch ends.
  scratch <- tempfile("gpukeras-launch-")
  dir.create(scratch)
  processes <- lapply(seq_len(workers) - 1L, function(index) {
    env <- c(callr::rcmd_safe_env(), worker_environment(addresses, index), TMPDIR = scratch)
    if (script) {
      callr::rscript_process$new(callr::rscript_process_options(script = worker, env = env, stderr = "2>&1"))
    } else {
      call_args <- if ("index" %in% names(formals(worker))) c(args, list(index = index)) else args
      callr::r_bg(worker, args = call_args, env = env, stderr = "2>&1", package = FALSE)
    }
  })
  on.exit(for (p in processes) if (p$is_alive()) p$kill(), add = TRUE)
  on.exit(unlink(scratch, recursive = TRUE), add = TRUE)
  output <- supervise_workers(processes, timeout, quiet)
  results <- lapply(processes, function(p) if (script) NULL else p$get_result())
  structure(results, output = output)
}

# What a worker is told about the cluster: TensorFlow's TF_CONFIG, and its index.
worker_environment <- function(addresses, index) {
  tf_config <- sprintf(
    '{"cluster": {"worker": [%s]}, "task": {"type": "worker", "index": %d}}',
    paste0('"', addresses, '"', collapse = ", "), index
  )
  c(TF_CONFIG = tf_config, GPUKERAS_WORKER_INDEX = as.character(index))
}

# Ports nothing listens on now, one per worker (each worker's server binds its own).
free_ports <- function(count) {
  found <- integer()
  for (port in sample(20000:60000, 200L)) {
    socket <- tryCatch(serverSocket(port), error = function(e) NULL)
    if (is.null(socket)) next
    close(socket)
    found <- c(found, port)
    if (length(found) == count) return(found)
  }
  gpukeras_abort("No free TCP ports found on 127.0.0.1 for the workers.", "gpukeras_error_launch")
}

# Show (or keep) each worker's lines as they come until all have ended; stop
# them all at the first that fails, or at the timeout.
supervise_workers <- function(processes, timeout, quiet) {
  output <- rep(list(character()), length(processes))
  take <- function(index) {
    lines <- processes[[index]]$read_output_lines()
    if (length(lines)) {
      output[[index]] <<- c(output[[index]], lines)
      if (!quiet) cat(sprintf("[worker %d] %s\n", index - 1L, lines), sep = "")
    }
  }
  started <- Sys.time()
  repeat {
    alive <- Filter(function(p) p$is_alive(), processes)
    if (length(alive)) alive[[1]]$poll_io(200L)
    for (index in seq_along(processes)) take(index)
    ended <- !vapply(processes, function(p) p$is_alive(), logical(1))
    for (index in which(ended)) {
      take(index)
      failure <- worker_failure(processes[[index]])
      if (!is.null(failure)) {
        for (p in processes) p$kill()
        gpukeras_abort(
          c(
            sprintf("Worker %d of %d stopped: %s; the other workers were stopped too.", index - 1L, length(processes), failure),
            if (length(output[[index]])) c("Its last lines:", utils::tail(output[[index]], 20L))
          ),
          "gpukeras_error_worker_lost",
          worker = index - 1L, output = output[[index]]
        )
      }
    }
    if (all(ended)) return(output)
    if (as.numeric(difftime(Sys.time(), started, units = "secs")) > timeout) {
      for (p in processes) p$kill()
      gpukeras_abort(
        sprintf("The workers did not finish within %s s; they were stopped.", format(timeout)),
        "gpukeras_error_timeout"
      )
    }
  }
}

# Why an ended worker failed, or NULL when it ended well.
worker_failure <- function(process) {
  status <- process$get_exit_status()
  if (!is.null(status) && status < 0L) return(sprintf("killed by signal %d", -status))
  if (inherits(process, "r_process")) {
    error <- tryCatch({
      process$get_result()
      NULL
    }, error = function(e) conditionMessage(if (!is.null(e$parent)) e$parent else e))
    if (!is.null(error)) return(sprintf("an error: %s", trimws(error)))
  }
  if (!is.null(status) && status != 0L) return(sprintf("exit status %d", status))
  NULL
}
