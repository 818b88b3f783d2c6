# Work in another process (R/process.R) comes back through callr: a process's error is
# the `parent` of callr's, which the session raises again as the parent of its own.

test_that("a process's error comes back whole, as the parent of the session's classed error", {
  skip_on_cran()
  session <- callr::r_session$new()
  withr::defer(session$close())
  session$call(function() {
    rlang::abort("`age` has levels the training data did not have.", c("gpukeras_error_bad_data", "gpukeras_error"),
                 column = "age")
  })
  session$poll_process(60000L)
  raised <- session$read()$error$parent
  error <- tryCatch(process_abort("Fold 1 of 3 failed in its worker.", "gpukeras_error_cv_fold", parent = raised),
                    error = identity)
  # the session's class, and the process's, so that a handler for either catches it
  expect_s3_class(error, "gpukeras_error_cv_fold")
  expect_s3_class(error, "gpukeras_error_bad_data")
  expect_s3_class(error$parent, "gpukeras_error_bad_data")
  expect_identical(error$parent$column, "age")
  expect_match(conditionMessage(error), "`age` has levels", fixed = TRUE)
  expect_identical(error_data(error$parent)$class[1], "gpukeras_error_bad_data")
})
