# Bad inputs to the training functions: gpu_fit() (and plot() of its result),
# lr_warmup_cosine(), lr_exponential(), lr_cyclical(), gpu_batch_size(),
# gpu_profile(). Each row must fail with a classed error whose message says
# what to do (see helper-bad-input.R); the first table before Python starts,
# so `model` there is a string, which R checks only after every other argument.

checked <- check_before_python(
  # nolint start: line_length_linter. One case a row, its columns aligned.
  bad_inputs(
    ~name,                                        ~code,                                                   ~class,         ~message,
    "gpu_fit: epochs zero",                       gpu_fit(model, data, epochs = 0),                        "bad_argument", "^`epochs` must be one whole number >= 1, not `0`",
    "gpu_fit: epochs negative",                   gpu_fit(model, data, epochs = -1),                       "bad_argument", "^`epochs` must be one whole number >= 1",
    "gpu_fit: epochs NA",                         gpu_fit(model, data, epochs = NA),                       "bad_argument", "^`epochs` must be one whole number >= 1, not `NA`",
    "gpu_fit: epochs a string",                   gpu_fit(model, data, epochs = "1"),                      "bad_argument", "^`epochs` must be one whole number >= 1",
    "gpu_fit: epochs huge",                       gpu_fit(model, data, epochs = 1e12),                     "bad_argument", "^`epochs` must be one whole number >= 1, not `1e\\+12`",
    "gpu_fit: keras3's fit(model, x, y) habit",   gpu_fit(model, data$x, data$y),                          "bad_argument", "^`epochs` must be one whole number >= 1, not a numeric of length 10.*gpu_fit\\(model, list\\(x = x, y = y\\), epochs = \\)",
    "gpu_fit: batch_size zero",                   gpu_fit(model, data, batch_size = 0),                    "bad_argument", "^`batch_size` must be \"auto\", one whole number >= 1 or NULL",
    "gpu_fit: batch_size huge",                   gpu_fit(model, data, batch_size = 1e12),                 "bad_argument", "^`batch_size` must be \"auto\", one whole number >= 1 or NULL, not `1e\\+12`",
    "gpu_fit: steps_per_execution zero",          gpu_fit(model, data, step = gpu_step(steps_per_execution = 0)),           "bad_argument", "^`steps_per_execution` must be \"auto\" or one whole number >= 1",
    "gpu_fit: steps_per_execution a word",        gpu_fit(model, data, step = gpu_step(steps_per_execution = "fast")),      "bad_argument", "^`steps_per_execution` must be \"auto\"",
    "gpu_fit: jit_compile a word",                gpu_fit(model, data, step = gpu_step(jit_compile = "yes")),               "bad_argument", "^`jit_compile` must be TRUE, FALSE or \"auto\", not `yes`",
    "gpu_fit: learning_rate negative",            gpu_fit(model, data, learning_rate = -1),                "bad_argument", "^`learning_rate` must be one positive number or a schedule.*lr_warmup_cosine\\(\\)",
    "gpu_fit: learning_rate a string",            gpu_fit(model, data, learning_rate = "0.01"),            "bad_argument", "^`learning_rate` must be one positive number or a schedule",
    "gpu_fit: learning_rate two",                 gpu_fit(model, data, learning_rate = c(0.1, 0.2)),       "bad_argument", "^`learning_rate` must be one positive number or a schedule",
    "gpu_fit: learning_rate a home-made schedule", gpu_fit(model, data, learning_rate = list(schedule = "cosine")), "bad_argument", "^`learning_rate` must be one positive number or a schedule",
    "gpu_fit: clipnorm zero",                     gpu_fit(model, data, clipnorm = 0),                      "bad_argument", "^`clipnorm` must be one positive number",
    "gpu_fit: clipvalue negative",                gpu_fit(model, data, clipvalue = -1),                    "bad_argument", "^`clipvalue` must be one positive number",
    "gpu_fit: clipnorm and clipvalue",            gpu_fit(model, data, clipnorm = 1, clipvalue = 1),       "bad_argument", "^Give `clipnorm` or `clipvalue`, not both",
    "gpu_fit: monitor NA",                        gpu_fit(model, data, monitor = NA),                      "bad_argument", "^`monitor` must be TRUE or FALSE",
    "gpu_backup: dir NA",                         gpu_fit(model, data, backup = gpu_backup(NA)),           "bad_argument", "^`dir` must be one non-empty string",
    "gpu_backup: dir empty",                      gpu_fit(model, data, backup = gpu_backup("")),           "bad_argument", "^`dir` must be one non-empty string",
    "gpu_backup: every zero",                     gpu_fit(model, data, backup = gpu_backup("b", every = 0)), "bad_argument", "^`every` must be \"epoch\" or one whole number >= 1",
    "gpu_backup: dir missing",                    gpu_fit(model, data, backup = gpu_backup()),             "bad_argument", "^`dir` is missing",
    "gpu_fit: backup not an option",              gpu_fit(model, data, backup = "b"),                      "bad_argument", "^`backup` must be gpu_backup\\(\\.\\.\\.\\) or NULL",
    "gpu_fit: backup_dir moved",                  gpu_fit(model, data, backup_dir = "b"),                  "bad_argument", "^gpu_fit\\(\\) has no argument `backup_dir` any more",
    "gpu_fit: background a word",                 gpu_fit(model, data, background = "yes"),               "bad_argument", "^`background` must be gpu_background\\(\\.\\.\\.\\), TRUE or FALSE",
    "gpu_background: max_restarts negative",      gpu_fit(model, data, background = gpu_background(-1)),   "bad_argument", "^`max_restarts` must be one whole number from 0 to 1000",
    "gpu_backup: every a word",                   gpu_fit(model, data, backup = gpu_backup("b", every = "batch")), "bad_argument", "^`every` must be \"epoch\"",
    "gpu_fit: an R function as callback",         gpu_fit(model, data, callbacks = function(logs) NULL),   "bad_argument", "^`callbacks` must be a Keras callback.*R functions cannot be callbacks",
    "gpu_fit: a string as callback",              gpu_fit(model, data, callbacks = list("a")),             "bad_argument", "^`callbacks` must be a Keras callback",
    "gpu_fit: seed negative",                     gpu_fit(model, data, seed = -1),                         "bad_argument", "^`seed` must be one whole number >= 0, not `-1`",
    "gpu_fit: seed huge",                         gpu_fit(model, data, seed = 1e12),                       "bad_argument", "^`seed` must be one whole number >= 0",
    "gpu_fit: verbose 3",                         gpu_fit(model, data, verbose = 3),                       "bad_argument", "^`verbose` must be \"auto\", 0, 1 or 2, not `3`",
    "gpu_fit: verbose a word",                    gpu_fit(model, data, verbose = "loud"),                  "bad_argument", "^`verbose` must be \"auto\", 0, 1 or 2",
    "gpu_fit: remat NA",                          gpu_fit(model, data, step = gpu_step(remat = NA)),                        "bad_argument", "^`remat` must be TRUE or FALSE",
    "gpu_fit: class_weight unnamed",              gpu_fit(model, data, class_weight = c(1, 2)),            "bad_argument", "^`class_weight` must be named numbers >= 0, one per class",
    "gpu_fit: class_weight a string",             gpu_fit(model, data, class_weight = c(a = "1")),         "bad_argument", "^`class_weight` must be named numbers >= 0",
    "gpu_fit: class_weight NA",                   gpu_fit(model, data, class_weight = c("0" = NA)),        "bad_argument", "^`class_weight` must be named numbers >= 0",
    "gpu_fit: strategy a type name",              gpu_fit(model, data, strategy = "mirrored"),             "bad_argument", "^`strategy` must be a gpu_strategy\\(\\)",
    "gpu_fit: data missing",                      gpu_fit(model),                                          "bad_argument", "^`data` is missing: give a gpu_dataset\\(\\) or R data as list\\(x = , y = \\)",
    "gpu_fit: data NULL",                         gpu_fit(model, NULL),                                    "bad_data",     "^`data` cannot be NULL.*list\\(x = features, y = labels\\)",
    "gpu_fit: data without labels",               gpu_fit(model, data$x),                                  "bad_data",     "^`data` is R data without labels.*list\\(x = features\\)",
    "gpu_fit: data with unknown names",           gpu_fit(model, list(a = 1)),                             "bad_data",     "^`data` is a list with names `a`, which gpu_fit\\(\\) cannot read",
    "gpu_fit: data a file name",                  gpu_fit(model, "data.csv"),                              "bad_data",     "^`data` cannot be `data.csv`.*gpu_dataset\\(\\)",
    "gpu_fit: data$x a file name",                gpu_fit(model, list(x = "data.csv")),                    "bad_data",     "^`data\\$x` must be R data",
    "gpu_fit: validation_data a string",          gpu_fit(model, data, validation_data = "valid"),         "bad_data",     "^`validation_data` cannot be `valid`",
    "gpu_fit: model a string",                    gpu_fit(model, data),                                    "bad_argument", "^`model` must be a compiled Keras 3 model, not `not a model`",
    "gpu_fit: model NULL",                        gpu_fit(NULL, data),                                     "bad_argument", "^`model` must be a compiled Keras 3 model, not NULL",
    "plot.gpukeras_fit: an unknown metric",       plot(fit, metrics = "accuracy"),                         "bad_argument", "^`metrics` must name history columns \\(\"loss\"\\), not `accuracy`",
    "plot.gpukeras_fit: metrics a number",        plot(fit, metrics = 1),                                  "bad_argument", "^`metrics` must name history columns",
    "plot.gpukeras_fit: timeline NA",             plot(fit, timeline = NA),                                "bad_argument", "^`timeline` must be TRUE or FALSE",
    "plot.gpukeras_fit: no epochs",               plot(no_epochs),                                         "bad_argument", "^There is nothing to plot: the history has no epochs",
    "lr_warmup_cosine: peak zero",                lr_warmup_cosine(0, 1, 10),                              "bad_argument", "^`peak` must be one positive number, not `0`",
    "lr_warmup_cosine: peak NA",                  lr_warmup_cosine(NA, 1, 10),                             "bad_argument", "^`peak` must be one positive number",
    "lr_warmup_cosine: peak a string",            lr_warmup_cosine("a", 1, 10),                            "bad_argument", "^`peak` must be one positive number",
    "lr_warmup_cosine: warmup_steps negative",    lr_warmup_cosine(1e-3, -1, 10),                          "bad_argument", "^`warmup_steps` must be one whole number of steps >= 0",
    "lr_warmup_cosine: warmup_steps fractional",  lr_warmup_cosine(1e-3, 1.5, 10),                         "bad_argument", "^`warmup_steps` must be one whole number of steps >= 0",
    "lr_warmup_cosine: decay_steps zero",         lr_warmup_cosine(1e-3, 1, 0),                            "bad_argument", "^`decay_steps` must be one whole number of steps >= 1",
    "lr_warmup_cosine: decay_steps huge",         lr_warmup_cosine(1e-3, 1, 1e12),                         "bad_argument", "^`decay_steps` must be one whole number of steps >= 1, not `1e\\+12`",
    "lr_warmup_cosine: alpha above 1",            lr_warmup_cosine(1e-3, 1, 10, alpha = 2),                "bad_argument", "^`alpha` must be one number in \\[0, 1\\]",
    "lr_exponential: initial negative",           lr_exponential(-0.1, 10, 0.9),                           "bad_argument", "^`initial` must be one positive number",
    "lr_exponential: decay_rate zero",            lr_exponential(0.1, 10, 0),                              "bad_argument", "^`decay_rate` must be one number in \\(0, 1\\].*every `decay_steps` steps",
    "lr_exponential: decay_rate above 1",         lr_exponential(0.1, 10, 1.5),                            "bad_argument", "^`decay_rate` must be one number in \\(0, 1\\]",
    "lr_exponential: staircase NA",               lr_exponential(0.1, 10, 0.9, staircase = NA),            "bad_argument", "^`staircase` must be TRUE or FALSE",
    "lr_cyclical: high below low",                lr_cyclical(0.1, 0.01, 10),                              "bad_argument", "^`high` \\(0.01\\) must be greater than `low` \\(0.1\\)",
    "lr_cyclical: high NA",                       lr_cyclical(0.01, NA, 10),                               "bad_argument", "^`high` must be one positive number",
    "lr_cyclical: step_size zero",                lr_cyclical(0.01, 0.1, 0),                               "bad_argument", "^`step_size` must be one whole number of steps >= 1",
    "lr_cyclical: mode unknown",                  lr_cyclical(0.01, 0.1, 10, mode = "sine"),               "bad_argument", "^`mode` must be one of \"triangular\", \"triangular2\", not `sine`",
    "gpu_batch_size: max_batch zero",             gpu_batch_size(model, data, max_batch = 0),              "bad_argument", "^`max_batch` must be one whole number >= 1",
    "gpu_batch_size: max_batch huge",             gpu_batch_size(model, data, max_batch = 1e9),            "bad_argument", "^`max_batch` must be one whole number >= 1, not `1e\\+09`",
    "gpu_batch_size: min_batch over max_batch",   gpu_batch_size(model, data, min_batch = 64, max_batch = 8), "bad_argument", "^`max_batch` \\(8\\) must be at least `min_batch` \\(64\\): give a larger",
    "gpu_batch_size: steps zero",                 gpu_batch_size(model, data, steps = 0),                  "bad_argument", "^`steps` must be one whole number >= 1",
    "gpu_batch_size: warmup NA",                  gpu_batch_size(model, data, warmup = NA),                "bad_argument", "^`warmup` must be one whole number >= 1",
    "gpu_batch_size: memory budget negative",     gpu_batch_size(model, data, memory_budget_mib = -1),     "bad_argument", "^`memory_budget_mib` must be one positive number",
    "gpu_batch_size: tolerance zero",             gpu_batch_size(model, data, tolerance = 0),              "bad_argument", "^`tolerance` must be one positive number",
    "gpu_batch_size: tolerance one",              gpu_batch_size(model, data, tolerance = 1),              "bad_argument", "^`tolerance` must be a number between 0 and 1",
    "gpu_batch_size: data missing",               gpu_batch_size(model),                                   "bad_argument", "^`data` is missing",
    "gpu_batch_size: model a string",             gpu_batch_size(model, data),                             "bad_argument", "^`model` must be a compiled Keras 3 model",
    "gpu_profile: steps from zero",               gpu_profile(model, data, steps = c(0, 5)),               "bad_argument", "^`steps` must be two whole numbers c\\(start, stop\\) with 1 <= start <= stop.*steps = c\\(10, 20\\)",
    "gpu_profile: steps backwards",               gpu_profile(model, data, steps = c(5, 3)),               "bad_argument", "^`steps` must be two whole numbers",
    "gpu_profile: one step",                      gpu_profile(model, data, steps = 5),                     "bad_argument", "^`steps` must be two whole numbers .* not `5`",
    "gpu_profile: steps NA",                      gpu_profile(model, data, steps = c(1, NA)),              "bad_argument", "^`steps` must be two whole numbers",
    "gpu_profile: steps huge",                    gpu_profile(model, data, steps = c(1, 1e12)),            "bad_argument", "^`steps` must be two whole numbers",
    "gpu_profile: logdir NA",                     gpu_profile(model, data, logdir = NA),                   "bad_argument", "^`logdir` must be one non-empty string",
    "gpu_profile: logdir empty",                  gpu_profile(model, data, logdir = ""),                   "bad_argument", "^`logdir` must be one non-empty string",
    "gpu_profile: batch_size zero",               gpu_profile(model, data, batch_size = 0),                "bad_argument", "^`batch_size` must be one whole number >= 1",
    "gpu_profile: verbose 5",                     gpu_profile(model, data, verbose = 5),                   "bad_argument", "^`verbose` must be \"auto\", 0, 1 or 2",
    "gpu_profile: data missing",                  gpu_profile(model),                                      "bad_argument", "^`data` is missing",
    "gpu_profile: model a string",                gpu_profile(model, data),                                "bad_argument", "^`model` must be a compiled Keras 3 model"
  ),
  # nolint end
  setup = quote({
    model <- "not a model"
    data <- list(x = matrix(seq_len(40) / 40, ncol = 4), y = seq_len(10) / 10)
    # gpu_fit() results as the core's plain data makes them: two epochs, none.
    fit <- new_gpukeras_fit(list(epoch = c(1, 2), loss = c(1, 0.5)), NULL, list(), list())
    no_epochs <- new_gpukeras_fit(list(), NULL, list(), list())
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
uncompiled <- tiny_model(compile = FALSE)
data <- regression_data(64)
narrow <- list(x = data$x[, 1:3], y = data$y) # 3 features for a model of 4 inputs
dataset <- gpu_dataset(data$x, data$y, batch_size = 16)
narrow_dataset <- gpu_dataset(narrow$x, narrow$y, batch_size = 16)
split <- gpu_dataset(data$x, data$y, batch_size = 16, validation_split = 0.25)
not_a_model <- numpy$zeros(c(2L, 2L))
a_file <- withr::local_tempfile(lines = "not a folder")

# nolint start: line_length_linter. One case a row, its columns aligned.
cases <- bad_inputs(
  ~name,                                           ~code,                                                              ~class,                ~message,
  "gpu_fit: an uncompiled model",                  gpu_fit(uncompiled, data, verbose = 0),                             "model_not_compiled",  "^The model is not compiled: compile it first, e.g. model\\$compile\\(",
  "gpu_fit: a NumPy array as model",               gpu_fit(not_a_model, data, verbose = 0),                            "bad_model",           "^model must be a Keras 3 model \\(keras.Model\\), not numpy.ndarray",
  "gpu_fit: a layer as model",                     gpu_fit(keras$layers$Dense(2L), data, verbose = 0),                 "bad_model",           "^model must be a Keras 3 model \\(keras.Model\\), not keras.src.layers.core.dense.Dense",
  "gpu_fit: R data of the wrong width",            gpu_fit(model, narrow, verbose = 0),                                "bad_data",            "^The model cannot train on this data: .*Give x and y that match the model's inputs",
  "gpu_fit: a dataset of the wrong width",         gpu_fit(model, narrow_dataset, verbose = 0),                        "bad_data",            "^The model cannot train on this data: .*Give x and y that match the model's inputs",
  "gpu_fit: validation data of the wrong width",   gpu_fit(model, data, validation_data = narrow, verbose = 0),        "bad_data",            "^Each row of `x` has shape \\(3\\); the model was trained on rows of shape \\(4\\)",
  "gpu_fit: a NumPy array as data",                gpu_fit(model, not_a_model, verbose = 0),                           "bad_data",            "^The model cannot train on this data",
  "gpu_fit: a model as data",                      gpu_fit(model, model, verbose = 0),                                 "bad_data",            "^The model cannot train on this data: Unrecognized data type",
  "gpu_fit: class_weight by unknown name",         gpu_fit(model, data, class_weight = c(cat = 1), verbose = 0),       "bad_argument",        "^`class_weight` names \"cat\", which is no class of the labels",
  "gpu_fit: labels for fewer rows",                gpu_fit(model, list(x = data$x, y = data$y[1:3]), verbose = 0),     "bad_data",            "^x and y must have the same number of rows, not x: 64, y: 3",
  "gpu_fit: NumPy labels for fewer rows",          gpu_fit(model, list(x = numpy$zeros(c(8L, 4L)), y = numpy$zeros(5L)), verbose = 0), "bad_argument", "^x and y must have the same number of rows: x has 8, y has 5",
  "gpu_fit: batch_size with a dataset",            gpu_fit(model, dataset, batch_size = 8, verbose = 0),               "bad_argument",        "^`batch_size` is for R data: a dataset makes its own batches.*gpu_dataset\\(batch_size = \\), or dataset_batch\\(\\)",
  "gpu_fit: a split and validation_data",          gpu_fit(model, split, validation_data = data, verbose = 0),         "bad_argument",        "holds a validation pipeline .*Give one of them",
  "gpu_fit: a split as validation_data",           gpu_fit(model, data, validation_data = split, verbose = 0),         "bad_argument",        "^`validation_data` must be one dataset or list\\(x = , y = \\), not a train/validation split",
  "gpu_fit: a NumPy array as callback",            gpu_fit(model, data, callbacks = not_a_model, verbose = 0),         "bad_argument",        "^`callbacks` must be a Keras callback or a list of them \\(keras.callbacks.Callback\\), not ndarray",
  "gpu_fit: a model as callback",                  gpu_fit(model, data, callbacks = list(model), verbose = 0),         "bad_argument",        "^`callbacks` must be a Keras callback or a list of them",
  "gpu_fit: a NumPy array as learning_rate",       gpu_fit(model, data, learning_rate = not_a_model, verbose = 0),     "bad_argument",        "^`learning_rate` must be one positive number or a schedule, not .*Schedules: lr_warmup_cosine\\(\\)",
  "gpu_fit: a NumPy array as strategy",            gpu_fit(model, data, strategy = not_a_model, verbose = 0),          "bad_argument",        "^strategy must come from gpu_strategy\\(\\)",
  "gpu_fit: backup_dir is a file",                 gpu_fit(model, data, backup = gpu_backup(a_file), verbose = 0), "bad_argument",        "^backup_dir .* is a file; give a folder",
  "gpu_fit: backup_dir cannot be made",            gpu_fit(model, data, backup = gpu_backup(file.path(a_file, "backups")), verbose = 0), "bad_argument", "^backup_dir .* cannot be created",
  "gpu_batch_size: an uncompiled model",           gpu_batch_size(uncompiled, data, max_batch = 8),                    "model_not_compiled",  "^The model is not compiled: compile it first",
  "gpu_batch_size: a NumPy array as model",        gpu_batch_size(not_a_model, data, max_batch = 8),                   "bad_model",           "^model must be a Keras 3 model \\(keras.Model\\), not numpy.ndarray",
  "gpu_batch_size: R data of the wrong width",     gpu_batch_size(model, narrow, max_batch = 8),                       "bad_data",            "^The model cannot train on this data: .*Give x and y that match the model's inputs",
  "gpu_batch_size: a dataset of the wrong width",  gpu_batch_size(model, narrow_dataset, max_batch = 8),               "bad_data",            "^The model cannot train on this data",
  "gpu_batch_size: not even a batch of 1 fits",    gpu_batch_size(model, data, max_batch = 8, memory_budget_mib = 1e-9), "out_of_memory",     "^Even a batch of 1 does not fit .*Give a larger memory_budget_mib",
  "gpu_profile: an uncompiled model",              gpu_profile(uncompiled, data, steps = c(1, 2)),                     "model_not_compiled",  "^The model is not compiled: compile it first",
  "gpu_profile: a NumPy array as model",           gpu_profile(not_a_model, data, steps = c(1, 2)),                    "bad_model",           "^model must be a Keras 3 model \\(keras.Model\\)",
  "gpu_profile: R data of the wrong width",        gpu_profile(model, narrow, steps = c(1, 2)),                        "bad_data",            "^The model cannot train on this data: .*Give x and y that match the model's inputs",
  "gpu_profile: logdir is a file",                 gpu_profile(model, data, steps = c(1, 2), logdir = a_file),         "bad_argument",        "^logdir .* cannot be written to .*give a folder you can write to",
  "gpu_profile: batch_size with a dataset",        gpu_profile(model, dataset, steps = c(1, 2), batch_size = 8),       "bad_argument",        "^`batch_size` is for R data: a dataset makes its own batches"
)
# nolint end

for (case in cases) {
  test_that(case$name, {
    expect_bad_input(run_bad_input(case), case)
  })
}
