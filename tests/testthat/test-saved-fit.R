# A fit saved by an older gpukeras (fixtures/saved-fit, written by its make.R before the
# encoding moved into the core) loads and predicts as it did: its encoding file is read,
# new data is encoded by it, and its levels are matched by name.

test_that("a fit saved before the encoding moved into the core loads and predicts the same", {
  skip_if_no_python()
  saved <- test_path("fixtures", "saved-fit")
  expected <- readRDS(file.path(saved, "expected.rds"))
  new <- readRDS(file.path(saved, "new.rds"))
  loaded <- gpu_load(file.path(saved, "model.keras"))
  expect_identical(format(loaded$encoding), unname(expected$encoding)) # the same lines
  expect_equal(predict(loaded, new), expected$probabilities, tolerance = 1e-6)
  expect_identical(predict(loaded, new, type = "class"), expected$classes)
  # levels by name, whatever order the new factor has them in
  new$region <- factor(as.character(new$region), levels = c("east", "south", "north"))
  expect_equal(predict(loaded, new), expected$probabilities, tolerance = 1e-6)
  # an unseen level: the same classed error, naming the column
  new$region <- factor(c("west", "north", "south", "east"))
  err <- expect_error(predict(loaded, new), class = "gpukeras_error_new_levels")
  expect_identical(err$column, "x$region")
  expect_identical(err$levels, "west")
})
