#' Start several R worker processes on this machine, for multi-worker training
#'
#' `gpu_launch()` starts `workers` R processes on 127.0.0.1, each with the
#' cluster described to it the way TensorFlow reads it (`TF_CONFIG`: every
#' worker's `host:port`, on free ports, and this worker's index), so that
#' `gpu_strategy("multi_worker")` with no `workers` joins the others. It shows
#' their output as it comes, each line headed by the worker's index, waits
#' for all of them (and their output to its end: lines a process a worker
#' started writes after the worker exited, for up to 5 seconds), and returns
#' each worker's result. When one fails or dies, the others are stopped at
#' once and the error says which worker and why.
#'
#' It is for trying multi-worker code on one machine and for tests; on a
#' cluster, start one R process per worker with its scheduler instead.
#'
#' @section A network of their own:
#' TensorFlow's workers listen on every network interface, without
#' authentication (see [gpu_strategy()], "Who can reach the workers"). So by
#' default (`network = "private"`) the workers run in a private network
#' namespace that `gpu_launch()` makes (with `unshare` and `nsenter` from
#' util-linux and `ip` from iproute2; Linux): it has loopback alone, so the
#' workers reach one another on `127.0.0.1` and no other process or host
#' reaches them. They cannot reach the network either: download data
#' before. Where the kernel does not allow it (no unprivileged user
#' namespaces), `gpu_launch()` stops with an error of class
#' `gpukeras_error_launch`; `network = "trusted"` then runs the workers on
#' this machine's network, and says so to them (`GPUKERAS_TRUSTED_NETWORK`):
#' only where every host that can reach this machine is trusted, or a
#' firewall keeps them out.
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
#' @param network `"private"` (a network of the workers' own, which no other
#'   host or process can reach) or `"trusted"` (this machine's network); see
#'   "A network of their own".
#' @param ... Not used: an argument gpu_launch() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
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
gpu_launch <- function(worker, workers = 2L, args = list(), timeout = Inf, quiet = FALSE,
                       network = c("private", "trusted"), ...) {
  check_unknown_args(
    "gpu_launch", other = "gpu_launch() passes the worker its arguments in `args`, e.g. args = list(epochs = 3)."
  )
  script <- is.character(worker) && length(worker) == 1L && !is.na(worker)
  if (!is.function(worker) && !script) {
    abort_bad_argument(sprintf("`worker` must be a function or the path of an R script, not %s.", describe(worker)))
  }
  if (script && !file.exists(worker)) {
    abort_bad_argument(sprintf("The R script '%s' does not exist (a relative path starts at %s).", worker, getwd()))
  }
  check_count(workers)
  if (!is.list(args)) abort_bad_argument(sprintf("`args` must be a list, not %s.", describe(args)))
  check_timeout(timeout)
  check_flag(quiet)
  if (missing(network)) network <- "private"
  check_choice(network, c("private", "trusted"))

  addresses <- sprintf("127.0.0.1:%d", free_ports(workers))
  # The workers' temp folder: what a stopped worker leaves there (TensorFlow's autograph
  # files, say) goes when the launch ends.
  scratch <- tempfile("gpukeras-launch-")
  dir.create(scratch)
  on.exit(unlink(scratch, recursive = TRUE), add = TRUE)
  private <- if (network == "private") private_network(scratch)
  # Run last-registered first: the workers end, then the network, then the folder goes.
  if (!is.null(private)) on.exit(private$holder$kill(), add = TRUE, after = FALSE)
  trusted <- if (network == "trusted") c(GPUKERAS_TRUSTED_NETWORK = "true")
  processes <- list()
  on.exit(for (p in processes) if (p$is_alive()) p$kill(), add = TRUE, after = FALSE)
  for (index in seq_len(workers) - 1L) {
    env <- c(callr::rcmd_safe_env(), worker_environment(addresses, index), TMPDIR = scratch, trusted)
    processes[[index + 1L]] <- if (script) {
      start_script(worker, env, private)
    } else {
      call_args <- if ("index" %in% names(formals(worker))) c(args, list(index = index)) else args
      callr::r_bg(
        worker, args = call_args, env = env, stderr = "2>&1", package = FALSE,
        arch = if (is.null(private)) "same" else file.path(private$bin, "R")
      )
    }
  }
  output <- supervise_workers(processes, timeout, quiet)
  results <- lapply(processes, function(p) if (script) NULL else p$get_result())
  structure(results, output = output)
}

# An R script as a worker, with Rscript (inside the private network, its Rscript), and
# what callr gives its children: this session's libraries.
start_script <- function(script, env, private) {
  processx::process$new(
    file.path(private$bin %||% R.home("bin"), "Rscript"), script,
    env = c("current", env, R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep)),
    stdout = "|", stderr = "2>&1", cleanup_tree = TRUE
  )
}

# A network namespace with loopback alone, held open by a process of its own (it ends
# when its stdin closes, with this session), and R and Rscript that start inside it: the
# workers reach one another on 127.0.0.1 and nothing else reaches them. Root makes it
# directly; anyone else inside a user namespace of their own, where the kernel allows it.
private_network <- function(scratch, call = caller_env()) {
  missing_tools <- Filter(function(tool) !nzchar(Sys.which(tool)), c("unshare", "nsenter", "ip"))
  if (length(missing_tools)) {
    no_private_network(
      sprintf("%s not found (util-linux, iproute2)", paste0("`", missing_tools, "`", collapse = ", ")), call = call
    )
  }
  root <- identical(unname(Sys.info()[["effective_user"]]), "root")
  holder <- processx::process$new(
    "unshare",
    c(
      if (!root) c("--user", "--map-root-user"), "--net", "--", "sh", "-c",
      "ip link set lo up && echo ready && exec cat"
    ),
    stdin = "|", stdout = "|", stderr = "|", cleanup = TRUE
  )
  deadline <- Sys.time() + 10
  ready <- FALSE
  while (!ready && holder$is_alive() && Sys.time() < deadline) {
    holder$poll_io(200L)
    ready <- "ready" %in% holder$read_output_lines()
  }
  if (!ready) no_private_network(holder_failure(holder), call = call)
  enter <- c("nsenter", "--target", holder$get_pid(), if (!root) c("--user", "--preserve-credentials"), "--net", "--")
  bin <- file.path(scratch, "bin")
  dir.create(bin)
  for (tool in c("R", "Rscript")) {
    path <- file.path(bin, tool)
    writeLines(
      c("#!/bin/sh", sprintf('exec %s "%s" "$@"', paste(enter, collapse = " "), file.path(R.home("bin"), tool))), path
    )
    Sys.chmod(path, "0700")
  }
  list(holder = holder, bin = bin)
}

# Why the namespace's holder did not get ready, in unshare's own words where it said
# any: read before the holder is killed, which closes its pipes (processx then gives
# only "Invalid connection object").
holder_failure <- function(holder) {
  if (holder$is_alive()) {
    holder$kill()
    return("unshare did not start a network namespace within 10 seconds")
  }
  said <- tryCatch(holder$read_all_error_lines(), error = function(e) character())
  said <- trimws(said[nzchar(trimws(said))])
  if (length(said)) return(paste(said, collapse = " "))
  sprintf("unshare ended with status %s, saying nothing", holder$get_exit_status())
}

no_private_network <- function(why, call = caller_env()) {
  gpukeras_abort(c(
    sprintf("gpu_launch() cannot give the workers a private network here: %s.", why),
    paste(
      "TensorFlow's workers listen on every network interface, without authentication.",
      "If every host that can reach this machine is trusted, or a firewall keeps them out",
      "(iptables -A INPUT -p tcp --dport 20000:60000 ! -i lo -j DROP), use network = \"trusted\"."
    )
  ), "gpukeras_error_launch", call = call)
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
free_ports <- function(count, call = caller_env()) {
  free <- Filter(function(port) {
    tryCatch({
      close(serverSocket(port))
      TRUE
    }, error = function(e) FALSE)
  }, sample(20000:60000, 200L))
  if (length(free) < count) {
    gpukeras_abort("No free TCP ports found on 127.0.0.1 for the workers.", "gpukeras_error_launch", call = call)
  }
  free[seq_len(count)]
}

# Show (or keep) each worker's lines as they come until all have ended; stop
# them all at the first that fails, or at the timeout. A worker has ended once it has
# exited and its output is read to the end (a line it wrote just before exiting, or a
# process it started, may still be writing to the pipe), or 5 seconds after it exited,
# in case a process it left behind holds the pipe open.
supervise_workers <- function(processes, timeout, quiet, call = caller_env()) {
  drain <- 5
  output <- rep(list(character()), length(processes))
  exited_at <- rep(NA_real_, length(processes))
  checked <- rep(FALSE, length(processes)) # ended, and its result looked at (once: it is read from a file)
  deadline <- Sys.time() + min(timeout, 1e9)
  repeat {
    alive <- vapply(processes, function(p) p$is_alive(), logical(1))
    now <- proc.time()[["elapsed"]]
    exited_at[!alive & is.na(exited_at)] <- now
    unread <- vapply(processes, function(p) p$is_incomplete_output(), logical(1))
    open <- alive | (unread & now - exited_at < drain)
    # Wait for a line (or the end of a worker's output, as it exits), at most 200 ms.
    if (any(open & unread)) {
      processx::poll(lapply(processes[open & unread], function(p) p$get_output_connection()), 200L)
    } else if (any(open)) {
      Sys.sleep(0.2)
    }
    for (index in seq_along(processes)) {
      lines <- processes[[index]]$read_output_lines()
      output[[index]] <- c(output[[index]], lines)
      if (!quiet && length(lines)) cat(sprintf("[worker %d] %s\n", index - 1L, lines), sep = "")
      failure <- if (!open[index] && !checked[index]) worker_failure(processes[[index]])
      checked[index] <- !open[index]
      if (!is.null(failure)) {
        for (p in processes) p$kill()
        gpukeras_abort(c(
          sprintf(
            "Worker %d of %d stopped: %s; the other workers were stopped too.", index - 1L, length(processes), failure
          ),
          if (length(output[[index]]))
            c(i = "Its last lines:", rlang::set_names(utils::tail(output[[index]], 20L), " "))
        ), "gpukeras_error_worker_lost", worker = index - 1L, output = output[[index]], call = call)
      }
    }
    if (!any(open)) return(output)
    if (Sys.time() > deadline) {
      for (p in processes) p$kill()
      gpukeras_abort(
        sprintf("The workers did not finish within %s s; they were stopped.", format(timeout)),
        "gpukeras_error_timeout", call = call
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
    }, error = function(e) conditionMessage(e$parent %||% e))
    if (!is.null(error)) return(sprintf("an error: %s", trimws(error)))
  }
  if (!is.null(status) && status != 0L) return(sprintf("exit status %d", status))
  NULL
}
