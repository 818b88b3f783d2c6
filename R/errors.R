# Every error a user can cause is an R condition of class
# c(<specific>, "gpukeras_error", "error", "condition") with a message that
# says what to do.
gpukeras_abort <- function(message, class = NULL, ..., call = NULL) {
  condition <- structure(
    class = unique(c(class, "gpukeras_error", "error", "condition")),
    list(message = paste(message, collapse = "\n"), call = call, ...)
  )
  stop(condition)
}

gpukeras_warn <- function(message, class = NULL, ...) {
  condition <- structure(
    class = unique(c(class, "gpukeras_warning", "warning", "condition")),
    list(message = paste(message, collapse = "\n"), call = NULL, ...)
  )
  warning(condition)
}
