test_that("gpu_devices() lists the CPU and every GPU with the documented columns", {
  skip_if_no_python()
  devices <- gpu_devices()
  expect_s3_class(devices, "data.frame")
  expect_named(devices, c(
    "device", "type", "name", "compute_capability",
    "memory_total_mib", "memory_free_mib", "nvml_index",
    "uuid", "pci_bus_id", "mig_parent", "nvml_reason"
  ))
  expect_gte(nrow(devices), 1)
  expect_false(anyDuplicated(devices$device) > 0)
  expect_true(all(devices$type %in% c("CPU", "GPU")))
  expect_match(devices$device, "^(CPU|GPU):[0-9]+$")
  expect_identical(
    devices$device, paste0(devices$type, ":", stats::ave(seq_along(devices$type), devices$type, FUN = seq_along) - 1L)
  )

  cpu <- devices[devices$device == "CPU:0", ]
  expect_identical(nrow(cpu), 1L)
  expect_identical(cpu$type, "CPU")
  expect_type(cpu$name, "character")
  expect_true(nzchar(cpu$name))
  expect_true(is.na(cpu$compute_capability))
  expect_true(is.na(cpu$nvml_index))
  expect_type(cpu$memory_total_mib, "double")
  expect_gt(cpu$memory_total_mib, 0)
  if (!is.na(cpu$memory_free_mib)) {
    expect_gt(cpu$memory_free_mib, 0)
    expect_lte(cpu$memory_free_mib, cpu$memory_total_mib)
  }
})

test_that("gpu_devices() sees no GPU without an NVIDIA GPU, and agrees with gpu_check()", {
  skip_if_no_python()
  devices <- gpu_devices()
  expect_identical(devices[, c("device", "type", "name")], shared_check()$devices[, c("device", "type", "name")])
  skip_if_nvidia_gpu()
  expect_identical(devices$device, "CPU:0")
})

test_that("rows_to_df() turns Python's None into NA and keeps columns without rows", {
  rows <- list(
    list(device = "CPU:0", memory = 1024, index = NULL),
    list(device = "GPU:0", memory = NULL, index = 0L)
  )
  df <- rows_to_df(rows, c("device", "memory", "index"))
  expect_identical(df, data.frame(device = c("CPU:0", "GPU:0"), memory = c(1024, NA), index = c(NA, 0L)))
  expect_named(rows_to_df(rows), c("device", "memory", "index"))

  empty <- rows_to_df(list(), c("nvml_index", "samples"))
  expect_s3_class(empty, "data.frame")
  expect_identical(nrow(empty), 0L)
  expect_named(empty, c("nvml_index", "samples"))
})
