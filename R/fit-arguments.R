# gpu_fit()'s arguments that need more than a utils-check.R check: the ones it does not
# have (Keras' habits), and the signals it can handle.

# gpu_fit() has `...` only to answer arguments it does not have (Keras' fit() habits, by
# `names`, "" for one given by position) with what to use instead.
abort_unused_fit_args <- function(names, call = caller_env()) {
  instead <- c(
    validation_split = "Split the rows with gpu_dataset(): gpu_fit(model, gpu_dataset(x, y, validation_split = 0.2)) validates on the held-out share every epoch.",
    x = "gpu_fit() takes features and labels together: gpu_fit(model, list(x = x, y = y)).",
    y = "gpu_fit() takes features and labels together: gpu_fit(model, list(x = x, y = y))."
  )
  named <- names[names != ""]
  meant <- lapply(setdiff(named, names(instead)), function(name) {
    closest <- closest_argument(name, setdiff(names(formals(gpu_fit)), "..."))
    if (length(closest)) sprintf("Did you mean `%s` for `%s`?", closest, name)
  })
  gpukeras_abort(
    c(
      if (length(named)) {
        sprintf("gpu_fit() has no argument%s %s.", if (length(named) > 1L) "s" else "", paste0("`", named, "`", collapse = ", "))
      } else {
        sprintf("gpu_fit() takes %d more argument(s) by position than it has.", length(names))
      },
      unlist(meant),
      unname(unique(instead[intersect(named, names(instead))])),
      "?gpu_fit lists its arguments."
    ),
    "gpukeras_error_bad_argument",
    call = call
  )
}

# The argument among `choices` that `name` most likely misspells: the same in
# lower case without dots and underscores (batchSize, batch.size), or one or two
# edits away (class_weights, epoch); character() when none is close.
closest_argument <- function(name, choices) {
  squash <- function(x) gsub("[._]", "", tolower(x))
  same <- choices[squash(choices) == squash(name)]
  if (length(same)) {
    return(same[1])
  }
  distance <- drop(utils::adist(name, choices))
  if (min(distance) <= min(2L, nchar(name) %/% 3L)) choices[which.min(distance)] else character()
}

# The signals gpu_fit() can handle: those schedulers send to stop or warn a job. R alone
# checks them; the core handles the names it is given (train/preempt.py).
handled_signals <- c("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGXCPU")

# `signals` as full upper-case names ("SIGTERM"), each once; character() for NULL.
check_signals <- function(signals, call = caller_env()) {
  if (is.null(signals)) {
    return(character())
  }
  if (!is.character(signals) || anyNA(signals)) {
    gpukeras_abort(
      sprintf("`signals` must be signal names, as c(\"SIGTERM\", \"SIGUSR1\"), or NULL, not %s.", describe(signals)),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
  full <- toupper(signals)
  full <- ifelse(startsWith(full, "SIG"), full, paste0("SIG", full))
  unknown <- signals[!full %in% handled_signals]
  if (length(unknown)) {
    gpukeras_abort(
      c(
        sprintf("`signals`: %s is not a signal gpu_fit() can handle.", paste0("\"", unknown, "\"", collapse = ", ")),
        sprintf("Give any of %s (SIGINT stays R's Ctrl-C; SIGKILL cannot be handled by any process).", paste(handled_signals, collapse = ", "))
      ),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
  unique(full)
}
