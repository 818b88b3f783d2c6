# Learning-rate schedule specs: what R hands the core, how they print, and
# every bad value as a classed error (no Python needed).

test_that("lr_warmup_cosine() gives a spec with double rates and integer steps", {
  schedule <- lr_warmup_cosine(peak = 1e-3, warmup_steps = 100, decay_steps = 1000)
  expect_s3_class(schedule, "gpukeras_lr_schedule")
  expect_identical(
    unclass(schedule),
    list(schedule = "warmup_cosine", peak = 1e-3, warmup_steps = 100L, decay_steps = 1000L, alpha = 0)
  )
  floor <- lr_warmup_cosine(2L, warmup_steps = 0, decay_steps = 5, alpha = 0.1)
  expect_identical(floor$peak, 2)
  expect_identical(floor$warmup_steps, 0L)
  expect_identical(floor$alpha, 0.1)
})

test_that("lr_exponential() and lr_cyclical() give their specs", {
  expect_identical(
    unclass(lr_exponential(initial = 0.01, decay_steps = 500, decay_rate = 0.9, staircase = TRUE)),
    list(schedule = "exponential", initial = 0.01, decay_steps = 500L, decay_rate = 0.9, staircase = TRUE)
  )
  expect_false(lr_exponential(0.1, 10, 1)$staircase)
  expect_identical(
    unclass(lr_cyclical(low = 1e-4, high = 1e-2, step_size = 200)),
    list(schedule = "cyclical", low = 1e-4, high = 1e-2, step_size = 200L, mode = "triangular")
  )
  expect_identical(lr_cyclical(0.001, 0.1, 5, mode = "triangular2")$mode, "triangular2")
})

test_that("schedules print one line that says what the rate does", {
  skip_if_no_python()
  expect_identical(
    format(lr_warmup_cosine(peak = 0.001, warmup_steps = 100, decay_steps = 1000, alpha = 0.1)),
    sprintf(
      paste0(
        "<gpukeras lr schedule> warmup_cosine: linear warmup 0 %s 0.001 over 100 steps, then cosine decay to 1e-04 ",
        "over 1,000 steps"
      ),
      arrow()
    )
  )
  expect_identical(
    format(lr_warmup_cosine(peak = 0.01, warmup_steps = 0, decay_steps = 1)),
    "<gpukeras lr schedule> warmup_cosine: starts at 0.01, then cosine decay to 0 over 1 step"
  )
  expect_identical(
    format(lr_exponential(0.01, 500, 0.9, staircase = TRUE)),
    "<gpukeras lr schedule> exponential: 0.01 x 0.9^(step / 500), in whole steps (staircase)"
  )
  expect_identical(
    format(lr_cyclical(1e-4, 1e-2, 200, "triangular2")),
    paste0(
      "<gpukeras lr schedule> cyclical: triangular2 between 1e-04 and 0.01, half a cycle every 200 steps (each cycle ",
      "half as high)"
    )
  )
  expect_output(
    print(lr_exponential(0.1, 10, 0.5)), "^<gpukeras lr schedule> exponential: 0.1 x 0.5\\^\\(step / 10\\)$"
  )
  expect_output(expect_invisible(print(lr_cyclical(0.1, 0.2, 3))), "triangular")
})

test_that("bad schedule values are classed errors that name the argument", {
  bad <- function(code, pattern) {
    expect_error(code, pattern, class = "gpukeras_error_bad_argument")
  }
  bad(lr_warmup_cosine(peak = 0, warmup_steps = 1, decay_steps = 1), "^`peak` must be one positive number, not `0`")
  bad(lr_warmup_cosine(peak = NA, warmup_steps = 1, decay_steps = 1), "`peak`")
  bad(
    lr_warmup_cosine(1e-3, warmup_steps = -1, decay_steps = 10),
    "^`warmup_steps` must be one whole number of steps >= 0, not `-1`"
  )
  bad(lr_warmup_cosine(1e-3, warmup_steps = 2.5, decay_steps = 10), "`warmup_steps`.*not `2.5`")
  bad(
    lr_warmup_cosine(1e-3, warmup_steps = 10, decay_steps = 0), "^`decay_steps` must be one whole number of steps >= 1"
  )
  bad(lr_warmup_cosine(1e-3, 10, 100, alpha = 1.5), "^`alpha` must be one number in \\[0, 1\\]")
  bad(lr_warmup_cosine(1e-3, 10, 100, alpha = c(0, 1)), "`alpha`")
  bad(lr_warmup_cosine(1e-3, "10", 100), "`warmup_steps`")
  bad(lr_exponential(-0.1, 10, 0.9), "^`initial` must be one positive number")
  bad(lr_exponential(0.1, Inf, 0.9), "`decay_steps`")
  bad(lr_exponential(0.1, 10, 0), "^`decay_rate` must be one number in \\(0, 1\\]")
  bad(lr_exponential(0.1, 10, 1.1), "`decay_rate`")
  bad(lr_exponential(0.1, 10, 0.9, staircase = "yes"), "^`staircase` must be TRUE or FALSE")
  bad(lr_cyclical(0.1, 0.01, 10), "^`high` \\(0.01\\) must be greater than `low` \\(0.1\\)")
  bad(lr_cyclical(0.1, 0.1, 10), "greater than `low`")
  bad(lr_cyclical(0, 0.1, 10), "^`low` must be one positive number")
  bad(lr_cyclical(0.01, 0.1, 0), "^`step_size`")
  bad(
    lr_cyclical(0.01, 0.1, 10, mode = "exp_range"),
    "^`mode` must be one of \"triangular\", \"triangular2\", not `exp_range`"
  )
})

# The learning rates the core's schedule gives at some steps, by R's spec.
core_rates <- function(schedule, steps) {
  skip_if_no_python()
  unlist(core_call("schedule_values", spec = unclass(schedule), steps = as.list(as.integer(steps))))
}

test_that("the core builds each spec into the schedule its help page describes", {
  steps <- c(0, 5, 10, 15, 20, 30, 60, 200)
  peak <- 0.02
  cosine <- lr_warmup_cosine(peak = peak, warmup_steps = 10, decay_steps = 50, alpha = 0.1)
  decayed <- pmin(pmax(steps - 10, 0), 50) / 50
  expected <- ifelse(
    steps < 10, peak * steps / 10,
    peak * ((1 - 0.1) * 0.5 * (1 + cos(pi * decayed)) + 0.1)
  )
  expect_equal(core_rates(cosine, steps), expected, tolerance = 1e-5)

  exponential <- lr_exponential(initial = 0.1, decay_steps = 10, decay_rate = 0.5)
  expect_equal(core_rates(exponential, steps), 0.1 * 0.5^(steps / 10), tolerance = 1e-5)
  stairs <- lr_exponential(initial = 0.1, decay_steps = 10, decay_rate = 0.5, staircase = TRUE)
  expect_equal(core_rates(stairs, steps), 0.1 * 0.5^floor(steps / 10), tolerance = 1e-5)

  smith <- function(step, low, high, size, halve) {
    cycle <- floor(1 + step / (2 * size))
    x <- abs(step / size - 2 * cycle + 1)
    low + (high - low) * pmax(0, 1 - x) / if (halve) 2^(cycle - 1) else 1
  }
  steps <- 0:25
  triangular <- lr_cyclical(low = 0.001, high = 0.011, step_size = 5)
  expect_equal(core_rates(triangular, steps), smith(steps, 0.001, 0.011, 5, FALSE), tolerance = 1e-5)
  expect_equal(core_rates(triangular, c(0, 5, 10, 15)), c(0.001, 0.011, 0.001, 0.011), tolerance = 1e-5)
  halving <- lr_cyclical(low = 0.001, high = 0.011, step_size = 5, mode = "triangular2")
  expect_equal(core_rates(halving, steps), smith(steps, 0.001, 0.011, 5, TRUE), tolerance = 1e-5)
  expect_equal(core_rates(halving, c(5, 15, 25)), c(0.011, 0.006, 0.0035), tolerance = 1e-5)
})
