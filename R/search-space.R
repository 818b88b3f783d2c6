#' A search space for gpu_search()
#'
#' Each function describes the values one hyperparameter may take; a named
#' list of them is [gpu_search()]'s `space`. Optuna's sampler draws each
#' trial's values from them.
#'
#' * `search_int(lower, upper)`: a whole number from `lower` to `upper`
#'   (both included); `log = TRUE` draws on a log scale (for sizes such as
#'   units, from 16 to 256, where 16 to 32 matters as much as 128 to 256).
#' * `search_float(lower, upper)`: a number in that range; `log = TRUE` for
#'   rates (a learning rate from 1e-4 to 1e-1).
#' * `search_choice(...)`: one of the values given (strings, numbers or
#'   `TRUE`/`FALSE`), e.g. `search_choice("adam", "sgd")`.
#'
#' A space that cannot be searched (a lower bound above the upper, a log scale
#' with a bound at or below 0, a choice of nothing, a value that is not one
#' number) is a `gpukeras_error_bad_argument` error at once, before any
#' process starts.
#'
#' @param lower,upper The range's bounds (included).
#' @param log Draw on a log scale: the bounds must then be above 0.
#' @param ... The values to choose from: each one string, number or logical.
#' @return An object of class `gpukeras_search_param`.
#' @seealso [gpu_search()]
#' @export
#' @examples
#' space <- list(
#'   units = search_int(16, 256, log = TRUE),
#'   dropout = search_float(0, 0.5),
#'   optimizer = search_choice("adam", "sgd")
#' )
#' space
search_int <- function(lower, upper, log = FALSE) search_range("int", lower, upper, log, current_env())

#' @rdname search_int
#' @export
search_float <- function(lower, upper, log = FALSE) search_range("float", lower, upper, log, current_env())

#' @rdname search_int
#' @export
search_choice <- function(...) {
  choices <- list(...)
  if (!length(choices)) {
    abort_bad_argument(c(
      "search_choice() needs at least one value to choose from.", "Give the values: search_choice(\"adam\", \"sgd\")."
    ))
  }
  for (i in seq_along(choices)) {
    value <- choices[[i]]
    if (!(is.character(value) || is.numeric(value) || is.logical(value)) || length(value) != 1L || is.na(value)) {
      abort_bad_argument(c(
        sprintf("Each value of search_choice() must be one string, number or TRUE/FALSE; value %d is %s.", i,
                describe(value)),
        "For a vector of values, spread it: do.call(search_choice, as.list(values))."
      ))
    }
  }
  if (anyDuplicated(choices)) {
    abort_bad_argument(
      sprintf("search_choice() was given %s twice: give each value once.", format(choices[[anyDuplicated(choices)]]))
    )
  }
  new_search_param(list(type = "choice", choices = choices, log = FALSE))
}

new_search_param <- function(spec) structure(spec, class = "gpukeras_search_param")

# search_int()'s and search_float()'s range: the bounds checked (whole numbers for "int").
search_range <- function(type, lower, upper, log, call) {
  widest <- .Machine$integer.max
  for (arg in c("lower", "upper")) {
    if (type == "int") check_whole_number(get(arg), -widest, widest, arg = arg, call = call) else
      check_number_decimal(get(arg), arg = arg, call = call)
  }
  check_flag(log, call = call)
  if (lower > upper) {
    abort_bad_argument(sprintf("`lower` (%s) is above `upper` (%s): give the range from its low end to its high end.",
                               format(lower), format(upper)), call = call)
  }
  if (log && lower <= 0) {
    abort_bad_argument(c(
      sprintf("A log scale needs bounds above 0, and `lower` is %s.", format(lower)),
      "Raise `lower` (e.g. 1e-5 for a rate), or use log = FALSE."
    ), call = call)
  }
  as_type <- if (type == "int") as.integer else as.numeric
  new_search_param(list(type = type, lower = as_type(lower), upper = as_type(upper), log = log))
}

#' @export
format.gpukeras_search_param <- function(x, ...) {
  core_call("search_param_line", spec = space_to_plain(list(x))[[1]]) # search/search_request.py spec_line()
}

#' @export
print.gpukeras_search_param <- function(x, ...) {
  cat("<gpukeras_search_param>", format(x), "\n")
  invisible(x)
}

# `space` checked: a named list of search_*() values, names unique and not empty.
check_space <- function(space, call = caller_env()) {
  usage <- "Give `space` as a named list: list(units = search_int(16, 256), dropout = search_float(0, 0.5))."
  if (!is.list(space) || inherits(space, "gpukeras_search_param")) {
    abort_bad_argument(c(
      sprintf("`space` must be a named list of search_int(), search_float() or search_choice() values, not %s.",
              describe(space)),
      usage
    ), call = call)
  }
  names <- rlang::names2(space)
  if (any(names == "") || anyDuplicated(names)) {
    abort_bad_argument(
      c("Every element of `space` needs a name of its own: the parameter model_fn(params) reads.", usage), call = call
    )
  }
  bad <- !vapply(space, inherits, logical(1), "gpukeras_search_param")
  if (any(bad)) {
    abort_bad_argument(c(
      sprintf("`space$%s` is %s, not a search_int(), search_float() or search_choice() value.",
              names[bad][1], describe(space[bad][[1]])),
      "A fixed value belongs in model_fn itself, or as a choice of one: search_choice(value)."
    ), call = call)
  }
  space
}

# The space as the core takes it (a dict of plain specs).
space_to_plain <- function(space) {
  lapply(space, function(param) {
    spec <- unclass(param)
    if (spec$type == "choice") spec$choices <- unname(spec$choices)
    spec
  })
}

# The names `model_fn` reads from its parameters: each `params$name` and `params[["name"]]`
# in its body; NULL where it uses `params` otherwise (passes it on, indexes it by a
# variable, assigns it), so what it reads cannot be known.
params_read <- function(model_fn) {
  arg <- names(formals(model_fn))[1]
  if (is.null(arg) || arg == "...") return(NULL)
  read <- character()
  known <- TRUE
  walk <- function(expr) {
    if (is.symbol(expr)) {
      if (identical(expr, as.symbol(arg))) known <<- FALSE
    } else if (is.call(expr)) {
      what <- if (length(expr) == 3L && identical(expr[[2]], as.symbol(arg))) expr[[3]]
      if ((identical(expr[[1]], quote(`$`)) && is.symbol(what)) ||
            (identical(expr[[1]], quote(`[[`)) && is.character(what) && length(what) == 1L)) {
        read <<- c(read, as.character(what))
      } else {
        parts <- as.list(expr)
        for (i in seq_along(parts)) if (!identical(parts[[i]], rlang::missing_arg())) walk(parts[[i]])
      }
    }
  }
  walk(body(model_fn))
  if (known) unique(read)
}

# Every name of `space` read by `model_fn` (the only function its values go to), where
# what it reads is known (params_read()): another is refused, with the name it most likely
# misspells, or, for one of gpu_fit()'s arguments, where gpu_search() searches those.
check_space_read <- function(space, model_fn, call = caller_env()) {
  read <- params_read(model_fn)
  unread <- setdiff(names(space), read)
  if (is.null(read) || !length(unread)) return(invisible())
  name <- unread[1]
  fit_args <- setdiff(names(formals(gpu_fit)), "...")
  said <- if (length(read)) paste0("`params$", read, "`", collapse = ", ") else "none of them"
  if (name %in% fit_args) {
    abort_bad_argument(c(
      sprintf("`space$%s` goes to model_fn, which never reads it (it reads %s).", name, said),
      "i" = sprintf("`%s` is gpu_fit()'s argument: search it in `...` (gpu_search(..., %s = search_*())).", name, name)
    ), call = call)
  }
  closest <- closest_argument(name, c(setdiff(read, names(space)), fit_args))
  abort_bad_argument(c(
    sprintf("`space$%s` is a name that model_fn never reads (it reads %s) and gpu_fit() does not take.", name, said),
    "i" = if (length(closest)) sprintf("Did you mean `%s`?", closest),
    "i" = "Each name of `space` is a parameter model_fn(params) reads; gpu_fit()'s are searched in `...`."
  ), call = call)
}
