# Every error a user can cause is an R condition of class
# c(<specific>, "gpukeras_error", "error", "condition") with a message that
# says what to do, raised in the name of the function the user called.
gpukeras_abort <- function(message, class = NULL, ..., call = user_call()) {
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

# The call of the exported gpukeras function the user called: the outermost
# one on the stack, so that an error raised in a helper (an argument check,
# the Python core) reads "Error in gpu_fit(model, x) :", as rlang's `call =`
# does. Made by do.call(), a call holds the argument values, which would all
# be printed: then it is the function's name alone. NULL when no exported
# function is on the stack (an internal function called directly).
user_call <- function() {
  namespace <- topenv(environment(user_call))
  exports <- getNamespaceExports(namespace)
  calls <- sys.calls()
  for (i in seq_along(calls)) {
    fn <- sys.function(i)
    if (!identical(environment(fn), namespace)) next
    name <- exported_name(fn, calls[[i]][[1]], exports, namespace)
    if (is.null(name)) next
    written <- is.name(calls[[i]][[1]]) || is.call(calls[[i]][[1]])
    arguments <- as.list(calls[[i]])[-1]
    literal <- vapply(arguments, function(arg) is.language(arg) || (is.atomic(arg) && length(arg) <= 1L), logical(1))
    return(if (written && all(literal)) calls[[i]] else call(name))
  }
  NULL
}

# The name `fn` is exported under (first trying the name it was called by), or NULL.
exported_name <- function(fn, head, exports, namespace) {
  if (is.call(head) && identical(head[[1]], as.name("::"))) head <- head[[3]]
  if (is.name(head) && as.character(head) %in% exports &&
    identical(get0(as.character(head), namespace, inherits = FALSE), fn)) {
    return(as.character(head))
  }
  for (name in exports) {
    if (identical(get0(name, namespace, inherits = FALSE), fn)) return(name)
  }
  NULL
}
