# Bad arguments to gpu_export() (issue #36, item 1). Each row must fail with a classed
# error whose message says what to do (see helper-bad-input.R), before Python starts,
# and write nothing.

# nolint start: line_length_linter. One case a row, its columns aligned.
checked <- check_before_python(bad_inputs(
  ~name,                                ~code,                                                        ~class,         ~message,
  "object: a number",                   gpu_export(1, file.path(dir, "m")),                           "bad_argument", "^`object` must be a gpu_fit\\(\\) result or a gpu_load\\(\\) model, not `1`",
  "object: a Keras-like list",          gpu_export(list(model = 1), file.path(dir, "m")),             "bad_argument", "^`object` must be a gpu_fit\\(\\) result.*model\\$export\\(path\\)",
  "path: missing",                      gpu_export(fit),                                              "bad_argument", "^`path` is missing: give the SavedModel's folder",
  "path: two",                          gpu_export(fit, c("a", "b")),                                 "bad_argument", "^`path` must be one non-empty string",
  "path: exists",                       gpu_export(fit, existing),                                    "bad_argument", "already exists.*overwrite = TRUE",
  "path: the ONNX JSON exists",         gpu_export(fit, file.path(dir, "taken.onnx"), format = "onnx"), "bad_argument", "taken.gpukeras.json' already exists",
  "path: in no folder",                 gpu_export(fit, file.path(dir, "no", "m")),                   "bad_argument", "the folder '.*/no' does not exist",
  "path: a .keras file for a SavedModel", gpu_export(fit, file.path(dir, "m.keras")),                 "bad_argument", "is a folder for format = \"savedmodel\", not a file name",
  "path: not .onnx for ONNX",           gpu_export(fit, file.path(dir, "m"), format = "onnx"),        "bad_argument", "^`path` must end in .onnx for format = \"onnx\"",
  "format: unknown",                    gpu_export(fit, file.path(dir, "m"), format = "pmml"),        "bad_argument", "^`format` must be one of \"savedmodel\", \"onnx\", not `pmml`",
  "unknown: unknown",                   gpu_export(fit, file.path(dir, "m"), unknown = "skip"),       "bad_argument", "^`unknown` must be one of \"error\", \"zero\", \"code\"",
  "overwrite: NA",                      gpu_export(fit, file.path(dir, "m"), overwrite = NA),         "bad_argument", "^`overwrite` must be TRUE or FALSE",
  "a misspelt argument",                gpu_export(fit, file.path(dir, "m"), formats = "onnx"),       "bad_argument", "Did you mean `format`"
), setup = quote({
# nolint end
  fit <- structure(list(model = NULL), class = "gpukeras_fit")
  dir <- tempfile("export-")
  dir.create(dir)
  existing <- file.path(dir, "served")
  dir.create(existing)
  writeLines("{}", file.path(dir, "taken.gpukeras.json"))
}))

for (result in checked) {
  test_that(paste(result$case$name, "(before Python starts)"), {
    expect_bad_input(result$error, result$case)
    expect_false(result$started_python, label = paste(deparse(result$case$code), collapse = " "))
  })
}

test_that("gpu_export()'s messages read as they should, and nothing is written", {
  dir <- withr::local_tempdir()
  dir.create(file.path(dir, "served"))
  fit <- structure(list(model = NULL), class = "gpukeras_fit")
  expect_snapshot(error = TRUE, transform = function(lines) gsub(dir, "<dir>", lines, fixed = TRUE), {
    gpu_export(iris, file.path(dir, "m"))
    gpu_export(fit, file.path(dir, "served"))
    gpu_export(fit, file.path(dir, "m"), format = "pmml")
    gpu_export(fit, file.path(dir, "m.keras"))
  })
  expect_identical(list.files(dir, all.files = TRUE, no.. = TRUE), "served")
})
