# gpu_fit()'s precision chosen by the memory plan, on a simulated GPU too small for the preset in
# mixed_bfloat16 (python/tests/test_precision_plan.py tests the rules and the table).
skip_if_no_python()
skip_if_not(reticulate::py_module_available("keras_hub"), "no KerasHub (install_gpukeras(extras = \"hub\"))")

test_that("on a GPU too small for mixed_bfloat16, gpu_fit() fine-tunes a preset in bfloat16 and says why", {
  environ <- reticulate::import("os")$environ
  was <- list(GPUKERAS_SIMULATE_GPU = environ$get("GPUKERAS_SIMULATE_GPU"), GPUKERAS_SIMULATE_GPU_MIB = NULL)
  # the LoRA fine-tune's plan: 0.026 MiB in mixed_bfloat16, 0.016 in bfloat16
  environ$update(list(GPUKERAS_SIMULATE_GPU = "1", GPUKERAS_SIMULATE_GPU_MIB = "0.02"))
  withr::defer(for (name in names(was)) if (is.null(was[[name]])) environ$pop(name) else environ$update(was[name]))
  folder <- file.path(withr::local_tempdir(), "tiny")
  preset <- reticulate::import_from_path("tiny_preset", test_path("python"))$save_tiny_preset(folder)
  model <- gpu_text_classifier(preset, 2, lora_rank = 2)
  texts <- gpu_text_data(rep(c("good movie", "bad movie"), 8), factor(rep(c("pos", "neg"), 8)), batch_size = 8)
  fit <- gpu_fit(model, texts, verbose = 0)
  expect_equal(fit$settings$dtype_policy, "bfloat16")
  expect_true(fit$settings$precision_choice$changed)
  line <- grep("^Precision:", format(fit), value = TRUE)
  expect_match(line, paste0(
    "^Precision: +bfloat16 \\(auto: bfloat16 \\(bfloat16 weights\\), 16.3 KiB by the memory plan; ",
    ".*20.5 KiB free.*; the largest batch in bfloat16: 71\\)$"
  ))
  # from float32 (mixed_bfloat16 tried), or in make test's simulated-GPU run from mixed_bfloat16
  expect_match(line, "mixed_bfloat16 (needs )?27 KiB")
})
