# Printing a gpukeras_fit.

#' @export
format.gpukeras_fit <- function(x, n = 5, ...) {
  history <- x$history
  epochs <- nrow(history)
  table <- if (epochs) utils::capture.output(print(utils::tail(history, n), row.names = FALSE, digits = 4)) else
    "(no epochs ran)"
  rate <- x$settings$learning_rate
  # our schedules in their own words (the core writes a number's, and other Keras schedules')
  lines <- fit_lines(
    x$settings, x$monitor, epochs,
    encoding = x$encoding,
    learning_rate = if (is.list(rate) && isTRUE(rate$schedule %in% c("warmup_cosine", "exponential", "cyclical")))
      sub("^<gpukeras lr schedule> ", "", format(structure(rate, class = "gpukeras_lr_schedule")))
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
print.gpukeras_fit <- print_formatted

# A fit's lines as the core writes them (train/fit_report.py): its head, its monitor's
# report and its settings.
fit_lines <- function(settings = NULL, monitor = NULL, epochs = 0L, ...) {
  lines <- core_call("fit_lines", settings = settings, monitor = monitor, epochs = epochs, ..., arrow = arrow())
  lapply(lines, as.character)
}

format_fit_monitor <- function(m) fit_lines(monitor = m)$monitor
