# gpu_serve() and gpu_api() answered over real HTTP: one R process serves a model
# saved by this session and loaded there with gpu_load() (gpu_serve() with a token and
# limits of its own on one port, gpu_api()'s routes added to a plumber app of the user's on
# another, and
# gpu_api()'s own router mounted in an app on a third), started
# for this file on 127.0.0.1 and killed after it; this session sends requests with curl,
# eight at a time, and compares the answers with predict() here. Hostile requests (a
# body of 50 MB announced, 8,000 records each with a key of its own, a web page's Host
# and Origin) are refused while the service goes on answering, its memory bounded; a
# body too large by gpu_serve()'s server; 400 connections holding
# an unfinished body leave /health answering; the server scores with R stopped, and ends
# with R.

skip_if_no_python()
skip_if_not_installed("plumber")
skip_if_not_installed("curl")
skip_if_not_installed("jsonlite")

serve_data <- function(n, seed) {
  withr::with_seed(seed, data.frame(
    income = round(stats::rnorm(n, 5, 1), 3),
    region = sample(c("east", "north", "west"), n, replace = TRUE),
    member = sample(c(TRUE, FALSE), n, replace = TRUE)
  ))
}

# The fit served: a classifier of a data.frame with a numeric, a factor and a logical
# column, saved with gpu_save() for the serving process to load.
serve_fit <- local({
  keras <- gpu_keras()
  train <- serve_data(200, 1)
  y <- factor(ifelse(train$income + (train$region == "west") > 5.3, "high", "low"))
  model <- keras$Sequential(list(
    keras$Input(shape = list(5L)),
    keras$layers$Dense(8L, activation = "relu"),
    keras$layers$Dense(2L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  gpu_fit(model, list(x = train, y = y), epochs = 2, verbose = 0, monitor = FALSE, seed = 1)
})
model_dir <- withr::local_tempdir(.local_envir = teardown_env())
model_path <- file.path(model_dir, "served.keras")
gpu_save(serve_fit, model_path)

# A model of a matrix with column names, served beside it.
matrix_fit <- local({
  keras <- gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L)), keras$layers$Dense(3L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  gpu_fit(model, list(x = as.matrix(iris[, 1:4]), y = iris$Species), epochs = 1, verbose = 0, monitor = FALSE, seed = 1)
})
matrix_path <- file.path(model_dir, "matrix.keras")
gpu_save(matrix_fit, matrix_path)

token <- "s3cret-token-for-the-test"
ports <- free_ports(3L)
server <- start_in_fresh_r(
  {
    model <- gpu_load(Sys.getenv("SERVE_MODEL"))
    # gpu_api()'s routes added to a router of the user's own with a route of its own,
    # twice (with a token under /secured), on the second port, beside gpu_serve()
    app <- plumber::pr_get(plumber::pr(), "/hello", function() list(hello = "world"))
    app <- gpu_api(model, max_rows = 50, router = app, prefix = "/model")
    app <- gpu_api(model, max_rows = 50, token = Sys.getenv("SERVE_TOKEN"), router = app, prefix = "/secured")
    httpuv::startServer("127.0.0.1", as.integer(Sys.getenv("SERVE_PORT_API")), app)
    # and a router of its own mounted in one
    matrix_api <- gpu_api(gpu_load(Sys.getenv("SERVE_MODEL_MATRIX")), allowed_hosts = "scoring.example")
    httpuv::startServer(
      "127.0.0.1", as.integer(Sys.getenv("SERVE_PORT_MATRIX")), plumber::pr_mount(plumber::pr(), "/m", matrix_api)
    )
    gpu_serve(
      model, port = as.integer(Sys.getenv("SERVE_PORT")), token = Sys.getenv("SERVE_TOKEN"), max_rows = 50,
      quiet = TRUE, limits = gpu_serve_limits(keep_alive_seconds = 60, max_head_bytes = 8192)
    )
  },
  env = c(
    SERVE_MODEL = model_path, SERVE_PORT = ports[1], SERVE_PORT_API = ports[2], SERVE_TOKEN = token,
    SERVE_MODEL_MATRIX = matrix_path, SERVE_PORT_MATRIX = ports[3]
  )
)
withr::defer(server$kill(), teardown_env())

served <- sprintf("http://127.0.0.1:%d", ports[1])
mounted <- sprintf("http://127.0.0.1:%d/model", ports[2])
on_matrix <- sprintf("http://127.0.0.1:%d/m", ports[3])

# A curl handle for one request: `body` a JSON string or raw bytes (POST), `bearer` the
# token to send, `headers` others (replacing the JSON Content-Type or curl's Host).
request_handle <- function(body = NULL, bearer = NULL, headers = list()) {
  handle <- curl::new_handle(timeout = 60)
  if (!is.null(body)) curl::handle_setopt(handle, postfields = body)
  headers <- utils::modifyList(list(`Content-Type` = "application/json"), headers)
  if (!is.null(bearer)) headers$Authorization <- paste("Bearer", bearer)
  do.call(curl::handle_setheaders, c(list(handle), headers))
  handle
}

# A response as list(status, json): its status code and its body read by jsonlite.
read_response <- function(response) {
  text <- rawToChar(response$content)
  list(
    status = response$status_code,
    json = jsonlite::fromJSON(text, simplifyVector = TRUE),
    text = text,
    headers = curl::parse_headers(response$headers)
  )
}

http <- function(url, body = NULL, bearer = token, headers = list()) {
  read_response(curl::curl_fetch_memory(url, handle = request_handle(body, bearer, headers)))
}

# Several requests at once (list(url, body, bearer) each), at most 8 connections: their
# responses in the order given.
http_concurrently <- function(requests) {
  pool <- curl::new_pool(total_con = 8, host_con = 8)
  responses <- vector("list", length(requests))
  for (i in seq_along(requests)) {
    local({
      index <- i
      request <- requests[[index]]
      curl::curl_fetch_multi(
        request$url,
        done = function(response) responses[[index]] <<- read_response(response),
        fail = function(message) responses[[index]] <<- list(status = NA, message = message),
        pool = pool, handle = request_handle(request$body, request$bearer %||% token, request$headers %||% list())
      )
    })
  }
  curl::multi_run(pool = pool, timeout = 120)
  responses
}

records <- function(df) as.character(jsonlite::toJSON(df, dataframe = "rows", digits = NA))

# Wait for the service: /health answers once the model is loaded and the port open.
local({
  deadline <- Sys.time() + 120
  repeat {
    up <- tryCatch(curl::curl_fetch_memory(paste0(served, "/health"))$status_code == 200L, error = function(e) FALSE)
    if (up) break
    if (!server$is_alive()) stop("the serving process ended: ", paste(server$read_all_error_lines(), collapse = "\n"))
    if (Sys.time() > deadline) stop("the service did not answer /health within 120 s")
    Sys.sleep(0.25)
  }
})

test_that("eight concurrent clients get predict()'s answers, as records, columns and classes", {
  batches <- lapply(1:16, function(i) serve_data(if (i %% 4 == 0) 50 else i, 100 + i))
  requests <- lapply(seq_along(batches), function(i) {
    body <- if (i %% 3 == 0) as.character(jsonlite::toJSON(as.list(batches[[i]]), digits = NA)) else
      records(batches[[i]])
    list(url = paste0(served, if (i %% 5 == 0) "/predict?type=class" else "/predict"), body = body)
  })
  responses <- http_concurrently(requests)
  for (i in seq_along(batches)) {
    response <- responses[[i]]
    expect_identical(response$status, 200L, label = paste("request", i))
    if (i %% 5 == 0) {
      expect_identical(response$json$predictions, as.character(predict(serve_fit, batches[[i]], type = "class")))
    } else {
      expected <- predict(serve_fit, batches[[i]])
      got <- as.matrix(response$json$predictions[colnames(expected)])
      expect_identical(dim(got), dim(expected))
      expect_equal(unname(got), unname(expected), tolerance = 1e-6)
    }
  }
})

test_that("one record as an object is one row; gpu_api() mounted in one's own app answers the same", {
  one <- serve_data(1, 7)
  expected <- predict(serve_fit, one)
  body <- as.character(jsonlite::toJSON(as.list(one), auto_unbox = TRUE, digits = NA))
  for (answer in list(http(paste0(served, "/predict"), body), http(paste0(mounted, "/predict"), body, bearer = NULL))) {
    expect_identical(answer$status, 200L)
    expect_equal(unlist(answer$json$predictions[1, colnames(expected)]), expected[1, ], tolerance = 1e-6)
  }
})

test_that(paste(
  "gpu_api() adds its routes to the caller's router, whose own routes its filter lets by; the token is that filter's"
), {
  own <- http(sprintf("http://127.0.0.1:%d/hello", ports[2]), bearer = NULL, headers = list(Host = "attacker.example"))
  expect_identical(own$status, 200L)
  expect_identical(own$json$hello, "world")
  secured <- sprintf("http://127.0.0.1:%d/secured", ports[2])
  rows <- serve_data(2, 21)
  expect_identical(http(paste0(secured, "/predict"), records(rows), bearer = NULL)$json$error, "unauthorized")
  expect_identical(http(paste0(secured, "/predict"), records(rows), bearer = "wrong")$status, 401L)
  expect_identical(http(paste0(secured, "/metadata"), bearer = NULL)$status, 401L)
  expect_identical(http(paste0(secured, "/health"), bearer = NULL)$status, 200L)
  # the token is checked before the Content-Type, as gpu_serve() does
  expect_identical(
    http(
      paste0(secured, "/predict"), records(rows), bearer = NULL, headers = list(`Content-Type` = "text/plain")
    )$status,
    401L
  )
  answer <- http(paste0(secured, "/predict"), records(rows))
  expect_identical(answer$status, 200L)
  expect_equal(
    unname(as.matrix(answer$json$predictions[c("high", "low")])), unname(predict(serve_fit, rows)), tolerance = 1e-6
  )
  expect_true(http(paste0(secured, "/metadata"))$json$token_required)
  # the routes under the other prefix take no token
  expect_identical(http(paste0(mounted, "/predict"), records(rows), bearer = NULL)$status, 200L)
})

test_that("bad requests get a 4xx naming what is wrong, concurrently, and the service goes on", {
  good <- serve_data(3, 11)
  bad <- list(
    list(body = "[{\"income\": 5", status = 400L, error = "malformed_json", message = "not valid JSON"),
    list(
      body = records(good[c("income", "member")]),
      status = 400L,
      error = "missing_column",
      message = "lacks column\\(s\\) .*: region",
      columns = "region"
    ),
    list(
      body = "[{\"income\": \"high\", \"region\": \"west\", \"member\": true}]",
      status = 400L,
      error = "wrong_type",
      message = "Column `income` must hold numbers, not strings",
      column = "income"
    ),
    list(
      body = "[{\"income\": 5, \"region\": \"south\", \"member\": true}]",
      status = 400L,
      error = "unseen_level",
      message = "Column `region` has level\\(s\\) .*\"south\"",
      column = "region",
      levels = "south"
    ),
    list(
      body = "[{\"income\": null, \"region\": \"west\", \"member\": true}]",
      status = 400L,
      error = "missing_value",
      message = "Column `income` is null",
      column = "income"
    ),
    list(
      body = records(serve_data(51, 12)),
      status = 413L,
      error = "too_many_rows",
      message = "51 rows; .* at most 50 per request \\(max_rows\\)"
    ),
    list(body = "[]", status = 400L, error = "no_rows", message = "no rows"),
    list(body = "[[5, 1, 0, 0, 1]]", status = 400L, error = "bad_body", message = "takes named columns: send records"),
    list(
      body = "{\"income\": [1, 2], \"region\": [\"west\"], \"member\": [true, true]}",
      status = 400L,
      error = "bad_body",
      message = "different lengths"
    ),
    list(body = records(good), bearer = "wrong", status = 401L, error = "unauthorized", message = "token is wrong"),
    list(body = records(good), bearer = "", status = 401L, error = "unauthorized", message = "token is wrong"),
    list(
      body = records(good),
      url = "/predict?type=probability",
      status = 400L,
      error = "bad_type",
      message = "type must be \"raw\" or \"class\""
    ),
    list(body = records(good), url = "/score", status = 404L, error = "not_found", message = "No route POST /score"),
    list(
      body = "[{\"income\": 1e400, \"region\": \"west\", \"member\": true}]",
      status = 400L,
      error = "bad_data",
      message = "Column `income` has Inf, NaN or numbers beyond float32's range",
      column = "income"
    ),
    list(
      body = paste0(
        "[{\"income\": 5, \"region\": \"west\", \"member\": true}, {\"income\": -1e308, \"region\": \"west\", ",
        "\"member\": true}]"
      ),
      status = 400L,
      error = "bad_data",
      message = "Column `income` .* in 1 row\\(s\\) \\(first: 2\\)",
      column = "income"
    ),
    list(
      body = records(good),
      headers = list(`Content-Type` = "text/plain"),
      status = 415L,
      error = "not_json",
      message = "`Content-Type: application/json`, not \"text/plain\""
    ),
    list(
      body = records(good),
      headers = list(Host = "attacker.example"),
      status = 403L,
      error = "forbidden_host",
      message = "not for \"attacker.example\": .*DNS rebinding"
    ),
    list(
      body = records(good),
      headers = list(Origin = "https://attacker.example"),
      status = 403L,
      error = "forbidden_origin",
      message = "web pages of other sites"
    ),
    list(
      body = records(good),
      headers = list(Origin = "null"),
      status = 403L,
      error = "forbidden_origin",
      message = "Origin: \"null\""
    ),
    list(
      body = records(good),
      headers = list(Host = "attacker.example", `Content-Type` = "text/plain"),
      bearer = "wrong",
      status = 403L,
      error = "forbidden_host",
      message = "attacker.example"
    )
  )
  requests <- lapply(
    bad,
    function(case) {
      list(
        url = paste0(served, case$url %||% "/predict"), body = case$body, bearer = case$bearer, headers = case$headers
      )
    }
  )
  responses <- http_concurrently(requests)
  for (i in seq_along(bad)) {
    case <- bad[[i]]
    response <- responses[[i]]
    expect_identical(response$status, case$status, label = case$error)
    expect_identical(response$json$error, case$error)
    expect_match(response$json$message, case$message)
    for (field in intersect(c("column", "columns", "levels"), names(case))) {
      expect_identical(response$json[[field]], case[[field]], label = paste(case$error, field))
    }
  }
  # no header at all: a 401 that says how to send the token
  answer <- read_response(curl::curl_fetch_memory(
    paste0(served, "/predict"), handle = curl::handle_setopt(curl::new_handle(), postfields = records(good))
  ))
  expect_identical(answer$status, 401L)
  expect_match(answer$json$message, "Authorization: Bearer <token>", fixed = TRUE)
  # and the service still answers, correctly
  expect_identical(http(paste0(served, "/health"), bearer = NULL)$json$status, "ok")
  after <- http(paste0(served, "/predict"), records(good))
  expect_equal(
    unname(as.matrix(after$json$predictions[c("high", "low")])), unname(predict(serve_fit, good)), tolerance = 1e-6
  )
})

# The serving process's resident memory, in MiB.
served_mib <- function() {
  status <- readLines(sprintf("/proc/%d/status", server$get_pid()))
  as.numeric(gsub("\\D", "", grep("^VmRSS:", status, value = TRUE))) / 1024
}

# A request written by hand on a socket, `head` its request line and headers, and no
# body sent: its status and JSON answer, read until the service closes the connection.
raw_http <- function(port, head) {
  con <- socketConnection("127.0.0.1", port, blocking = TRUE, open = "r+b", timeout = 30)
  on.exit(close(con))
  writeLines(c(head, ""), con, sep = "\r\n")
  response <- readLines(con, warn = FALSE)
  list(
    status = as.integer(strsplit(response[1], " ", fixed = TRUE)[[1]][2]),
    json = jsonlite::fromJSON(response[length(response)])
  )
}

test_that(paste(
  "a body over max_bytes is refused from its headers, unread, and a missing token before that; GET routes read none"
), {
  before <- served_mib()
  # 50 MB announced, with Expect: 100-continue, as curl's command line sends a large body:
  # the answer comes before a byte of it is sent
  announce <- function(request, ...) {
    c(
      paste(request, "HTTP/1.1"),
      sprintf("Host: 127.0.0.1:%d", ports[1]),
      ...,
      "Content-Length: 52428800",
      "Expect: 100-continue"
    )
  }
  large <- raw_http(
    ports[1], announce("POST /predict", paste("Authorization: Bearer", token), "Content-Type: application/json")
  )
  expect_identical(large$status, 413L)
  expect_identical(large$json$error, "too_large")
  expect_match(
    large$json$message,
    "The body is over 64.0 KiB; this service takes at most that (65536 bytes, max_bytes)",
    fixed = TRUE
  )
  # the server refuses it from its size alone, before any other check
  expect_identical(raw_http(ports[1], announce("POST /predict", "Content-Type: application/json"))$status, 413L)
  expect_identical(raw_http(ports[1], announce("GET /health"))$status, 413L)
  expect_identical(http(paste0(served, "/metadata"))$json$max_bytes, 65536L)
  # a GET's body is never parsed: this one is not JSON
  with_body <- curl::handle_setopt(request_handle("[{\"income\": ", token), customrequest = "GET")
  expect_identical(read_response(curl::curl_fetch_memory(paste0(served, "/metadata"), handle = with_body))$status, 200L)
  expect_lt(served_mib() - before, 20)
  expect_identical(http(paste0(served, "/health"), bearer = NULL)$json$status, "ok")
})

# GET /health twice on one connection, `pause` seconds apart: each answer's status line, NA
# where the service had closed the connection.
kept_alive_after <- function(port, pause) {
  con <- socketConnection("127.0.0.1", port, blocking = TRUE, open = "r+b", timeout = 30)
  on.exit(close(con))
  ask <- function() {
    writeLines(c("GET /health HTTP/1.1", sprintf("Host: 127.0.0.1:%d", port), ""), con, sep = "\r\n")
    status <- readLines(con, n = 1L, warn = FALSE)
    if (!length(status)) return(NA_character_)
    size <- 0L
    repeat {
      line <- readLines(con, n = 1L, warn = FALSE)
      if (!length(line) || !nzchar(line)) break
      if (grepl("^content-length:", line, ignore.case = TRUE)) size <- as.integer(sub("^[^:]*:", "", line))
    }
    readChar(con, size, useBytes = TRUE)
    status
  }
  first <- ask()
  Sys.sleep(pause)
  c(first, tryCatch(ask(), error = function(e) NA_character_))
}

test_that("gpu_serve(limits = ) sets the server's: headers over max_head_bytes get a 431, idle connections stay open", {
  padded <- raw_http(ports[1], c(
    "GET /health HTTP/1.1", sprintf("Host: 127.0.0.1:%d", ports[1]), paste("X-Padding:", strrep("a", 9000))
  ))
  expect_identical(padded$status, 431L)
  expect_identical(padded$json$error, "headers_too_large")
  expect_match(padded$json$message, "at most 8192 bytes", fixed = TRUE)
  # keep_alive_seconds = 60: still open after the default's 5 s
  expect_identical(kept_alive_after(ports[1], 6), rep("HTTP/1.1 200 OK", 2))
})

# The service's server: the process gpu_serve()'s R started, which listens on its port.
front_pid <- function() {
  as.integer(system2("pgrep", c("-P", server$get_pid(), "-f", "gpukeras/serve/server.py"), stdout = TRUE))
}

test_that("gpu_serve()'s server scores on its own: with R stopped, it refuses, predicts and answers /health", {
  expect_length(front_pid(), 1L)
  tools::pskill(server$get_pid(), tools::SIGSTOP)
  withr::defer(tools::pskill(server$get_pid(), tools::SIGCONT))
  large <- raw_http(ports[1], c(
    "POST /predict HTTP/1.1", sprintf("Host: 127.0.0.1:%d", ports[1]), "Content-Type: application/json",
    "Content-Length: 52428800"
  ))
  expect_identical(large$status, 413L)
  expect_identical(http(paste0(served, "/health"), bearer = NULL)$json$status, "ok")
  rows <- serve_data(3, 31)
  answer <- http(paste0(served, "/predict"), records(rows))
  expect_equal(
    unname(as.matrix(answer$json$predictions[c("high", "low")])), unname(predict(serve_fit, rows)), tolerance = 1e-6
  )
})

test_that("8,000 records each with a key of its own build no table; /health answers while such bodies are in flight", {
  before <- served_mib()
  # on gpu_api() with the default max_rows (10,000): these bodies (95 KB) are within its max_bytes
  own_keys <- sprintf("[%s]", paste0("{\"k", 1:8000, "\": 1}", collapse = ","))
  key_columns <- sprintf("{%s}", paste0("\"k", 1:8000, "\": [1]", collapse = ","))
  flowers <- iris[rep(1:150, length.out = 2000), 1:4]
  noted <- sprintf(
    "[%s]",
    paste(sprintf(
      paste0(
        "{\"Sepal.Length\": %s, \"Sepal.Width\": %s, \"Petal.Length\": %s, \"Petal.Width\": %s, \"note\": {\"k%d\": ",
        "[1, {\"k%d\": 2}]}}"
      ),
      flowers$Sepal.Length, flowers$Sepal.Width, flowers$Petal.Length, flowers$Petal.Width, seq_len(2000), seq_len(2000)
    ), collapse = ",")
  )
  hostile <- list(own_keys, key_columns, own_keys, key_columns, own_keys, own_keys)
  requests <- c(
    lapply(hostile, function(body) list(url = paste0(on_matrix, "/predict"), body = body)),
    list(list(url = paste0(on_matrix, "/predict"), body = noted)),
    rep(list(list(url = paste0(served, "/health"))), 3)
  )
  responses <- http_concurrently(requests[c(1, 8, 2, 3, 9, 4, 5, 10, 6, 7)])
  statuses <- vapply(responses, `[[`, integer(1), "status")
  expect_identical(statuses, c(400L, 200L, 400L, 400L, 200L, 400L, 400L, 200L, 400L, 200L))
  for (response in responses[statuses == 400L]) {
    expect_identical(response$json$error, "missing_column")
    expect_identical(response$json$columns, colnames(iris)[1:4])
  }
  # the records' other keys, nested ones too, are never read
  expected <- predict(matrix_fit, as.matrix(flowers))
  expect_equal(
    unname(as.matrix(responses[[10]]$json$predictions[levels(iris$Species)])), unname(expected), tolerance = 1e-6
  )
  # each such body made an 8,000 x 8,000 table before: 0.75 GB and 15 s
  expect_lt(served_mib() - before, 150)
})

test_that("gpu_serve() answers a refused body a quarter of a second late, and other requests meanwhile", {
  refused <- sprintf("[%s]", paste0("{\"k", 1:200, "\": 1}", collapse = ","))
  pool <- curl::new_pool(total_con = 4, host_con = 4)
  began <- Sys.time()
  done <- list()
  finish <- function(name) {
    force(name)
    function(response) done[[name]] <<- list(status = response$status_code, at = Sys.time())
  }
  curl::curl_fetch_multi(
    paste0(served, "/predict"), done = finish("refused"), pool = pool, handle = request_handle(refused, token)
  )
  for (i in 1:3) curl::curl_fetch_multi(paste0(served, "/health"), done = finish(paste0("health", i)), pool = pool)
  curl::multi_run(pool = pool, timeout = 60)
  expect_identical(done$refused$status, 400L)
  expect_gte(as.numeric(difftime(done$refused$at, began, units = "secs")), 0.25)
  # the three /health requests were answered while the refused one waited
  expect_identical(names(done)[[4]], "refused")
  expect_true(all(vapply(done, `[[`, integer(1), "status")[-4] == 200L))
})

test_that("an answer echoes at most a few short values of what the client sent, as valid UTF-8", {
  levels <- c(strrep("x", 300), sprintf("level %d", 1:20))
  unseen <- http(paste0(served, "/predict"), records(data.frame(income = 5, region = levels, member = TRUE)))
  expect_identical(unseen$status, 400L)
  expect_identical(unseen$json$levels, c(paste0(strrep("x", 37), "..."), sprintf("level %d", 1:4)))
  expect_match(unseen$json$message, "\"level 4\" and 16 more. It knows \"east\", \"north\", \"west\".", fixed = TRUE)
  expect_lt(nchar(unseen$text), 600)
  invalid <- c(
    charToRaw("[{\"income\": 5, \"region\": \"we"), as.raw(c(0xff, 0x01)), charToRaw("st\", \"member\": true}]")
  )
  answer <- read_response(curl::curl_fetch_memory(paste0(served, "/predict"), handle = request_handle(invalid, token)))
  expect_identical(answer$json$error, "malformed_json")
  expect_true(validUTF8(answer$text))
  expect_false(grepl("[[:cntrl:]]", answer$json$message))
  long_type <- http(paste0(served, "/predict?type=", strrep("z", 500)), records(serve_data(1, 3)))
  expect_match(long_type$json$message, sprintf("not \"%s...\"", strrep("z", 37)), fixed = TRUE)
})

test_that(paste(
  "a web page's Host or Origin is refused by gpu_api()'s routes too; allowed_hosts and local pages are answered"
), {
  one <- records(iris[1, 1:4])
  for (headers in list(
    list(Host = "attacker.example"), list(Origin = "http://attacker.example:8000"), list(Host = "127.attacker.example")
  )) {
    expect_identical(
      http(paste0(mounted, "/health"), bearer = NULL, headers = headers)$status, 403L, label = names(headers)
    )
    expect_identical(
      http(paste0(on_matrix, "/predict"), one, bearer = NULL, headers = headers)$status, 403L, label = names(headers)
    )
  }
  expect_identical(
    http(
      paste0(mounted, "/predict"),
      records(serve_data(1, 3)),
      bearer = NULL,
      headers = list(`Content-Type` = "text/plain")
    )$json$error,
    "not_json"
  )
  named <- http(
    paste0(on_matrix, "/predict"),
    one,
    bearer = NULL,
    headers = list(Host = sprintf("Scoring.Example:%d", ports[3]), Origin = "https://scoring.example")
  )
  expect_identical(named$status, 200L)
  for (headers in list(
    list(Origin = sprintf("http://localhost:%d", ports[1])), list(Host = sprintf("[::1]:%d", ports[1])),
    list(Host = "localhost.")
  )) {
    expect_identical(
      http(paste0(served, "/health"), bearer = NULL, headers = headers)$status, 200L, label = unlist(headers)
    )
  }
})

test_that("a model of a matrix takes its columns by name, or rows of numbers", {
  rows <- as.matrix(iris[c(1, 51, 101, 150), 1:4])
  expected <- predict(matrix_fit, rows)
  by_name <- http(paste0(on_matrix, "/predict"), records(as.data.frame(rows[, 4:1])), bearer = NULL)
  expect_identical(by_name$status, 200L)
  expect_equal(unname(as.matrix(by_name$json$predictions[levels(iris$Species)])), unname(expected), tolerance = 1e-6)
  as_rows <- http(
    paste0(on_matrix, "/predict?type=class"), as.character(jsonlite::toJSON(unname(rows), digits = NA)), bearer = NULL
  )
  expect_identical(as_rows$json$predictions, as.character(predict(matrix_fit, rows, type = "class")))
  lacking <- http(paste0(on_matrix, "/predict"), records(as.data.frame(rows[, 1:3])), bearer = NULL)
  expect_identical(lacking$status, 400L)
  expect_identical(lacking$json$columns, "Petal.Width")
  text <- http(
    paste0(on_matrix, "/predict"),
    "[{\"Sepal.Length\": \"long\", \"Sepal.Width\": 3, \"Petal.Length\": 1, \"Petal.Width\": 0.2}]",
    bearer = NULL
  )
  expect_identical(text$status, 400L)
  expect_identical(text$json$error, "wrong_type")
  expect_identical(text$json$column, "Sepal.Length")
  short <- http(paste0(on_matrix, "/predict"), "[[5.1, 3.5, 1.4, 0.2], [4.9, 3.0, 1.4]]", bearer = NULL)
  expect_identical(short$status, 400L)
  expect_identical(short$json$error, "bad_data")
  expect_match(
    short$json$message,
    "Each row must hold 4 numbers (Sepal.Length, Sepal.Width, Petal.Length, Petal.Width); row 2 holds 3.",
    fixed = TRUE
  )
  # jsonlite reads "NaN" in an array of numbers as NaN
  not_a_number <- http(paste0(on_matrix, "/predict"), "[[5.1, 3.5, 1.4, 0.2], [4.9, 3.0, 1.4, \"NaN\"]]", bearer = NULL)
  expect_identical(not_a_number$json$error, "bad_data")
  expect_identical(not_a_number$json$column, "Petal.Width")
  expect_identical(not_a_number$json$rows, 2L)
  beyond <- http(
    paste0(on_matrix, "/predict"),
    "[{\"Sepal.Length\": 5.1, \"Sepal.Width\": 1e39, \"Petal.Length\": 1.4, \"Petal.Width\": 0.2}]",
    bearer = NULL
  )
  expect_identical(beyond$json$error, "bad_data")
  expect_identical(beyond$json$column, "Sepal.Width")
  meta <- http(paste0(on_matrix, "/metadata"), bearer = NULL)$json
  expect_identical(meta$input$form, "records or rows")
  expect_identical(meta$input$columns$name, colnames(rows))
})

test_that("/metadata lists the inputs with their types and levels, the outputs and the versions, behind the token", {
  expect_identical(http(paste0(served, "/metadata"), bearer = NULL)$status, 401L)
  meta <- http(paste0(served, "/metadata"))
  expect_identical(meta$status, 200L)
  columns <- meta$json$input$columns
  expect_identical(columns$name, c("income", "region", "member"))
  expect_identical(columns$type, c("numeric", "factor", "logical"))
  expect_identical(columns$levels[[2]], c("east", "north", "west"))
  expect_identical(meta$json$classes, c("high", "low"))
  expect_identical(meta$json$max_rows, 50L)
  expect_true(meta$json$token_required)
  expect_identical(meta$json$outputs$shape[[1]], c(NA, 2L))
  # the output as Keras names it (the output layer), not its symbolic tensor's keras_tensor_n
  expect_match(meta$json$outputs$name, "^dense")
  expect_identical(meta$json$versions$gpukeras, as.character(utils::packageVersion("gpukeras")))
  expect_identical(meta$json$versions$plumber, as.character(utils::packageVersion("plumber")))
  expect_false(http(paste0(mounted, "/metadata"), bearer = NULL)$json$token_required)
})

test_that("a port in use is a classed error before serving; another host without a token is warned about", {
  expect_error(gpu_serve(serve_fit, port = ports[1], quiet = TRUE), class = "gpukeras_error_port_in_use")
  busy_port <- free_ports(1L)
  busy <- serverSocket(busy_port) # every interface
  withr::defer(close(busy))
  expect_warning(
    expect_error(
      gpu_serve(serve_fit, port = busy_port, host = "0.0.0.0", quiet = TRUE), class = "gpukeras_error_port_in_use"
    ),
    class = "gpukeras_warning_serve_open"
  )
})

test_that("400 connections holding an unfinished body leave /health answering at once", {
  before <- served_mib()
  held <- processx::run(
    gpukeras_python(), c(normalizePath(test_path("hold_connections.py")), ports[1], 400, 10),
    timeout = 120
  )
  result <- jsonlite::fromJSON(held$stdout)
  expect_identical(result$held, 400L)
  # each of the 10 was answered within the script's 5 s (a status of 0 otherwise); how fast, on
  # a quiet machine, is bench/serve.R's to say, not a test's on a busy one
  expect_identical(result$statuses, rep(200L, 10))
  expect_lt(served_mib() - before, 100)
})

test_that("the server ends with the service's R process, however that ends, and no copy of the model stays", {
  front <- front_pid()
  expect_length(front, 1L)
  # the server's folder (its stderr, server.log, is there): the model it loaded is gone
  # already, so that an R process ended by a signal leaves no copy of it
  folder <- dirname(Sys.readlink(file.path("/proc", front, "fd", "2")))
  expect_match(basename(folder), "^gpukeras-serve-")
  expect_identical(dir(folder, all.files = TRUE, no.. = TRUE), "server.log")
  server$kill() # SIGKILL: no on.exit() of R's runs
  deadline <- Sys.time() + 10
  while (dir.exists(file.path("/proc", front)) && Sys.time() < deadline) Sys.sleep(0.1)
  expect_false(dir.exists(file.path("/proc", front)))
  expect_error(curl::curl_fetch_memory(paste0(served, "/health")))
})
