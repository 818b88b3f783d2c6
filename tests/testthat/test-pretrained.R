# KerasHub presets from R: gpu_text_classifier(), gpu_causal_lm(), gpu_text_data() and
# gpu_generate(), fine-tuned with gpu_fit() on tiny presets the tests save with KerasHub's own
# save_to_preset() (python/tiny_preset.py: a 2-layer BERT with random weights and a 16-word
# vocabulary, a 2-layer Gemma and GPT-2; nothing is downloaded).

test_that("install_gpukeras(extras = \"hub\") pins KerasHub and what its tokenizers need", {
  base <- gpukeras_requirements(gpu = FALSE, os = "Linux")
  hub <- setdiff(gpukeras_requirements(gpu = FALSE, os = "Linux", extras = "hub"), base)
  expect_identical(sub("==.*", "", hub), c(
    "kagglehub", "kagglesdk", "sentencepiece", "tokenizers", "regex", "keras-hub", "tensorflow-text"
  ))
  expect_true(all(grepl("==", hub, fixed = TRUE)))
  # tensorflow-text is TensorFlow's own release series; none for Windows, where keras-hub needs none
  expect_match(grep("^tensorflow-text==", hub, value = TRUE), paste0("==", sub("[.][0-9]+$", "", pinned$tensorflow)))
  expect_false(any(grepl("tensorflow-text", gpukeras_requirements(os = "Windows", extras = "hub"))))
  # installed without their dependencies: tensorflow-text's would put `tensorflow` over tensorflow-cpu
  expect_identical(no_deps_requirements, c("keras-hub", "tensorflow-text"))
  source_tree <- test_path("..", "..", "python")
  skip_if_not(dir.exists(source_tree), "not a source tree")
  dev <- unlist(lapply(file.path(source_tree, c("requirements-dev.txt", "requirements-hub-nodeps.txt")), readLines))
  expect_true(all(hub %in% dev))
})

test_that("gpu_text_data() and gpu_text_classifier() refuse bad arguments before Python starts", {
  expect_snapshot(error = TRUE, {
    gpu_text_data(c("a good one", NA, "a bad one"))
    gpu_text_data(1:3)
    gpu_text_data(c("a", "b"), factor("x"))
    gpu_text_classifier("bert_tiny_en_uncased", 1)
  })
  expect_error(gpu_text_data(c("a", NA)), class = "gpukeras_error_missing_values")
  expect_error(gpu_text_classifier("x", "one"), class = "gpukeras_error_bad_argument")
  expect_error(gpu_text_classifier("x", 2, lora_rank = 0), class = "gpukeras_error_bad_argument")
  expect_error(gpu_check(preset = c("a", "b")), class = "gpukeras_error_bad_argument")
})

test_that("gpu_causal_lm() and gpu_generate() refuse bad arguments before Python starts", {
  expect_snapshot(error = TRUE, {
    gpu_generate(NULL, c("the movie", NA))
    gpu_generate(NULL, "the movie", max_length = 0)
    gpu_generate(NULL, "the movie", sampler = "best")
  })
  missing <- expect_error(gpu_generate(NULL, NA_character_), class = "gpukeras_error_missing_values")
  expect_identical(missing$column, "prompts")
  expect_error(gpu_generate(NULL, 1), class = "gpukeras_error_bad_argument")
  expect_error(gpu_generate(NULL, "a", max_length = 2.5), class = "gpukeras_error_bad_argument")
  expect_error(gpu_causal_lm("x", lora_rank = 0), class = "gpukeras_error_bad_argument")
  expect_error(gpu_causal_lm(c("x", "y")), class = "gpukeras_error_bad_argument")
  expect_error(gpu_causal_lm("x", temperature = 1), class = "gpukeras_error_bad_argument")
})

mark_slow()
skip_if_no_python()
skip_if_not(reticulate::py_module_available("keras_hub"), "no KerasHub (install_gpukeras(extras = \"hub\"))")

# Each preset is saved once, on first use, and only read after (by its path): the tests that
# share one neither write into it nor depend on which test saved it.
saved_presets <- new.env()
saved_preset <- function(key, leaf, save) {
  if (is.null(saved_presets[[key]])) saved_presets[[key]] <- save(file.path(tempfile("gpukeras-preset-"), leaf))
  saved_presets[[key]]
}

# The "fresh R" that loads the saved models, serves one and hides KerasHub: one process for
# the file's four uses (each would import TensorFlow and KerasHub again in a process of its own).
hub_r <- shared_fresh_r()

tiny_preset <- function(dropout = 0.1) {
  saved_preset(paste0("tiny-dropout-", dropout), "tiny", function(folder) {
    reticulate::import_from_path("tiny_preset", test_path("python"))$save_tiny_preset(folder, dropout = dropout)
  })
}

test_that("gpu_check() and gpu_report() read KerasHub's version from its metadata", {
  metadata <- reticulate::import("importlib.metadata")
  versions <- c(metadata$version("keras-hub"), metadata$version("tensorflow-text"))
  expect_identical(c(shared_check()$stack$keras_hub, shared_check()$stack$tensorflow_text), versions)
  report <- gpu_report(NULL, check = shared_check())
  expect_true(sprintf("| KerasHub | %s (tensorflow-text %s) |", versions[1], versions[2]) %in% report)
})

test_that("gpu_check(preset = ) says whether a preset loads: its backbone, tasks and size, or the repair", {
  preset <- tiny_preset()
  check <- gpu_check(probe = FALSE, preset = preset)
  expect_identical(check$preset[c("loads", "backbone", "tasks", "parameters")], list(
    loads = TRUE, backbone = "BertBackbone", tasks = c("MaskedLM", "TextClassifier", "TextEmbedder"), parameters = 5168L
  ))
  expect_true(sprintf("  %s: loads (BertBackbone, 5,168 parameters)", preset) %in% format(check))
  failed <- gpu_check(probe = FALSE, preset = withr::local_tempdir())
  expect_false(failed$preset$loads)
  expect_match(failed$preset$problem, "is not a KerasHub preset folder")
  expect_true(failed$preset$problem %in% failed$advice)
})

test_that("a preset's text classifier fine-tunes from R, predicts probabilities and classes, and saves", {
  preset <- tiny_preset()
  texts <- rep(c("good movie", "great movie", "nice movie", "bad movie", "awful movie", "sad movie"), 6)
  labels <- factor(rep(c("pos", "pos", "pos", "neg", "neg", "neg"), 6))
  model <- gpu_text_classifier(preset, labels, learning_rate = 1e-2)
  fit <- gpu_fit(model, gpu_text_data(texts, labels, batch_size = 8, seed = 1), epochs = 8, verbose = 0)
  expect_s3_class(fit, "gpukeras_fit")
  expect_true(any(grepl("texts; classes neg, pos", format(fit), fixed = TRUE)))
  new_texts <- c("good movie", "awful movie", "nice movie", "sad movie")
  # each class's probability (not the model's logits), a column per level of the labels
  probabilities <- predict(fit, new_texts)
  expect_identical(dimnames(probabilities), list(NULL, c("neg", "pos")))
  expect_equal(rowSums(probabilities), rep(1, 4), tolerance = 1e-6)
  expect_identical(predict(fit, gpu_text_data(new_texts)), probabilities)
  # better than chance
  expect_identical(predict(fit, new_texts, type = "class"), factor(c("pos", "neg", "pos", "neg"), levels(labels)))
  scores <- evaluate(fit, new_texts, factor(c("pos", "neg", "pos", "neg")))
  expect_setequal(names(scores), c("loss", "accuracy"))
  missing <- expect_error(predict(fit, c("good movie", NA)), class = "gpukeras_error_missing_values")
  expect_identical(missing$column, "newdata")
  # saved with its levels, and loaded in a fresh R: the same predictions
  path <- file.path(withr::local_tempdir(), "classifier.keras")
  gpu_save(fit, path)
  again <- do.call(hub_r, list(expr = bquote({
    warned <- character()
    model <- withCallingHandlers(gpu_load(.(path)), warning = function(w) {
      warned <<- c(warned, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
    list(
      probabilities = predict(model, .(new_texts)), classes = predict(model, .(new_texts), type = "class"),
      scores = evaluate(model, .(new_texts), factor(c("pos", "neg", "pos", "neg"))), warned = warned
    )
  })))
  expect_identical(again$warned, character())
  expect_identical(again$probabilities, probabilities)
  expect_equal(again$scores[names(scores)], scores, tolerance = 1e-6)
  expect_identical(again$classes, predict(fit, new_texts, type = "class"))
  # served by gpu_serve() (its own Python process): texts in, predict()'s probabilities out
  port <- free_ports(1L)
  server <- hub_r(
    gpu_serve(gpu_load(Sys.getenv("SERVE_MODEL")), port = as.integer(Sys.getenv("SERVE_PORT")), quiet = TRUE),
    env = c(SERVE_MODEL = path, SERVE_PORT = port), wait = FALSE
  )
  withr::defer(server$stop())
  ask <- function(route, body = NULL) {
    handle <- curl::new_handle(timeout = 60)
    if (!is.null(body)) curl::handle_setopt(handle, postfields = body, httpheader = "Content-Type: application/json")
    answer <- curl::curl_fetch_memory(sprintf("http://127.0.0.1:%d%s", port, route), handle = handle)
    jsonlite::fromJSON(rawToChar(answer$content))
  }
  deadline <- Sys.time() + 240
  while (is.null(tryCatch(ask("/health"), error = function(e) NULL)) && server$running() && Sys.time() < deadline) {
    Sys.sleep(0.5)
  }
  served <- ask("/predict", jsonlite::toJSON(new_texts))$predictions
  expect_equal(as.matrix(served[, c("neg", "pos")]), unname(probabilities), tolerance = 1e-6, ignore_attr = TRUE)
  expect_identical(ask("/metadata")$input$form, "texts")
})

test_that("lora_rank trains only KerasHub's adapters and the head", {
  preset <- tiny_preset()
  model <- gpu_text_classifier(preset, 3, lora_rank = 2)
  count <- reticulate::py_eval("lambda weights: sum(int(__import__('math').prod(w.shape)) for w in weights)")
  hub <- reticulate::import("keras_hub")
  reference <- hub$models$TextClassifier$from_preset(preset, num_classes = 3L)
  reference$backbone$enable_lora(rank = 2L)
  expect_identical(count(model$trainable_weights), count(reference$trainable_weights))
  expect_lt(count(model$trainable_weights), count(model$weights) / 4)
  fit <- gpu_fit(model, gpu_text_data(c("good", "bad", "fine"), factor(c("a", "b", "c"))), epochs = 1, verbose = 0)
  expect_s3_class(fit, "gpukeras_fit")
  # saved with its adapters kept, or merged into the weights: the same predictions in a fresh R
  paths <- file.path(withr::local_tempdir(), c("keep.keras", "merge.keras"))
  gpu_save(fit, paths[[1]])
  gpu_save(fit, paths[[2]], lora = "merge")
  texts <- c("good movie", "bad movie")
  again <- do.call(hub_r, list(expr = bquote(lapply(.(paths), function(path) {
    loaded <- gpu_load(path)
    weights <- vapply(loaded$model$trainable_weights, function(weight) weight$path, "")
    list(probabilities = predict(loaded, .(texts)), printed = format(loaded), adapters = sum(grepl("lora", weights)))
  }))))
  for (loaded in again) expect_equal(loaded$probabilities, predict(fit, texts), tolerance = 1e-5)
  expect_identical(c(again[[1]]$adapters, again[[2]]$adapters), c(8L, 0L))
  lora <- c("(adapters trainable)", "merged into the weights")
  printed <- sprintf("  KerasHub preset %s; LoRA rank 2 %s", preset, lora)
  expect_identical(c(again[[1]]$printed[[2]], again[[2]]$printed[[2]]), printed)
  expect_error(gpu_save(fit, paths[[1]], lora = "fold"), class = "gpukeras_error_bad_argument")
})

test_that("a folder that is not a preset, and no KerasHub, are classed errors that say what to do", {
  not_preset <- withr::local_tempdir()
  expect_snapshot(error = TRUE, gpu_text_classifier(not_preset, 2), transform = function(x) {
    gsub(normalizePath(not_preset), "<folder>", x, fixed = TRUE)
  })
  expect_error(gpu_text_classifier(not_preset, 2), class = "gpukeras_error_bad_preset")
  # KerasHub hidden as if not installed (the process may have imported it), then put back
  missing <- hub_r({
    reticulate::py_run_string("import sys; hidden = sys.modules.get('keras_hub'); sys.modules['keras_hub'] = None")
    error <- catch_error(gpu_text_classifier("bert_tiny_en_uncased", 2))
    reticulate::py_run_string("del sys.modules['keras_hub']\nif hidden is not None: sys.modules['keras_hub'] = hidden")
    error
  })
  expect_true("gpukeras_error_keras_hub_missing" %in% missing$class)
  expect_match(missing$message, "install_gpukeras(extras = \"hub\")", fixed = TRUE)
})

tiny_lm_preset <- function(kind = "gemma") {
  saved_preset(kind, kind, function(folder) {
    module <- reticulate::import_from_path("tiny_preset", test_path("python"))
    if (kind == "gemma") module$save_tiny_gemma_preset(folder) else module$save_tiny_causal_lm_preset(folder)
  })
}

test_that("a preset's causal LM fine-tunes from R on texts and generates what it learnt, and saves", {
  preset <- tiny_lm_preset()
  model <- gpu_causal_lm(preset, learning_rate = 1e-2)
  fit <- gpu_fit(model, gpu_text_data(rep("the movie was good", 16), batch_size = 8), epochs = 12, verbose = 0)
  expect_s3_class(fit, "gpukeras_fit")
  expect_identical(gpu_generate(fit, c("the movie", "the"), max_length = 8), rep("the movie was good", 2))
  sampled <- gpu_generate(fit, "the movie", sampler = "top_k")
  expect_length(sampled, 1)
  expect_match(sampled, "^the movie")
  path <- file.path(withr::local_tempdir(), "lm.keras")
  gpu_save(fit, path)
  expect_identical(gpu_generate(gpu_load(path), "the movie", max_length = 8), "the movie was good")
  # GPT-2's backbone takes 16 tokens
  gpt2 <- gpu_causal_lm(tiny_lm_preset("gpt2"))
  expect_error(gpu_generate(gpt2, "the", max_length = 17), class = "gpukeras_error_bad_argument")
  expect_error(gpu_generate(gpu_text_classifier(tiny_preset(), 2), "the"), class = "gpukeras_error_bad_argument")
})

test_that("a causal LM's lora_rank trains only KerasHub's adapters, and tracking records the preset and rank", {
  preset <- tiny_lm_preset()
  model <- gpu_causal_lm(preset, lora_rank = 2)
  count <- reticulate::py_eval("lambda weights: sum(int(__import__('math').prod(w.shape)) for w in weights)")
  reference <- reticulate::import("keras_hub")$models$CausalLM$from_preset(preset)
  reference$backbone$enable_lora(rank = 2L)
  expect_identical(count(model$trainable_weights), count(reference$trainable_weights))
  expect_lt(count(model$trainable_weights), count(model$weights) / 4)
  skip_if_no_mlflow()
  local_tracking_off()
  gpu_track(file.path(tempfile("runs-"), "store"), experiment = "lm")
  fit <- gpu_fit(model, gpu_text_data(rep("the movie was good", 4)), epochs = 1, verbose = 0)
  params <- function(fit) {
    mlflow_client(Sys.getenv("MLFLOW_TRACKING_URI"))$get_run(fit$settings$tracking$run_id)$data$params
  }
  expect_identical(c(params(fit)[["preset"]], params(fit)[["lora_rank"]]), c(normalizePath(preset), "2"))
  # also for a fit of the model gpu_load() gave back
  path <- file.path(withr::local_tempdir(), "lm.keras")
  gpu_save(fit, path)
  loaded <- gpu_load(path)$model
  again <- gpu_fit(loaded, gpu_text_data(rep("the movie was good", 4)), epochs = 1, verbose = 0)
  expect_identical(c(params(again)[["preset"]], params(again)[["lora_rank"]]), c(normalizePath(preset), "2"))
})

test_that("a preset without the task asked is a classed error", {
  expect_error(gpu_causal_lm(tiny_preset()), class = "gpukeras_error_bad_preset")
  expect_error(gpu_causal_lm(withr::local_tempdir()), class = "gpukeras_error_bad_preset")
})

test_that("a text model fine-tunes in the background as in the session: its texts carried, its tokenizer seeded", {
  # No dropout and no shuffling: the same weights in both processes show that the child made
  # the same batches from the texts it was carried (data-texts.rds).
  preset <- tiny_preset(dropout = 0)
  texts <- rep(c("good movie", "great movie", "nice movie", "bad movie", "awful movie", "sad movie"), 6)
  labels <- factor(rep(c("pos", "pos", "pos", "neg", "neg", "neg"), 6))
  here <- gpu_text_classifier(preset, labels, learning_rate = 1e-2)
  there <- gpu_text_classifier(preset, labels, learning_rate = 1e-2)
  there$set_weights(here$get_weights())
  data <- gpu_text_data(texts, labels, batch_size = 8, shuffle = FALSE)
  in_session <- gpu_fit(here, data, epochs = 8, seed = 3, verbose = 0)
  job <- gpu_fit(there, data, epochs = 8, seed = 3, background = TRUE, verbose = 0)
  expect_true(file.exists(file.path(job$dir, "data-texts.rds")))
  fit <- gpu_job_wait(job, timeout = 600)
  expect_identical(fit$settings$data, in_session$settings$data)
  expect_equal(fit$history$loss, in_session$history$loss, tolerance = 1e-5)
  new_texts <- c("good movie", "awful movie", "nice movie", "sad movie")
  expect_equal(predict(fit, new_texts), predict(in_session, new_texts), tolerance = 1e-5)
  expect_identical(predict(fit, new_texts, type = "class"), factor(c("pos", "neg", "pos", "neg"), levels(labels)))
  # Gemma's SentencePiece tokenizer, with LoRA: the seed the job (or gpu_fit(seed = )) gives
  # TensorFlow clears its kernel cache, which held the tokenizer's op; it is made again.
  lm <- tiny_lm_preset()
  here <- gpu_causal_lm(lm, lora_rank = 2, learning_rate = 1e-2)
  there <- gpu_causal_lm(lm, lora_rank = 2, learning_rate = 1e-2)
  there$set_weights(here$get_weights())
  lm_texts <- gpu_text_data(rep("the movie was good", 16), batch_size = 8)
  in_session <- gpu_fit(here, lm_texts, epochs = 4, seed = 3, verbose = 0)
  fit <- gpu_job_wait(gpu_fit(there, lm_texts, epochs = 4, seed = 3, background = TRUE, verbose = 0), timeout = 600)
  expect_equal(fit$history$loss, in_session$history$loss, tolerance = 1e-5)
  # the model given back holds the child's frozen kernels and trained adapters, as `here` does
  expect_equal(lapply(there$get_weights(), as.vector), lapply(here$get_weights(), as.vector), tolerance = 1e-5)
  generated <- lapply(list(fit, in_session), gpu_generate, "the movie", max_length = 8)
  expect_identical(generated[[1]], generated[[2]])
})

test_that("a LoRA fine-tune killed in the background resumes from its backup with its adapters, as an unbroken run", {
  # Keras alone backs up each kernel with its adapters added, and the restarted child would
  # train zero adapters on that sum: another run. No dropout, no shuffling, as above.
  preset <- tiny_preset(dropout = 0)
  texts <- rep(c("good movie", "great movie", "nice movie", "bad movie", "awful movie", "sad movie"), 6)
  labels <- factor(rep(c("pos", "pos", "pos", "neg", "neg", "neg"), 6))
  here <- gpu_text_classifier(preset, labels, lora_rank = 2, learning_rate = 1e-2)
  there <- gpu_text_classifier(preset, labels, lora_rank = 2, learning_rate = 1e-2)
  there$set_weights(here$get_weights())
  data <- gpu_text_data(texts, labels, batch_size = 4, shuffle = FALSE)
  unbroken <- gpu_fit(here, data, epochs = 2, seed = 3, verbose = 0)
  # killed after the 5th batch of epoch 2 (backups every 3 batches): resumed after 3
  marker <- withr::local_tempfile()
  job <- gpu_fit(there, data, epochs = 2, seed = 3, backup = gpu_backup(NULL, every = 3),
                 callbacks = crash_at(marker, epoch = 1, batch = 4),
                 background = gpu_background(max_restarts = 1), verbose = 0)
  fit <- gpu_job_wait(job, timeout = 600)
  expect_identical(readLines(marker, warn = FALSE), "1")
  expect_identical(fit$settings$resumed_from, list(epoch = 2L, batches_done = 3L))
  expect_equal(fit$history$loss, unbroken$history$loss, tolerance = 1e-5)
  expect_equal(lapply(there$get_weights(), as.vector), lapply(here$get_weights(), as.vector), tolerance = 1e-5)
  # the adapters are LoRA's still: trainable, both factors trained
  adapters <- Filter(function(weight) grepl("lora_kernel", weight$path), there$trainable_weights)
  expect_length(adapters, 8L)
  expect_true(all(vapply(adapters, function(weight) max(abs(as.vector(weight$numpy()))) > 0, logical(1))))
})
