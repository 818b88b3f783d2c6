# gpu_export() (issue #36, item 1): a SavedModel whose served function takes the raw
# columns and encodes them as predict() does, read by a fresh Python with
# tf.saved_model.load() alone; ONNX run by onnxruntime on the encoded rows; both engines.

export_data <- function(n = 48) {
  withr::with_seed(5, {
    x <- data.frame(
      income = stats::rnorm(n),
      member = sample(c(TRUE, FALSE), n, TRUE),
      region = factor(sample(c("north", "south", "east", "west"), n, TRUE)),
      plan = sample(c("basic", "plus", "max"), n, TRUE),
      stringsAsFactors = FALSE
    )
    y <- factor(sample(c("low", "mid", "high"), n, TRUE), levels = c("low", "mid", "high"))
  })
  list(x = x, y = y)
}

# region as an integer code (a Dense layer reads it as a number: enough here), plan one-hot:
# income, member, region, plan's 3 indicators.
export_model <- function(seed = 2L) {
  keras <- gpu_keras()
  keras$utils$set_random_seed(seed)
  model <- keras$Sequential(list(
    keras$Input(shape = list(6L)),
    keras$layers$Dense(8L, activation = "relu"),
    keras$layers$Dense(3L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  model
}

# New rows: region a factor of other levels in another order, plan one level only.
new_rows <- function() {
  data.frame(
    income = c(-1.5, 0.2, 2.5, 0.7),
    member = c(TRUE, FALSE, TRUE, FALSE),
    region = factor(c("west", "east", "north", "south"), levels = c("west", "south", "north", "east", "central")),
    plan = c("max", "max", "basic", "plus"),
    stringsAsFactors = FALSE
  )
}

# A data.frame as JSON columns (every column a list, also of one value).
as_columns <- function(df) {
  lapply(df, function(values) as.list(if (is.factor(values)) as.character(values) else values))
}

# Run serve_export.py in a fresh Python (the environment's, as a server would have it).
serve_in_fresh_python <- function(request) {
  json <- reticulate::import("json")
  dir <- withr::local_tempdir()
  asked <- file.path(dir, "request.json")
  answered <- file.path(dir, "answer.json")
  writeLines(json$dumps(request), asked)
  python <- gpukeras_python()
  said <- suppressWarnings(system2(
    python, c(test_path("serve_export.py"), asked, answered), stdout = TRUE, stderr = TRUE, env = "LD_LIBRARY_PATH="
  ))
  if (!file.exists(answered)) stop(paste(utils::tail(said, 20), collapse = "\n"))
  json$loads(paste(readLines(answered, warn = FALSE), collapse = "\n"))
}

outputs_matrix <- function(answer) {
  levels <- c("low", "mid", "high")
  list(
    output = do.call(rbind, lapply(answer$outputs$output, unlist)),
    levels = sapply(levels, function(level) unlist(answer$outputs[[level]])),
    class = unlist(answer$outputs$class)
  )
}

test_that(paste(
  "a SavedModel scores raw columns as predict() does, in a fresh Python, under each unknown rule; ONNX on the encoded",
  "rows"
), {
  skip_if_no_python()
  data <- export_data()
  ds <- gpu_dataset(data$x, data$y, batch_size = 16, factors = c(region = "codes"), seed = 1)
  fit <- gpu_fit(export_model(), ds, epochs = 1, verbose = 0, monitor = FALSE, seed = 1)
  dir <- withr::local_tempdir()
  exported <- lapply(c(error = "error", zero = "zero", code = "code"), function(rule) {
    gpu_export(fit, file.path(dir, paste0("model-", rule)), unknown = rule)
  })
  # ONNX needs install_gpukeras(extras = "onnx") (make dev-env installs it); checked last
  has_onnx <- reticulate::py_module_available("tf2onnx") && reticulate::py_module_available("onnxruntime")
  onnx <- if (has_onnx) gpu_export(fit, file.path(dir, "model.onnx"), format = "onnx")
  expect_s3_class(exported$error, "gpukeras_export")
  expect_identical(exported$error$inputs$name, c("income", "member", "region", "plan"))
  expect_identical(exported$error$inputs$dtype, c("float64", "bool", "string", "string"))
  expect_identical(exported$error$outputs$name, c("output", "low", "mid", "high", "class"))
  expect_match(
    format(exported$zero), "region: string, levels east, north, south, west; unseen: error", fixed = TRUE, all = FALSE
  )
  expect_match(format(exported$zero), "plan: string, levels basic, max, plus; unseen: zero", fixed = TRUE, all = FALSE)
  expect_true(file.exists(file.path(dir, "model-error", "assets.extra", "gpukeras.json")))

  new <- new_rows()
  unseen_plan <- transform(new, plan = c("gold", "max", "gold", "plus"))
  unseen_region <- transform(new, region = c("central", "east", "north", "south"))
  encoded <- core_encoded(as_pipeline_data(new, NULL, "error", encoding = fit$encoding))
  answer <- serve_in_fresh_python(list(
    savedmodels = lapply(exported, function(e) {
      list(
        path = e$path,
        requests = list(new = as_columns(new), plan = as_columns(unseen_plan), region = as_columns(unseen_region))
      )
    }),
    onnx = if (has_onnx)
      list(path = onnx$path, rows = lapply(seq_len(nrow(encoded)), function(i) as.list(unname(encoded[i, ]))))
  ))
  expect_false(answer$gpukeras_imported)
  expect_identical(
    unlist(answer$savedmodels$error$signature[c("income", "member", "region", "plan")]),
    c(income = "float64", member = "bool", region = "string", plan = "string")
  )

  expected <- predict(fit, new)
  for (rule in c("error", "zero", "code")) {
    served <- outputs_matrix(answer$savedmodels[[rule]]$answers$new)
    expect_equal(served$output, unname(expected), tolerance = 1e-5)
    expect_equal(served$levels, expected, tolerance = 1e-5, ignore_attr = TRUE)
    expect_identical(served$class, as.character(predict(fit, new, type = "class")))
  }
  # unknown = "error": the request fails naming the column, its levels and the value
  failed <- answer$savedmodels$error$answers$region$error
  expect_match(failed, "Column `region` has level(s) not seen in training", fixed = TRUE)
  expect_match(failed, "[central]", fixed = TRUE)
  expect_match(
    answer$savedmodels$error$answers$plan$error, "Column `plan` has level(s) not seen in training", fixed = TRUE
  )
  # "zero" scores an unseen one-hot level as predict(unknown = "zero"); region (codes) stays an error
  zero <- outputs_matrix(answer$savedmodels$zero$answers$plan)
  expect_equal(zero$output, unname(predict(fit, unseen_plan, unknown = "zero")), tolerance = 1e-5)
  expect_match(answer$savedmodels$zero$answers$region$error, "Column `region`", fixed = TRUE)
  # "code" gives region the reserved code, as predict(unknown = "code")
  code <- outputs_matrix(answer$savedmodels$code$answers$region)
  expect_equal(code$output, unname(predict(fit, unseen_region, unknown = "code")), tolerance = 1e-5)
  expect_match(answer$savedmodels$code$answers$plan$error, "Column `plan`", fixed = TRUE)
  # ONNX: onnxruntime on the rows predict() encodes; the encoding beside it
  skip_if_not(has_onnx, "tf2onnx or onnxruntime is not installed (install_gpukeras(extras = \"onnx\"))")
  expect_true(file.exists(file.path(dir, "model.gpukeras.json")))
  # a model in mixed bfloat16 (a GPU's default) exports as a float32 copy: bfloat16's rounding apart
  rounding <- if (grepl("bfloat16", fit$settings$dtype_policy)) 1e-2 else 1e-5
  expect_equal(do.call(rbind, lapply(answer$onnx$outputs, unlist)), unname(expected), tolerance = rounding)
})

test_that("an existing path is kept without overwrite, replaced with it; a failed export leaves nothing", {
  skip_if_no_python()
  data <- export_data(16)
  keras <- gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = list(2L)), keras$layers$Dense(3L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
  fit <- gpu_fit(model, list(x = data$x[c("income", "member")], y = data$y), epochs = 1, verbose = 0, monitor = FALSE)
  dir <- withr::local_tempdir()
  path <- file.path(dir, "served")
  dir.create(path)
  writeLines("keep", file.path(path, "mine.txt"))
  expect_error(gpu_export(fit, path), "already exists", class = "gpukeras_error_bad_argument")
  expect_identical(list.files(path), "mine.txt")
  # a model from gpu_load() exports as its fit does
  gpu_save(fit, file.path(dir, "saved.keras"))
  loaded <- gpu_load(file.path(dir, "saved.keras"))
  unlink(file.path(dir, c("saved.keras", "saved.gpukeras.json")))
  replaced <- gpu_export(loaded, path, overwrite = TRUE)
  expect_identical(sort(list.files(path)), c("assets", "assets.extra", "fingerprint.pb", "saved_model.pb", "variables"))
  expect_identical(replaced$inputs$dtype, c("float64", "bool"))
  expect_identical(replaced$outputs$name, c("output", "low", "mid", "high", "class"))
  # a model that takes 6 columns where the encoding gives 2: the export fails, and writes nothing
  wrong <- structure(list(model = export_model(), encoding = fit$encoding), class = "gpukeras_fit")
  expect_error(
    gpu_export(wrong, file.path(dir, "never")),
    "cannot run on rows encoded as its training data was",
    class = "gpukeras_error_bad_argument"
  )
  expect_identical(list.files(dir, all.files = TRUE, no.. = TRUE), "served")
})

test_that("ONNX: a layer ONNX has no operation for is a classed error naming it", {
  skip_if_no_python()
  skip_if_not(
    reticulate::py_module_available("tf2onnx"), "tf2onnx is not installed (install_gpukeras(extras = \"onnx\"))"
  )
  keras <- gpu_keras()
  skip_if_not(identical(keras$backend$backend(), "tensorflow"), "ONNX export is tested on the TensorFlow engine")
  model <- keras$Sequential(list(
    keras$Input(shape = list(2L)),
    keras$layers$Discretization(bin_boundaries = list(0, 1), output_mode = "int", name = "bins"),
    keras$layers$Dense(1L)
  ))
  model$compile(optimizer = "adam", loss = "mse")
  x <- matrix(c(0.5, 2, -1, 0.3), ncol = 2)
  fit <- gpu_fit(model, list(x = x, y = c(1, 0)), epochs = 1, verbose = 0, monitor = FALSE)
  dir <- withr::local_tempdir()
  error <- expect_error(gpu_export(fit, file.path(dir, "bins.onnx"), format = "onnx"), class = "gpukeras_error_export")
  expect_match(conditionMessage(error), "`bins` (Discretization: Bucketize)", fixed = TRUE)
  expect_match(conditionMessage(error), "format = \"savedmodel\"", fixed = TRUE)
  expect_identical(list.files(dir, all.files = TRUE, no.. = TRUE), character())
  # the SavedModel of the same model: its matrix input, a plain float32 tensor named x
  # (served in a fresh Python by python/tests/test_export.py)
  exported <- gpu_export(fit, file.path(dir, "bins"))
  expect_identical(
    exported$inputs[c("name", "type", "dtype")], data.frame(name = "x", type = "array", dtype = "float32")
  )
  expect_identical(exported$outputs$name, "output")
})

test_that("install_gpukeras(extras = \"onnx\") pins onnx, onnxruntime and tf2onnx", {
  reqs <- gpukeras_requirements(gpu = FALSE, os = "Linux", extras = "onnx")
  expect_identical(utils::tail(reqs, 3), c("onnx==1.23.2", "onnxruntime==1.32.0", "tf2onnx==1.17.0"))
  expect_false(any(grepl("onnx", gpukeras_requirements(gpu = FALSE, os = "Linux"))))
})

test_that("on JAX, in a fresh R process: the SavedModel scores as predict(); ONNX says which engine to use", {
  # no gpu_setup() in that process: its model is float32, as on the CPU, and export reads only the
  # model (the simulated GPU's bfloat16 export is the first test's)
  skip_if_no_python()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  dir <- withr::local_tempdir()
  found <- do.call(run_in_fresh_r, list(expr = bquote({
    data <- .(export_data)()
    fit <- gpukeras::gpu_fit(
      .(export_model)(),
      gpukeras::gpu_dataset(data$x, data$y, batch_size = 16, factors = c(region = "codes"), seed = 1),
      epochs = 1,
      verbose = 0,
      monitor = FALSE,
      seed = 1
    )
    new <- .(new_rows)()
    exported <- gpukeras::gpu_export(fit, file.path(.(dir), "jax-model"))
    list(
      backend = exported$backend, path = exported$path, expected = unname(predict(fit, new)),
      onnx = catch_error(gpukeras::gpu_export(fit, file.path(dirname(exported$path), "m.onnx"), format = "onnx"))
    )
  }), env = c(KERAS_BACKEND = "jax"), timeout = 300))
  expect_identical(found$backend, "jax")
  expect_identical(found$onnx$class[1], "gpukeras_error_export")
  expect_match(found$onnx$message, "Export from the TensorFlow engine instead", fixed = TRUE)
  answer <- serve_in_fresh_python(list(savedmodels = list(jax = list(
    path = found$path, requests = list(new = as_columns(new_rows()))
  ))))
  expect_equal(outputs_matrix(answer$savedmodels$jax$answers$new)$output, found$expected, tolerance = 1e-5)
})
