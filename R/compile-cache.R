#' Compiled programs kept for later sessions (JAX)
#'
#' On the JAX backend, every program XLA compiles for gpukeras (a fit's
#' training step, its evaluation and prediction, a population's) is kept in a
#' folder of the user's cache, readable by that user alone, and loaded from
#' there instead of compiled again: by the session, by its workers
#' ([gpu_cv()], [gpu_search()], `gpu_fit(background = TRUE)`) and by later
#' sessions. A script run again tomorrow compiles nothing it compiled today.
#' TensorFlow keeps no compiled program between processes.
#'
#' `gpu_compile_cache()` says where the cache is, what it holds and, for this
#' session, how many programs were compiled (`misses`) and how many loaded
#' (`hits`); `clear = TRUE` removes what JAX keeps there first.
#'
#' Settings, read as the session's Python starts (set them before, in
#' `.Rprofile` for instance); a session passes them on to its workers:
#' * `options(gpukeras.compile_cache = )`, or the environment variable
#'   `GPUKERAS_COMPILE_CACHE`: `TRUE` (the default: the folder `compiled` in
#'   `tools::R_user_dir("gpukeras", "cache")`), `FALSE` (`"false"`) to keep
#'   nothing, or the path of another folder.
#' * `options(gpukeras.compile_cache_size = )`, or
#'   `GPUKERAS_COMPILE_CACHE_SIZE`: the most bytes it holds (default 2e9);
#'   past it the programs used least recently go first. The bound needs the
#'   Python package filelock, which [install_gpukeras()] installs.
#'
#' A cache you set for JAX yourself (the environment variable
#' `JAX_COMPILATION_CACHE_DIR`) is yours: gpukeras then uses it as you set it,
#' keeps none of its own and clears nothing there.
#'
#' @param clear `TRUE` to remove the programs kept in gpukeras' folder (and
#'   nothing else there) before saying what it holds. Programs this session
#'   loaded stay in its memory.
#' @param ... Not used: an argument gpu_compile_cache() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return An object of class `gpukeras_compile_cache`: a list with `folder`
#'   (`NULL` when none is kept), `whose` (`"gpukeras"`, `"user"` or `"off"`),
#'   `why`, `programs` and `bytes` kept, `max_bytes` (-1: unbounded),
#'   `cleared` (files removed by `clear`), and this session's `jax_started`,
#'   `hits` and `misses`.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   gpu_compile_cache()
#' }
gpu_compile_cache <- function(clear = FALSE, ...) {
  check_unknown_args("gpu_compile_cache")
  check_flag(clear)
  cleared <- 0L
  if (clear) {
    folder <- compile_cache_choice()$folder
    if (!is.null(folder)) cleared <- core_call("compile_cache_clear", folder = folder)$files
  }
  said <- core_call("compile_cache")
  structure(c(said, list(cleared = cleared)), class = "gpukeras_compile_cache")
}

#' @export
format.gpukeras_compile_cache <- function(x, ...) {
  bound <- if (x$max_bytes < 0) "unbounded" else paste("at most", format_bytes(x$max_bytes))
  c(
    if (is.null(x$folder)) {
      sprintf("<gpukeras compile cache> none: %s", x$why)
    } else {
      sprintf(
        "<gpukeras compile cache> %s%s", x$folder,
        if (x$whose == "user") " (yours: JAX_COMPILATION_CACHE_DIR)" else ""
      )
    },
    if (!is.null(x$folder)) sprintf("  %d programs, %s (%s)", x$programs, format_bytes(x$bytes), bound),
    if (x$cleared > 0) sprintf("  cleared: %d files", x$cleared),
    if (isTRUE(x$jax_started)) {
      sprintf("  this session: %d compiled, %d loaded from the cache", x$misses, x$hits)
    } else {
      "  this session: JAX has not started"
    }
  )
}

#' @export
print.gpukeras_compile_cache <- print_formatted

# The cache's folder (NULL: none) and bound in bytes, from the options, else the
# environment (which process_env() sets for a session's workers), else the defaults.
compile_cache_choice <- function(call = caller_env()) {
  setting <- getOption("gpukeras.compile_cache", Sys.getenv("GPUKERAS_COMPILE_CACHE", "true"))
  size <- getOption("gpukeras.compile_cache_size", Sys.getenv("GPUKERAS_COMPILE_CACHE_SIZE", "2e9"))
  if (is.character(setting) && tolower(setting) %in% c("true", "false")) setting <- tolower(setting) == "true"
  if (!rlang::is_bool(setting) && !rlang::is_string(setting)) {
    abort_bad_argument(c(
      "Option `gpukeras.compile_cache` must be TRUE, FALSE or a folder's path.",
      sprintf("It is %s.", describe(setting))
    ), call = call)
  }
  size <- suppressWarnings(as.numeric(size))
  if (length(size) != 1 || is.na(size) || size < 0) {
    abort_bad_argument(c(
      "Option `gpukeras.compile_cache_size` must be a number of bytes, such as 2e9.",
      "Set it with `options(gpukeras.compile_cache_size = 2e9)`."
    ), call = call)
  }
  folder <- if (isTRUE(setting)) file.path(tools::R_user_dir("gpukeras", "cache"), "compiled")
  if (is.character(setting)) folder <- path.expand(setting)
  list(folder = folder, max_bytes = size)
}

# The choice as a worker's environment carries it.
compile_cache_env <- function() {
  choice <- compile_cache_choice()
  c(
    GPUKERAS_COMPILE_CACHE = if (is.null(choice$folder)) "false" else choice$folder,
    GPUKERAS_COMPILE_CACHE_SIZE = format(choice$max_bytes, scientific = FALSE)
  )
}
