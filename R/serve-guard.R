# gpu_serve()'s and gpu_api()'s look at a request's headers, which decides
# before its body is read whether it may go on: its Host and Origin (a web page
# reaching the service by DNS rebinding, or from another site), its token, its
# Content-Type and its size, in a plumber filter (serve_filter()) of gpu_api()'s
# routes and of gpu_serve()'s, which its server (serve-front.R) hands requests to
# whole, within its limits.

# What a request's headers alone decide, before its body is read: NULL when it
# may go on to its route, else the refusal list(status, body). In this order:
# its Host and Origin (a web page's request through DNS rebinding, or from
# another site), its token (`token`: the route needs one), its Content-Type
# (`json`: a POST of JSON), its size.
serve_guard <- function(req, settings, token, json) {
  check_host(req, settings$hosts) %||%
    check_origin(req, settings$hosts) %||%
    (if (token) check_bearer(req, settings$token)) %||%
    (if (json) check_json(req)) %||%
    check_length(req, settings$max_bytes)
}

# A header as text that string functions take: a byte that is not UTF-8 as "?".
request_header <- function(req, field) {
  value <- req[[field]]
  if (!is.null(value)) iconv(value, "UTF-8", "UTF-8", sub = "?")
}

# A refusal as serve_guard() returns it.
refusal <- function(status, code, message) {
  list(status = as.integer(status), body = as_json(serve_problem(code, message)))
}

check_host <- function(req, hosts) {
  given <- request_header(req, "HTTP_HOST")
  # a browser always sends one; a client that sends none names no other host
  if (is.null(given) || host_allowed(host_name(given), hosts)) return(NULL)
  refusal(403L, "forbidden_host", sprintf(paste0(
    "This service answers requests for %s, not for \"%s\": a web page may be reaching it under its own name (DNS ",
    "rebinding). If clients use that name, start the service with allowed_hosts = \"%s\"."
  ), hosts_text(hosts), client_text(given, 60L), client_text(host_name(given), 60L)))
}

check_origin <- function(req, hosts) {
  origin <- request_header(req, "HTTP_ORIGIN")
  if (is.null(origin)) return(NULL)
  site <- regmatches(origin, regexec("^[A-Za-z][A-Za-z0-9+.-]*://([^/?#@]+)$", origin))[[1]]
  if (length(site) == 2L && host_allowed(host_name(site[2]), hosts)) return(NULL)
  refusal(403L, "forbidden_origin", sprintf(
    "This service does not answer web pages of other sites (Origin: \"%s\"); it answers pages of %s.",
    client_text(origin, 60L), hosts_text(hosts)
  ))
}

check_json <- function(req) {
  type <- request_header(req, "HTTP_CONTENT_TYPE") %||% ""
  if (identical(tolower(trimws(sub(";.*", "", type))), "application/json")) return(NULL)
  refusal(415L, "not_json", sprintf(
    "POST /predict takes a JSON body: send the header `Content-Type: application/json`%s.",
    if (nzchar(type)) sprintf(", not \"%s\"", client_text(type, 60L)) else ""
  ))
}

check_length <- function(req, max_bytes) {
  length <- req$CONTENT_LENGTH
  if (is.null(length) || !nzchar(length)) {
    if (is.null(req$HTTP_TRANSFER_ENCODING)) return(NULL)
    return(refusal(
      411L, "length_required", "Send the body with a `Content-Length` header (this service takes no chunked bodies)."
    ))
  }
  bytes <- suppressWarnings(as.numeric(length))
  if (!isTRUE(bytes > max_bytes)) return(NULL)
  refusal(413L, "too_large", too_large_message(max_bytes))
}

# The refusal of a body over `max_bytes`: the same from R and from gpu_serve()'s front,
# which refuses it without R (the client knows what it sent).
too_large_message <- function(max_bytes) {
  sprintf(
    "The body is over %s; this service takes at most that (%.0f bytes, max_bytes) per request: send the rows in parts.",
    format_bytes(max_bytes), max_bytes
  )
}

# NULL when the request may go on (no token asked for, or the right one);
# else the 401 answer.
check_bearer <- function(req, token) {
  if (is.null(token)) return(NULL)
  given <- req$HTTP_AUTHORIZATION %||% ""
  if (same_secret(given, paste("Bearer", token))) return(NULL)
  refusal(
    401L,
    "unauthorized",
    if (nzchar(given)) "The bearer token is wrong." else
      "This service needs a token: send the header `Authorization: Bearer <token>`."
  )
}

# Whether two strings are equal, in a time that depends on their length only.
same_secret <- function(given, expected) {
  a <- utf8ToInt(enc2utf8(given))
  b <- utf8ToInt(enc2utf8(expected))
  if (length(a) != length(b) || anyNA(a)) return(FALSE)
  sum(bitwXor(a, b)) == 0L
}

# The hosts a service answers (what check_host() and check_origin() compare
# with): `names` (localhost, `host` where it is one address, and
# `allowed_hosts`), `any_address` (`host` is every interface: any address of
# the machine names it), `any` (allowed_hosts = "*").
served_hosts <- function(host, allowed_hosts) {
  named <- if (is.null(allowed_hosts)) character() else host_name(allowed_hosts)
  wildcard <- !is.null(host) && host %in% c("0.0.0.0", "::")
  list(
    names = unique(c("localhost", if (!is.null(host) && !wildcard) host_name(host), setdiff(named, "*"))),
    any_address = wildcard, any = "*" %in% named
  )
}

# A Host header's (or an Origin's) host: without its port and the brackets of
# an IPv6 address, in lower case, without a final dot.
host_name <- function(value) {
  value <- tolower(value)
  name <- ifelse(
    grepl("^\\[[^]]*\\](:[0-9]*)?$", value), sub("^\\[([^]]*)\\].*$", "\\1", value), sub(":[0-9]*$", "", value)
  )
  sub("\\.$", "", name)
}

host_allowed <- function(name, hosts) {
  hosts$any || name %in% hosts$names || is_loopback(name) || (hosts$any_address && is_ip_address(name))
}

hosts_text <- function(hosts) {
  sprintf(
    "%s and %s", paste(hosts$names, collapse = ", "),
    if (hosts$any_address) "this machine's addresses" else "loopback addresses"
  )
}

is_ip_address <- function(name) {
  grepl("^[0-9]{1,3}(\\.[0-9]{1,3}){3}$", name) || (grepl(":", name, fixed = TRUE) && grepl("^[0-9a-f:.]+$", name))
}

is_loopback <- function(host) host %in% c("localhost", "::1") || grepl("^127(\\.[0-9]{1,3}){3}$", host)

# The plumber filter that makes serve_guard()'s checks for the service's routes
# (`paths`: POST /predict, GET /metadata and GET /health, in this order, under the
# router's prefix) and forwards every other request untouched, so that it can sit in
# a router of the caller's. /health needs no token; only POST /predict a JSON body.
serve_filter <- function(settings, paths) {
  function(req, res) {
    path <- req$PATH_INFO
    if (!isTRUE(path %in% paths)) return(plumber::forward())
    refused <- serve_guard(
      req, settings,
      token = !identical(path, paths[3]),
      json = identical(path, paths[1]) && identical(req$REQUEST_METHOD, "POST")
    )
    if (is.null(refused)) return(plumber::forward())
    serve_answer(res, refused$status, refused$body)
  }
}
