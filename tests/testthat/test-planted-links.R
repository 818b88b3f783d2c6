# Writes never follow a link at the destination (issue #59, item 3): a link planted where
# predict(file = ), gpu_save() or gpu_export() writes is replaced by what they write, as a
# rename replaces a name; the file or folder it points to (a victim's) is left as it was.

skip_if_no_python()

link_fit <- function() {
  keras <- gpu_keras()
  model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(3L, activation = "softmax")))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  gpu_fit(model, list(x = iris[, 1:4], y = iris$Species), epochs = 1, verbose = 0, monitor = FALSE, seed = 1)
}

# A victim's file in a folder of its own, and a link to it at `at`.
plant_link <- function(at, victim_dir, name = "victim.txt") {
  dir.create(victim_dir, showWarnings = FALSE)
  victim <- file.path(victim_dir, name)
  writeLines("the victim's own data", victim)
  stopifnot(file.symlink(victim, at))
  victim
}

expect_replaced_link <- function(at, victim, victim_dir, leftovers = "victim.txt") {
  expect_false(is_link(at)) # the name itself now holds what was written
  expect_identical(readLines(victim), "the victim's own data")
  expect_setequal(list.files(victim_dir, all.files = TRUE, no.. = TRUE), leftovers)
}

test_that("a name is taken by a file, a folder or a link (a dangling one too), not by nothing", {
  dir <- withr::local_tempdir()
  stopifnot(file.symlink(file.path(dir, "nowhere"), file.path(dir, "dangling")))
  writeLines("x", file.path(dir, "file"))
  expect_identical(path_taken(file.path(dir, c("file", "dangling", ".", "nothing"))), c(TRUE, TRUE, TRUE, FALSE))
  expect_identical(is_link(file.path(dir, c("file", "dangling", "nothing"))), c(FALSE, TRUE, FALSE))
})

test_that("predict(file = , overwrite = TRUE) replaces a link at `file`, and leaves its target alone", {
  fit <- link_fit()
  dir <- withr::local_tempdir()
  at <- file.path(dir, "predictions.csv")
  victim <- plant_link(at, file.path(dir, "victim"))
  expect_error(predict(fit, iris[1:5, 1:4], file = at), "already exists", class = "gpukeras_error_bad_argument")
  written <- predict(fit, iris[1:5, 1:4], file = at, overwrite = TRUE)
  expect_identical(written$path, normalizePath(at))
  expect_replaced_link(at, victim, file.path(dir, "victim"))
  expect_identical(nrow(utils::read.csv(at)), 5L)

  # a link to a folder is replaced too, and a dangling link counts as taken
  unlink(at)
  stopifnot(
    file.symlink(file.path(dir, "victim"), at), file.symlink(file.path(dir, "nowhere"), file.path(dir, "dangling.csv"))
  )
  predict(fit, iris[1:5, 1:4], file = at, overwrite = TRUE)
  expect_replaced_link(at, victim, file.path(dir, "victim"))
  expect_error(
    predict(fit, iris[1:5, 1:4], file = file.path(dir, "dangling.csv")),
    "already exists",
    class = "gpukeras_error_bad_argument"
  )
})

test_that("gpu_save(overwrite = TRUE) replaces links at the model and at its encoding file", {
  fit <- link_fit()
  dir <- withr::local_tempdir()
  at <- file.path(dir, "model.keras")
  victims <- file.path(dir, "victim")
  victim <- plant_link(at, victims)
  other <- plant_link(file.path(dir, "model.gpukeras.json"), victims, "other.txt")
  expect_error(gpu_save(fit, at), "already exist", class = "gpukeras_error_bad_argument")
  written <- gpu_save(fit, at, overwrite = TRUE)
  expect_identical(written$model, normalizePath(at))
  expect_replaced_link(at, victim, victims, c("victim.txt", "other.txt"))
  expect_false(is_link(file.path(dir, "model.gpukeras.json")))
  expect_identical(readLines(other), "the victim's own data")
  expect_s3_class(gpu_load(at), "gpukeras_model")
})

test_that("gpu_export(overwrite = TRUE) replaces a link to a folder, and removes nothing in that folder", {
  skip_if_not(reticulate::py_module_available("tensorflow"), "a SavedModel needs TensorFlow")
  fit <- link_fit()
  dir <- withr::local_tempdir()
  at <- file.path(dir, "served")
  victims <- file.path(dir, "victim")
  victim <- plant_link(file.path(dir, "unused"), victims)
  stopifnot(file.symlink(victims, at))
  expect_error(gpu_export(fit, at), "already exist", class = "gpukeras_error_bad_argument")
  exported <- gpu_export(fit, at, overwrite = TRUE)
  expect_identical(exported$path, normalizePath(at))
  expect_false(is_link(at))
  expect_true(file.exists(file.path(at, "saved_model.pb")))
  expect_identical(readLines(victim), "the victim's own data")
  expect_identical(list.files(victims, all.files = TRUE, no.. = TRUE), "victim.txt")
})
