# gpu_serve()'s and gpu_api()'s argument checks, before anything listens or Python starts.

# The token's value is never shown, even where it is not a string.
check_token <- function(token, call) {
  if (is.null(token)) return(invisible())
  if (!is.character(token) || length(token) != 1L || is.na(token) || !grepl("^[[:graph:]]+$", token)) {
    given <- if (is.character(token) && length(token) == 1L) {
      "a string with spaces or control characters"
    } else {
      sprintf("a %s of length %d", class(token)[1], length(token))
    }
    abort_bad_argument(c(
      sprintf("`token` must be NULL or one non-empty string without spaces, not %s.", given),
      "Clients send it as the header `Authorization: Bearer <token>`."
    ), call = call)
  }
}

check_max_bytes <- function(max_bytes, call) {
  if (!is.null(max_bytes) && !is_whole_number(max_bytes, max = Inf)) {
    stop_input_type(max_bytes, "NULL or one whole number of bytes >= 1", "max_bytes", call)
  }
}

check_allowed_hosts <- function(allowed_hosts, call) {
  if (is.null(allowed_hosts)) return(invisible())
  if (!is.character(allowed_hosts) || !length(allowed_hosts) || anyNA(allowed_hosts) ||
    !all(grepl("^[^[:space:]/@]+$", allowed_hosts))) {
    abort_bad_argument(c(
      sprintf(
        "`allowed_hosts` must be NULL or host names (no scheme, path or spaces), not %s.",
        describe(allowed_hosts)
      ),
      paste(
        "Name the hosts clients reach the service by, as their Host header gives them:",
        "e.g. allowed_hosts = \"scoring.example.org\"."
      )
    ), call = call)
  }
}

# A package from Suggests that a function needs: a classed error saying how to
# install it when it is not.
check_suggested <- function(package, what, call = caller_env()) {
  if (requireNamespace(package, quietly = TRUE)) return(invisible(TRUE))
  gpukeras_abort(c(
    sprintf("%s needs the R package %s, which is not installed.", what, package),
    sprintf(
      "Install it: install.packages(\"%s\") (Debian and Ubuntu: apt install r-cran-%s).",
      package, tolower(package)
    )
  ), "gpukeras_error_package_missing", package = package, call = call)
}

# gpu_api()'s `prefix`: "" (the routes at /predict, /metadata, /health) or a path
# that begins with "/" and does not end with one.
check_prefix <- function(prefix, call) {
  if (!is.character(prefix) || length(prefix) != 1L || is.na(prefix) || !grepl("^(/[A-Za-z0-9._~-]+)*$", prefix)) {
    wanted <- "\"\" or a path such as \"/model\" (segments of letters, digits, '.', '_', '~' and '-', no final '/')"
    stop_input_type(prefix, wanted, "prefix", call)
  }
}
