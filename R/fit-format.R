# Printing a gpukeras_fit.

#' @export
format.gpukeras_fit <- function(x, n = 5, ...) {
  history <- x$history
  epochs <- nrow(history)
  table <- if (epochs) utils::capture.output(print(utils::tail(history, n), row.names = FALSE, digits = 4)) else
    "(no epochs ran)"
  rate <- x$settings$learning_rate
  lines <- fit_lines(
    x$settings, x$monitor, epochs,
    encoding = if (!is.null(x$encoding)) encoding_to_plain(x$encoding),
    learning_rate = if (!is.null(rate)) format_learning_rate(rate)
  )
  c(
    lines$head,
    if (epochs > n) sprintf("History (last %d of %d epochs):", n, epochs) else "History:",
    paste0("  ", table),
    lines$monitor,
    lines$settings
  )
}

#' @export
print.gpukeras_fit <- function(x, ...) print_formatted(x, ...)

# A fit's lines as the core writes them (train/fit_report.py): its head, its monitor's
# report and its settings.
fit_lines <- function(settings = NULL, monitor = NULL, epochs = 0L, ...) {
  lines <- core_call("fit_lines", settings = settings, monitor = monitor, epochs = epochs, ..., arrow = arrow())
  lapply(lines, as.character)
}

format_fit_monitor <- function(m) fit_lines(monitor = m)$monitor

# A learning rate as the core reports it: a number, one of our schedule specs,
# or another Keras schedule (its class name and config).
format_learning_rate <- function(rate) {
  if (is.numeric(rate)) return(sprintf("%s (constant)", format_rate(rate)))
  if (is.list(rate) && isTRUE(rate$schedule %in% c("warmup_cosine", "exponential", "cyclical"))) {
    return(sub("^<gpukeras lr schedule> ", "", format(structure(rate, class = "gpukeras_lr_schedule"))))
  }
  if (is.list(rate) && !is.null(rate$schedule)) {
    details <- rate[names(rate) != "schedule" & vapply(rate, function(v) is.atomic(v) && length(v) == 1L, logical(1))]
    return(sprintf(
      "%s(%s)", rate$schedule,
      paste(names(details), vapply(details, format, character(1)), sep = " = ", collapse = ", ")
    ))
  }
  describe(rate)
}
