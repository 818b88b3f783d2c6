test_that("format_bytes() formats each size of a vector in its own unit", {
  expect_identical(
    format_bytes(c(504, 1024, 40448, 3e6, 5 * 2^30)),
    c("504 B", "1.0 KiB", "39.5 KiB", "2.9 MiB", "5.0 GiB")
  )
  expect_identical(format_bytes(c(3e6, 2048)), c("2.9 MiB", "2.0 KiB"))
  expect_identical(format_bytes(numeric()), character())
})
