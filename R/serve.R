#' Serve a trained model's predictions over HTTP
#'
#' `gpu_serve()` runs a local HTTP service that scores JSON with the model of
#' a [gpu_fit()] result or a [gpu_load()] model, in a Python process of its
#' own: the answers are `predict(fit, newdata)`'s, new data encoded as the
#' training data was, by the same encoding. It blocks the R session until it is stopped (Ctrl-C, or the
#' process killed), so run it in a process of its own, e.g.
#' `Rscript -e 'gpukeras::gpu_serve(gpukeras::gpu_load("model.keras"))'`.
#' `gpu_api()` returns the same service as a [plumber][plumber::pr] router,
#' to run with [plumber::pr_run()], or adds its routes to a router of one's
#' own (`router`, under `prefix`), beside one's own routes; it can also be
#' mounted ([plumber::pr_mount()]); its routes answer as `gpu_serve()` does,
#' through the same code, and leave every other route's requests alone. The
#' OpenAPI description of `POST /predict` (plumber's `/openapi.json`)
#' gives the model's columns with their types and levels (`gpu_serve()`
#' answers it at `GET /openapi.json`). `gpu_api()` needs the plumber package
#' (Debian: `r-cran-plumber`).
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
#'     must be training levels. `null` is NA. A text classifier of a KerasHub
#'     preset ([gpu_text_classifier()]) takes the texts as an array of strings,
#'     `["a great movie", "an awful one"]` (`/metadata`'s input form
#'     `"texts"`), at most 1 KiB a text by default in `max_bytes`, and answers
#'     each class's probability as `predict()` does. The query `?type=class` asks for
#'     classes instead of the model's outputs (see [predict()]'s `type`).
#'     The answer: see "Answers".}
#'   \item{`GET /metadata`}{The inputs (each column with its type, and levels
#'     for factors; or the shape of a row of numbers, taken as float32), the
#'     outputs (shapes, and the classes), the NA rule, `max_rows`,
#'     `max_bytes`, for an image model how its images were read (`image`:
#'     size, color mode, rescale) and the pixel range it takes (`pixels`,
#'     e.g. `[0, 1]` for `rescale = 1 / 255`: pixels are not rescaled by the
#'     service, as [predict()] does not rescale an array), and the versions
#'     of gpukeras, R, plumber, Python, Keras and the backend.}
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
#' (`gpu_serve()` takes one within `max_bytes`); `405`
#' `"method_not_allowed"` (e.g. a `GET` of `/predict`); `413`
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
#' h11), which loads the model saved by [gpu_save()] (in a
#' private temporary folder, removed once loaded), reads every request and answers it. No HTTP is
#' parsed by gpukeras itself, and the R session only waits. The server
#' enforces:
#' \itemize{
#'   \item a body larger than `max_bytes` is refused from its
#'     `Content-Length`, unread, whatever else the request says (a `413`
#'     before any other check, the connection closed); a chunked body once it
#'     passes `max_bytes`;
#'   \item a body must arrive whole within 30 seconds of its headers (else a
#'     `408`, the connection closed), and the headers of a connection's first
#'     request within 10 seconds (else the connection is closed); an idle
#'     connection is kept alive 5 seconds;
#'   \item headers over 64 KiB get a `431`; from 1,000 open connections a
#'     request gets a `503` (`limits = gpu_serve_limits()` sets these times
#'     and sizes);
#'   \item malformed framing (two `Content-Length`s, a signed one, a
#'     `Transfer-Encoding` beside one) gets a `400`; `Upgrade` is never
#'     honoured (the request is answered as HTTP).
#' }
#' So connections that hold an unfinished body cost the server a socket
#' each: `/health` answers meanwhile. Connections are kept alive, and
#' requests sent on one without waiting (pipelined) are answered in order;
#' requests on several connections are read at once (a `/predict` body over
#' 4 KiB, or any with `batch_window = 0`, parsed in a thread of its own), and
#' those that arrive within `batch_window` seconds of each other, or while the
#' model predicts others, are encoded together (a data frame's columns) and
#' predicted together in one call of the model. Then the
#' headers decide (host, origin, token,
#' `Content-Type`) and the body. Each request's HTTP, JSON and checks run in
#' the service's one Python interpreter, so one service answers on about one
#' core; `vignette("after-the-fit", package = "gpukeras")` says how many
#' requests that is, and how to answer more.
#'
#' The limits of one request follow what it costs. By default `max_rows`
#' is 10,000, or fewer where those rows would take more than 16 MiB as the
#' model's float32 input: an image model's rows are images, 1,365 of 32 x
#' 32 x 3 pixels, 27 of 224 x 224 x 3. By default `max_bytes` is what
#' `max_rows` rows of the model's columns take as JSON records, twice over
#' (room for spaces and ignored fields); for a model of unnamed rows of
#' numbers (an image model's), what `max_rows` such rows take with 12 bytes
#' a number (a pixel of 0-255, or of \[0, 1\] with up to 8 decimals, and its
#' comma), 51 MiB for 32 x 32 x 3; and at least 64 KiB; `/metadata` says
#' both. A request over either gets a `413` whose JSON names the limit
#' (`"limit": "max_rows"` and `"max_rows": 1365`, or `"max_bytes"`). Rows of
#' plain numbers are read from the body straight into float32 (about twice
#' the body's bytes of memory); any other body is parsed into JSON values and
#' its rows counted before any column is read, and only the model's columns
#' are taken from it, so a request costs time in proportion to its bytes,
#' whatever its keys. A
#' `POST /predict` that is refused (a `400`, or a `413` from its length or
#' its body) gets its answer a quarter of a second later, while other
#' requests are answered: a client that sends such bodies one after another
#' then gets at most four answers a second. ([gpu_api()]'s routes, in a server of the
#' caller's, make the same checks of headers and bodies, but there httpuv
#' holds what a client sends until R gets to its headers; where clients
#' across a network can reach it, a proxy in front that limits bodies spares
#' that.)
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
#' `gpu_api()`'s routes make the same checks, after the server that runs
#' them has read the body: where it runs other than by `gpu_serve()`,
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
#' @param max_rows `NULL` (10,000 rows, or fewer where they would take
#'   more than 16 MiB as the model's float32 input: see "Limits"), or the
#'   most rows one request may have; more get a 413.
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
#' @param batch_window Seconds a `POST /predict` waits at most for others being
#'   read meanwhile, to be predicted with it in one call of the model (as
#'   TensorFlow Serving batches requests), each answered with its own rows;
#'   requests that arrive while the model predicts go in its next call. A
#'   request alone is predicted at once. `0`: each request predicted alone.
#' @param limits `NULL` (the defaults, see "Limits"), or [gpu_serve_limits()]:
#'   how long the server waits for a body, for a new connection's headers and
#'   on an idle connection, how many connections it holds, how large headers
#'   may be.
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
gpu_serve <- function(fit, port = 8000, host = "127.0.0.1", token = NULL, max_rows = NULL,
                      batch_size = 1024, unknown = c("error", "zero", "code"), max_bytes = NULL,
                      allowed_hosts = NULL, quiet = FALSE, batch_window = 0.002, limits = NULL, ...) {
  check_unknown_args("gpu_serve")
  call <- current_env()
  port <- check_whole_number(port, 1, 65535, call = call)
  check_string(host, call = call)
  check_flag(quiet, call = call)
  check_number_decimal(batch_window, min = 0, max = 1, call = call)
  limits <- if (is.null(limits)) gpu_serve_limits() else check_fit_option(limits, "serve_limits", call = call)
  settings <- serve_settings(fit, token, max_rows, batch_size, unknown, max_bytes, allowed_hosts, call)
  check_suggested("jsonlite", "Serving with gpu_serve()", call)
  folder <- tempfile("gpukeras-serve-")
  dir.create(folder, mode = "0700")
  on.exit(unlink(folder, recursive = TRUE), add = TRUE)
  settings$model <- gpu_save(fit, file.path(folder, "model.keras"))$model
  settings[c("host", "port", "batch_window", names(limits))] <- c(list(host, port, batch_window), unclass(limits))
  log <- file.path(folder, "server.log")
  server <- serve_start(settings, log, call)
  on.exit(server$kill(), add = TRUE)
  # The server has loaded the model: its copy goes now, not at on.exit(), which a signal
  # (a supervisor's SIGTERM) skips, leaving the model in R's temporary folder.
  unlink(setdiff(dir(folder, full.names = TRUE, all.files = TRUE, no.. = TRUE), log), recursive = TRUE)
  if (!quiet) {
    rlang::inform(c(
      sprintf("Serving on http://%s:%d: POST /predict, GET /metadata, GET /health.", host, port),
      "i" = "Stop with Ctrl-C (or by ending this process)."
    ))
  }
  # httpuv's service() answers the session's own plumber or httpuv servers meanwhile
  while (server$is_alive()) if (requireNamespace("httpuv", quietly = TRUE)) httpuv::service(1000) else server$wait(1000)
  serve_server_failed("ended", log, call)
}

#' @rdname gpu_serve
#' @export
gpu_api <- function(fit, token = NULL, max_rows = NULL, batch_size = 1024,
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
  settings <- serve_settings(fit, token, max_rows, batch_size, unknown, max_bytes, allowed_hosts, call)
  check_suggested("plumber", "Serving with gpu_api()", call)
  check_suggested("jsonlite", "Serving with gpu_api()", call)
  settings$prefix <- prefix
  served <- core_call(
    "serve_service", model = fit$model, encoding = fit$encoding, settings = settings, error_call = call
  )
  serve_routes(served, router, prefix)
}

# The service's settings from both verbs' arguments, checked (no Python needed): what the
# core's service takes (serve/service.py), with the versions /metadata gives.
serve_settings <- function(fit, token, max_rows, batch_size, unknown, max_bytes, allowed_hosts, call) {
  check_trained_model(
    fit, "For a Keras model, train it with gpu_fit(), or save it with gpu_save() and load it with gpu_load().",
    call = call
  )
  check_token(token, call)
  max_rows <- check_count(max_rows, allow_null = TRUE, call = call)
  check_count(batch_size, call = call)
  unknown <- check_choice(unknown[[1]], c("error", "zero", "code"), "unknown", call = call)
  check_max_bytes(max_bytes, call)
  check_allowed_hosts(allowed_hosts, call)
  inputs <- fit$encoding$inputs
  if (isTRUE(fit$encoding$several) || length(inputs) > 1L) {
    abort_bad_argument(c(
      sprintf(
        "gpu_serve() serves a model with one input; this one has %d (%s).", length(inputs),
        paste(names(inputs), collapse = ", ")
      ),
      "Score it with predict(fit, list(...)) in R, or build the service with plumber around predict()."
    ), call = call)
  }
  scoring_model(fit, call)
  versions <- list(
    gpukeras = as.character(utils::packageVersion("gpukeras")), R = paste(R.version$major, R.version$minor, sep = ".")
  )
  if (requireNamespace("plumber", quietly = TRUE)) versions$plumber <- as.character(utils::packageVersion("plumber"))
  list(
    token = token, max_rows = max_rows, max_bytes = max_bytes, batch_size = as.integer(batch_size),
    unknown = unknown, allowed_hosts = if (!is.null(allowed_hosts)) as.list(allowed_hosts), versions = versions
  )
}

# The service's routes added to `router` (NULL: a router of its own, which also answers
# requests for no route and errors as the service does) under `prefix`, each answered by
# the core (serve_reply()), with /predict's OpenAPI description from the core.
serve_routes <- function(served, router, prefix) {
  paths <- paste0(prefix, c("/predict", "/metadata", "/health"))
  no_parsers <- stats::setNames(list(), character())
  reply <- function(req, res) serve_reply(served, req, res)
  api <- router %||% plumber::pr()
  api <- plumber::pr_post(
    api, paths[1], reply, parsers = no_parsers, comments = "Predictions of the model for JSON records, columns or rows"
  )
  api <- plumber::pr_get(
    api, paths[2], reply, parsers = no_parsers, comments = "The model's inputs, outputs, rules and versions"
  )
  api <- plumber::pr_get(api, paths[3], reply, parsers = no_parsers, comments = "Whether the service answers")
  api <- plumber::pr_set_api_spec(api, function(spec) {
    spec$paths[[paths[1]]]$post <- jsonlite::parse_json(core_call("serve_predict_spec", served = served))
    spec
  })
  if (!is.null(router)) return(api)
  api <- plumber::pr_set_404(api, reply)
  plumber::pr_set_error(api, function(req, res, err) {
    res$status <- 500L
    res$setHeader("Content-Type", "application/json")
    res$body <- as.character(jsonlite::toJSON(
      list(error = "server_error", message = substr(conditionMessage(err), 1L, 300L)), auto_unbox = TRUE
    ))
    res
  })
}

# The core's answer to a plumber request, as its response: its status, headers and JSON
# body. Every answer closes its connection: httpuv writes a response's head and body apart
# without TCP_NODELAY, so on a kept-alive connection the body waited for the client's
# delayed ACK, 40 ms on Linux.
serve_reply <- function(served, req, res) {
  fields <- grep("^HTTP_", ls(req), value = TRUE)
  headers <- stats::setNames(mget(fields, envir = req), tolower(gsub("_", "-", sub("^HTTP_", "", fields))))
  headers[["content-length"]] <- req$CONTENT_LENGTH
  answer <- core_call(
    "serve_answer",
    served = served, method = req$REQUEST_METHOD, path = req$PATH_INFO, query = sub("^[?]", "", req$QUERY_STRING),
    headers = headers, body = req$bodyRaw %||% raw()
  )
  res$status <- as.integer(answer$status)
  for (header in names(answer$headers)) res$setHeader(header, answer$headers[[header]])
  res$setHeader("Connection", "close")
  res$body <- answer$body
  res
}
