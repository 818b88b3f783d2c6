# The service's refusals as its clients read them, made without a server or Python:
# serve_guard() on a request's headers (what gpu_serve() decides before reading a
# body), request_data() on bodies. test-serve.R sends the same over real HTTP.

part <- list(type = "data.frame", columns = list(
  income = list(type = "numeric"),
  region = list(type = "factor", levels = c("east", "west"))
))
settings <- list(
  part = part, encoding = list(na = "error"), token = "s3cret", max_rows = 50L,
  max_bytes = request_byte_limit(part, 50L), hosts = served_hosts("127.0.0.1", "scoring.example"), unknown = "error"
)

# A request's headers as httpuv gives them: a POST of JSON to /predict with the token,
# from this machine, unless `...` says otherwise (NULL: no such header).
request <- function(...) {
  fields <- utils::modifyList(list(
    REQUEST_METHOD = "POST", PATH_INFO = "/predict", HTTP_HOST = "127.0.0.1:8000",
    HTTP_AUTHORIZATION = "Bearer s3cret", HTTP_CONTENT_TYPE = "application/json", CONTENT_LENGTH = "120"
  ), list(...))
  list2env(fields)
}

# What a client reads: "passes", or the status and the JSON answer.
guarded <- function(...) {
  answer <- serve_guard(request(...), settings, token = TRUE, json = TRUE)
  if (is.null(answer)) "passes" else paste(answer$status, answer$body)
}

# What a client reads of a body: "passes", or the refusal, serving's own or of what
# predict() refuses before Python runs (R's checks, mapped by prediction_refused()).
refused <- function(body) {
  tryCatch(
    {
      newdata <- request_data(parse_request_body(charToRaw(body), part), settings)
      tryCatch(
        abort_not_finite(list(x = encode_part(newdata, "x", part)$x)),
        gpukeras_error_bad_data = function(e) prediction_refused(e, settings)
      )
      "passes"
    },
    gpukeras_serve_reject = function(e) paste(e$status, as_json(e$problem))
  )
}

# The refusal of a body whose data predict() refuses for its NA: the error
# predict() raises, as R's check or the core's (abort_missing()), mapped by
# prediction_refused().
refused_na <- function(body) {
  newdata <- request_data(parse_request_body(charToRaw(body), part), settings)
  tryCatch(
    {
      abort_missing(list(x = encode_part(newdata, "x", part)$x))
      "passes"
    },
    gpukeras_error_missing_values = function(e) {
      tryCatch(prediction_refused(e, settings), gpukeras_serve_reject = function(e) paste(e$status, as_json(e$problem)))
    }
  )
}

test_that("an empty body is told what to send with the served model's own columns", {
  expect_match(
    refused(""), "^400 .*bad_body.*e\\.g\\. \\[\\{\\\\\"income\\\\\":0,\\\\\"region\\\\\":\\\\\"east\\\\\"\\}\\]"
  )
  other <- list(type = "data.frame", columns = list(age = list(type = "numeric")))
  said <- tryCatch(parse_request_body(raw(), other), gpukeras_serve_reject = conditionMessage)
  expect_match(said, "[{\"age\":0}]", fixed = TRUE)
  expect_no_match(said, "income")
})

test_that("the headers decide, in this order: Host, Origin, token, Content-Type, size", {
  expect_identical(guarded(), "passes")
  expect_snapshot({
    writeLines(guarded(HTTP_HOST = "attacker.example", HTTP_AUTHORIZATION = NULL))
    writeLines(guarded(HTTP_ORIGIN = "https://attacker.example", HTTP_CONTENT_TYPE = "text/plain"))
    writeLines(guarded(HTTP_AUTHORIZATION = NULL, CONTENT_LENGTH = "52428800"))
    writeLines(guarded(HTTP_CONTENT_TYPE = "text/plain;charset=UTF-8"))
    writeLines(guarded(CONTENT_LENGTH = "52428800"))
    writeLines(guarded(CONTENT_LENGTH = NULL, HTTP_TRANSFER_ENCODING = "chunked"))
  })
})

test_that(paste(
  "localhost, loopback addresses, the address listened on and allowed_hosts are answered; other names are not"
), {
  passes <- c("127.0.0.1:8000", "localhost", "LOCALHOST.:8000", "127.0.0.2", "[::1]:8000", "scoring.example:443")
  for (host in passes) expect_identical(guarded(HTTP_HOST = host), "passes", label = host)
  for (host in c(
    "attacker.example", "127.0.0.1.attacker.example", "127.attacker.example", "10.0.0.5", "[::1].example",
    "\xff.example"
  )) {
    expect_match(guarded(HTTP_HOST = host), "^403 .*forbidden_host", label = host)
  }
  expect_match(guarded(HTTP_CONTENT_TYPE = "text/\xff"), "^415 .*not \\\\\"text/\\?\\\\\"")
  # a client that sends no Host (HTTP/1.0) is no web page
  expect_identical(guarded(HTTP_HOST = NULL), "passes")
  for (origin in c("http://localhost:3000", "https://scoring.example", "http://[::1]:8000")) {
    expect_identical(guarded(HTTP_ORIGIN = origin), "passes", label = origin)
  }
  for (origin in c(
    "null", "https://attacker.example", "http://localhost.attacker.example", "http://user@localhost", "http://\xfe"
  )) {
    expect_match(guarded(HTTP_ORIGIN = origin), "^403 .*forbidden_origin", label = origin)
  }
  # listening on every interface: any address of the machine names it, no other name does
  everywhere <- served_hosts("0.0.0.0", NULL)
  expect_true(host_allowed(host_name("10.0.0.5:8000"), everywhere))
  expect_false(host_allowed(host_name("attacker.example"), everywhere))
  expect_true(host_allowed(host_name("anything.example"), served_hosts("0.0.0.0", "*")))
})

test_that("max_bytes by default fits max_rows rows of the model's columns twice over, and 64 KiB at least", {
  expect_identical(request_byte_limit(part, 50L), 64 * 1024)
  expect_identical(request_byte_limit(part, 10000L), 2 * 10000 * ((6 + 4 + 24) + (6 + 4 + 6 * 4 + 2) + 2))
  rows <- list(type = "array", shape = c(28L, 28L), names = NULL)
  expect_identical(request_byte_limit(rows, 1000L), 2 * 1000 * (25 * 784 + 2))
  # a body of max_rows records as jsonlite writes them, pretty-printed, fits
  records <- jsonlite::toJSON(
    data.frame(income = rep(-123456.789012345, 10000), region = "west"), dataframe = "rows", digits = NA, pretty = TRUE
  )
  expect_lt(nchar(records, type = "bytes"), request_byte_limit(part, 10000L))
})

test_that("NA is predict()'s to refuse: its error names the columns (a factor once) and the first rows", {
  expect_identical(refused("[{\"income\": null, \"region\": null}]"), "passes")
  expect_snapshot({
    writeLines(refused_na(
      "[{\"income\": 5, \"region\": \"west\"}, {\"income\": null, \"region\": null}, {\"income\": 6}]"
    ))
    writeLines(refused_na("[{\"income\": 5, \"region\": \"west\"}, {\"income\": 6, \"region\": null}]"))
  })
})

test_that("bodies are refused by their rows, keys and numbers before a table is made, and echo little", {
  expect_identical(refused("[{\"income\": 5, \"region\": \"west\"}]"), "passes")
  # the search of the text for the columns' names (before a parse) reads no escaped key wrong
  expect_identical(refused("[{\"\\u0069ncome\": 5, \"region\": \"west\"}]"), "passes")
  expect_identical(refused("{\"region\": [\"west\"], \"income\": [5]}"), "passes")
  # records in any order of keys, or lacking one, are read as records with the same keys are
  expect_identical(
    refused("[{\"income\": 5, \"region\": \"west\"}, {\"region\": \"east\", \"income\": 6, \"id\": [1]}]"), "passes"
  )
  # NA passes to predict(), whose error is the refusal
  expect_identical(refused("[{\"income\": 5, \"region\": \"west\"}, {\"region\": \"east\"}]"), "passes")
  expect_match(
    refused_na("[{\"income\": 5, \"region\": \"west\"}, {\"region\": \"east\"}]"),
    "^400 .*missing_value.*Column `income` is null \\(NA\\) in 1 row\\(s\\) \\(first: 2\\)"
  )
  expect_match(
    refused_na("[{\"income\": 5, \"region\": \"west\"}, {\"income\": null, \"region\": \"east\"}]"),
    "^400 .*missing_value.*\\(first: 2\\)"
  )
  expect_match(
    refused("[{\"income\": 5, \"region\": \"west\"}, {\"income\": [], \"region\": \"east\"}]"),
    "^400 .*wrong_type.*Column `income` must hold single values"
  )
  expect_snapshot({
    writeLines(refused(sprintf("[%s]", paste(rep("{\"income\": 5, \"region\": \"west\"}", 51), collapse = ","))))
    writeLines(refused(sprintf("[%s]", paste0("{\"k", 1:8000, "\": 1}", collapse = ","))))
    writeLines(refused("{\"income\": [1, 2], \"region\": [\"west\"], \"other\": [1, 2, 3]}"))
    writeLines(refused("[{\"income\": 1e400, \"region\": \"west\"}]"))
    writeLines(refused("[{\"income\": 5, \"region\": \"west\"}, {\"income\": -1e308, \"region\": \"east\"}]"))
    writeLines(refused("[{\"income\": {\"nested\": 1}, \"region\": \"west\"}]"))
    writeLines(refused("[{\"income\": 5, \"region\": \"west\"}, 5]"))
    writeLines(refused("[[5, 1]]"))
  })
})

test_that("gpu_api() adds its routes beside the caller's, and describes /predict from the encoding", {
  skip_if_not_installed("plumber")
  mine <- plumber::pr_get(plumber::pr(), "/mine", function() "mine")
  service <- list(fit = NULL, settings = settings, metadata = list())
  api <- serve_routes(service, mine, "/model")
  expect_identical(api, mine)
  spec <- api$getApiSpec()
  expect_identical(names(spec$paths), c("/mine", "/model/predict", "/model/metadata", "/model/health"))
  post <- spec$paths[["/model/predict"]]$post
  expect_snapshot(writeLines(as.character(jsonlite::toJSON(post$requestBody, auto_unbox = TRUE, pretty = TRUE))))
  # a model of a matrix without column names takes rows of numbers
  rows <- utils::modifyList(settings, list(part = list(type = "array", shape = 4L, names = NULL)))
  expect_identical(request_schema(rows)$items$items, list(type = "number"))
})

test_that("predict()'s refusal of an unseen level becomes a 400 from its class and fields", {
  registerS3method("predict", "gpukeras_test_refusing", function(object, newdata, ...) {
    rlang::abort(
      "`x$region` has level(s) not seen in training.",
      class = c("gpukeras_error_new_levels", "gpukeras_error"), column = "x$region",
      levels = c(strrep("n", 100), "south")
    )
  }, envir = asNamespace("stats"))
  fit <- structure(list(), class = "gpukeras_test_refusing")
  answer <- tryCatch(
    predict_for_request(fit, data.frame(), "raw", settings),
    gpukeras_serve_reject = function(e) paste(e$status, as_json(e$problem))
  )
  expect_snapshot(writeLines(answer))
})

test_that("gpu_api()'s router and prefix are checked before the model", {
  expect_snapshot(error = TRUE, {
    gpu_api(NULL, prefix = "model/")
    gpu_api(NULL, router = list())
  })
})

test_that("the server that ended or did not start is a classed error with what it said", {
  log <- withr::local_tempfile(lines = c("Traceback (most recent call last):", "OSError: [Errno 98] address in use"))
  expect_snapshot(serve_front_failed("did not start", log, call("gpu_serve")), error = TRUE)
  expect_error(serve_front_failed("ended", tempfile(), NULL), class = "gpukeras_error_serve_front")
})
