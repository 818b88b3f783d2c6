# gpu_audit(): findings on small real models built for them, the table and
# its print, and classed errors. The rules themselves are tested in
# python/tests/test_audit.py.

test_that("gpu_audit() checks its arguments before Python", {
  expect_error(
    gpu_audit(1), "`model` must be a Keras 3 model, not `1`.", fixed = TRUE, class = "gpukeras_error_bad_argument"
  )
  expect_error(gpu_audit(NULL), "not NULL", fixed = TRUE, class = "gpukeras_error_bad_argument")
  expect_error(
    gpu_audit(1, batch_size = 0),
    "`batch_size` must be one whole number >= 1, not `0`.",
    fixed = TRUE,
    class = "gpukeras_error_bad_argument"
  )
  expect_error(gpu_audit(1, batch_size = "32"), class = "gpukeras_error_bad_argument")
  skip_if_no_python()
  keras <- gpu_keras()
  expect_error(
    gpu_audit(keras$layers$Dense(2L)),
    "model must be a Keras 3 model (keras.Model)",
    fixed = TRUE,
    class = "gpukeras_error_bad_model"
  )
  expect_error(
    gpu_audit(keras$Sequential(list(keras$layers$Dense(2L)))),
    "The model is not built", fixed = TRUE, class = "gpukeras_error_bad_model"
  )
})

test_that("gpu_audit() lists findings worst first, as a data.frame, and prints them by severity", {
  skip_if_no_python()
  keras <- gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = list(30L)),
    keras$layers$Dense(100L, activation = "relu", dtype = "mixed_float16", name = "hidden"),
    keras$layers$Dense(3L, activation = "softmax", dtype = "mixed_float16", name = "probabilities")
  ))
  audit <- gpu_audit(model, batch_size = 50)
  expect_s3_class(audit, c("gpukeras_audit", "data.frame"), exact = TRUE)
  expect_named(audit, c("layer", "layer_class", "check", "severity", "finding", "advice", "flops_share", "factor"))
  expect_identical(
    audit[, c("layer", "check", "severity")],
    structure(
      data.frame(
        layer = c("hidden", "probabilities", "(batch)", "hidden"),
        check = c(
          "dims_not_multiple_of_8", "output_in_low_precision", "batch_not_multiple_of_8", "dims_not_multiple_of_8"
        ),
        severity = c("warning", "warning", "warning", "info"),
        stringsAsFactors = FALSE
      ),
      class = c("gpukeras_audit", "data.frame")
    )
  )
  expect_equal(audit$flops_share[1], 30 * 100 / (30 * 100 + 100 * 3))
  expect_identical(is.na(audit$flops_share), c(FALSE, FALSE, TRUE, FALSE))
  expect_type(audit$factor, "double")
  expect_match(audit$advice[1], "units 104", fixed = TRUE)
  expect_match(audit$advice[3], "batch size of 56", fixed = TRUE)

  lines <- format(audit)
  expect_match(
    lines[1],
    paste0(
      "^<gpukeras audit> model '.+' \\((tensorflow|jax) backend\\), 2 layers checked, batch size 50: 3 warnings, 1 to ",
      "look at$"
    )
  )
  expect_identical(grep("^[A-Z]", lines, value = TRUE)[1:2], c("Warnings (3):", "Worth a look (1):"))
  expect_true(any(grepl("hidden (Dense, 91% of FLOPs): It computes in float16 with units 100", lines, fixed = TRUE)))
  expect_true(any(grepl("Round to a multiple of 8 (units 104)", lines, fixed = TRUE)))
  expect_output(print(audit), "Worth a look (1):", fixed = TRUE)
  expect_invisible(print(audit))
  # A subset keeps the class and the model's details, and still prints.
  warnings_only <- audit[audit$severity == "warning", ]
  expect_match(format(warnings_only)[1], "batch size 50: 3 warnings, 0 to look at$")
  expect_false(any(grepl("Worth a look", format(warnings_only), fixed = TRUE)))
  # Picked-out columns print as a table.
  expect_output(print(audit[, c("layer", "check")]), "^ +layer +check\n1 +hidden +dims_not_multiple_of_8")
  # Without the details it prints too.
  bare <- audit[1, ]
  attr(bare, "audit") <- NULL
  expect_match(format(bare)[1], "^<gpukeras audit>: 1 warning, 0 to look at$")
})

test_that("gpu_audit() finds recurrent and convolution issues, and nothing in a clean model", {
  skip_if_no_python()
  keras <- gpu_keras()
  recurrent <- keras$Sequential(list(
    keras$Input(shape = list(5L, 8L)),
    keras$layers$LSTM(8L, recurrent_dropout = 0.1, name = "recur"),
    keras$layers$Dense(1L)
  ))
  audit <- gpu_audit(recurrent)
  expect_identical(audit$check, "rnn_no_cudnn")
  expect_match(audit$finding, "recurrent_dropout = 0.1", fixed = TRUE)
  expect_true(any(grepl("not counted: LSTMCell", format(audit), fixed = TRUE)))

  conv <- keras$Sequential(list(
    keras$Input(shape = list(8L, 8L, 256L)),
    keras$layers$Conv2D(256L, 3L, padding = "same"),
    keras$layers$GlobalAveragePooling2D(),
    keras$layers$Dense(10L)
  ))
  audit <- gpu_audit(conv)
  expect_identical(audit$check, "separable_conv")
  expect_equal(audit$factor, 9 * 256 * 256 / (9 * 256 + 256 * 256))

  clean <- keras$Sequential(list(
    keras$Input(shape = list(16L)),
    keras$layers$Dense(32L, activation = "relu"),
    keras$layers$Dense(2L, activation = "softmax")
  ))
  audit <- gpu_audit(clean, batch_size = 30)
  expect_identical(nrow(audit), 0L)
  expect_named(audit, c("layer", "layer_class", "check", "severity", "finding", "advice", "flops_share", "factor"))
  expect_identical(format(audit)[2], "No findings: nothing in this model stands in the way of the GPU.")
})
