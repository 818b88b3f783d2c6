# gpu_search(background = TRUE): the search in a background R process (callr's r_bg),
# which starts the trials' workers as gpu_search() does. The session follows it through
# the study itself (the storage holds the trials done and the best so far); the process
# gives back the gpukeras_search, or the error that ended it, through callr.

# `args` are the gpu_search() call's, checked. `storage` is search_storage()'s: the job
# reads the study at its URL, and shows it (in its print and status) without a password.
# The URL as given, which may hold a password, reaches the process through its
# environment, not with the arguments (a file callr writes).
search_in_background <- function(args, storage, call = caller_env()) {
  args$background <- FALSE
  process <- callr::r_bg(
    process_entry,
    args = list(
      path = getNamespaceInfo("gpukeras", "path"), entry = "search_job_run", args = list(args[names(args) != "storage"])
    ),
    env = c(process_env(), GPUKERAS_SEARCH_STORAGE = args$storage), stdout = NULL, stderr = NULL,
    cleanup_tree = TRUE
  )
  structure(list2env(list(
    process = process, args = args, url = storage$url, started = Sys.time(),
    shown = storage$folder %||% core_call("mask_uri", uri = storage$url)
  ), parent = emptyenv()), class = c("gpukeras_search_job", "gpukeras_job"))
}

# In the background process: the search.
search_job_run <- function(args) do.call(gpu_search, c(args, list(storage = Sys.getenv("GPUKERAS_SEARCH_STORAGE"))))

# What the ended search's process gave back: the gpukeras_search, or the condition that
# ended it (callr's error, whose `parent` is the search's own, when it raised one).
search_job_outcome <- function(job) {
  if (is.null(job$outcome)) job$outcome <- tryCatch(job$process$get_result(), error = identity)
  job$outcome
}

# Where the search is: its state, and from the study the trials done and the best so far.
#' @export
gpu_job_status.gpukeras_search_job <- function(job, ...) {
  if (!is.null(job$final)) return(job$final)
  alive <- job$process$is_alive()
  state <- if (alive) "running" else if (inherits(search_job_outcome(job), "error")) "failed" else "done"
  progress <- tryCatch(core_call("search_progress", storage = job$url, study = job$args$study),
                       error = function(e) NULL)
  structure(list(
    state = state, trials = job$args$trials, done = progress$done %||% 0L, running = progress$running %||% 0L,
    best = progress$best, objective = job$args$objective,
    elapsed = as.numeric(difftime(Sys.time(), job$started, units = "secs")),
    error = if (state == "failed") error_data(job$outcome$parent %||% job$outcome), storage = job$shown
  ), class = "gpukeras_search_job_status")
}

#' @export
gpu_job_wait.gpukeras_search_job <- function(job, timeout = Inf, ...) {
  call <- current_env()
  status <- job_wait_until(job, timeout, function() gpu_job_status(job), every = 0.2)
  if (is.null(status)) return(invisible(job))
  outcome <- search_job_outcome(job)
  if (status$state == "done") return(outcome)
  # the search's own error; none where its process ended without one (a crash)
  error <- outcome$parent
  process_abort(
    if (is.null(error)) "The search failed: the search's process ended without a result." else "The search failed.",
    "gpukeras_error_job_failed", parent = error, call = call
  )
}

# Stop the search and its workers; the study keeps every trial, and the same gpu_search()
# call resumes it (the trials it was running are run again). A trial the search had just
# asked for, not yet marked as its own, is released at once (the core's search_release):
# nothing else would ever end it. A storage that cannot be reached now leaves it to the
# next search, after Optuna's grace period.
#' @export
gpu_job_cancel.gpukeras_search_job <- function(job, ...) {
  status <- gpu_job_status(job)
  if (status$state == "running") {
    job$process$kill_tree()
    job$process$wait(5000L)
    tryCatch(core_call("search_release", storage = job$url, study = job$args$study), error = function(e) NULL)
    status <- gpu_job_status(job)
    status$state <- "cancelled"
    status$error <- NULL
  }
  job$final <- status
  invisible(job)
}

#' @export
format.gpukeras_search_job <- function(x, ...) c("<gpukeras_search_job>", format(gpu_job_status(x)))

#' @export
print.gpukeras_search_job <- print_formatted

#' @export
format.gpukeras_search_job_status <- function(x, ...) unlist(core_call("search_job_status_lines", status = unclass(x)))

#' @export
print.gpukeras_search_job_status <- print_formatted
