# gpu_fit()'s arguments that need more than a utils-check.R check: the ones it does not
# have (Keras' habits), and the signals it can handle.

# gpu_fit() has `...` only to answer arguments it does not have (Keras' fit() habits, by
# `names`, "" for one given by position) with what to use instead.
abort_unused_fit_args <- function(names, call = caller_env()) {
  instead <- c(
    validation_split = paste0(
      "Split the rows with gpu_dataset(): gpu_fit(model, gpu_dataset(x, y, validation_split = 0.2)) validates on the ",
      "held-out share every epoch."
    ),
    x = "gpu_fit() takes features and labels together: gpu_fit(model, list(x = x, y = y)).",
    y = "gpu_fit() takes features and labels together: gpu_fit(model, list(x = x, y = y))."
  )
  abort_unused_args(names, gpu_fit, "gpu_fit", instead = instead, call = call)
}

# The error for arguments `fn` does not have, which its `...` caught (`names`, "" for one
# given by position): each misspelt one with the argument it most likely means, the
# advice `other` (once) where one is close to none of fn's own, and the advice in
# `instead` for those named there. `topic`: fn's help page.
abort_unused_args <- function(names, fn, topic, label = paste0(topic, "()"), instead = character(), other = NULL,
                              call = caller_env()) {
  named <- names[names != ""]
  own <- setdiff(names(formals(fn)), "...")
  asked <- setdiff(named, names(instead))
  closest <- lapply(asked, function(name) if (length(own)) closest_argument(name, own))
  near <- lengths(closest) > 0L
  abort_bad_argument(c(
    if (length(named)) {
      sprintf(
        "%s has no argument%s %s.", label, if (length(named) > 1L) "s" else "", paste0("`", named, "`", collapse = ", ")
      )
    } else {
      sprintf("%s takes %d more argument(s) by position than it has.", label, length(names))
    },
    sprintf("Did you mean `%s` for `%s`?", unlist(closest), asked[near]),
    if (!all(near)) other,
    unname(unique(instead[intersect(named, names(instead))])),
    sprintf("?%s lists its arguments.", topic)
  ), call = call)
}

# The argument among `choices` that `name` most likely misspells: the same in
# lower case without dots and underscores (batchSize, batch.size), two letters
# swapped (tpye), or one or two edits away (class_weights, epoch); character()
# when none is close.
closest_argument <- function(name, choices) {
  squash <- function(x) gsub("[._]", "", tolower(x))
  same <- choices[squash(choices) == squash(name)]
  if (length(same)) return(same[1])
  swapped <- choices[vapply(choices, swaps_two_letters, logical(1), name)]
  if (length(swapped)) return(swapped[1])
  distance <- drop(utils::adist(name, choices))
  if (min(distance) <= min(2L, nchar(name) %/% 3L)) choices[which.min(distance)] else character()
}

# Whether `a` is `b` with two neighbouring letters swapped.
swaps_two_letters <- function(a, b) {
  x <- strsplit(a, "")[[1]]
  y <- strsplit(b, "")[[1]]
  if (length(x) != length(y)) return(FALSE)
  differ <- which(x != y)
  length(differ) == 2L && differ[2] == differ[1] + 1L && all(x[differ] == rev(y[differ]))
}

# The signals gpu_fit() can handle: those schedulers send to stop or warn a job. R alone
# checks them; the core handles the names it is given (train/preempt.py).
handled_signals <- c("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGXCPU")

# `signals` as full upper-case names ("SIGTERM"), each once; character() for NULL.
check_signals <- function(signals, call = caller_env()) {
  if (is.null(signals)) return(character())
  if (!is.character(signals) || anyNA(signals)) {
    abort_bad_argument(
      sprintf("`signals` must be signal names, as c(\"SIGTERM\", \"SIGUSR1\"), or NULL, not %s.", describe(signals)),
      call = call
    )
  }
  full <- toupper(signals)
  full <- ifelse(startsWith(full, "SIG"), full, paste0("SIG", full))
  unknown <- signals[!full %in% handled_signals]
  if (length(unknown)) {
    abort_bad_argument(c(
      sprintf("`signals`: %s is not a signal gpu_fit() can handle.", paste0("\"", unknown, "\"", collapse = ", ")),
      sprintf(
        "Give any of %s (SIGINT stays R's Ctrl-C; SIGKILL cannot be handled by any process).",
        paste(handled_signals, collapse = ", ")
      )
    ), call = call)
  }
  unique(full)
}

# `ema`: NULL, or a momentum strictly between 0 and 1 (Keras' optimizer EMA), as a double.
check_ema <- function(ema, call = caller_env()) {
  if (is.null(ema)) return(NULL)
  if (!is_number(ema) || ema <= 0 || ema >= 1) {
    abort_bad_argument(c(
      sprintf("`ema` must be NULL or one number between 0 and 1, not %s.", describe(ema)),
      "The momentum of the weights' moving average: 0.999 averages over about the last 1,000 updates."
    ), call = call)
  }
  as.numeric(ema)
}
