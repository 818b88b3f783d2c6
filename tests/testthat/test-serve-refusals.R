# What gpu_api() and gpu_serve() refuse before any request, and gpu_api()'s routes in a
# router of the caller's. The refusals of requests, header by header and body by body,
# are the core's (python/tests/test_serve_service.py); test-serve.R sends them over real
# HTTP.

test_that("gpu_api() adds its routes beside the caller's, and describes /predict from the encoding", {
  skip_if_no_python()
  skip_if_not_installed("plumber")
  keras <- gpu_keras()
  model <- keras$Sequential(list(keras$Input(shape = list(3L)), keras$layers$Dense(2L, activation = "softmax")))
  encoding <- list(
    inputs = list(x = list(
      type = "data.frame", column_order = c("income", "region"),
      columns = list(income = list(type = "numeric"), region = list(type = "factor", levels = c("east", "west")))
    )),
    input_order = "x", several = FALSE, na = "error"
  )
  served <- core_call("serve_service", model = model, encoding = encoding, settings = list(max_rows = 50L))
  mine <- plumber::pr_get(plumber::pr(), "/mine", function() "mine")
  api <- serve_routes(served, mine, "/model")
  expect_identical(api, mine)
  spec <- api$getApiSpec()
  expect_identical(names(spec$paths), c("/mine", "/model/predict", "/model/metadata", "/model/health"))
  post <- spec$paths[["/model/predict"]]$post
  expect_snapshot(writeLines(as.character(jsonlite::toJSON(post$requestBody, auto_unbox = TRUE, pretty = TRUE))))
})

test_that("gpu_serve_limits() holds the server's limits, checked, and prints them", {
  limits <- gpu_serve_limits(keep_alive_seconds = 65, max_connections = 200)
  expect_s3_class(limits, "gpukeras_serve_limits")
  expect_identical(limits$keep_alive_seconds, 65)
  expect_identical(limits$max_connections, 200L)
  expect_identical(gpu_serve_limits()$max_head_bytes, 65536L)
  expect_snapshot(print(limits))
})

test_that("gpu_api()'s router and prefix are checked before the model", {
  expect_snapshot(error = TRUE, {
    gpu_api(NULL, prefix = "model/")
    gpu_api(NULL, router = list())
  })
})

test_that("the server that ended or did not start is a classed error with what it said", {
  log <- withr::local_tempfile(lines = c("Traceback (most recent call last):", "OSError: [Errno 98] address in use"))
  expect_snapshot(serve_server_failed("did not start", log, call("gpu_serve")), error = TRUE)
  expect_error(serve_server_failed("ended", tempfile(), NULL), class = "gpukeras_error_serve_server")
})
