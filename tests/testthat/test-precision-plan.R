# gpu_fit()'s precision and batch_size = "auto" chosen by the memory plan, on a simulated GPU
# of a few KiB (python/tests/test_precision_plan.py tests the rules and the table).

# The core's simulated GPU (GPUKERAS_SIMULATE_GPU) for the rest of the test: `mib` of memory,
# or none where `mib` is NULL; as it was afterwards.
local_simulated_gpu <- function(mib, env = parent.frame()) {
  environ <- reticulate::import("os")$environ
  names <- c("GPUKERAS_SIMULATE_GPU", "GPUKERAS_SIMULATE_GPU_MIB")
  was <- lapply(stats::setNames(names, names), function(name) environ$get(name))
  for (name in names) environ$pop(name, NULL)
  if (!is.null(mib)) environ$update(list(GPUKERAS_SIMULATE_GPU = "1", GPUKERAS_SIMULATE_GPU_MIB = mib))
  withr::defer(for (name in names) if (is.null(was[[name]])) environ$pop(name, NULL) else environ$update(was[name]),
               envir = env)
}

test_that("on a GPU too small for mixed_bfloat16, gpu_fit() fine-tunes a preset in bfloat16 and says why", {
  skip_if_no_python()
  skip_if_not(reticulate::py_module_available("keras_hub"), "no KerasHub (install_gpukeras(extras = \"hub\"))")
  # the LoRA fine-tune's plan, sequences of the preset's 8 tokens counted: 0.039 MiB in
  # mixed_bfloat16, 0.028 in bfloat16
  local_simulated_gpu("0.03")
  folder <- file.path(withr::local_tempdir(), "tiny")
  preset <- reticulate::import_from_path("tiny_preset", test_path("python"))$save_tiny_preset(folder)
  model <- gpu_text_classifier(preset, 2, lora_rank = 2)
  texts <- gpu_text_data(rep(c("good movie", "bad movie"), 8), factor(rep(c("pos", "neg"), 8)), batch_size = 8)
  fit <- gpu_fit(model, texts, verbose = 0)
  expect_equal(fit$settings$dtype_policy, "bfloat16")
  expect_true(fit$settings$precision_choice$changed)
  line <- grep("^Precision:", format(fit), value = TRUE)
  expect_match(line, paste0(
    "^Precision: +bfloat16 \\(auto: bfloat16 \\(bfloat16 weights\\), 29 KiB by the memory plan; ",
    ".*30.7 KiB free.*; the largest batch in bfloat16: 9\\)$"
  ))
  # from float32 (mixed_bfloat16 tried), or in make test's simulated-GPU run from mixed_bfloat16
  expect_match(line, "mixed_bfloat16 (needs )?39.8 KiB")
})

test_that("batch_size = \"auto\" is a word or a whole number, checked before Python starts", {
  data <- regression_data(64)
  expect_snapshot(error = TRUE, gpu_fit("not a model", data, batch_size = "big"))
  expect_error(gpu_fit("not a model", data, batch_size = c(8, 16)), class = "gpukeras_error_bad_argument")
  expect_error(
    gpu_cv(function() NULL, data, batch_size = "auto"), "batch_size = \"auto\"` cannot be given to gpu_cv",
    class = "gpukeras_error_bad_argument"
  )
})

test_that("batch_size = \"auto\" takes the largest power of two the memory plan fits on a GPU, 32 on the CPU", {
  skip_if_no_python()
  skip_if_nvidia_gpu()
  data <- regression_data(4096)
  local_simulated_gpu("0.01")
  model <- tiny_model()
  fit <- gpu_fit(model, data, batch_size = "auto", verbose = 0, monitor = FALSE)
  policy <- fit$settings$dtype_policy
  # the plan's largest fitting batch, from gpu_memory_plan()'s table: fixed + n x per sample
  table <- function(n) {
    rows <- gpu_memory_plan(tiny_model(), n)$precisions
    rows$peak_mib[rows$precision == policy & rows$training == "full"]
  }
  per_sample <- table(2) - table(1)
  largest <- floor((0.01 - (table(1) - per_sample)) / per_sample)
  chosen <- 2^floor(log2(largest))
  expect_equal(fit$settings$batch_size, chosen)
  expect_equal(fit$settings$batch_choice$batch_size, chosen)
  reason <- sprintf(
    "auto: %d, the largest power of two within the %d rows that fit 10.2 KiB free in %s", chosen, largest, policy
  )
  expect_equal(fit$settings$batch_choice$reason, reason)
  expect_true(paste("Batch size:    ", reason) %in% format(fit))
  # a batch size the user gave is kept
  given <- gpu_fit(tiny_model(), data, batch_size = 8, verbose = 0, monitor = FALSE)
  expect_equal(given$settings$batch_size, 8)
  expect_null(given$settings$batch_choice)
  # on the CPU: the batch R data gets without a batch_size, and why
  local_simulated_gpu(NULL)
  cpu <- gpu_fit(tiny_model(), data, batch_size = "auto", accumulate = 2, verbose = 0, monitor = FALSE)
  expect_equal(cpu$settings$batch_size, 64)
  expect_equal(cpu$settings$micro_batch_size, 32)
  expect_match(cpu$settings$batch_choice$reason, "^auto: 64 = 2 x 32, as with no batch_size \\(no GPU")
})
