# Argument checks shared by the exported functions. Each stops with a
# gpukeras_error_bad_argument (or a more specific class) naming the argument.

# The type checks, in the manner of rlang's standalone type checks (as httr2 uses them):
# one predicate each, one error (`stop_input_type()`), the checked value returned in the
# type the core takes (an integer, a double), and `allow_null` where NULL means "none".
# Messages: "`arg` must be <what>, not <what it is>."
stop_input_type <- function(x, what, arg = caller_arg(x), call = caller_env(), note = "") {
  abort_bad_argument(sprintf("`%s` must be %s, not %s%s.", arg, what, describe(x), note), call = call)
}

describe <- function(x) {
  if (is.null(x)) return("NULL")
  if (length(x) == 1L && is.atomic(x)) return(sprintf("`%s`", format(x)))
  sprintf("a %s of length %d", class(x)[1], length(x))
}

is_number <- function(x) is.numeric(x) && length(x) == 1L && !is.na(x)

# Counts stop at MAX_COUNT: a count beyond a million is a mistake (a batch, a number of
# steps). R's checks need no Python and run before it starts; the core checks its Python
# callers by its own rules (core/arguments.py).
MAX_COUNT_TEXT <- "1e6"
MAX_COUNT <- as.numeric(MAX_COUNT_TEXT)

is_whole_number <- function(x, min = 1, max = MAX_COUNT) is_number(x) && x >= min && x == round(x) && x <= max

over_count <- function(x) {
  if (is.numeric(x) && length(x) == 1L && isTRUE(x > MAX_COUNT)) sprintf(" (at most %s)", MAX_COUNT_TEXT) else ""
}

check_flag <- function(x, arg = caller_arg(x), call = caller_env()) {
  if (!is.logical(x) || length(x) != 1L || is.na(x)) stop_input_type(x, "TRUE or FALSE", arg, call)
  invisible(x)
}

check_positive_number <- function(x, arg = caller_arg(x), allow_null = FALSE, call = caller_env()) {
  if (allow_null && is.null(x)) return(invisible(NULL))
  if (!is_number(x) || !is.finite(x) || x <= 0) stop_input_type(x, "one positive number", arg, call)
  invisible(as.double(x))
}

check_positive_numbers <- function(x, arg = caller_arg(x), call = caller_env()) {
  if (!is.numeric(x) || length(x) == 0L || anyNA(x) || !all(is.finite(x)) || any(x <= 0)) {
    stop_input_type(x, "positive numbers", arg, call)
  }
  invisible(x)
}

# One whole number from `min` to `max` (rlang's check_number_whole()), returned as an
# integer: "`arg` must be one whole number from 0 to 1000, not `1.5`." A bound as wide as
# R's integers, or counts' MAX_COUNT, goes unsaid ("one whole number >= 1", "one finite
# whole number"), and a count above MAX_COUNT says so.
check_whole_number <- function(x, min = 1, max = MAX_COUNT, allow_null = FALSE, arg = caller_arg(x),
                               call = caller_env()) {
  if (allow_null && is.null(x)) return(invisible(NULL))
  if (!is_whole_number(x, min, max)) {
    note <- if (max == MAX_COUNT) over_count(x) else ""
    stop_input_type(x, bounds_text("whole number", min, max), arg, call, note)
  }
  invisible(as.integer(x))
}

# One finite number from `min` to `max` (rlang's check_number_decimal()), as a double.
check_number_decimal <- function(x, min = -Inf, max = Inf, allow_null = FALSE, arg = caller_arg(x),
                                 call = caller_env()) {
  if (allow_null && is.null(x)) return(invisible(NULL))
  if (!is_number(x) || !is.finite(x) || x < min ||
      x > max) stop_input_type(x, bounds_text("number", min, max), arg, call)
  invisible(as.double(x))
}

# One number in `interval`, whose ends are open or closed as it is written ("[0, 1)"), as a
# double: "`arg` must be one number in [0, 1)<what>, not `1`."
check_number_in <- function(x, interval, what = "", arg = caller_arg(x), call = caller_env()) {
  ends <- as.numeric(strsplit(gsub("[][()]", "", interval), ",", fixed = TRUE)[[1]])
  inside <- is_number(x) && (if (startsWith(interval, "[")) x >= ends[1] else x > ends[1]) &&
    (if (endsWith(interval, "]")) x <= ends[2] else x < ends[2])
  if (!inside) stop_input_type(x, paste0("one number in ", interval, what), arg, call)
  invisible(as.double(x))
}

# "one <kind> from <min> to <max>", leaving out a bound that is not one (no caller has an
# upper bound alone).
bounds_text <- function(kind, min, max) {
  widest <- .Machine$integer.max
  if (min <= -widest) return(sprintf("one finite %s", kind))
  if (max >= widest || max == MAX_COUNT) return(sprintf("one %s >= %s", kind, format(min)))
  sprintf("one %s from %s to %s", kind, format(min), format(max))
}

check_string <- function(x, arg = caller_arg(x), call = caller_env()) {
  if (!is.character(x) || length(x) != 1L || is.na(x) || !nzchar(x)) {
    stop_input_type(x, "one non-empty string", arg, call)
  }
  invisible(x)
}

# A count: one whole number from 1 to MAX_COUNT (callers name every other argument).
check_count <- check_whole_number

check_choice <- function(x, choices, arg = caller_arg(x), call = caller_env()) {
  if (!is.character(x) || length(x) != 1L || is.na(x) || !x %in% choices) {
    stop_input_type(x, sprintf("one of %s", paste0("\"", choices, "\"", collapse = ", ")), arg, call)
  }
  x
}

# A whole number >= `min`, or the word `auto` that stands for the default (or NULL).
check_auto_count <- function(x, arg = caller_arg(x), auto = "auto", min = 1, allow_null = FALSE, call = caller_env()) {
  if (identical(x, auto) || (allow_null && is.null(x))) return(x)
  if (!is_whole_number(x, min)) {
    what <- if (allow_null) "\"%s\", one whole number >= %d or NULL" else "\"%s\" or one whole number >= %d"
    stop_input_type(x, sprintf(what, auto, min), arg, call, over_count(x))
  }
  as.integer(x)
}

check_auto_flag <- function(x, arg = caller_arg(x), call = caller_env()) {
  if (identical(x, "auto") || (is.logical(x) && length(x) == 1L && !is.na(x))) return(x)
  stop_input_type(x, "TRUE, FALSE or \"auto\"", arg, call)
}

check_learning_rate <- function(learning_rate, call = caller_env()) {
  if (is.null(learning_rate) || inherits(learning_rate, "python.builtin.object")) return(learning_rate)
  if (inherits(learning_rate, "gpukeras_lr_schedule")) return(unclass(learning_rate))
  if (!is_number(learning_rate) || !is.finite(learning_rate) || learning_rate <= 0) {
    abort_bad_argument(c(
      sprintf("`learning_rate` must be one positive number or a schedule, not %s.", describe(learning_rate)),
      "Schedules: lr_warmup_cosine(), lr_exponential(), lr_cyclical()."
    ), call = call)
  }
  as.double(learning_rate)
}

check_callbacks <- function(callbacks, call = caller_env()) {
  if (is.null(callbacks)) return(NULL)
  if (inherits(callbacks, "python.builtin.object")) callbacks <- list(callbacks)
  if (!is.list(callbacks) || length(callbacks) == 0L ||
    !all(vapply(callbacks, inherits, logical(1), "python.builtin.object"))) {
    abort_bad_argument(c(
      sprintf("`callbacks` must be a Keras callback or a list of them (Python objects), not %s.", describe(callbacks)),
      "R functions cannot be callbacks: Keras may call them from a worker thread, where R must not run."
    ), call = call)
  }
  unname(callbacks)
}

check_seed <- function(seed, call = caller_env()) {
  if (is.null(seed)) return(NULL)
  check_whole_number(seed, min = 0, max = .Machine$integer.max, call = call)
}

# "auto" is a progress bar where someone watches (an interactive session) and
# one line per epoch in logs.
resolve_verbose <- function(verbose, call = caller_env()) {
  if (identical(verbose, "auto")) return(if (interactive()) 1L else 2L)
  if (!is_number(verbose) || !verbose %in% 0:2) stop_input_type(verbose, "\"auto\", 0, 1 or 2", "verbose", call)
  as.integer(verbose)
}

# The first line of each exported function whose `...` is there only to catch
# the arguments it does not have (a misspelt one, one past its last given by
# position): abort_unused_args()'s error, with the argument most likely meant,
# before anything can start Python. `fn`: the function's name; `topic`: its
# help page; `other`: advice for a named argument close to none of its own
# (a function with none says so). Reads the names of the dots in `call`, the
# function's frame, without evaluating them.
check_unknown_args <- function(fn, topic = fn, other = NULL, call = caller_env()) {
  dots <- as.list(substitute(list(...), call))[-1L]
  if (!length(dots)) return(invisible())
  fun <- get(fn, envir = topenv(), mode = "function")
  if (!length(setdiff(names(formals(fun)), "..."))) other <- sprintf("%s() takes no arguments.", fn)
  abort_unused_args(rlang::names2(dots), fun, topic, label = paste0(fn, "()"), other = other, call = call)
}

# `x` as a trained model with its encoding: a gpu_fit() result or a gpu_load() model
# (gpu_export(), gpu_serve()); `hint` says what to do with anything else.
check_trained_model <- function(x, hint, arg = caller_arg(x), call = caller_env()) {
  if (!inherits(x, c("gpukeras_fit", "gpukeras_model"))) {
    abort_bad_argument(
      c(sprintf("`%s` must be a gpu_fit() result or a gpu_load() model, not %s.", arg, describe(x)), hint),
      call = call
    )
  }
  invisible(x)
}
