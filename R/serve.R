#' Serve a trained model's predictions over HTTP
#'
#' `gpu_serve()` runs a local HTTP service that scores JSON with the model of
#' a [gpu_fit()] result or a [gpu_load()] model, through [predict()] itself:
#' the answers are `predict(fit, newdata)`'s, new data encoded as the training
#' data was. It blocks the R session until it is stopped (Ctrl-C, or the
#' process killed), so run it in a process of its own, e.g.
#' `Rscript -e 'gpukeras::gpu_serve(gpukeras::gpu_load("model.keras"))'`.
#' `gpu_api()` returns the same service as a [plumber][plumber::pr] router,
#' to run with [plumber::pr_run()] or to mount in one's own plumber app
#' ([plumber::pr_mount()]). Both need the plumber package (Debian:
#' `r-cran-plumber`).
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
#' rule `"drop"`) is `null`. Numbers carry 15 significant digits.
#'
#' @section Bad requests:
#' A request the service cannot score gets a 4xx status and a JSON body
#' `{"error": <code>, "message": <what is wrong and what to send instead>}`,
#' with the column and its values where there are: `400` for
#' `"malformed_json"`, `"bad_body"` (JSON of another form), `"no_rows"`,
#' `"missing_column"` (`columns` names them), `"wrong_type"` (`column`),
#' `"unseen_level"` (`column`, `levels`), `"missing_value"` (`column`, `rows`,
#' 1-based) and `"bad_data"` (any other refusal of [predict()]), or
#' `"bad_type"` (the query's `type`); `401` `"unauthorized"` for a missing
#' or wrong token; `404` `"not_found"`; `413` `"too_many_rows"` above
#' `max_rows`. A failure of the model itself is a `500`
#' `"prediction_failed"`. The service goes on serving after each.
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
#' @param quiet `TRUE`: no line saying where the service listens.
#' @param ... Not used: an argument these functions do not have is an error
#'   that names the one meant.
#' @return `gpu_serve()` returns (invisibly) only when the service stops.
#'   `gpu_api()`: a plumber router (a `Plumber` object) with the three routes.
#' @seealso [gpu_save()] and [gpu_load()] to serve a model saved by another
#'   session; `bench/serve.R` in the source for throughput and latency.
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
#'   # In a process of its own: gpu_serve(fit, port = 8000), then e.g.
#'   # curl -X POST localhost:8000/predict?type=class -d '[{"Sepal.Length": 5.1,
#'   #   "Sepal.Width": 3.5, "Petal.Length": 1.4, "Petal.Width": 0.2}]'
#' }
gpu_serve <- function(fit, port = 8000, host = "127.0.0.1", token = NULL, max_rows = 10000,
                      batch_size = 1024, unknown = c("error", "zero", "code"), quiet = FALSE, ...) {
  check_unknown_args("gpu_serve")
  call <- current_env()
  check_port(port, call)
  check_string(host, call = call)
  check_flag(quiet, call = call)
  api <- serve_router(fit, token, max_rows, batch_size, unknown, call)
  if (is.null(token) && !is_loopback(host)) {
    gpukeras_warn(
      c(
        sprintf("The service listens on %s without a token: anyone who can reach port %d there can use it.", host, as.integer(port)),
        "Give token = <a secret string> (clients send `Authorization: Bearer <token>`), or keep host = \"127.0.0.1\"."
      ),
      "gpukeras_warning_serve_open"
    )
  }
  check_port_free(host, port, call)
  if (!quiet) {
    rlang::inform(c(
      sprintf("Serving on http://%s:%d: POST /predict, GET /metadata, GET /health.", host, as.integer(port)),
      "i" = "Stop with Ctrl-C (or by ending this process)."
    ))
  }
  plumber::pr_run(api, host = host, port = as.integer(port), docs = FALSE, quiet = TRUE)
  invisible()
}

#' @rdname gpu_serve
#' @export
gpu_api <- function(fit, token = NULL, max_rows = 10000, batch_size = 1024,
                    unknown = c("error", "zero", "code"), ...) {
  check_unknown_args("gpu_api", "gpu_serve", "gpu_api() returns the router, which plumber::pr_run(api, host = , port = ) runs; gpu_serve(fit, port = , host = ) runs it for you.")
  serve_router(fit, token, max_rows, batch_size, unknown, current_env())
}

# The plumber router of gpu_api(), after the checks both verbs share: the
# arguments first (no Python needed), then plumber, then the model.
serve_router <- function(fit, token, max_rows, batch_size, unknown, call) {
  check_trained_model(fit, "For a Keras model, train it with gpu_fit(), or save it with gpu_save() and load it with gpu_load().", call = call)
  check_token(token, call)
  check_count(max_rows, call = call)
  check_count(batch_size, call = call)
  unknown <- check_choice(unknown[[1]], c("error", "zero", "code"), "unknown", call = call)
  part <- served_input(fit$encoding, call)
  check_suggested("plumber", "Serving with gpu_serve() or gpu_api()", call)
  check_suggested("jsonlite", "Serving with gpu_serve() or gpu_api()", call)
  model <- scoring_model(fit, call)
  settings <- list(
    part = part, encoding = fit$encoding, token = token, max_rows = as.integer(max_rows),
    batch_size = as.integer(batch_size), unknown = unknown
  )
  metadata <- serve_metadata(fit, model, settings)
  serve_routes(fit, settings, metadata)
}

# Every answer closes its connection: httpuv writes a response's head and body
# apart without TCP_NODELAY, so on a kept-alive connection the body waited for
# the client's delayed ACK, 40 ms on Linux (GET /health from R's curl: 43 ms,
# 1.6 ms with a new connection per request, which costs under a millisecond on
# loopback).
serve_routes <- function(fit, settings, metadata) {
  json <- function(res, status, value) {
    res$status <- as.integer(status)
    res$setHeader("Content-Type", "application/json")
    res$setHeader("Connection", "close")
    if (res$status == 401L) res$setHeader("WWW-Authenticate", "Bearer")
    res$body <- if (is.character(value)) value else as_json(value)
    res
  }
  api <- plumber::pr()
  api <- plumber::pr_post(api, "/predict", function(req, res) {
    answer <- serve_predict(fit, req, settings)
    json(res, answer$status, answer$body)
  }, parsers = stats::setNames(list(), character()))
  api <- plumber::pr_get(api, "/metadata", function(req, res) {
    refused <- check_bearer(req, settings$token)
    if (!is.null(refused)) {
      return(json(res, refused$status, refused$body))
    }
    json(res, 200L, metadata)
  })
  api <- plumber::pr_get(api, "/health", function(req, res) json(res, 200L, list(status = "ok")))
  api <- plumber::pr_set_404(api, function(req, res) {
    json(res, 404L, serve_problem("not_found", sprintf("No route %s %s: this service has POST /predict, GET /metadata and GET /health.", req$REQUEST_METHOD, req$PATH_INFO)))
  })
  plumber::pr_set_error(api, function(req, res, err) {
    json(res, 500L, serve_problem("server_error", one_line(conditionMessage(err))))
  })
}

# One request to POST /predict: list(status, body), the body a JSON string.
serve_predict <- function(fit, req, settings) {
  refused <- check_bearer(req, settings$token)
  if (!is.null(refused)) {
    return(refused)
  }
  tryCatch(
    {
      type <- req$argsQuery$type %||% "raw"
      if (!identical(type, "raw") && !identical(type, "class")) {
        serve_reject(400L, "bad_type", sprintf("The query's type must be \"raw\" or \"class\", not \"%s\".", paste(type, collapse = ",")))
      }
      body <- parse_request_body(req$bodyRaw)
      newdata <- request_data(body, settings)
      predicted <- predict_for_request(fit, newdata, type, settings)
      list(status = 200L, body = predictions_json(predicted))
    },
    gpukeras_serve_reject = function(e) list(status = e$status, body = as_json(e$problem))
  )
}

# predict() on the request's data; its refusals of the data are 400s, any other
# failure a 500.
predict_for_request <- function(fit, newdata, type, settings) {
  tryCatch(
    stats::predict(fit, newdata, batch_size = settings$batch_size, type = type, unknown = settings$unknown),
    gpukeras_error_new_levels = function(e) {
      column <- sub("^x\\$", "", e$column %||% "")
      serve_reject(400L, "unseen_level", sprintf("Column `%s` has level(s) the model was not trained on: %s.", column, paste0("\"", e$levels, "\"", collapse = ", ")), column = column, levels = I(e$levels))
    },
    gpukeras_error_bad_data = function(e) serve_reject(400L, "bad_data", one_line(conditionMessage(e))),
    error = function(e) serve_reject(500L, "prediction_failed", one_line(conditionMessage(e)))
  )
}

# NULL when the request may go on (no token asked for, or the right one);
# else the 401 answer.
check_bearer <- function(req, token) {
  if (is.null(token)) {
    return(NULL)
  }
  given <- req$HTTP_AUTHORIZATION %||% ""
  if (same_secret(given, paste("Bearer", token))) {
    return(NULL)
  }
  message <- if (nzchar(given)) "The bearer token is wrong." else "This service needs a token: send the header `Authorization: Bearer <token>`."
  list(status = 401L, body = as_json(serve_problem("unauthorized", message)))
}

# Whether two strings are equal, in a time that depends on their length only.
same_secret <- function(given, expected) {
  a <- utf8ToInt(enc2utf8(given))
  b <- utf8ToInt(enc2utf8(expected))
  if (length(a) != length(b) || anyNA(a)) {
    return(FALSE)
  }
  sum(bitwXor(a, b)) == 0L
}

is_loopback <- function(host) {
  host %in% c("localhost", "::1") || grepl("^127\\.", host)
}

check_port <- function(port, call) {
  if (!is.numeric(port) || length(port) != 1L || is.na(port) || port != round(port) || port < 1 || port > 65535) {
    gpukeras_abort(
      sprintf("`port` must be one whole number from 1 to 65535, not %s.", describe(port)),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
}

check_token <- function(token, call) {
  if (is.null(token)) {
    return(invisible())
  }
  if (!is.character(token) || length(token) != 1L || is.na(token) || !grepl("^[[:graph:]]+$", token)) {
    gpukeras_abort(
      c(
        sprintf("`token` must be NULL or one non-empty string without spaces, not %s.", if (is.character(token) && length(token) == 1L) "a string with spaces or control characters" else describe(token)),
        "Clients send it as the header `Authorization: Bearer <token>`."
      ),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
}

# A port that cannot be bound (in use, or a privileged one) stops here, before
# plumber, which would print its own error and leave none to catch.
check_port_free <- function(host, port, call) {
  free <- tryCatch(
    {
      server <- httpuv::startServer(host, as.integer(port), list(call = function(req) list(status = 200L, headers = list(), body = "")))
      httpuv::stopServer(server)
      TRUE
    },
    error = function(e) FALSE
  )
  if (!free) {
    gpukeras_abort(
      c(
        sprintf("Cannot listen on %s port %d: it is in use, or not this machine's address, or needs privileges.", host, as.integer(port)),
        "Choose another port (e.g. port = 8001), or stop what listens there."
      ),
      "gpukeras_error_port_in_use",
      call = call
    )
  }
}

# A package from Suggests that a function needs: a classed error saying how to
# install it when it is not.
check_suggested <- function(package, what, call = caller_env()) {
  if (requireNamespace(package, quietly = TRUE)) {
    return(invisible(TRUE))
  }
  gpukeras_abort(
    c(
      sprintf("%s needs the R package %s, which is not installed.", what, package),
      sprintf("Install it: install.packages(\"%s\") (Debian and Ubuntu: apt install r-cran-%s).", package, tolower(package))
    ),
    "gpukeras_error_package_missing",
    package = package,
    call = call
  )
}
