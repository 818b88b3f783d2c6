# Every error a user can cause is an rlang error of class
# c(<specific>, "gpukeras_error", "rlang_error", "error", "condition") with a
# message that says what to do, raised in the name of the function the user
# called: each exported function's frame is passed down to its helpers as
# `call` (`error_call` where `...` is forwarded), as rlang's `call =` reads it.
# The message's first line says what is wrong; the lines after it (unnamed
# ones become "i" bullets) say why and what to do.
gpukeras_abort <- function(message, class = NULL, ..., call = caller_env()) {
  rlang::abort(as_bullets(message), class = c(class, "gpukeras_error"), ..., call = call)
}

# The errors of a bad argument and of data that cannot be used as it is, the most common.
abort_bad_argument <- function(message, ..., call = caller_env()) {
  gpukeras_abort(message, "gpukeras_error_bad_argument", ..., call = call)
}

abort_bad_data <- function(message, ..., call = caller_env()) {
  gpukeras_abort(message, "gpukeras_error_bad_data", ..., call = call)
}

gpukeras_warn <- function(message, class = NULL, ...) {
  rlang::warn(as_bullets(message), class = c(class, "gpukeras_warning"), ...)
}

# `message` with its unnamed lines after the first named "i".
as_bullets <- function(message) {
  if (length(message) > 1L) {
    named <- rlang::names2(message)
    named[-1][named[-1] == ""] <- "i"
    names(message) <- named
  }
  message
}
