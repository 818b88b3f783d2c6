# gpu_workers(): where gpu_cv()'s and gpu_search()'s fits run, as one option object; a
# number is short for gpu_workers(workers = ).

test_that("gpu_workers() holds the checked devices, workers and workers per GPU, and prints them", {
  workers <- gpu_workers(devices = c(0, 2), per_device = 2)
  expect_s3_class(workers, "gpukeras_workers")
  expect_identical(unclass(workers), list(devices = c(0, 2), workers = NULL, per_device = 2L, population = "auto"))
  expect_identical(format(gpu_workers(workers = 3, population = FALSE)), c(
    "<gpukeras workers option>", "  devices   : \"all\"", "  workers   : 3", "  per_device: \"auto\"",
    "  population: FALSE"
  ))
  expect_identical(check_workers(2), gpu_workers(workers = 2))
  expect_identical(check_workers(workers), workers)
})

test_that("a bad gpu_workers() says which argument and what it takes", {
  expect_snapshot(error = TRUE, {
    gpu_workers(devices = "gpu")
    gpu_workers(workers = 1.5)
    gpu_workers(per_device = 0)
    gpu_workers(population = TRUE)
    gpu_cv(function() NULL, list(x = matrix(1:4, 2), y = 1:2), workers = "all")
    gpu_cv(function() NULL, list(x = matrix(1:4, 2), y = 1:2), devices = 0)
  })
})

test_that("whole numbers and numbers are checked with their bounds said", {
  expect_identical(check_whole_number(3), 3L)
  expect_identical(check_number_decimal(0.5, 0, 1), 0.5)
  expect_null(check_whole_number(NULL, allow_null = TRUE))
  expect_snapshot(error = TRUE, {
    check_whole_number(1001, 0, 1000, arg = "max_restarts")
    check_whole_number(2e6, arg = "workers")
    check_whole_number(-1, 0, .Machine$integer.max, arg = "seed")
    check_whole_number(1.5, -.Machine$integer.max, .Machine$integer.max, arg = "lower")
    check_number_decimal(2, 0, 1, arg = "share")
    check_number_decimal(Inf, arg = "upper")
  })
})
