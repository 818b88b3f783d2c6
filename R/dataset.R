#' A fast tf.data input pipeline from R data or files
#'
#' Builds a `tf.data.Dataset` that keeps the GPU fed and never calls back into
#' R during training: R data is converted once to C-contiguous NumPy arrays
#' (float32 features; int32 labels for factors and integers, float32
#' otherwise), files are streamed. The pipeline follows TensorFlow's
#' performance guide: parallel `map`, then `cache`, then `shuffle`, then
#' `batch`, then random augmentation on whole batches in parallel, then
#' `prefetch`, with AUTOTUNE choosing the parallelism.
#'
#' @section Sources:
#' * A numeric matrix or array of any rank (images as N x H x W x C); rows are
#'   the first dimension.
#' * A data.frame: numeric and logical columns as they are; a factor or
#'   character column becomes one indicator (0/1) column per level, as R's
#'   `model.matrix(~ 0 + f)` makes them (`factors = "one_hot"`, the default: a
#'   Dense layer would otherwise read a level's code as an amount), or one
#'   integer code, 0-based (`factors = "codes"`, for an Embedding layer; per
#'   column: `factors = c(region = "codes")`). Ordered factors follow the same
#'   rule. The print says how many columns the model receives and why (`5
#'   columns: income, region (4 levels, one-hot)`), and so does [gpu_fit()]'s;
#'   a model whose input has another width is a `gpukeras_error_bad_data`
#'   saying both. The levels are kept in `attr(, "gpukeras")$vocabulary`, how
#'   the data was encoded in `attr(, "gpukeras")$encoding`; new data given
#'   `like = ` this dataset is encoded the same way (see "Scoring new data").
#' * A named list of these, for multi-input models (a dict of inputs).
#' * A path (one string): a folder with one sub-folder of images per class;
#'   CSV files (a glob such as `"data/*.csv"`, a file, or a folder of them;
#'   name the label column with `label`); TFRecord files (`*.tfrecord`,
#'   `*.tfrecords`, `*.tfrec`).
#'
#' @section Images:
#' An image folder's images are decoded, resized to `image_size` and given
#' to the model as float32 pixels in \[0, 255\] (as Keras'
#' `image_dataset_from_directory()` does); `rescale = 1/255` reads them in
#' \[0, 1\] instead (or put a Rescaling layer at the model's start). The labels
#' are the class folders' positions in name order: the class names are in
#' `attr(, "gpukeras")$class_names` and `$vocabulary$y`, and printed. A class
#' folder without images is a class all the same, as a factor's level no row
#' has is (a `gpukeras_warning_empty_levels` warning). A folder
#' of new images read `like = ` the training dataset or fit gets the training
#' folder's image size, color mode, rescale and labels (a class folder the
#' training data did not have is a `gpukeras_error_new_levels` error), and
#' `predict(fit, type = "class")` names the classes.
#'
#' @section Scoring new data:
#' Factor codes depend on the levels a factor has: `gpu_dataset(newdata)`
#' alone would code new data by its own levels, so that a level could get
#' another code than in training. Give `like = ` the training dataset (or the
#' fit) instead, or score with [predict.gpukeras_fit()] and
#' [evaluate.gpukeras_fit()], which do this for you; [gpu_save()] keeps the
#' encoding beside the model for a later session.
#'
#' @param x Features: an R matrix, array, data.frame, named list of them, or a
#'   path to files (see Sources).
#' @param y Labels for R data: a numeric, integer, logical or factor vector (or
#'   a matrix); `NULL` for none, or for files (use `label`). A factor's codes
#'   are its levels' positions, every level counted (one no row has too, with a
#'   `gpukeras_warning_empty_levels` warning): a classifier has one output unit
#'   per level.
#' @param batch_size Elements per batch. One larger than the training rows
#'   (after `validation_split`), where they are known (R data, an image
#'   folder), is the rows: one batch per epoch, as Keras makes it, with a
#'   `gpukeras_warning_batch_size` warning (not for new data read `like = `
#'   training data, nor for the default 32).
#' @param shuffle Shuffle the training elements every epoch.
#' @param seed Seed for shuffling, augmentation and the validation split.
#'   Shuffling and the split are then the same in every run; augmentation
#'   runs on several batches in parallel, whose calls share the presets' seed
#'   state, so its draws may differ from run to run.
#' @param cache Cache elements after `map`: `TRUE` in memory (for files only
#'   when they surely fit: under a quarter of free memory), `FALSE`, or a file
#'   path. Arrays without a `map` need no cache and get none.
#' @param map A function applied to each element (`x`, `x, y` or, with
#'   `sample_weight`, `x, y, w`), returning the new element (a list for several): an R function using TensorFlow ops,
#'   traced once into the graph when the pipeline is built, or a Python
#'   callable.
#' @param augment Random augmentation of image batches, a named list of presets
#'   and their parameters: `flip_horizontal`, `flip_vertical`, `brightness`
#'   (`factor`, `value_range`), `contrast` (`factor`), `crop` (`height`,
#'   `width`), `rotation` (`factor`), e.g.
#'   `list(flip_horizontal = list(), rotation = list(factor = 0.05))`.
#' @param validation_split Share of rows held out for validation; then the
#'   result is `list(train = , validation = )`, disjoint; validation data is
#'   neither shuffled nor augmented.
#' @param drop_remainder Drop the last, smaller batch.
#' @param deterministic `FALSE` lets parallel steps return elements out of
#'   order (faster); `NULL` uses tf.data's default.
#' @param prefetch `"auto"` (AUTOTUNE), a number of batches, or `0`.
#' @param to_device `"auto"` keeps batches on the host (Keras copies each
#'   batch to the GPU in its train step; TensorFlow's `prefetch_to_device` does
#'   not overlap under Keras' eager `fit()`), or a device such as `"GPU:0"`.
#' @param na What to do with NA/NaN in R data: `"error"` (names the columns
#'   and first rows) or `"drop"` (drops those rows).
#' @param label For CSV and TFRecord files: the name of the label column or
#'   feature.
#' @param columns For CSV files: the feature columns to use (default: all
#'   but `label`).
#' @param image_size For image folders: `c(height, width)` images are resized to.
#' @param color_mode For image folders: `"rgb"`, `"grayscale"` or `"rgba"`.
#' @param rescale For image folders: a factor the pixels (0-255) are
#'   multiplied by, e.g. `1/255`; `NULL` keeps them in \[0, 255\].
#' @param sample_weight For R data: one weight >= 0 per row, which Keras'
#'   `fit()` multiplies into each row's loss (see [gpu_fit()]'s Weights);
#'   elements are then `x, y, sample_weight`. With `na = "drop"`, a row
#'   whose weight is NA is dropped.
#' @param like For new R data or a new image folder (to score, or to train
#'   further): the training data's `gpu_dataset()`, a [gpu_fit()] result or a
#'   [gpu_load()] model,
#'   whose encoding is applied to `x` and `y`: the same columns (matched by
#'   name; order and other columns do not matter), factor and character
#'   values coded by the training levels (matched by name), the same dtype.
#'   `NULL` (the default) records a new encoding from `x` and `y`.
#' @param unknown With `like`: what a factor level the training data did not
#'   have becomes. `"error"` (the default) stops with a
#'   `gpukeras_error_new_levels` error naming the column and the levels;
#'   `"zero"`, for a one-hot factor, gives those rows 0 in every indicator
#'   column of that factor; `"code"`, for a factor of integer codes, gives
#'   them the reserved code `length(levels)`, one past the training codes (an
#'   embedding then needs `input_dim = length(levels) + 1`).
#' @param factors For R data without `like`: how factor and character columns
#'   of a data.frame reach the model: `"one_hot"` (the default, one indicator
#'   column per level) or `"codes"` (one integer code), for all of them, or a
#'   vector of these named by columns (the others one-hot). With `like`, the
#'   training data's rule applies.
#' @param ... Not used: an argument gpu_dataset() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return A `tf.data.Dataset` (a Python object) of class `gpukeras_dataset`,
#'   usable by Keras' `fit()`, with an R print method; its facts are in
#'   `attr(, "gpukeras")`. With `validation_split > 0`, a list of two:
#'   `train` and `validation`.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   ds <- gpu_dataset(as.matrix(iris[, 1:4]), iris$Species, batch_size = 16, seed = 1)
#'   ds
#'   split <- gpu_dataset(iris[, 1:4], iris$Species, validation_split = 0.2, seed = 1)
#'   split$validation
#'   # new rows encoded as the training rows were (columns by name, factor levels)
#'   gpu_dataset(iris[c(5, 1), 4:1], like = split$train, shuffle = FALSE)
#' }
gpu_dataset <- function(x, y = NULL, batch_size = 32, shuffle = TRUE, seed = NULL,
                        cache = TRUE, map = NULL, augment = NULL, validation_split = 0,
                        drop_remainder = FALSE, deterministic = NULL, prefetch = "auto",
                        to_device = "auto", na = c("error", "drop"), label = NULL,
                        columns = NULL, image_size = c(64, 64), color_mode = "rgb",
                        rescale = NULL, like = NULL, unknown = c("error", "zero", "code"),
                        sample_weight = NULL, factors = "one_hot", ...) {
  check_unknown_args("gpu_dataset")
  recipe <- if (is.character(x) && length(x) == 1L) mget(setdiff(names(formals()), "..."))
  options <- pipeline_options(
    batch_size, shuffle, seed, cache, map, augment, validation_split,
    drop_remainder, deterministic, prefetch, to_device
  )
  na <- check_choice(na[[1]], c("error", "drop"), "na")
  result <- if (is.character(x) && length(x) == 1L) {
    if (!is.null(y) || !is.null(sample_weight)) {
      abort_bad_argument(
        if (is.null(y)) "`sample_weight` is for R data; weigh classes of files with gpu_fit(class_weight = )." else
          "`y` is for R data; with files, name the label column or feature with `label`."
      )
    }
    encoding <- if (!is.null(like)) encoding_of(like)
    if (!is.null(encoding) && is.null(encoding$images)) {
      abort_bad_argument(
        c(
          "`like` was trained on R data, not an image folder.",
          "Give the new data as R data too: gpu_dataset(newdata, like = )."
        )
      )
    }
    images <- encoding$images
    recipe$like <- encoding # what a background fit's child needs of it (not a fit's model)
    if (!is.null(images)) {
      image_size <- images$image_size
      color_mode <- images$color_mode
      rescale <- images$rescale
    }
    source <- file_source(x, label, columns, image_size, color_mode, rescale)
    if (!is.null(images)) {
      if (source$kind != "image_folder") {
        abort_bad_argument("`like` is for R data and image folders: CSV and TFRecord files are read as they are.")
      }
      source$args$class_names <- as.list(encoding$y$levels)
    }
    made <- do.call(core_call, c(list("dataset_from_source", kind = source$kind, source = source$args), options))
    if (source$kind == "image_folder") made$info$encoding <- encoding_from_plain(made$info$encoding)
    made
  } else {
    if (!is.null(label) || !is.null(columns)) {
      abort_bad_argument(
        c(
          sprintf("`%s` is for CSV and TFRecord files, not for R data.", if (!is.null(label)) "label" else "columns"),
          paste0(
            "For R data, give the features as `x` and the labels as `y`, e.g. gpu_dataset(df[setdiff(names(df), ",
            "\"label\")], df$label)."
          )
        )
      )
    }
    if (!is.null(rescale)) {
      abort_bad_argument(
        c("`rescale` is for image folders.", "Scale R arrays before, e.g. gpu_dataset(images / 255, labels).")
      )
    }
    unknown <- check_choice(unknown[[1]], c("error", "zero", "code"), "unknown")
    check_factors(factors)
    if (!is.null(like) && !missing(factors)) {
      abort_bad_argument(
        c(
          "`factors` is for new training data: with `like`, the training data's encoding decides.",
          "Leave `factors` out."
        )
      )
    }
    encoding <- if (!is.null(like)) encoding_of(like)
    if (!is.null(encoding$images)) {
      abort_bad_argument(
        c(
          "`like` was trained on an image folder: give new images as a folder too.",
          "Or give R arrays of images to predict(fit, images) directly."
        )
      )
    }
    data <- as_pipeline_data(
      x, y, na, encoding = encoding, unknown = unknown, sample_weight = sample_weight, factors = factors
    )
    recipe <- list(arrays = data, options = options, encoding = data$encoding)
    built <- arrays_pipeline(recipe)
    # The pipeline's own copy of the data (its tensors share it when there is no
    # split): what a background fit carries, where the R data would be twice the size;
    # the rows the core dropped from it (na = "drop") are its dataset's again.
    recipe$arrays <- kept_arrays(built$arrays)
    recipe$dropped <- built$info$dropped_rows
    built
  }
  # The core's warnings on new training data: a class folder without images; a batch larger
  # than the rows made the rows, said where the size was asked for (a default on a few rows,
  # or new data to score, is no mistake).
  if (is.null(like)) {
    raise_core_warnings(result$warnings, skip = if (missing(batch_size)) "batch_size", call = current_env())
  }
  datasets_from_result(result, recipe)
}

# The encoding of `like`: a gpu_dataset(), a gpukeras_fit, a model from
# gpu_load(), or an encoding.
encoding_of <- function(like, arg = "like", call = caller_env()) {
  encoding <- if (inherits(like, "gpukeras_encoding")) {
    like
  } else if (inherits(like, "gpukeras_dataset")) {
    attr(like, "gpukeras")$encoding
  } else if (inherits(like, c("gpukeras_fit", "gpukeras_model"))) {
    like$encoding
  } else if (is.list(like) && identical(names(like), c("train", "validation")) &&
    inherits(like$train, "gpukeras_dataset")) {
    attr(like$train, "gpukeras")$encoding
  } else {
    abort_bad_argument(
      sprintf("`%s` must be a gpu_dataset(), a gpu_fit() result or a gpu_load() model, not %s.", arg, describe(like)),
      call = call
    )
  }
  if (is.null(encoding)) {
    abort_bad_argument(c(
      sprintf("`%s` has no record of how its data was encoded.", arg),
      paste0(
        "Only R data given to gpu_dataset() or gpu_fit() (matrices, arrays, data.frames) is recorded; files and ",
        "NumPy arrays are not."
      )
    ), call = call)
  }
  encoding
}

# `factors` checked: "one_hot" or "codes", or a vector of them named (by factor or
# character columns, which the core checks).
check_factors <- function(factors, call = caller_env()) {
  rules <- c("one_hot", "codes")
  if (!is.character(factors) || !length(factors) || anyNA(factors) || !all(factors %in% rules) ||
      (is.null(names(factors)) && length(factors) != 1L) ||
        (!is.null(names(factors)) && any(!nzchar(names(factors))))) {
    abort_bad_argument(c(
      sprintf(
        "`factors` must be \"one_hot\" or \"codes\", or such values named by columns, not %s.", describe(factors)
      ),
      "e.g. factors = \"codes\" (integer codes for an Embedding layer), or factors = c(region = \"codes\")."
    ), call = call)
  }
  invisible(factors)
}


# The core's pipeline over the arrays of `recipe`, with its options: R data
# from as_pipeline_data() (copied once, to float32 features and `y_dtype`
# labels, checked for NA where it asks), or the NumPy arrays a background fit
# carried (shared as they are); and what converting the R data found.
arrays_pipeline <- function(recipe, call = caller_env()) {
  result <- handover_call(
    "dataset_from_arrays", recipe$arrays,
    c(list(copy = FALSE, x_dtype = "float32", encoding = recipe$encoding), recipe$options),
    call = call
  )
  result$info$encoding <- recipe$encoding
  result$info$dropped_rows <- recipe$dropped %||% result$info$dropped_rows
  result
}

# gpu_dataset()'s value from the core's `result`. The recipe (the call for
# files; the arrays and options for R data) makes the dataset again in
# gpu_fit(background = TRUE)'s child.
datasets_from_result <- function(result, recipe) {
  train <- new_gpukeras_dataset(result$dataset, result$info)
  attr(train, "gpukeras_recipe") <- recipe
  if (is.null(result$validation)) return(train)
  validation_info <- result$validation_info
  shared <- intersect(c("vocabulary", "encoding", "dropped_rows"), names(result$info))
  validation_info[shared] <- result$info[shared]
  validation <- new_gpukeras_dataset(result$validation, validation_info, "validation")
  attr(validation, "gpukeras_recipe") <- recipe
  list(train = train, validation = validation)
}

pipeline_options <- function(batch_size, shuffle, seed, cache, map, augment, validation_split,
                             drop_remainder, deterministic, prefetch, to_device, call = caller_env()) {
  check_count(batch_size, call = call)
  check_flag(shuffle, call = call)
  seed <- check_seed(seed, call = call)
  if (!(isTRUE(cache) || isFALSE(cache) || (is.character(cache) && length(cache) == 1L && !is.na(cache)))) {
    abort_bad_argument(sprintf("`cache` must be TRUE, FALSE or a file path, not %s.", describe(cache)), call = call)
  }
  # tf.data would fail only when the first batch is read, inside training.
  if (is.character(cache) && nzchar(cache) && !dir.exists(dirname(path.expand(cache)))) {
    abort_bad_argument(c(
      sprintf("`cache` is '%s', in a folder that does not exist.", cache),
      "Create the folder first, or give cache = TRUE to cache in memory."
    ), call = call)
  }
  if (!is.null(map) && !is.function(map) && !inherits(map, "python.builtin.object")) {
    abort_bad_argument(sprintf("`map` must be a function (R or Python), not %s.", describe(map)), call = call)
  }
  if (!is.null(augment) && (!is.list(augment) || is.null(names(augment)) || any(!nzchar(names(augment))))) {
    abort_bad_argument(c(
      sprintf("`augment` must be a named list of presets, not %s.", describe(augment)),
      "For example: list(flip_horizontal = list(), rotation = list(factor = 0.05))."
    ), call = call)
  }
  check_number_in(validation_split, "[0, 1)", call = call)
  check_flag(drop_remainder, call = call)
  if (!is.null(deterministic)) check_flag(deterministic, call = call)
  if (!identical(prefetch, "auto") && !is_whole_number(prefetch, 0)) {
    abort_bad_argument(c(
      sprintf("`prefetch` must be \"auto\" or a number of batches >= 0, not %s.", describe(prefetch)),
      "Give a whole number up to 1e6 (a few batches keep the GPU fed), or \"auto\" to let tf.data choose."
    ), call = call)
  }
  if (!identical(to_device, "auto") && !identical(to_device, "none")) {
    to_device <- device_names(to_device, "to_device", call = call)
  }
  list(
    batch_size = as.integer(batch_size), shuffle = shuffle, seed = seed, cache = cache, map = map,
    augment = lapply(augment, augment_parameters), validation_split = validation_split, drop_remainder = drop_remainder,
    deterministic = deterministic, prefetch = if (is.numeric(prefetch)) as.integer(prefetch) else prefetch,
    to_device = to_device
  )
}

# An augment preset's parameters as a list for Python; sizes in pixels
# (crop's height and width) as integers, which Keras needs: R's 32 is a double,
# and RandomCrop fails on a float size when tf.data traces it.
augment_parameters <- function(parameters) {
  parameters <- as.list(parameters)
  for (name in intersect(names(parameters), c("height", "width"))) {
    value <- parameters[[name]]
    if (is.numeric(value) && length(value) == 1L && !is.na(value) && value == round(value)) {
      parameters[[name]] <- as.integer(value)
    }
  }
  parameters
}

# Which kind of file source a path names, and the arguments for it.
file_source <- function(path, label, columns, image_size, color_mode, rescale = NULL, call = caller_env()) {
  if (!is.null(label)) check_string(label, call = call)
  if (!is.null(columns) && (!is.character(columns) || anyNA(columns))) {
    abort_bad_argument(sprintf("`columns` must be column names, not %s.", describe(columns)), call = call)
  }
  expanded <- path.expand(path)
  has_files <- function(pattern) {
    dir.exists(expanded) && length(list.dirs(expanded, recursive = FALSE)) == 0 &&
      length(list.files(expanded, pattern, ignore.case = TRUE)) > 0
  }
  is_tfrecord <- grepl("\\.(tfrecords?|tfrec)$", expanded, ignore.case = TRUE) ||
    has_files("\\.(tfrecords?|tfrec)$")
  is_csv <- grepl("\\.csv$", expanded, ignore.case = TRUE) || has_files("\\.csv$")
  if (!is.null(rescale) && (is_tfrecord || is_csv)) {
    abort_bad_argument("`rescale` is for image folders, not CSV or TFRecord files.", call = call)
  }
  if (is_tfrecord) return(list(kind = "tfrecord", args = list(pattern = expanded, label = label)))
  if (is_csv) {
    return(list(
      kind = "csv", args = list(pattern = expanded, label = label, columns = if (!is.null(columns)) as.list(columns))
    ))
  }
  if (!dir.exists(expanded)) {
    gpukeras_abort(c(
      sprintf("'%s' is not a folder, a CSV file/glob or TFRecord files.", path),
      "Give a folder of images with one sub-folder per class, \"data/*.csv\", or \"data/*.tfrecord\"."
    ), "gpukeras_error_missing_files", call = call)
  }
  if (!is.numeric(image_size) || length(image_size) != 2L || anyNA(image_size) || any(image_size < 1)) {
    abort_bad_argument(sprintf("`image_size` must be c(height, width), not %s.", describe(image_size)), call = call)
  }
  color_mode <- check_choice(color_mode, c("rgb", "grayscale", "rgba"), call = call)
  if (!is.null(rescale)) check_positive_number(rescale, call = call)
  list(kind = "image_folder", args = list(
    path = expanded, image_size = as.list(as.integer(image_size)), color_mode = color_mode,
    rescale = if (!is.null(rescale)) as.double(rescale)
  ))
}

new_gpukeras_dataset <- function(dataset, info, role = "train") {
  info$role <- role
  attr(dataset, "gpukeras") <- info
  class(dataset) <- unique(c("gpukeras_dataset", class(dataset)))
  dataset
}
