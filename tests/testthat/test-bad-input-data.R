# Bad inputs to the data functions: gpu_as_numpy(), gpu_dataset(),
# gpu_dataset_benchmark(). Each row must fail with a classed error whose
# message says what to do (see helper-bad-input.R); the first table before
# Python starts.

checked <- check_before_python(
  # nolint start: line_length_linter. One case a row, its columns aligned.
  bad_inputs(
    ~name,                                        ~code,                                                   ~class,          ~message,
    "gpu_as_numpy: a string",                     gpu_as_numpy("a"),                                       "bad_data",      "^`x` must be a numeric vector, matrix or array, not `a`.*factor codes",
    "gpu_as_numpy: NULL",                         gpu_as_numpy(NULL),                                      "bad_data",      "^`x` must be a numeric vector, matrix or array, not NULL",
    "gpu_as_numpy: a list",                       gpu_as_numpy(list(1, 2)),                                "bad_data",      "^`x` must be a numeric vector, matrix or array, not a list",
    "gpu_as_numpy: a data.frame",                 gpu_as_numpy(iris),                                      "bad_data",      "^`x` must be a numeric vector, matrix or array, not a data.frame",
    "gpu_as_numpy: empty",                        gpu_as_numpy(numeric()),                                 "bad_data",      "^`x` is empty",
    "gpu_as_numpy: dtype NA",                     gpu_as_numpy(1:3, dtype = NA),                           "bad_argument",  "^`dtype` must be one non-empty string, not `NA`",
    "gpu_as_numpy: dtype a number",               gpu_as_numpy(1:3, dtype = 32),                           "bad_argument",  "^`dtype` must be one non-empty string",
    "gpu_dataset: batch_size zero",               gpu_dataset(x, y, batch_size = 0),                       "bad_argument",  "^`batch_size` must be one whole number >= 1, not `0`",
    "gpu_dataset: label with R data",             gpu_dataset(iris, label = "Species"),                    "bad_argument",  "^`label` is for CSV and TFRecord files, not for R data.\n[^ ]+ For R data, give the features as `x` and the labels as `y`",
    "gpu_dataset: columns with R data",           gpu_dataset(x, y, columns = "a"),                        "bad_argument",  "^`columns` is for CSV and TFRecord files",
    "gpu_dataset: batch_size negative",           gpu_dataset(x, y, batch_size = -1),                      "bad_argument",  "^`batch_size` must be one whole number >= 1",
    "gpu_dataset: batch_size NA",                 gpu_dataset(x, y, batch_size = NA),                      "bad_argument",  "^`batch_size` must be one whole number >= 1, not `NA`",
    "gpu_dataset: batch_size fractional",         gpu_dataset(x, y, batch_size = 1.5),                     "bad_argument",  "^`batch_size` must be one whole number >= 1",
    "gpu_dataset: batch_size a string",           gpu_dataset(x, y, batch_size = "32"),                    "bad_argument",  "^`batch_size` must be one whole number >= 1",
    "gpu_dataset: batch_size huge",               gpu_dataset(x, y, batch_size = 1e12),                    "bad_argument",  "^`batch_size` must be one whole number >= 1, not `1e\\+12`",
    "gpu_dataset: shuffle NA",                    gpu_dataset(x, y, shuffle = NA),                         "bad_argument",  "^`shuffle` must be TRUE or FALSE",
    "gpu_dataset: seed negative",                 gpu_dataset(x, y, seed = -1),                            "bad_argument",  "^`seed` must be one whole number >= 0",
    "gpu_dataset: seed fractional",               gpu_dataset(x, y, seed = 1.5),                           "bad_argument",  "^`seed` must be one whole number >= 0",
    "gpu_dataset: seed huge",                     gpu_dataset(x, y, seed = 1e12),                          "bad_argument",  "^`seed` must be one whole number >= 0, not `1e\\+12`",
    "gpu_dataset: cache NA",                      gpu_dataset(x, y, cache = NA),                           "bad_argument",  "^`cache` must be TRUE, FALSE or a file path",
    "gpu_dataset: cache a number",                gpu_dataset(x, y, cache = 1),                            "bad_argument",  "^`cache` must be TRUE, FALSE or a file path",
    "gpu_dataset: cache in a missing folder",     gpu_dataset(x, y, cache = "/no/such/folder/cache"),      "bad_argument",  "^`cache` is '/no/such/folder/cache', in a folder that does not exist.*Create the folder",
    "gpu_dataset: map a string",                  gpu_dataset(x, y, map = "f"),                            "bad_argument",  "^`map` must be a function \\(R or Python\\)",
    "gpu_dataset: augment unnamed",               gpu_dataset(x, y, augment = list(1)),                    "bad_argument",  "^`augment` must be a named list of presets.*For example",
    "gpu_dataset: augment a string",              gpu_dataset(x, y, augment = "flip"),                     "bad_argument",  "^`augment` must be a named list of presets",
    "gpu_dataset: validation_split one",          gpu_dataset(x, y, validation_split = 1),                 "bad_argument",  "^`validation_split` must be one number in \\[0, 1\\)",
    "gpu_dataset: validation_split negative",     gpu_dataset(x, y, validation_split = -0.1),              "bad_argument",  "^`validation_split` must be one number in \\[0, 1\\)",
    "gpu_dataset: validation_split NA",           gpu_dataset(x, y, validation_split = NA),                "bad_argument",  "^`validation_split` must be one number",
    "gpu_dataset: drop_remainder NA",             gpu_dataset(x, y, drop_remainder = NA),                  "bad_argument",  "^`drop_remainder` must be TRUE or FALSE",
    "gpu_dataset: deterministic a word",          gpu_dataset(x, y, deterministic = "yes"),                "bad_argument",  "^`deterministic` must be TRUE or FALSE",
    "gpu_dataset: prefetch negative",             gpu_dataset(x, y, prefetch = -1),                        "bad_argument",  "^`prefetch` must be \"auto\" or a number of batches >= 0",
    "gpu_dataset: prefetch a word",               gpu_dataset(x, y, prefetch = "lots"),                    "bad_argument",  "^`prefetch` must be \"auto\"",
    "gpu_dataset: prefetch fractional",           gpu_dataset(x, y, prefetch = 1.5),                       "bad_argument",  "^`prefetch` must be \"auto\".*whole number up to 1e6",
    "gpu_dataset: prefetch huge",                 gpu_dataset(x, y, prefetch = 1e12),                      "bad_argument",  "^`prefetch` must be \"auto\".*whole number up to 1e6",
    "gpu_dataset: to_device unknown kind",        gpu_dataset(x, y, to_device = "TPU:0"),                  "bad_argument",  "^`to_device` must be GPU indices",
    "gpu_dataset: na unknown",                    gpu_dataset(x, y, na = "keep"),                          "bad_argument",  "^`na` must be one of \"error\", \"drop\", not `keep`",
    "gpu_dataset: x NULL",                        gpu_dataset(NULL),                                       "bad_data",      "^`x` must be a numeric matrix, array, vector or data.frame, not NULL",
    "gpu_dataset: x a character matrix",          gpu_dataset(matrix(letters[1:4], 2)),                    "bad_data",      "^`x` is a character matrix: features must be numbers.*as.numeric",
    "gpu_dataset: x two file names",              gpu_dataset(c("a.csv", "b.csv")),                        "bad_data",      "^`x` is a character vector: features must be numbers",
    "gpu_dataset: x an unnamed list",             gpu_dataset(list(matrix(1:4, 2))),                       "bad_data",      "must be a named list of matrices",
    "gpu_dataset: x a function",                  gpu_dataset(function(x) x),                              "bad_data",      "^`x` must be a numeric matrix, array, vector or data.frame, not a function",
    "gpu_dataset: x with no columns",             gpu_dataset(data.frame(row.names = 1:3)),                "bad_data",      "^The data.frame `x` has no columns",
    "gpu_dataset: y a list",                      gpu_dataset(x, list(1, 2)),                              "bad_data",      "^`y` must be a numeric, logical, factor or character vector",
    "gpu_dataset: y too short",                   gpu_dataset(x, y[1:5]),                                  "bad_data",      "^x and y must have the same number of rows, not x: 10, y: 5.*one label per row",
    "gpu_dataset: no rows",                       gpu_dataset(x[0, , drop = FALSE]),                       "bad_data",      "^The data has no rows",
    "gpu_dataset: two columns of one name",       gpu_dataset(cbind(x, x[, 1, drop = FALSE]), y),          "bad_data",      "^The columns of `x` must have distinct names: the name\\(s\\) `a` are given to several columns \\(1 and 5\\).*make.unique",
    "gpu_dataset: a column without a name",       gpu_dataset(cbind(x, 1), y),                             "bad_data",      "^The columns of `x` must have distinct names: column\\(s\\) 5 have no name",
    "gpu_dataset: cbind() of two tables",         gpu_dataset(cbind(df, df["a"]), y),                      "bad_data",      "the name\\(s\\) `a` are given to several columns \\(1 and 3\\)",
    "gpu_dataset: a matrix column",               gpu_dataset(transform(df, m = I(x[, 1:2])), y),          "bad_data",      "^`x` has matrix or data.frame column\\(s\\) inside it: m",
    "gpu_dataset: a path that does not exist",    gpu_dataset("/no/such/folder"),                          "missing_files", "is not a folder, a CSV file/glob or TFRecord files.*data/\\*.csv",
    "gpu_dataset: y with files",                  gpu_dataset("/no/such/file.csv", y = 1:3),               "bad_argument",  "^`y` is for R data; with files, name the label column or feature with `label`",
    "gpu_dataset: label a number",                gpu_dataset(folder, label = 1),                          "bad_argument",  "^`label` must be one non-empty string",
    "gpu_dataset: columns a number",              gpu_dataset("/no/such/*.csv", columns = 1),              "bad_argument",  "^`columns` must be column names",
    "gpu_dataset: image_size zero",               gpu_dataset(folder, image_size = 0),                     "bad_argument",  "^`image_size` must be c\\(height, width\\)",
    "gpu_dataset: image_size NA",                 gpu_dataset(folder, image_size = c(10, NA)),             "bad_argument",  "^`image_size` must be c\\(height, width\\)",
    "gpu_dataset: color_mode unknown",            gpu_dataset(folder, color_mode = "cmyk"),                "bad_argument",  "^`color_mode` must be one of \"rgb\", \"grayscale\", \"rgba\", not `cmyk`",
    "gpu_dataset_benchmark: an R list",           gpu_dataset_benchmark(list()),                           "bad_argument",  "^`dataset` must be a gpu_dataset\\(\\) or tf.data.Dataset, not a list",
    "gpu_dataset_benchmark: NULL",                gpu_dataset_benchmark(NULL),                             "bad_argument",  "^`dataset` must be a gpu_dataset\\(\\) or tf.data.Dataset, not NULL",
    "gpu_dataset_benchmark: R data",              gpu_dataset_benchmark(x, steps = 0),                     "bad_argument",  "^`dataset` must be a gpu_dataset\\(\\) or tf.data.Dataset"
  ),
  # nolint end
  setup = quote({
    x <- matrix(seq_len(40) / 40, ncol = 4, dimnames = list(NULL, c("a", "b", "c", "d")))
    df <- data.frame(a = seq_len(10), b = factor(rep(c("u", "v"), 5)))
    y <- seq_len(10) / 10
    folder <- tempfile("empty-folder")
    dir.create(folder)
  })
)

for (result in checked) {
  test_that(paste(result$case$name, "(before Python starts)"), {
    expect_bad_input(result$error, result$case)
    expect_false(result$started_python, label = paste(deparse(result$case$code), collapse = " "))
  })
}

skip_if_no_python()
data <- regression_data(64)
x <- data$x
y <- data$y
dataset <- gpu_dataset(x, y, batch_size = 16)
split <- gpu_dataset(x, y, batch_size = 16, validation_split = 0.25)
numpy <- reticulate::import("numpy", convert = FALSE)
model <- tiny_model()
files <- withr::local_tempdir()
# A folder of image classes whose only "image" is text, one of classes
# holding no images at all, an empty folder, and a CSV with a text column.
dir.create(file.path(files, "fake-images", "cats"), recursive = TRUE)
writeLines("not an image", file.path(files, "fake-images", "cats", "a.jpg"))
dir.create(file.path(files, "no-images", "notes"), recursive = TRUE)
writeLines("hello", file.path(files, "no-images", "notes", "a.txt"))
dir.create(file.path(files, "empty"))
csv <- file.path(files, "table.csv")
utils::write.csv(data.frame(a = 1:3, b = c("x", "y", "z"), label = 1:3), csv, row.names = FALSE)
# NA and Inf are the core's to find (in its copy of the data), with the same classes and fields
small <- matrix(seq_len(40) / 40, ncol = 4, dimnames = list(NULL, c("a", "b", "c", "d")))
small_y <- seq_len(10) / 10
ragged <- file.path(files, "ragged.csv")
writeLines(c("a,label", "1,0", "2,1,9", "3,0"), ragged)

# nolint start: line_length_linter. One case a row, its columns aligned.
cases <- bad_inputs(
  ~name,                                          ~code,                                                                 ~class,          ~message,
  "gpu_as_numpy: NA (the core's check)",         gpu_as_numpy(c(1, NA)),                                                "bad_data",      "^`x` has 1 NA/NaN value\\(s\\), the first at position 2. Remove or impute them",
  "gpu_as_numpy: an unknown dtype",               gpu_as_numpy(1:3, dtype = "nonsense"),                                 "bad_argument",  "could not be converted to NumPy dtype 'nonsense'.*\"float32\"",
  "gpu_dataset: CSV files that do not exist",     gpu_dataset("/no/such/folder/*.csv"),                                  "missing_files", "^No CSV files match '/no/such/folder/\\*.csv'. Check the path",
  "gpu_dataset: TFRecord files that do not exist", gpu_dataset("/no/such/file.tfrecord"),                                "missing_files", "^No TFRecord files match",
  "gpu_dataset: an empty folder",                 gpu_dataset(file.path(files, "empty")),                                "missing_files", "has no sub-folders; each class needs its own",
  "gpu_dataset: class folders without images",    gpu_dataset(file.path(files, "no-images")),                            "missing_files", "^No images \\(.png, .jpg, .jpeg, .bmp, .gif\\) in the class folders",
  "gpu_dataset: a text file named .jpg",          gpu_dataset(file.path(files, "fake-images"), image_size = c(8, 8)),    "bad_image",     "are not PNG, JPEG, GIF or BMP images.*a.jpg'. Remove them",
  "gpu_dataset: a label column not in the CSV",   gpu_dataset(csv, label = "nolabel"),                                   "bad_argument",  "label = \"nolabel\" is not a column of .*Columns: \"a\", \"b\", \"label\"",
  "gpu_dataset: CSV columns not in the file",     gpu_dataset(csv, label = "label", columns = c("a", "zzz")),            "bad_argument",  "columns \"zzz\" not found",
  "gpu_dataset: a CSV row with an extra field",  gpu_dataset(ragged, label = "label"),                                  "bad_data",      "^Line 3 of '.*ragged.csv' has 3 fields, but the header has 2",
  "gpu_dataset: a CSV text column",               gpu_dataset(csv, label = "label"),                                     "bad_data",      "Column\\(s\\) \"b\" of .* hold text.*columns = c\\(\"a\"\\)",
  "gpu_dataset: NA in x",                       gpu_dataset(rbind(small, NA), c(small_y, 1)),                      "missing_values", "NA/NaN in 1 row\\(s\\) \\(first: 11\\).*na = \"drop\"",
  "gpu_dataset: every row NA, dropped",         gpu_dataset(matrix(NA_real_, 2, 2), na = "drop"),        "bad_data",      "^Every row has an NA",
  "gpu_dataset: Inf in x",                      gpu_dataset(rbind(small, c(1, Inf, 1, 1)), c(small_y, 1)),         "not_finite",    "^The data has Inf, -Inf or values beyond float32's range .* in 1 row\\(s\\) \\(first: 11\\), in x\\$b\\..*NaN loss",
  "gpu_dataset: 1e300 in y, na = drop",         gpu_dataset(small, c(small_y[-1], -1e300), na = "drop"),           "not_finite",    "^The data has Inf, -Inf or values beyond float32's range .* \\(first: 10\\), in y\\.",
  "gpu_dataset: a weight beyond float32",       gpu_dataset(small, small_y, sample_weight = c(1e39, rep(1, 9))),    "not_finite",    "beyond float32's range .*\\(first: 1\\), in sample_weight\\.",
  "gpu_dataset: x with a list column",          gpu_dataset(data.frame(a = I(list(1, 2)))),              "bad_data",      "^Column\\(s\\) of unsupported type in `x`: a.*drop list columns",
  "gpu_dataset: a map that fails",                gpu_dataset(x, y, map = function(x, y) stop("boom")),                  "bad_map",       "The map function failed when tf.data traced it into a graph: .*boom.*TensorFlow ops",
  "gpu_dataset: an unknown augment preset",       gpu_dataset(x, y, augment = list(sparkle = list())),                   "bad_argument",  "Unknown augment preset\\(s\\): sparkle. Presets: flip_horizontal",
  "gpu_dataset: augment parameters Keras refuses", gpu_dataset(x, y, augment = list(rotation = list(factor = "big"))),   "bad_argument",  "augment preset 'rotation' \\(RandomRotation\\) rejected its parameters",
  "gpu_dataset: image augment on a table",        gpu_dataset(x, y, augment = list(flip_horizontal = list())),           "bad_argument",  "The presets work on image batches, N x H x W x C",
  "gpu_dataset: to_device that does not exist",   gpu_dataset(x, y, to_device = "GPU:99"),                               "unknown_device", "^No such device: 'GPU:99'. Devices here: .*gpu_devices\\(\\) lists them",
  "gpu_dataset_benchmark: steps zero",            gpu_dataset_benchmark(dataset, steps = 0),                             "bad_argument",  "^`steps` must be one whole number >= 1, not `0`",
  "gpu_dataset_benchmark: steps huge",            gpu_dataset_benchmark(dataset, steps = 1e12),                          "bad_argument",  "^`steps` must be one whole number >= 1",
  "gpu_dataset_benchmark: a train/validation split", gpu_dataset_benchmark(split),                                      "bad_argument",  "^`dataset` must be a gpu_dataset\\(\\) or tf.data.Dataset, not a list of length 2",
  "gpu_dataset_benchmark: a NumPy array",         gpu_dataset_benchmark(numpy$zeros(c(2L, 2L))),                         "bad_argument",  "^dataset must be a gpu_dataset\\(\\) or a tf.data.Dataset, not a ndarray",
  "gpu_dataset_benchmark: a model",               gpu_dataset_benchmark(model),                                          "bad_argument",  "^dataset must be a gpu_dataset\\(\\) or a tf.data.Dataset, not a Sequential"
)
# nolint end

for (case in cases) {
  test_that(case$name, {
    expect_bad_input(run_bad_input(case), case)
  })
}

test_that("the messages for column names and nested columns (issue #32, item 3)", {
  x <- matrix(seq_len(8) / 8, ncol = 2, dimnames = list(NULL, c("income", "age")))
  nested <- data.frame(a = 1:4)
  nested$m <- x
  expect_snapshot(error = TRUE, {
    gpu_dataset(cbind(x, x[, "income", drop = FALSE]), 1:4)
    gpu_dataset(cbind(x, 1), 1:4)
    gpu_dataset(nested, 1:4)
  })
})
