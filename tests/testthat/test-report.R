# The monitor's report in print(fit): throughput, time per training step and the input
# line on every path (timed wait, batches on the device, several batches per call on
# TensorFlow), and a real gpu_fit() of a gpu_dataset() at steps_per_execution 8.

# A monitor report as the core gives it (None as NULL), on the CPU.
report_of <- function(...) {
  utils::modifyList(list(
    samples_per_second = 40000, wall_samples_per_second = 30000,
    step_time_mean_ms = 3.2, step_time_sd_ms = 0.4, batch_time_mean_ms = 3.2,
    steps_per_execution = 1L, input_on_device = FALSE,
    input_wait_share = 0.012, input_verdict = "not input-bound",
    input_wait_method = "next(iterator) timed inside train_function (tensorflow backend)",
    host_cpu_percent_mean = 97, gpu_not_measured = "no GPU in use", advice = list()
  ), list(...))
}

monitor_lines <- function(m) format_fit_monitor(m)

test_that("one batch per call: the step is the call, as before", {
  text <- monitor_lines(report_of())
  expect_true("Throughput:     40,000 samples/s; step 3.20 ms (sd 0.40 ms)" %in% text)
  expect_true("Input pipeline: not input-bound (waiting for input 1.2% of step time)" %in% text)
})

test_that("several batches per call: the step is one batch, and the call is named with its spread", {
  text <- monitor_lines(report_of(
    steps_per_execution = 8L, step_time_mean_ms = 25.6, step_time_sd_ms = 1.5, batch_time_mean_ms = 3.25
  ))
  expect_true(
    "Throughput:     40,000 samples/s; step 3.25 ms (8 steps a call: 25.60 ms, sd 1.50 ms)" %in% text
  )
})

test_that("batches already on the device wait for nothing, and the report says so", {
  text <- monitor_lines(report_of(
    input_on_device = TRUE, input_wait_share = 0, input_verdict = "not input-bound",
    input_wait_method = "input on the device (no wait by construction)"
  ))
  expect_true("Input pipeline: on the device (no wait by construction)" %in% text)
})

test_that("a wait not timed: the pipeline alone is the estimate, on two lines with the reason", {
  method <- paste(
    "input wait not timed: with steps_per_execution 8, TensorFlow takes batches inside",
    "Keras' graph loop; the tf.data pipeline is timed alone after training"
  )
  text <- monitor_lines(report_of(
    steps_per_execution = 8L, input_wait_share = NULL, input_verdict = "moderately input-bound",
    pipeline_batch_ms = 0.3, input_share_alone = 0.094, input_wait_method = method
  ))
  at <- which(startsWith(text, "Input pipeline: "))
  expect_identical(text[at + 0:1], c(
    paste(
      "Input pipeline: moderately input-bound, estimated: the pipeline alone takes 0.30 ms",
      "a batch, 9.4% of a training step"
    ),
    paste0("                (", method, ")")
  ))

  # Data that cannot be read again: not known, and why.
  unknown <- monitor_lines(report_of(input_wait_share = NULL, input_verdict = NULL, input_wait_method = "why"))
  expect_true("Input pipeline: not known (why)" %in% unknown)
  expect_true("Input pipeline: not known (input wait not measured)" %in%
    monitor_lines(report_of(input_wait_share = NULL, input_verdict = NULL, input_wait_method = NULL)))
})

test_that("rows not known: throughput says so and still gives the step time", {
  text <- monitor_lines(report_of(samples_per_second = NULL, wall_samples_per_second = NULL))
  expect_true("Throughput:     samples/s not known (rows per batch not seen); step 3.20 ms (sd 0.40 ms)" %in% text)
  expect_true("Throughput:     not measured" %in% monitor_lines(report_of(
    samples_per_second = NULL, step_time_mean_ms = NULL, batch_time_mean_ms = NULL
  )))
})

test_that("gpu_fit() of a gpu_dataset() at steps_per_execution 8 measures throughput, step time and input", {
  skip_if_no_python()
  data <- regression_data(250) # 12 full batches of 20 and one of 10: calls of 8 and 5 batches
  pipeline <- gpu_dataset(data$x, data$y, batch_size = 20, seed = 1)
  fit <- gpu_fit(tiny_model(), pipeline, epochs = 3, step = gpu_step(steps_per_execution = 8), verbose = 0)
  m <- fit$monitor
  expect_identical(as.integer(m$steps_per_execution), 8L)
  expect_gt(m$samples_per_second, 0)
  expect_gt(m$batch_time_mean_ms, 0)
  expect_lt(m$batch_time_mean_ms, m$step_time_mean_ms)
  expect_gt(m$wall_samples_per_second, 0)
  expect_null(m$input_wait_share)
  expect_gte(m$input_share_alone, 0)
  expect_gte(m$pipeline_batch_ms, 0)
  expect_true(m$input_verdict %in% c("not input-bound", "moderately input-bound", "highly input-bound"))
  expect_match(m$input_wait_method, "graph loop", fixed = TRUE)
  text <- format(fit)
  expect_false(any(grepl("not measured", text[startsWith(text, "Throughput:")], fixed = TRUE)))
  expect_true(any(grepl("^Input pipeline: .*, estimated: the pipeline alone takes", text)))
  expect_false(any(grepl("raise steps_per_execution|steps_per_execution = 8 or more", m$advice)))
})

test_that("R data at steps_per_execution 8: the rows are counted, and the advice does not name gpu_dataset()", {
  skip_if_no_python()
  data <- regression_data(250)
  fit <- gpu_fit(tiny_model(), data, batch_size = 20, epochs = 2, step = gpu_step(steps_per_execution = 8), verbose = 0)
  m <- fit$monitor
  expect_gt(m$samples_per_second, 0)
  expect_false(is.null(m$input_share_alone))
  expect_false(any(grepl("gpu_dataset() already", m$advice, fixed = TRUE)))
})

test_that("the input verdict states its margin, and a share within it of a line says so (issue #28)", {
  text <- monitor_lines(report_of(
    input_wait_share = 0.141, input_wait_margin = 0.023, input_verdict = "moderately input-bound"
  ))
  expect_true("Input pipeline: moderately input-bound (waiting for input 14.1% +/- 2.3 points of step time)" %in% text)
  near <- monitor_lines(report_of(
    input_wait_share = 0.062, input_wait_margin = 0.03, input_near_line = 0.05, input_verdict = "not input-bound"
  ))
  expect_true(paste(
    "Input pipeline: not input-bound (waiting for input 6.2% +/- 3.0 points of step time,",
    "near the 5% line)"
  ) %in% near)
})

test_that("a table trained from R: the verdict follows its margin rule and the advice fits a table (issue #28)", {
  skip_if_no_python()
  data <- regression_data(640)
  table <- list(x = as.data.frame(data$x), y = data$y)
  fit <- gpu_fit(tiny_model(), table, batch_size = 16, epochs = 2, verbose = 0)
  m <- fit$monitor
  skip_if(isTRUE(m$input_on_device), "the rows trained on the device (JAX): no wait by construction")
  expect_true(fit$settings$data_kind %in% c("arrays", "keras arrays"))
  # 80 steps less the first two: windows enough for a margin, of a point at least
  expect_gte(m$input_wait_margin, 0.01)
  expect_false(isTRUE(m$input_wait_estimated))
  low <- m$input_wait_share - m$input_wait_margin
  below_floor <- !is.null(m$fetch_floor_ms) && m$input_wait_mean_ms < m$fetch_floor_ms
  expected <- if (below_floor ||
      low < 0.05) "not input-bound" else if (low < 0.2) "moderately input-bound" else "highly input-bound"
  expect_identical(m$input_verdict, expected)
  line <- grep("^Input pipeline: ", format(fit), value = TRUE)
  expect_match(
    line, sprintf("%s (waiting for input %.1f%% +/- ", m$input_verdict, 100 * m$input_wait_share), fixed = TRUE
  )
  advice <- paste(m$advice, collapse = " ")
  expect_false(grepl("image", advice, fixed = TRUE))
  expect_false(grepl("gpu_dataset() already", advice, fixed = TRUE))
})
