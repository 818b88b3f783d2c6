# Bad `file` and `overwrite` arguments to predict(fit, newdata, file = ) (issue #36, item 3).
# Each row must fail with a classed error whose message says what to do (see
# helper-bad-input.R), before Python starts, and write nothing.

# nolint start: line_length_linter. One case a row, its columns aligned.
checked <- check_before_python(bad_inputs(
  ~name,                          ~code,                                                   ~class,         ~message,
  "file: a number",               predict(fit, new, file = 1),                             "bad_argument", "^`file` must be one file path \\(a string\\), such as \"predictions.csv\", not `1`",
  "file: two paths",              predict(fit, new, file = c("a.csv", "b.csv")),           "bad_argument", "^`file` must be one file path \\(a string\\).*not a character of length 2",
  "file: NA",                     predict(fit, new, file = NA_character_),                 "bad_argument", "^`file` must be one file path",
  "file: empty",                  predict(fit, new, file = ""),                            "bad_argument", "^`file` must be one file path",
  "file: a folder",               predict(fit, new, file = dir),                           "bad_argument", "is a folder. Give a file name in it, such as file.path\\(",
  "file: in no folder",           predict(fit, new, file = file.path(dir, "no", "p.csv")), "bad_argument", "the folder \".*/no\" does not exist. Create it first with dir.create\\(\\)",
  "file: exists",                 predict(fit, new, file = existing),                      "bad_argument", "already exists. Give overwrite = TRUE to replace it",
  "overwrite: NA",                predict(fit, new, file = "p.csv", overwrite = NA),       "bad_argument", "^`overwrite` must be TRUE or FALSE",
  "overwrite: without file",      predict(fit, new, overwrite = TRUE),                     "bad_argument", "^`overwrite` is for `file`",
  "file: a model from gpu_load()", predict(model, new, file = existing),                   "bad_argument", "already exists"
), setup = quote({
# nolint end
  fit <- structure(list(model = NULL), class = "gpukeras_fit")
  model <- structure(list(model = NULL), class = "gpukeras_model")
  new <- data.frame(a = 1:3)
  dir <- tempfile("predict-file-")
  dir.create(dir)
  existing <- file.path(dir, "exists.csv")
  writeLines("keep", existing)
}))

for (result in checked) {
  test_that(paste(result$case$name, "(before Python starts)"), {
    expect_bad_input(result$error, result$case)
    expect_false(result$started_python, label = paste(deparse(result$case$code), collapse = " "))
  })
}

test_that("predict(file = )'s messages read as they should", {
  dir <- withr::local_tempdir()
  writeLines("keep", file.path(dir, "exists.csv"))
  fit <- structure(list(model = NULL), class = "gpukeras_fit")
  new <- data.frame(a = 1:3)
  expect_snapshot(error = TRUE, transform = function(lines) gsub(dir, "<dir>", lines, fixed = TRUE), {
    predict(fit, new, file = c("a.csv", "b.csv"))
    predict(fit, new, file = dir)
    predict(fit, new, file = file.path(dir, "no", "p.csv"))
    predict(fit, new, file = file.path(dir, "exists.csv"))
  })
  expect_identical(readLines(file.path(dir, "exists.csv")), "keep")
  expect_identical(list.files(dir, all.files = TRUE, no.. = TRUE), "exists.csv")
})
