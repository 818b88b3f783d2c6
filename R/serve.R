#' Serve a trained model's predictions over HTTP
#'
#' `gpu_serve()` runs a local HTTP service that scores JSON with the model of
#' a [gpu_fit()] result or a [gpu_load()] model, through [predict()] itself:
#' the answers are `predict(fit, newdata)`'s, new data encoded as the training
#' data was. It blocks the R session until it is stopped (Ctrl-C, or the
#' process killed), so run it in a process of its own, e.g.
#' `Rscript -e 'gpukeras::gpu_serve(gpukeras::gpu_load("model.keras"))'`.
#' `gpu_api()` returns the same service as a [plumber][plumber::pr] router,
#' to run with [plumber::pr_run()], or adds its routes to a router of one's
#' own (`router`, under `prefix`), beside one's own routes; it can also be
#' mounted ([plumber::pr_mount()]). Its checks of a request's headers (see
#' "Security") are a plumber filter, which lets every other route's requests
#' by; the OpenAPI description of `POST /predict` (plumber's `/openapi.json`)
#' gives the model's columns with their types and levels. Both need the
#' plumber package (Debian: `r-cran-plumber`).
#'
#' @section Routes:
#' \describe{
#'   \item{`POST /predict`}{The body is JSON in one of three forms: records,
#'     `[{"income": 52000, "region": "west"}, ...]`; columns, `{"income":
#'     [52000, 61000], "region": ["west", "east"]}` (one record `{"income":
#'     52000, "region": "west"}` is one row); or rows as arrays of numbers,
#'     `[[5.1, 3.5], [4.9, 3.0]]`, for a model trained on a matrix or array
#'     (one trained on a matrix with column names also takes its columns by
#'     name). Every training column is needed (by name; others are ignored):
#'     numbers for numeric columns, `true`/`false` (or numbers) for logical
#'     ones, strings (or numbers) for factor and character ones, whose values
#'     must be training levels. `null` is NA. The query `?type=class` asks for
#'     classes instead of the model's outputs (see [predict()]'s `type`).
#'     The answer: see "Answers".}
#'   \item{`GET /metadata`}{The inputs (each column with its type, and levels
#'     for factors), the outputs (shapes, and the classes), the NA rule,
#'     `max_rows`, and the versions of gpukeras, R, plumber, Python, Keras
#'     and the backend.}
#'   \item{`GET /health`}{`{"status": "ok"}`, without a token: for a load
#'     balancer or a supervisor to poll.}
#' }
#'
#' @section Answers:
#' `POST /predict` answers `{"predictions": ...}`, one entry per row: for
#' `type = "raw"`, records named by the training labels' levels for a
#' classifier with one output per class (`[{"high": 0.91, "low": 0.09},
#' ...]`), numbers for a model with one output column, arrays of numbers per
#' row otherwise (an object of these by output name for a model with several
#' outputs); for `type = "class"`, the classes as strings (0-based integer
#' codes when the labels were numbers). NA (rows dropped by the training NA
#' rule `"drop"`) is `null`. Numbers carry 15 significant digits. Where
#' [predict()] warns (an image model's pixels outside the range it was trained
#' on: 0-255 for one trained on `rescale = 1 / 255`), the answer has
#' `"warnings"` too, an array of its messages.
#'
#' @section Bad requests:
#' A request the service cannot score gets a 4xx status and a JSON body
#' `{"error": <code>, "message": <what is wrong and what to send instead>}`,
#' with the column and its values where there are: `400` for
#' `"malformed_json"`, `"bad_body"` (JSON of another form), `"no_rows"`,
#' `"missing_column"` (`columns` names them), `"wrong_type"` (`column`),
#' `"unseen_level"` (`column`, `levels`), `"missing_value"` (`column`, the
#' first column with NA, and `rows`, the first 100 rows with one, 1-based)
#' and `"bad_data"` (numbers the model cannot take: `Inf`, `NaN`,
#' beyond float32's range of about 3.4e38, or rows of the wrong width or
#' shape, naming the column where there is one; and any other refusal of
#' [predict()]), or `"bad_type"` (the query's `type`); `401` `"unauthorized"`
#' for a missing or wrong token; `403` `"forbidden_host"` and
#' `"forbidden_origin"` (see "Security"); `404` `"not_found"`; `411`
#' `"length_required"` for a chunked body to [gpu_api()]'s routes
#' (`gpu_serve()` takes one within `max_bytes`); `413`
#' `"too_large"` above `max_bytes` and `"too_many_rows"` above `max_rows`;
#' `415` `"not_json"` for a `POST` whose `Content-Type` is not
#' `application/json`; from `gpu_serve()`'s server (see "Limits"), `400`
#' `"bad_request"` (a request that is not valid HTTP/1.1), `408`
#' `"request_timeout"`, `431` `"headers_too_large"`, `503` (too many
#' connections) and `503` `"unavailable"` (the service is ending). A failure of
#' the model itself is a `500` `"prediction_failed"`. The service goes on
#' serving after each. Answers echo little of what the client sent: at most a
#' few of its values, each cut to 40 characters, as valid UTF-8.
#'
#' @section Limits:
#' The port `gpu_serve()` listens on is a Python process of its own, started
#' with the service and ended with it: an HTTP/1.1 server on uvicorn (with
#' h11) and Starlette, which reads every request and hands each one it takes,
#' whole, to R on a Unix socket only this user can open. No HTTP is parsed by
#' gpukeras itself. The server enforces, before R sees a request:
#' \itemize{
#'   \item a body larger than `max_bytes` is refused from its
#'     `Content-Length`, at once and unread, whatever else the request says (a
#'     `413` before any other check, the connection closed); a chunked body
#'     once it passes `max_bytes`;
#'   \item a body must arrive whole within 30 seconds of its headers (else a
#'     `408`, the connection closed), and the headers of a connection's first
#'     request within 10 seconds (else the connection is closed); an idle
#'     connection is kept alive 5 seconds;
#'   \item headers over 64 KiB get a `431`; from 1,000 open connections a
#'     request gets a `503`;
#'   \item malformed framing (two `Content-Length`s, a signed one, a
#'     `Transfer-Encoding` beside one) gets a `400`; `Upgrade` is never
#'     honoured (the request is answered as HTTP).
#' }
#' So connections that hold an unfinished body cost the server a socket
#' each and R nothing: `/health` answers meanwhile. Connections are kept
#' alive, and requests sent on one without waiting (pipelined) are answered
#' in order. R then decides from the headers (host, origin, token,
#' `Content-Type`) and the body. By default `max_bytes` is what `max_rows` rows
#' of the model's columns take as JSON records, twice over (room for spaces and
#' ignored fields), and at least 64 KiB; `/metadata` says it. A body that
#' passes is parsed into JSON values and its rows counted before any table is
#' made, and only the model's columns are taken from it, so a request costs
#' time in proportion to its bytes, whatever its keys. A `POST /predict` whose
#' body R refuses (a `400` or `413` after its body was read) gets its answer a
#' quarter of a second later, from the server, while R answers other requests:
#' a client that sends such bodies one after another then gets at most four
#' answers a second. ([gpu_api()]'s routes, in a server of the caller's, make
#' R's checks alone: there httpuv holds what a client sends until R gets to
#' its headers; where clients across a network can reach it, a proxy in front
#' that limits bodies spares that.)
#'
#' For a public address, put a reverse proxy that speaks HTTPS (nginx,
#' Caddy) in front of a service on `127.0.0.1`, and name the host clients use
#' in `allowed_hosts` (the proxy forwards their `Host`); e.g. with Caddy,
#' `scoring.example.org { reverse_proxy 127.0.0.1:8000 }`, and with nginx a
#' `location / { proxy_pass http://127.0.0.1:8000; proxy_set_header Host
#' $host; }` in the site's `server` block.
#'
#' @section Security:
#' The service binds the loopback interface (`127.0.0.1`) by default: only
#' this machine reaches it. Another `host` (`"0.0.0.0"`: every interface)
#' opens it to the network; then give a `token`, or a
#' `gpukeras_warning_serve_open` warning says that anyone who can reach the
#' port can use it. With a `token`, `POST /predict` and `GET /metadata` need
#' the header `Authorization: Bearer <token>` (compared in a time that does
#' not depend on where a wrong one differs);
#' other requests get a 401. The token is taken only from this argument
#' (e.g. `token = Sys.getenv("MY_TOKEN")`, written by the user), never read
#' from the environment by gpukeras. HTTP is not encrypted: across a network,
#' put the service behind a proxy that speaks HTTPS.
#'
#' A web page cannot use the service from a browser: requests whose `Host`
#' header names another host than `localhost`, a loopback address, the
#' address the service listens on (any address of the machine for
#' `"0.0.0.0"`) or one of `allowed_hosts` get a `403` (a page that renamed
#' its own host to `127.0.0.1`, by DNS rebinding, sends its own name);
#' so do requests whose `Origin` header, which browsers send, names such a
#' host; and `POST /predict` takes only `Content-Type: application/json`,
#' which a page cannot send to another site without the service's consent
#' (it gives none). Behind a proxy that forwards the client's `Host`, name
#' that host in `allowed_hosts`.
#'
#' `gpu_api()`'s router makes the same checks in a filter, after the server
#' that runs it has read the body: where it runs other than by `gpu_serve()`,
#' set `plumber::options_plumber(maxRequestSize = )` so that plumber refuses
#' large bodies unread. It describes `POST /predict` with
#' [plumber::pr_set_api_spec()], which replaces a description function given
#' to `router` before: give one's own after `gpu_api()`, building on the
#' `spec` it is given.
#'
#' @param fit A [gpu_fit()] result or a [gpu_load()] model (a model with one
#'   input: a data.frame, matrix or array).
#' @param port The TCP port to listen on.
#' @param host The address to listen on: `"127.0.0.1"` (this machine only,
#'   the default), or another address, as the user chooses (see "Security").
#' @param token `NULL` (no token), or a string that requests must send as
#'   `Authorization: Bearer <token>`.
#' @param max_rows The most rows one request may have; more get a 413.
#' @param batch_size Rows per batch when [predict()] runs the model.
#' @param unknown A factor level training did not have, as [predict()]'s
#'   `unknown`: `"error"` (a 400 naming the column and the levels), `"zero"`
#'   or `"code"`.
#' @param max_bytes `NULL` (derived from `max_rows` and the model's columns:
#'   see "Limits"), or the most bytes one request's body may have; larger
#'   ones get a 413 before they are read.
#' @param allowed_hosts `NULL`, or host names (as clients' `Host` header
#'   gives them, e.g. `"scoring.example.org"`) that the service answers
#'   besides `localhost` and the addresses it listens on; `"*"` for any (for
#'   a proxy that checks them itself). See "Security".
#' @param router `NULL` (a router of its own, which also answers requests
#'   for no route with a JSON `404`), or a plumber router of one's own
#'   ([plumber::pr()]) to add the routes to, returned with them.
#' @param prefix `""` (the routes at `/predict`, `/metadata` and `/health`),
#'   or a path that they begin with, e.g. `"/model"` for `/model/predict`.
#' @param quiet `TRUE`: no line saying where the service listens.
#' @param ... Not used: an argument these functions do not have is an error
#'   that names the one meant.
#' @return `gpu_serve()` returns (invisibly) only when the service stops.
#'   `gpu_api()`: a plumber router (a `Plumber` object) with the three routes:
#'   `router` with them added, or one of its own.
#' @seealso [gpu_save()] and [gpu_load()] to serve a model saved by another
#'   session; `bench/serve.R` in the source for throughput and latency, and
#'   (`--hostile`) for the service under hostile requests.
#' @export
#' @examples
#' if (!is.null(gpukeras_python()) && requireNamespace("plumber", quietly = TRUE)) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'   fit <- gpu_fit(model, list(x = iris[, 1:4], y = iris$Species), epochs = 1,
#'                  verbose = 0, monitor = FALSE)
#'   api <- gpu_api(fit, max_rows = 1000)
#'   print(api) # POST /predict, GET /metadata, GET /health
#'   # beside one's own routes, under a prefix
#'   app <- plumber::pr_get(plumber::pr(), "/version", function() "1.0")
#'   app <- gpu_api(fit, router = app, prefix = "/iris")
#'   names(app$getApiSpec()$paths) # /version, /iris/predict, ...
#'   # In a process of its own: gpu_serve(fit, port = 8000), then POST JSON records
#'   # of the four columns to localhost:8000/predict?type=class (see "Routes").
#' }
gpu_serve <- function(fit, port = 8000, host = "127.0.0.1", token = NULL, max_rows = 10000,
                      batch_size = 1024, unknown = c("error", "zero", "code"), max_bytes = NULL,
                      allowed_hosts = NULL, quiet = FALSE, ...) {
  check_unknown_args("gpu_serve")
  call <- current_env()
  check_port(port, call)
  check_string(host, call = call)
  check_flag(quiet, call = call)
  service <- serve_service(fit, token, max_rows, batch_size, unknown, max_bytes, allowed_hosts, host, call)
  if (is.null(token) && !is_loopback(host)) {
    gpukeras_warn(c(
      sprintf(
        "The service listens on %s without a token: anyone who can reach port %d there can use it.", host,
        as.integer(port)
      ),
      "Give token = <a secret string> (clients send `Authorization: Bearer <token>`), or keep host = \"127.0.0.1\"."
    ), "gpukeras_warning_serve_open")
  }
  check_port_free(host, port, call)
  if (!quiet) {
    rlang::inform(c(
      sprintf("Serving on http://%s:%d: POST /predict, GET /metadata, GET /health.", host, as.integer(port)),
      "i" = "Stop with Ctrl-C (or by ending this process)."
    ))
  }
  serve_behind_front(serve_routes(service, NULL, ""), host, port, service$settings, call)
}

#' @rdname gpu_serve
#' @export
gpu_api <- function(fit, token = NULL, max_rows = 10000, batch_size = 1024,
                    unknown = c("error", "zero", "code"), max_bytes = NULL, allowed_hosts = NULL,
                    router = NULL, prefix = "", ...) {
  check_unknown_args(
    "gpu_api",
    "gpu_serve",
    paste0(
      "gpu_api() returns the router, which plumber::pr_run(api, host = , port = ) runs; gpu_serve(fit, port = , host ",
      "= ) runs it for you."
    )
  )
  call <- current_env()
  check_prefix(prefix, call)
  if (!is.null(router) && !inherits(router, "Plumber")) {
    stop_input_type(router, "NULL or a plumber router (plumber::pr())", "router", call)
  }
  service <- serve_service(fit, token, max_rows, batch_size, unknown, max_bytes, allowed_hosts, NULL, call)
  serve_routes(service, router, prefix)
}

# The service both verbs build, after the checks they share: the arguments
# first (no Python needed), then plumber, then the model. list(fit, settings =
# what the routes and the server check requests with, metadata = what GET
# /metadata answers); `host` is the address gpu_serve() listens on (NULL:
# gpu_api()'s, unknown).
serve_service <- function(fit, token, max_rows, batch_size, unknown, max_bytes, allowed_hosts, host, call) {
  check_trained_model(
    fit, "For a Keras model, train it with gpu_fit(), or save it with gpu_save() and load it with gpu_load().",
    call = call
  )
  check_token(token, call)
  check_count(max_rows, call = call)
  check_count(batch_size, call = call)
  unknown <- check_choice(unknown[[1]], c("error", "zero", "code"), "unknown", call = call)
  check_max_bytes(max_bytes, call)
  check_allowed_hosts(allowed_hosts, call)
  part <- served_input(fit$encoding, call)
  check_suggested("plumber", "Serving with gpu_serve() or gpu_api()", call)
  check_suggested("jsonlite", "Serving with gpu_serve() or gpu_api()", call)
  model <- scoring_model(fit, call)
  shapes <- model_io(model)
  if (is.null(part$shape)) part$shape <- served_row_shape(shapes$inputs)
  settings <- list(
    part = part, encoding = fit$encoding, token = token, max_rows = as.integer(max_rows),
    max_bytes = max_bytes %||% request_byte_limit(part, max_rows), hosts = served_hosts(host, allowed_hosts),
    batch_size = as.integer(batch_size), unknown = unknown
  )
  list(fit = fit, settings = settings, metadata = serve_metadata(fit, shapes$outputs, settings))
}

# Every answer closes its connection: httpuv writes a response's head and body
# apart without TCP_NODELAY, so on a kept-alive connection the body waited for
# the client's delayed ACK, 40 ms on Linux (GET /health from R's curl: 43 ms,
# 1.6 ms with a new connection per request, which costs under a millisecond on
# loopback).
serve_headers <- function(status) {
  c(
    list(`Content-Type` = "application/json", Connection = "close"),
    if (status == 401L) list(`WWW-Authenticate` = "Bearer")
  )
}

# A plumber response with `status`, the service's headers and `value` as JSON
# (a string is JSON already).
serve_answer <- function(res, status, value) {
  res$status <- as.integer(status)
  headers <- serve_headers(res$status)
  for (header in names(headers)) res$setHeader(header, headers[[header]])
  res$body <- if (is.character(value)) value else as_json(value)
  res
}

# The service's routes added to `router` (NULL: a router of its own, which also
# gets the service's answers for no route and for an error) under `prefix`: the
# guard as a filter (serve_filter()), the routes with no body parser (POST
# /predict parses its own, after the guard), and /predict's OpenAPI description
# from the encoding.
serve_routes <- function(service, router, prefix) {
  settings <- service$settings
  paths <- paste0(prefix, c("/predict", "/metadata", "/health"))
  no_parsers <- stats::setNames(list(), character())
  api <- router %||% plumber::pr()
  api <- plumber::pr_filter(api, paste0("gpukeras", prefix), serve_filter(settings, paths))
  api <- plumber::pr_post(api, paths[1], function(req, res) {
    answer <- serve_predict(service$fit, req, settings)
    serve_answer(res, answer$status, answer$body)
  }, parsers = no_parsers, comments = "Predictions of the model for JSON records, columns or rows")
  api <- plumber::pr_get(
    api, paths[2], function(req, res) serve_answer(res, 200L, service$metadata),
    parsers = no_parsers, comments = "The model's inputs, outputs, rules and versions"
  )
  api <- plumber::pr_get(
    api, paths[3], function(req, res) serve_answer(res, 200L, list(status = "ok")),
    parsers = no_parsers, comments = "Whether the service answers"
  )
  api <- plumber::pr_set_api_spec(api, function(spec) predict_api_spec(spec, paths[1], settings))
  if (!is.null(router)) return(api)
  api <- plumber::pr_set_404(api, function(req, res) {
    serve_answer(res, 404L, serve_problem("not_found", sprintf(
      "No route %s %s: this service has POST /predict, GET /metadata and GET /health.",
      req$REQUEST_METHOD, client_text(req$PATH_INFO, 100L)
    )))
  })
  plumber::pr_set_error(api, function(req, res, err) {
    serve_answer(res, 500L, serve_problem("server_error", client_text(one_line(conditionMessage(err)), 300L)))
  })
}

# One request to POST /predict, whose headers passed serve_guard(): list(status,
# body), the body a JSON string.
serve_predict <- function(fit, req, settings) {
  tryCatch({
    type <- req$argsQuery$type %||% "raw"
    if (!identical(type, "raw") && !identical(type, "class")) {
      serve_reject(
        400L, "bad_type",
        sprintf("The query's type must be \"raw\" or \"class\", not \"%s\".", client_text(paste(type, collapse = ",")))
      )
    }
    body <- parse_request_body(req$bodyRaw, settings$part)
    newdata <- request_data(body, settings)
    predicted <- predict_for_request(fit, newdata, type, settings)
    list(status = 200L, body = predictions_json(predicted$value, predicted$warnings))
  }, gpukeras_serve_reject = function(e) list(status = e$status, body = as_json(e$problem)))
}

# predict() on the request's data: list(value, warnings), its answer and its warnings
# (pixels outside the training range), one line each, which the client gets with the
# answer as a user of predict() would. Its refusals of the data are 400s, any other
# failure a 500 (prediction_refused()).
predict_for_request <- function(fit, newdata, type, settings) {
  warnings <- character()
  value <- withCallingHandlers(
    tryCatch(
      stats::predict(fit, newdata, batch_size = settings$batch_size, type = type, unknown = settings$unknown),
      error = function(e) prediction_refused(e, settings)
    ),
    gpukeras_warning = function(w) {
      warnings <<- c(warnings, one_line(conditionMessage(w)))
      invokeRestart("muffleWarning")
    }
  )
  list(value = value, warnings = warnings)
}

# predict()'s error as the service's refusal, by its class and fields: an unseen
# level names the column (as predict() names it among the served input's) and
# the levels; NA the columns and rows. One handler: tryCatch() nests its
# handlers, so a refusal raised in the handler of a class would be caught by a
# sibling `error` handler.
prediction_refused <- function(e, settings) {
  if (inherits(e, "gpukeras_error_new_levels")) {
    at <- served_column_at(e$column, settings$part)
    column <- if (is.na(at)) client_text(e$column) else names(settings$part$columns)[at]
    abort_unseen_levels(column, e$levels, if (!is.na(at)) settings$part$columns[[at]]$levels)
  }
  if (inherits(e, "gpukeras_error_missing_values")) {
    at <- served_column_at(e$column, settings$part)
    abort_missing_value(served_columns(settings$part)[at[!is.na(at)]], e$rows, e$n_rows)
  }
  # the served input's columns, from predict()'s names for them (x$income; x: rows of more dimensions)
  column <- sub("^[^$]*[$]", "", grep("$", e$column, fixed = TRUE, value = TRUE))
  if (inherits(e, "gpukeras_error_not_finite")) abort_bad_numbers(column, e$rows, e$n_rows)
  if (inherits(e, "gpukeras_error_wrong_type")) {
    abort_wrong_type(column, e$type, wanted_values(settings$part$columns[[column]]))
  }
  if (inherits(e, "gpukeras_error_bad_data")) {
    serve_reject(400L, "bad_data", client_text(one_line(conditionMessage(e)), 300L))
  }
  serve_reject(500L, "prediction_failed", client_text(one_line(conditionMessage(e)), 300L))
}
