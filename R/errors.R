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

check_flag <- function(x, arg = deparse(substitute(x))) {
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    gpukeras_abort(
      sprintf("`%s` must be TRUE or FALSE, not %s.", arg, describe(x)),
      "gpukeras_error_bad_argument"
    )
  }
  invisible(x)
}

check_positive_number <- function(x, arg = deparse(substitute(x))) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || !is.finite(x) || x <= 0) {
    gpukeras_abort(
      sprintf("`%s` must be one positive number, not %s.", arg, describe(x)),
      "gpukeras_error_bad_argument"
    )
  }
  invisible(x)
}

check_string <- function(x, arg = deparse(substitute(x))) {
  if (!is.character(x) || length(x) != 1L || is.na(x) || !nzchar(x)) {
    gpukeras_abort(
      sprintf("`%s` must be one non-empty string, not %s.", arg, describe(x)),
      "gpukeras_error_bad_argument"
    )
  }
  invisible(x)
}

describe <- function(x) {
  if (is.null(x)) return("NULL")
  if (length(x) == 1L && is.atomic(x)) return(sprintf("`%s`", format(x)))
  sprintf("a %s of length %d", class(x)[1], length(x))
}

gpukeras_warn <- function(message, class = NULL, ...) {
  condition <- structure(
    class = unique(c(class, "gpukeras_warning", "warning", "condition")),
    list(message = paste(message, collapse = "\n"), call = NULL, ...)
  )
  warning(condition)
}

check_positive_numbers <- function(x, arg = deparse(substitute(x))) {
  if (!is.numeric(x) || length(x) == 0L || anyNA(x) || !all(is.finite(x)) || any(x <= 0)) {
    gpukeras_abort(
      sprintf("`%s` must be positive numbers, not %s.", arg, describe(x)),
      "gpukeras_error_bad_argument"
    )
  }
  invisible(x)
}

check_count <- function(x, arg = deparse(substitute(x))) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || x < 1 || x != round(x) || x > 1e6) {
    gpukeras_abort(
      sprintf("`%s` must be one whole number >= 1, not %s.", arg, describe(x)),
      "gpukeras_error_bad_argument"
    )
  }
  invisible(x)
}

check_choice <- function(x, choices, arg = deparse(substitute(x))) {
  if (!is.character(x) || length(x) != 1L || is.na(x) || !x %in% choices) {
    gpukeras_abort(
      sprintf(
        "`%s` must be one of %s, not %s.", arg,
        paste0("\"", choices, "\"", collapse = ", "), describe(x)
      ),
      "gpukeras_error_bad_argument"
    )
  }
  x
}
