# gpu_search(background = TRUE): the search in a background R process, which starts the
# trials' workers as gpu_search() does. The session follows it through the study itself
# (the storage holds the trials done and the best so far), and through the job's folder:
#   args.rds     the gpu_search() call, its arguments checked
#   result.rds   the gpukeras_search, when the search ended
#   error.rds    the error that ended it (class and message)

# `storage` is search_storage()'s: the job reads the study at its URL, and shows it (in its
# print and status) without a password.
search_in_background <- function(args, storage, call = caller_env()) {
  dir <- tempfile("gpukeras-search-job-")
  dir.create(dir)
  args$background <- FALSE
  write_rds_atomic(args, file.path(dir, "args.rds"), "The search's arguments (args.rds)", call = call)
  env <- c(
    callr::rcmd_safe_env(),
    GPUKERAS_PYTHON = reticulate::py_config()$python,
    KERAS_BACKEND = core_call("keras_backend")
  )
  process <- job_process("search_job_run", list(dir), stdout = file.path(dir, "stdout.log"), stderr = file.path(dir, "stderr.log"), env = env)
  job <- new.env(parent = emptyenv())
  job$dir <- dir
  job$process <- process
  job$args <- args
  job$url <- storage$url
  job$shown <- storage$folder %||% core_call("search_safe_url", url = storage$url)
  job$started <- Sys.time()
  structure(job, class = c("gpukeras_search_job", "gpukeras_job"))
}

# In the background process: the search, its result or its error written for the session.
search_job_run <- function(dir) {
  args <- readRDS(file.path(dir, "args.rds"))
  outcome <- tryCatch(
    list(result = do.call(gpu_search, args)),
    error = function(e) list(error = list(class = class(e), message = conditionMessage(e)))
  )
  if (!is.null(outcome$result)) {
    write_rds_atomic(outcome$result, file.path(dir, "result.rds"))
  } else {
    write_rds_atomic(outcome$error, file.path(dir, "error.rds"))
  }
  invisible()
}

# Where the search is: its state, and from the study the trials done and the best so far.
search_job_status <- function(job) {
  if (!is.null(job$final)) {
    return(job$final)
  }
  alive <- job$process$is_alive()
  state <- if (alive) "running" else if (file.exists(file.path(job$dir, "result.rds"))) "done" else "failed"
  progress <- tryCatch(
    core_call("search_progress", storage = job$url, study = job$args$study),
    error = function(e) NULL
  )
  error <- if (state == "failed") read_rds_or_null(file.path(job$dir, "error.rds"))
  structure(
    list(
      state = state, trials = job$args$trials, done = progress$done %||% 0L, running = progress$running %||% 0L,
      best = progress$best, objective = job$args$objective, elapsed = as.numeric(difftime(Sys.time(), job$started, units = "secs")),
      error = error, storage = job$shown
    ),
    class = "gpukeras_search_job_status"
  )
}

search_job_wait <- function(job, timeout) {
  deadline <- Sys.time() + min(timeout, 1e9)
  repeat {
    status <- search_job_status(job)
    if (status$state != "running") break
    if (Sys.time() >= deadline) {
      gpukeras_abort(
        c(sprintf("The search did not end within %s seconds; %d of %d trials are done.", format(timeout), status$done, status$trials),
          "Wait again with gpu_job_wait(job), or stop it with gpu_job_cancel(job) (the study keeps its trials)."),
        "gpukeras_error_job_timeout"
      )
    }
    Sys.sleep(0.2)
  }
  if (status$state == "done") {
    return(readRDS(file.path(job$dir, "result.rds")))
  }
  error <- status$error %||% list(class = "gpukeras_error_job_failed", message = "the search's process ended without a result")
  gpukeras_abort(
    sprintf("The search failed: %s", error$message),
    unique(c(setdiff(error$class, c("gpukeras_error", "rlang_error", "error", "condition")), "gpukeras_error_job_failed"))
  )
}

# Stop the search and its workers; the study keeps every trial, and the same gpu_search()
# call resumes it (the trials it was running are run again).
search_job_cancel <- function(job) {
  status <- search_job_status(job)
  if (status$state == "running") {
    job$process$kill_tree()
    job$process$wait(5000L)
    status <- search_job_status(job)
    status$state <- "cancelled"
    status$error <- NULL
  }
  job$final <- status
  invisible(job)
}

#' @export
format.gpukeras_search_job <- function(x, ...) {
  format(search_job_status(x))
}

#' @export
print.gpukeras_search_job <- function(x, ...) {
  cat("<gpukeras_search_job>", format(x), sep = "\n")
  invisible(x)
}

#' @export
format.gpukeras_search_job_status <- function(x, ...) {
  best <- if (is.null(x$best)) "none yet" else sprintf("trial %d, %s = %.5g", x$best$number, x$objective, x$best$value)
  # the trials a stopped search was running stay "running" in the study until it resumes
  running <- if (!x$running) {
    ""
  } else if (x$state == "running") {
    sprintf(", %d running", x$running)
  } else {
    sprintf(", %d interrupted (run again when the search resumes)", x$running)
  }
  c(
    sprintf("Search %s: %d of %d trials done%s", x$state, x$done, x$trials, running),
    sprintf("Best so far: %s", best),
    if (x$state == "cancelled") sprintf("The study is kept in %s: the same gpu_search() call resumes it.", x$storage %||% "its storage"),
    if (!is.null(x$error)) sprintf("Error: %s", x$error$message)
  )
}

#' @export
print.gpukeras_search_job_status <- function(x, ...) {
  cat(format(x), sep = "\n")
  invisible(x)
}
