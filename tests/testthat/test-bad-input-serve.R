# Bad inputs to gpu_serve() and gpu_api(): each row must fail with a classed error whose
# message says what to do (see helper-bad-input.R), before Python starts and before
# anything listens. Bad requests to a running service are test-serve.R's.

# nolint start: line_length_linter. One case a row, its columns aligned.
checked <- check_before_python(bad_inputs(
  ~name,                                  ~code,                                                  ~class,            ~message,
  "gpu_serve: fit a path",                gpu_serve("model.keras"),                               "bad_argument",    "^`fit` must be a gpu_fit\\(\\) result or a gpu_load\\(\\) model, not `model.keras`",
  "gpu_api: fit a Keras model",           gpu_api(list(layers = 2)),                              "bad_argument",    "^`fit` must be a gpu_fit\\(\\) result .*save it with gpu_save\\(\\)",
  "gpu_serve: port zero",                 gpu_serve(fake_fit, port = 0),                          "bad_argument",    "^`port` must be one whole number from 1 to 65535, not `0`",
  "gpu_serve: port too high",             gpu_serve(fake_fit, port = 70000),                      "bad_argument",    "^`port` must be one whole number from 1 to 65535, not `70000`",
  "gpu_serve: port a string",             gpu_serve(fake_fit, port = "8000"),                     "bad_argument",    "^`port` must be one whole number from 1 to 65535, not `8000`",
  "gpu_serve: port not whole",            gpu_serve(fake_fit, port = 8000.5),                     "bad_argument",    "^`port` must be one whole number",
  "gpu_serve: host empty",                gpu_serve(fake_fit, host = ""),                         "bad_argument",    "^`host` must be one non-empty string",
  "gpu_serve: host NA",                   gpu_serve(fake_fit, host = NA),                         "bad_argument",    "^`host` must be one non-empty string",
  "gpu_serve: two hosts",                 gpu_serve(fake_fit, host = c("127.0.0.1", "::1")),      "bad_argument",    "^`host` must be one non-empty string, not a character of length 2",
  "gpu_serve: quiet NA",                  gpu_serve(fake_fit, quiet = NA),                        "bad_argument",    "^`quiet` must be TRUE or FALSE",
  "gpu_serve: token empty",               gpu_serve(fake_fit, token = ""),                        "bad_argument",    "^`token` must be NULL or one non-empty string without spaces.*Authorization: Bearer",
  "gpu_api: token with a space",          gpu_api(fake_fit, token = "my secret"),                 "bad_argument",    "^`token` must be NULL or one non-empty string without spaces, not a string with spaces",
  "gpu_api: token a number, not shown",   gpu_api(fake_fit, token = 1234),                        "bad_argument",    "^`token` must be NULL or one non-empty string without spaces, not a numeric of length 1\\.",
  "gpu_api: two tokens",                  gpu_api(fake_fit, token = c("a", "b")),                 "bad_argument",    "^`token` must be NULL or one non-empty string without spaces, not a character of length 2",
  "gpu_api: max_rows zero",               gpu_api(fake_fit, max_rows = 0),                        "bad_argument",    "^`max_rows` must be one whole number >= 1, not `0`",
  "gpu_api: max_rows not whole",          gpu_api(fake_fit, max_rows = 2.5),                      "bad_argument",    "^`max_rows` must be one whole number >= 1",
  "gpu_serve: batch_size zero",           gpu_serve(fake_fit, batch_size = 0),                    "bad_argument",    "^`batch_size` must be one whole number >= 1",
  "gpu_api: max_bytes zero",              gpu_api(fake_fit, max_bytes = 0),                       "bad_argument",    "^`max_bytes` must be NULL or one whole number of bytes >= 1, not `0`",
  "gpu_serve: max_bytes a string",        gpu_serve(fake_fit, max_bytes = "1MB"),                 "bad_argument",    "^`max_bytes` must be NULL or one whole number of bytes >= 1, not `1MB`",
  "gpu_api: allowed_hosts a URL",         gpu_api(fake_fit, allowed_hosts = "http://a.example"),  "bad_argument",    "^`allowed_hosts` must be NULL or host names \\(no scheme, path or spaces\\), not `http://a.example`.*Host header",
  "gpu_serve: allowed_hosts NA",          gpu_serve(fake_fit, allowed_hosts = NA_character_),     "bad_argument",    "^`allowed_hosts` must be NULL or host names \\(no scheme, path or spaces\\)",
  "gpu_api: unknown not a rule",          gpu_api(fake_fit, unknown = "skip"),                    "bad_argument",    "^`unknown` must be one of \"error\", \"zero\", \"code\", not `skip`",
  "gpu_serve: limits a list",             gpu_serve(fake_fit, limits = list(body_seconds = 60)),  "bad_argument",    "^`limits` must be gpu_serve_limits\\(\\.\\.\\.\\) or NULL, not a list",
  "gpu_serve_limits: body_seconds zero",  gpu_serve_limits(body_seconds = 0),                     "bad_argument",    "^`body_seconds` must be one number from 0.01 to 3600, not `0`",
  "gpu_serve_limits: keep-alive a string", gpu_serve_limits(keep_alive_seconds = "60"),           "bad_argument",    "^`keep_alive_seconds` must be one number from 0.01 to 3600",
  "gpu_serve_limits: no connections",     gpu_serve_limits(max_connections = 0),                  "bad_argument",    "^`max_connections` must be one whole number from 1 to 65536, not `0`",
  "gpu_serve_limits: headers too small",  gpu_serve_limits(max_head_bytes = 100),                 "bad_argument",    "^`max_head_bytes` must be one whole number from 1024 to 1048576, not `100`",
  "gpu_serve_limits: negative delay",     gpu_serve_limits(refusal_delay = -1),                   "bad_argument",    "^`refusal_delay` must be one number from 0 to 10, not `-1`",
  "gpu_serve: misspelt port",             gpu_serve(fake_fit, prot = 8000),                       "bad_argument",    "^gpu_serve\\(\\) has no argument `prot`.*Did you mean `port` for `prot`",
  "gpu_api: a port",                      gpu_api(fake_fit, port = 8000),                         "bad_argument",    "^gpu_api\\(\\) has no argument `port`.*plumber::pr_run\\(api, host = , port = \\)",
  "gpu_api: several inputs",              gpu_api(several_fit),                                   "bad_argument",    "^gpu_serve\\(\\) serves a model with one input; this one has 2 \\(a, b\\)",
  "gpu_api: no model in the fit",         gpu_api(fake_fit),                                      "bad_argument",    "^This result holds no model to score with",
  "a suggested package missing",          check_suggested("notapackage", "gpu_serve()"),          "package_missing", "^gpu_serve\\(\\) needs the R package notapackage.*install.packages\\(\"notapackage\"\\).*r-cran-notapackage"
), setup = quote({
# nolint end
  fake_fit <- structure(list(model = NULL, encoding = NULL), class = "gpukeras_fit")
  several_fit <- structure(
    list(
      model = NULL, encoding = list(several = TRUE, inputs = list(a = list(type = "array"), b = list(type = "array")))
    ),
    class = "gpukeras_fit"
  )
}))

for (result in checked) {
  test_that(paste(result$case$name, "(before Python starts)"), {
    expect_bad_input(result$error, result$case)
    expect_false(result$started_python, label = paste(deparse(result$case$code), collapse = " "))
  })
}

test_that("gpu_serve()'s and gpu_api()'s messages read as they should", {
  fake_fit <- structure(list(model = NULL, encoding = NULL), class = "gpukeras_fit")
  expect_snapshot(error = TRUE, {
    gpu_serve("model.keras")
    gpu_serve(fake_fit, port = 70000)
    gpu_api(fake_fit, token = "my secret")
    gpu_api(fake_fit, token = 1234)
    gpu_api(fake_fit, max_bytes = -1)
    gpu_serve(fake_fit, allowed_hosts = "scoring.example:8000/")
    gpu_api(fake_fit, port = 8000)
    check_suggested("notapackage", "gpu_serve()")
  })
})
