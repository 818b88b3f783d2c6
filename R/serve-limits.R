#' The limits of gpu_serve()'s server on connections and their requests
#'
#' `gpu_serve(fit, limits = gpu_serve_limits(...))` sets how long the server
#' waits for what a client sends, how many connections it holds open and how
#' large a request's headers may be; the limits of one request's rows and
#' bytes are [gpu_serve()]'s `max_rows` and `max_bytes` (see its section
#' "Limits"). The defaults suit a service on `127.0.0.1`, alone or behind a
#' proxy. A proxy that keeps its connections to the service open longer than 5
#' seconds (nginx's `keepalive_timeout` in an `upstream` block, say 60 s) wants
#' `keep_alive_seconds` a little longer than its own, so that the service never
#' closes a connection the proxy is about to use; clients that send large
#' bodies over slow links want a longer `body_seconds`; many clients that each
#' hold a connection open, a larger `max_connections`.
#'
#' @param body_seconds Seconds a request's body may take to arrive whole once
#'   its headers have: a slower one gets a `408` and its connection is closed.
#' @param head_seconds Seconds a new connection may take to send its first
#'   request's headers, after which it is closed.
#' @param keep_alive_seconds Seconds an idle connection is kept open for its
#'   next request.
#' @param max_connections Open connections from which a request gets a `503`
#'   (each one held takes the server a socket, nothing more; at most 65,536).
#' @param max_head_bytes The most bytes a request's line and headers may take:
#'   more get a `431`.
#' @param refusal_delay Seconds by which a refused `POST /predict` (a `400`,
#'   or a `413`) is answered late, while other requests are answered: a client
#'   that sends such requests one after another then gets few answers a second.
#'   `0` answers at once.
#' @param ... Nothing: an argument it does not have is an error naming it, with
#'   the one most likely meant.
#' @return A `gpukeras_serve_limits` option object, a list of the checked
#'   values with `format()` and `print()` methods.
#' @seealso [gpu_serve()], which takes it.
#' @export
#' @examples
#' gpu_serve_limits()
#' # behind nginx with `keepalive_timeout 60s;` in its upstream block
#' gpu_serve_limits(keep_alive_seconds = 65, max_connections = 200)
gpu_serve_limits <- function(body_seconds = 30, head_seconds = 10, keep_alive_seconds = 5, max_connections = 1000,
                             max_head_bytes = 65536, refusal_delay = 0.25, ...) {
  check_unknown_args("gpu_serve_limits")
  call <- current_env()
  seconds <- function(x, arg = caller_arg(x)) check_number_decimal(x, min = 0.01, max = 3600, arg = arg, call = call)
  fit_option(list(
    body_seconds = seconds(body_seconds), head_seconds = seconds(head_seconds),
    keep_alive_seconds = seconds(keep_alive_seconds), max_connections = check_whole_number(max_connections, 1, 65536),
    max_head_bytes = check_whole_number(max_head_bytes, 1024, 2^20),
    refusal_delay = check_number_decimal(refusal_delay, min = 0, max = 10)
  ), "serve_limits")
}
