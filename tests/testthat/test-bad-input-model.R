# Bad inputs to the model functions: gpu_audit(), gpu_quantize(),
# gpu_precision_check(). Each row must fail with a classed error whose message
# says what to do (see helper-bad-input.R); the first table before Python
# starts, so `model` there is a string.

checked <- check_before_python(
  # nolint start: line_length_linter. One case a row, its columns aligned.
  bad_inputs(
    ~name,                                      ~code,                                          ~class,         ~message,
    "gpu_audit: model a string",                gpu_audit(model),                               "bad_argument", "^`model` must be a Keras 3 model, not `not a model`",
    "gpu_audit: model NULL",                    gpu_audit(NULL),                                "bad_argument", "^`model` must be a Keras 3 model, not NULL",
    "gpu_audit: batch_size zero",               gpu_audit(model, batch_size = 0),               "bad_argument", "^`batch_size` must be one whole number >= 1, not `0`",
    "gpu_audit: batch_size NA",                 gpu_audit(model, batch_size = NA),              "bad_argument", "^`batch_size` must be one whole number >= 1",
    "gpu_audit: batch_size huge",               gpu_audit(model, batch_size = 1e12),            "bad_argument", "^`batch_size` must be one whole number >= 1, not `1e\\+12`",
    "gpu_quantize: model a string",             gpu_quantize(model),                            "bad_argument", "^`model` must be a Keras 3 model, not `not a model`",
    "gpu_quantize: model NULL",                 gpu_quantize(NULL),                             "bad_argument", "^`model` must be a Keras 3 model, not NULL",
    "gpu_quantize: mode NA",                    gpu_quantize(model, mode = NA),                 "bad_argument", "^`mode` must be one non-empty string",
    "gpu_quantize: mode a number",              gpu_quantize(model, mode = 8),                  "bad_argument", "^`mode` must be one non-empty string",
    "gpu_quantize: mode empty",                 gpu_quantize(model, mode = ""),                 "bad_argument", "^`mode` must be one non-empty string",
    "gpu_quantize: two modes",                  gpu_quantize(model, mode = c("int8", "int4")),  "bad_argument", "^`mode` must be one non-empty string, not a character of length 2",
    "gpu_quantize: batch_size zero",            gpu_quantize(model, data = data, batch_size = 0), "bad_argument", "^`batch_size` must be one whole number >= 1",
    "gpu_quantize: batch_size without data",    gpu_quantize(model, batch_size = 8),            "bad_argument", "^`batch_size` is for R data in `data`.*without data nothing is run",
    "gpu_quantize: data a string",              gpu_quantize(model, data = "x"),                "bad_data",     "^`data` cannot be `x`.*list\\(x = features, y = labels\\)",
    "gpu_quantize: data without labels",        gpu_quantize(model, data = data$x),             "bad_data",     "^`data` is R data without labels.*list\\(x = features\\)",
    "gpu_precision_check: model a string",      gpu_precision_check(model),                     "bad_argument", "^`model` must be a Keras 3 model, not `not a model`",
    "gpu_precision_check: model NULL",          gpu_precision_check(NULL),                      "bad_argument", "^`model` must be a Keras 3 model, not NULL",
    "gpu_precision_check: model an R list",     gpu_precision_check(list()),                    "bad_argument", "^`model` must be a Keras 3 model, not a list"
  ),
  # nolint end
  setup = quote({
    model <- "not a model"
    data <- list(x = matrix(seq_len(40) / 40, ncol = 4), y = seq_len(10) / 10)
  })
)

for (result in checked) {
  test_that(paste(result$case$name, "(before Python starts)"), {
    expect_bad_input(result$error, result$case)
    expect_false(result$started_python, label = paste(deparse(result$case$code), collapse = " "))
  })
}

skip_if_no_python()
keras <- gpu_keras()
numpy <- reticulate::import("numpy", convert = FALSE)
model <- tiny_model()
data <- regression_data(64)
dataset <- gpu_dataset(data$x, data$y, batch_size = 16)
split <- gpu_dataset(data$x, data$y, batch_size = 16, validation_split = 0.25)
not_a_model <- numpy$zeros(c(2L, 2L))
# No Input: Keras has not built it, so it has no shapes and no weights.
unbuilt <- keras$Sequential(list(keras$layers$Dense(2L)))

# nolint start: line_length_linter. One case a row, its columns aligned.
cases <- bad_inputs(
  ~name,                                           ~code,                                                                ~class,         ~message,
  "gpu_audit: a NumPy array as model",             gpu_audit(not_a_model),                                               "bad_model",    "^model must be a Keras 3 model \\(keras.Model\\), not numpy.ndarray",
  "gpu_audit: a layer as model",                   gpu_audit(keras$layers$Dense(2L)),                                    "bad_model",    "^model must be a Keras 3 model \\(keras.Model\\), not .*Dense",
  "gpu_audit: a model that is not built",          gpu_audit(unbuilt),                                                   "bad_model",    "^The model is not built, so its layers have no shapes to check: start it with an Input",
  "gpu_quantize: float8",                          gpu_quantize(model, "float8"),                                        "bad_argument", "^mode must be 'int8' or 'int4' \\(for inference\\). float8 .* Tensor Cores",
  "gpu_quantize: an unknown mode",                 gpu_quantize(model, "int3"),                                          "bad_argument", "^mode must be 'int8' or 'int4' \\(for inference\\). 'int3' is not a Keras quantization mode",
  "gpu_quantize: gptq",                            gpu_quantize(model, "gptq"),                                          "bad_argument", "^mode must be 'int8' or 'int4'.*calibration data",
  "gpu_quantize: awq",                             gpu_quantize(model, "awq"),                                           "bad_argument", "^mode must be 'int8' or 'int4'",
  "gpu_quantize: a NumPy array as model",          gpu_quantize(not_a_model),                                            "bad_model",    "^model must be a Keras 3 model \\(keras.Model\\), not numpy.ndarray",
  "gpu_quantize: a model that is not built",       gpu_quantize(unbuilt),                                                "bad_model",    "^The model is not built, so it has no weights to quantize: start it with an Input",
  "gpu_quantize: R data of the wrong width",       gpu_quantize(model, data = list(x = data$x[, 1:3], y = data$y)),      "bad_data",     "^The model cannot run on this data: .*Give x and y that match the model's inputs",
  "gpu_quantize: a NumPy array as data",           gpu_quantize(model, data = not_a_model),                              "bad_data",     "^The model cannot run on this data",
  "gpu_quantize: a split as data",                 gpu_quantize(model, data = split),                                    "bad_argument", "^`data` must be one dataset or list\\(x = , y = \\), not a train/validation split: give its validation part",
  "gpu_quantize: batch_size with a dataset",       gpu_quantize(model, data = dataset, batch_size = 4),                  "bad_argument", "^`batch_size` is for R data in `data`: a dataset is batched already",
  "gpu_precision_check: a NumPy array as model",   gpu_precision_check(not_a_model),                                     "bad_argument", "^model must be a Keras 3 model with layers, not a ndarray",
  "gpu_precision_check: a layer as model",         gpu_precision_check(keras$layers$Dense(2L)),                          "bad_argument", "^model must be a Keras 3 model with layers, not a Dense"
)
# nolint end

for (case in cases) {
  test_that(case$name, {
    expect_bad_input(run_bad_input(case), case)
  })
}
