#' Train a Keras model on the GPU, measured
#'
#' Trains a compiled Keras 3 model with Keras' own `fit()` and measures what
#' the hardware did meanwhile: throughput and step time, the share of step
#' time spent waiting for input, GPU utilization and memory (NVML, sampled on
#' a background thread that never runs R), host CPU load and, where the
#' model's FLOPs and the GPU's peak are known, achieved TFLOP/s and model FLOPs
#' utilization (MFU). The report ends with concrete advice.
#'
#' @section Data:
#' * A [gpu_dataset()] (or any `tf.data.Dataset`, or another Python object
#'   Keras' `fit()` accepts): used as it is; it is batched already, so
#'   `batch_size` must be `NULL`.
#' * The result of `gpu_dataset(..., validation_split = )`, a list of `train`
#'   and `validation`: the validation pipeline becomes `validation_data`.
#' * R data as `list(x = , y = )` (or `list(x, y)`): `x` a matrix, array,
#'   data.frame or a named list of them (several inputs), `y` the labels (or
#'   `NULL` for a model that trains without them); NumPy arrays (from
#'   [gpu_as_numpy()]) are taken as they are. It is checked and
#'   converted once to NumPy exactly as [gpu_dataset()] does (data.frame
#'   columns, factor codes, NA as an error), and the core builds the same
#'   tf.data pipeline from it with `batch_size` (default 32), shuffled every
#'   epoch. The core seeds Keras and TensorFlow before it builds the pipeline,
#'   so with a `seed` the order of the batches depends on the seed alone.
#'
#' `validation_data` takes the same forms; R validation data is not shuffled
#' and is batched by `batch_size` (32 when `data` is a dataset).
#'
#' @section Progress:
#' `verbose = "auto"` shows a progress bar in an interactive session (`1`) and
#' one line per epoch otherwise (`2`), so logs of scripts and batch jobs get no
#' flood of progress lines. `0` is silent.
#'
#' @param model A compiled Keras 3 model (from keras3, [gpu_keras()] or
#'   reticulate).
#' @param data The training data: a [gpu_dataset()], the `list(train = ,
#'   validation = )` it returns with a validation split, or R data as
#'   `list(x = , y = )` (see Data).
#' @param epochs Passes over the training data.
#' @param validation_data Data evaluated at the end of every epoch, in the same
#'   forms as `data`; `NULL` for none.
#' @param batch_size Rows per batch when `data` is R data (default 32). Must
#'   be `NULL` for a dataset, which is batched already.
#' @param steps_per_execution Batches run per call into the compiled train
#'   step: `"auto"` keeps what the model was compiled with (Keras' default is
#'   1; the monitor's advice says when raising it would pay), or a number
#'   (larger values cut the per-step overhead of small models). Set on the
#'   compiled model, keeping its loss and metrics.
#' @param jit_compile Compile the train step with XLA: `TRUE`, `FALSE` or
#'   `"auto"` (the default set by [gpu_setup()], else Keras' own choice: XLA
#'   on a GPU and on JAX, not for TensorFlow on the CPU). A model XLA cannot
#'   compile falls back to `FALSE`.
#' @param learning_rate `NULL` keeps the optimizer's, a positive number sets a
#'   constant rate, or a schedule: [lr_warmup_cosine()], [lr_exponential()],
#'   [lr_cyclical()] (or a Keras `LearningRateSchedule` object).
#' @param clipnorm Clip each gradient to this L2 norm; `NULL` for no clipping.
#' @param clipvalue Clip each gradient element to `[-clipvalue, clipvalue]`;
#'   `NULL` for no clipping. Give `clipnorm` or `clipvalue`, not both.
#' @param monitor Measure throughput, input wait, GPU utilization and memory,
#'   and host CPU while training. `FALSE` trains without measuring (`monitor`
#'   of the result is then `NULL`).
#' @param backup_dir A folder where training state is backed up (see
#'   `backup_freq`): an interrupted `gpu_fit()` called again (in a fresh R
#'   session) with the same arguments and folder resumes where it stopped,
#'   with the full history, and ends with the weights an uninterrupted run
#'   would have. Give a `seed` too, so the resumed run sees the batches in the
#'   same order. `NULL` for none.
#' @param backup_freq When to back up to `backup_dir`: `"epoch"` (at the end
#'   of every epoch) or a whole number of batches (every that many batches,
#'   and at every epoch's end), so a long epoch killed in the middle loses at
#'   most that many batches. A backup writes the weights and optimizer state,
#'   so very frequent backups of a large model slow training.
#' @param strategy `NULL` to train on one device, or a [gpu_strategy()] (or a
#'   `tf.distribute` strategy / Keras `Distribution` made in Python) to train
#'   on several devices or machines. `batch_size` is then the global batch,
#'   split over the replicas; a model built outside the strategy is copied
#'   into it and the trained weights copied back (see [gpu_strategy()]).
#' @param callbacks A Keras callback (a Python object, e.g. from keras3 or
#'   `gpu_keras()$callbacks`) or a list of them. R functions cannot be
#'   callbacks: Keras may call them from a worker thread.
#' @param seed A whole number: seeds Keras and TensorFlow before training
#'   (weights initialised from here on, dropout) and the shuffling of R data,
#'   for repeatable runs. A dataset's own order is fixed where it was made
#'   (`gpu_dataset(seed = )`).
#' @param verbose `"auto"`, `0` (silent), `1` (progress bar) or `2` (one line
#'   per epoch); see Progress.
#' @return An object of class `gpukeras_fit`, a list with
#'   * `history`: a data.frame with a row per epoch: `epoch` and the loss and
#'     metrics (`val_` ones for validation data);
#'   * `monitor`: `NULL` with `monitor = FALSE`, else a list with
#'     `samples_per_second` (over the timed steps' own time, the first steps
#'     left out), `wall_samples_per_second` (over the epochs' wall-clock
#'     time, compiling and stalls included), `step_time_mean_ms`, `step_time_sd_ms`,
#'     `input_wait_share` (time waiting for the next batch beyond what taking
#'     an always-ready one costs, `fetch_floor_ms`), `input_verdict`,
#'     `gpu_utilization_mean`,
#'     `gpu_utilization_p95`, `gpu_memory_used_max_mib`,
#'     `host_cpu_percent_mean`, `flops_per_step`, `achieved_tflops`, `mfu` and
#'     `advice` (`NULL` where not known, e.g. GPU numbers without a GPU, and
#'     then `gpu_not_measured` says why), and more detail from the core
#'     (`steps_timed`, `gpu_sample_hz`, `peak_tflops`, ...);
#'   * `timeline`: a list of data.frames, `gpu` (`time_s`, `nvml_index`,
#'     `utilization`, `memory_used_mib`, `power_w`; no rows without a GPU) and
#'     `host` (`time_s`, `cpu_percent`);
#'   * `settings`: the settings in force, read back by the core (`epochs`,
#'     `batch_size`, `steps_per_epoch`, `jit_compile`, `steps_per_execution`,
#'     `learning_rate`, `clipnorm`, `clipvalue`, `backup_dir`, `seed`,
#'     `backend`, `device`, `dtype_policy`, `seconds`, ...), with `verbose`,
#'     `data` (and `validation_data`), a description of the data, and
#'     `data_kind`, how the core fed it to Keras.
#'
#'   It has `print()`, `plot()` and `as.data.frame()` (the history) methods.
#' @seealso [gpu_dataset()] for input pipelines, [lr_warmup_cosine()] for
#'   schedules, [gpu_check()] to see whether the GPU is used at all.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(16L, activation = "relu"),
#'     keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(
#'     optimizer = "adam", loss = "sparse_categorical_crossentropy",
#'     metrics = list("accuracy")
#'   )
#'   fit <- gpu_fit(
#'     model, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
#'     epochs = 3, batch_size = 16, seed = 1, verbose = 0,
#'     learning_rate = lr_exponential(0.01, decay_steps = 10, decay_rate = 0.9)
#'   )
#'   print(fit)
#'   plot(fit)
#' }
gpu_fit <- function(model, data, epochs = 1, validation_data = NULL, batch_size = NULL,
                    steps_per_execution = "auto", jit_compile = "auto", learning_rate = NULL,
                    clipnorm = NULL, clipvalue = NULL, monitor = TRUE, backup_dir = NULL,
                    callbacks = NULL, seed = NULL, verbose = "auto", backup_freq = "epoch",
                    strategy = NULL) {
  # Every check that needs no Python comes first, so a mistake fails at once.
  check_count(epochs)
  if (!is.null(batch_size)) check_count(batch_size)
  steps_per_execution <- check_auto_count(steps_per_execution)
  jit_compile <- check_auto_flag(jit_compile)
  learning_rate <- check_learning_rate(learning_rate)
  if (!is.null(clipnorm)) check_positive_number(clipnorm)
  if (!is.null(clipvalue)) check_positive_number(clipvalue)
  check_flag(monitor)
  if (!is.null(backup_dir)) {
    check_string(backup_dir)
    backup_dir <- normalizePath(path.expand(backup_dir), mustWork = FALSE)
  }
  backup_freq <- check_auto_count(backup_freq, auto = "epoch")
  callbacks <- check_callbacks(callbacks)
  seed <- check_seed(seed)
  verbose <- resolve_verbose(verbose)
  if (!is.null(strategy)) strategy <- strategy_object(strategy)
  data <- read_training_data(data, missing(data))
  if (!is.null(data$validation)) {
    if (!is.null(validation_data)) {
      gpukeras_abort(
        c(
          "`data` holds a validation pipeline (from gpu_dataset(validation_split = )) and `validation_data` is given too.",
          "Give one of them."
        ),
        "gpukeras_error_bad_argument"
      )
    }
    validation_data <- data$validation
  }
  validation <- if (!is.null(validation_data)) fit_data(validation_data, "validation_data")
  if (!is.null(validation$validation)) {
    gpukeras_abort(
      "`validation_data` must be one dataset or list(x = , y = ), not a train/validation split.",
      "gpukeras_error_bad_argument"
    )
  }
  if (!is.null(clipnorm) && !is.null(clipvalue)) {
    gpukeras_abort("Give `clipnorm` or `clipvalue`, not both.", "gpukeras_error_bad_argument")
  }
  check_python_object(model, "model", "a compiled Keras 3 model")
  if (!is.null(batch_size) && data$kind != "r") {
    gpukeras_abort(
      c(
        "`batch_size` is for R data: a dataset is batched already.",
        "Set the batch size in gpu_dataset(batch_size = ), or leave `batch_size` NULL."
      ),
      "gpukeras_error_bad_argument"
    )
  }

  gpu_precision_check(model)
  batch <- if (data$kind == "r") as.integer(batch_size %||% 32L)
  train <- fit_input(data)
  validation_input <- if (!is.null(validation)) fit_input(validation)

  result <- core_call(
    "fit.fit",
    model = model,
    data = train,
    epochs = as.integer(epochs),
    validation_data = validation_input,
    batch_size = batch,
    steps_per_execution = steps_per_execution,
    jit_compile = jit_compile,
    learning_rate = learning_rate,
    clipnorm = if (!is.null(clipnorm)) as.double(clipnorm),
    clipvalue = if (!is.null(clipvalue)) as.double(clipvalue),
    monitor = monitor,
    backup_dir = backup_dir,
    backup_freq = backup_freq,
    strategy = strategy,
    callbacks = callbacks,
    seed = seed,
    verbose = verbose
  )
  settings <- result$settings
  settings$verbose <- verbose
  settings$data_kind <- settings$data
  settings$data <- describe_fit_data(data, train, settings$batch_size %||% batch)
  if (!is.null(validation)) {
    settings$validation_data <- describe_fit_data(validation, validation_input, NULL)
  }
  new_gpukeras_fit(result$history, result$monitor, result$timeline, settings)
}

# A whole number >= 1, or the word `auto` that stands for the default.
# `data` as the verbs that train read it (fit_data()); a clear error when it
# was not given at all.
read_training_data <- function(data, data_missing) {
  if (data_missing) {
    gpukeras_abort(
      "`data` is missing: give a gpu_dataset() or R data as list(x = , y = ).",
      "gpukeras_error_bad_argument"
    )
  }
  fit_data(data, "data")
}

check_auto_count <- function(x, arg = deparse(substitute(x)), auto = "auto") {
  if (identical(x, auto)) {
    return(x)
  }
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || x < 1 || x != round(x) || x > 1e6) {
    gpukeras_abort(
      sprintf("`%s` must be \"%s\" or one whole number >= 1, not %s.", arg, auto, describe(x)),
      "gpukeras_error_bad_argument"
    )
  }
  as.integer(x)
}

check_auto_flag <- function(x, arg = deparse(substitute(x))) {
  if (identical(x, "auto") || (is.logical(x) && length(x) == 1L && !is.na(x))) {
    return(x)
  }
  gpukeras_abort(
    sprintf("`%s` must be TRUE, FALSE or \"auto\", not %s.", arg, describe(x)),
    "gpukeras_error_bad_argument"
  )
}

check_learning_rate <- function(learning_rate) {
  if (is.null(learning_rate) || inherits(learning_rate, "python.builtin.object")) {
    return(learning_rate)
  }
  if (inherits(learning_rate, "gpukeras_lr_schedule")) {
    return(unclass(learning_rate))
  }
  if (!is.numeric(learning_rate) || length(learning_rate) != 1L || is.na(learning_rate) ||
    !is.finite(learning_rate) || learning_rate <= 0) {
    gpukeras_abort(
      c(
        sprintf("`learning_rate` must be one positive number or a schedule, not %s.", describe(learning_rate)),
        "Schedules: lr_warmup_cosine(), lr_exponential(), lr_cyclical()."
      ),
      "gpukeras_error_bad_argument"
    )
  }
  as.double(learning_rate)
}

check_callbacks <- function(callbacks) {
  if (is.null(callbacks)) {
    return(NULL)
  }
  if (inherits(callbacks, "python.builtin.object")) {
    callbacks <- list(callbacks)
  }
  if (!is.list(callbacks) || length(callbacks) == 0L ||
    !all(vapply(callbacks, inherits, logical(1), "python.builtin.object"))) {
    gpukeras_abort(
      c(
        sprintf("`callbacks` must be a Keras callback or a list of them (Python objects), not %s.", describe(callbacks)),
        "R functions cannot be callbacks: Keras may call them from a worker thread, where R must not run."
      ),
      "gpukeras_error_bad_argument"
    )
  }
  unname(callbacks)
}

check_seed <- function(seed) {
  if (is.null(seed)) {
    return(NULL)
  }
  if (!is.numeric(seed) || length(seed) != 1L || is.na(seed) || seed < 0 || seed != round(seed) ||
    seed > .Machine$integer.max) {
    gpukeras_abort(sprintf("`seed` must be one whole number >= 0, not %s.", describe(seed)), "gpukeras_error_bad_argument")
  }
  as.integer(seed)
}

# "auto" is a progress bar where someone watches (an interactive session) and
# one line per epoch in logs.
resolve_verbose <- function(verbose) {
  if (identical(verbose, "auto")) {
    return(if (interactive()) 1L else 2L)
  }
  if (!is.numeric(verbose) || length(verbose) != 1L || is.na(verbose) || !verbose %in% 0:2) {
    gpukeras_abort(
      sprintf("`verbose` must be \"auto\", 0, 1 or 2, not %s.", describe(verbose)),
      "gpukeras_error_bad_argument"
    )
  }
  as.integer(verbose)
}

# What kind of training data `data` is: a Python dataset (kind "python"), R
# data (kind "r", with x and y), or a train/validation split of datasets.
# Checked without Python; converted later by fit_input().
fit_data <- function(data, arg) {
  if (inherits(data, "python.builtin.object")) {
    return(list(kind = "python", dataset = data))
  }
  usage <- sprintf(
    "Give `%s` as a gpu_dataset(), or R data as list(x = features, y = labels) (for several inputs, x = list(input_a = , input_b = )).",
    arg
  )
  if (is.list(data) && !is.data.frame(data)) {
    names <- names(data) %||% rep("", length(data))
    if (identical(names, c("train", "validation")) &&
      all(vapply(data, inherits, logical(1), "python.builtin.object"))) {
      return(list(kind = "python", dataset = data$train, validation = data$validation))
    }
    if (all(names == "") && length(data) %in% 1:2) {
      names(data) <- c("x", "y")[seq_along(data)]
      names <- names(data)
    }
    if (length(data) %in% 1:2 && "x" %in% names && all(names %in% c("x", "y")) && !anyDuplicated(names)) {
      if (is.null(data$x) || is.character(data$x) && length(data$x) == 1L) {
        gpukeras_abort(
          c(sprintf("`%s$x` must be R data (a matrix, array, data.frame or named list of them).", arg), usage),
          "gpukeras_error_bad_data"
        )
      }
      return(list(kind = "r", x = data$x, y = data$y))
    }
    gpukeras_abort(
      c(sprintf("`%s` is a list with names %s, which gpu_fit() cannot read.", arg, describe_names(names)), usage),
      "gpukeras_error_bad_data"
    )
  }
  if (is.matrix(data) || is.array(data) || is.data.frame(data) || is.numeric(data)) {
    gpukeras_abort(
      c(sprintf("`%s` is R data without labels.", arg), usage,
        "A model trained without labels takes list(x = features)."),
      "gpukeras_error_bad_data"
    )
  }
  gpukeras_abort(c(sprintf("`%s` cannot be %s.", arg, describe(data)), usage), "gpukeras_error_bad_data")
}

describe_names <- function(names) {
  if (!length(names) || all(names == "")) "none" else paste0("`", names, "`", collapse = ", ")
}

# What the core gets for `data` as fit_data() read it: a Python dataset as it
# is; R data checked and converted once to NumPy (as gpu_dataset() does) and
# handed over as list(x, y), from which the core builds the seeded gpu_dataset()
# pipeline itself. The core seeds Keras and TensorFlow first, so the shuffle
# order depends on `seed` alone, and a run resumed from a backup sees the
# batches in the same order as the run that was interrupted.
fit_input <- function(data) {
  if (data$kind == "python") {
    return(data$dataset)
  }
  if (inherits(data$x, "python.builtin.object") && (is.null(data$y) || inherits(data$y, "python.builtin.object"))) {
    return(list(data$x, data$y)) # NumPy arrays already (gpu_as_numpy())
  }
  converted <- withCallingHandlers(
    as_pipeline_data(data$x, data$y, "error"),
    gpukeras_error_bad_data = function(e) {
      if (grepl("na = \"drop\"", conditionMessage(e), fixed = TRUE)) {
        e$message <- paste(
          conditionMessage(e),
          "In gpu_fit(), drop those rows first, or pass data = gpu_dataset(x, y, na = \"drop\")."
        )
        stop(e)
      }
    }
  )
  list(converted$x, converted$y)
}

describe_fit_data <- function(data, input, batch_size) {
  if (data$kind == "r") {
    first <- if (is.list(data$x) && !is.data.frame(data$x)) data$x[[1]] else data$x
    numpy <- inherits(first, "python.builtin.object")
    rows <- if (numpy) reticulate::py_len(first) else count_rows(first)
    return(sprintf(
      "%s rows of %s%s", format(rows, big.mark = ","), if (numpy) "NumPy arrays" else "R data",
      if (!is.null(batch_size)) sprintf(" in batches of %d", as.integer(batch_size)) else ""
    ))
  }
  info <- attr(input, "gpukeras")
  if (!is.null(info)) {
    rows <- if (is.null(info$rows)) "rows not known" else sprintf("%s rows", format(info$rows, big.mark = ","))
    return(sprintf("gpu_dataset() %s pipeline from %s: %s", info$role, info$source, rows))
  }
  dataset <- core_call("fit.describe_dataset", data = input)
  if (is.null(dataset)) {
    return(class(input)[1])
  }
  sprintf(
    "tf.data dataset%s: %s of %s",
    if (inherits(input, "tf_dataset")) " (tfdatasets)" else "",
    if (is.null(dataset$batches)) "batches not known" else paste(format(dataset$batches, big.mark = ","), "batches"),
    dataset$element
  )
}

# The gpukeras_fit object from the core's plain data.
new_gpukeras_fit <- function(history, monitor, timeline, settings) {
  structure(
    list(
      history = history_df(history),
      monitor = fit_monitor(monitor),
      timeline = fit_timeline(timeline),
      settings = settings
    ),
    class = "gpukeras_fit"
  )
}

# A Python list of numbers crosses as a numeric vector, or as a list when it
# holds None; both become a numeric vector with NA for None.
as_numbers <- function(x) {
  if (is.list(x)) {
    return(vapply(x, function(value) if (is.null(value)) NA_real_ else as.numeric(value), numeric(1)))
  }
  as.numeric(x)
}

history_df <- function(history) {
  history <- history[!vapply(history, is.null, logical(1))]
  if (!length(history)) {
    return(data.frame(epoch = integer()))
  }
  columns <- lapply(history, as_numbers)
  rows <- max(lengths(columns))
  columns <- lapply(columns, function(column) if (length(column) < rows) c(column, rep(NA_real_, rows - length(column))) else column)
  epoch <- if (!is.null(columns$epoch)) as.integer(columns$epoch) else seq_len(rows)
  columns$epoch <- NULL
  data.frame(epoch = epoch, columns, check.names = FALSE)
}

fit_monitor <- function(monitor) {
  if (is.null(monitor)) {
    return(NULL)
  }
  monitor$advice <- as.character(unlist(monitor$advice))
  monitor
}

timeline_columns <- list(
  gpu = c("time_s", "nvml_index", "utilization", "memory_used_mib", "power_w"),
  host = c("time_s", "cpu_percent")
)

# The core's timeline (rows or columns, for GPU and host samples) as two
# data.frames with fixed columns; no samples give 0-row data.frames.
fit_timeline <- function(timeline) {
  parts <- lapply(names(timeline_columns), function(part) {
    as_samples_df(timeline[[part]], timeline_columns[[part]])
  })
  names(parts) <- names(timeline_columns)
  parts
}

as_samples_df <- function(samples, columns) {
  if (is.data.frame(samples)) {
    samples <- as.list(samples)
  }
  is_rows <- is.list(samples) && length(samples) && is.null(names(samples))
  df <- if (is_rows) {
    rows_to_df(samples, union(columns, names(samples[[1]])))
  } else {
    values <- lapply(samples, as_numbers)
    extra <- setdiff(names(values), columns)
    all <- lapply(c(columns, extra), function(column) values[[column]] %||% numeric())
    names(all) <- c(columns, extra)
    rows <- max(0L, lengths(all))
    as.data.frame(lapply(all, function(column) if (length(column) < rows) c(column, rep(NA_real_, rows - length(column))) else column))
  }
  if ("nvml_index" %in% names(df)) df$nvml_index <- as.integer(df$nvml_index)
  df
}

#' @export
as.data.frame.gpukeras_fit <- function(x, row.names = NULL, optional = FALSE, ...) {
  x$history
}

format_percent <- function(share, digits = 0) {
  sprintf(paste0("%.", digits, "f%%"), 100 * share)
}

format_fit_monitor <- function(m) {
  if (is.null(m)) {
    return("Monitor: off (monitor = FALSE)")
  }
  throughput <- if (is.null(m$samples_per_second)) {
    "not measured"
  } else {
    sprintf(
      "%s samples/s%s", format(round(m$samples_per_second), big.mark = ","),
      if (is.null(m$step_time_mean_ms)) "" else sprintf(
        "; step %.2f ms (sd %.2f ms)", m$step_time_mean_ms, m$step_time_sd_ms %||% NA_real_
      )
    )
  }
  input <- if (is.null(m$input_wait_share)) {
    sprintf("%s (input wait not measured)", m$input_verdict %||% "not known")
  } else {
    # Say why a share over 5 % can still be "not input-bound" (see input_verdict()).
    within <- !is.null(m$input_wait_mean_ms) && !is.null(m$fetch_floor_ms) &&
      m$input_wait_mean_ms < m$fetch_floor_ms
    sprintf(
      "%s (waiting for input %s of step time%s)", m$input_verdict %||% "?",
      format_percent(m$input_wait_share, 1),
      if (within) sprintf(", %.2f ms a step: less than the %.2f ms taking a ready batch takes", m$input_wait_mean_ms, m$fetch_floor_ms) else ""
    )
  }
  gpu <- if (is.null(m$gpu_utilization_mean)) {
    sprintf("not measured (%s)", m$gpu_not_measured %||% "no GPU")
  } else {
    sprintf(
      "utilization mean %.0f%%, p95 %.0f%%; memory used up to %s",
      m$gpu_utilization_mean, m$gpu_utilization_p95 %||% NA_real_, format_mib(m$gpu_memory_used_max_mib %||% NA_real_)
    )
  }
  compute <- if (!is.null(m$achieved_tflops) || !is.null(m$mfu)) {
    paste(c(
      if (!is.null(m$achieved_tflops)) sprintf("%s achieved", format_flops(m$achieved_tflops)),
      if (!is.null(m$peak_tflops)) sprintf("peak %s (%s)", format_flops(m$peak_tflops), m$peak_source %||% "?"),
      if (!is.null(m$mfu)) sprintf("MFU %s", format_percent(m$mfu, 1))
    ), collapse = "; ")
  }
  c(
    sprintf("Throughput:     %s", throughput),
    if (!is.null(m$wall_samples_per_second)) {
      sprintf(
        "                %s samples/s over the epochs' wall time (compiling and stalls included)",
        format(round(m$wall_samples_per_second), big.mark = ",")
      )
    },
    sprintf("Input pipeline: %s", input),
    sprintf("GPU:            %s", gpu),
    if (!is.null(m$host_cpu_percent_mean)) sprintf("Host CPU:       mean %.0f%%", m$host_cpu_percent_mean),
    if (!is.null(compute)) sprintf("Compute:        %s", compute),
    if (length(m$advice)) c("Advice:", paste(" ", arrow(), m$advice))
  )
}

format_fit_settings <- function(settings) {
  clipping <- c("clipnorm", "clipvalue", "global_clipnorm")
  clipping <- clipping[!vapply(settings[clipping], is.null, logical(1))]
  run <- c(
    if (!is.null(settings$steps_per_epoch)) sprintf("%s steps per epoch", format(settings$steps_per_epoch, big.mark = ",")),
    if (!is.null(settings$steps_per_execution)) sprintf("steps_per_execution %d", as.integer(settings$steps_per_execution)),
    if (!is.null(settings$jit_compile)) sprintf("jit_compile %s", settings$jit_compile),
    vapply(clipping, function(name) sprintf("%s %s", name, format(settings[[name]])), character(1)),
    if (!is.null(settings$seed)) sprintf("seed %d", as.integer(settings$seed))
  )
  backups <- if (!is.null(settings$backup_dir)) {
    resumed <- settings$resumed_from
    paste0(
      settings$backup_dir,
      if (is.numeric(settings$backup_freq)) sprintf(", every %d batches", as.integer(settings$backup_freq)),
      if (!is.null(resumed)) sprintf(" (resumed in epoch %d, after %s batches)", as.integer(resumed$epoch), format(resumed$batches_done, big.mark = ","))
    )
  }
  strategy <- settings$strategy
  placement <- if (!is.null(strategy)) {
    sprintf(
      "%s over %s (%d replica%s)%s",
      strategy$type, paste(unlist(strategy$devices), collapse = ", "), as.integer(strategy$replicas),
      if (strategy$replicas == 1) "" else "s",
      if (!is.null(strategy$global_batch_size)) {
        sprintf(
          "; global batch %d = %s per replica", as.integer(strategy$global_batch_size),
          format(strategy$per_replica_batch_size)
        )
      } else {
        ""
      }
    )
  }
  c(
    if (!is.null(placement)) paste("Strategy:      ", placement),
    if (length(run)) paste("Settings:      ", paste(run, collapse = ", ")),
    if (!is.null(settings$learning_rate)) paste("Learning rate: ", format_learning_rate(settings$learning_rate)),
    if (!is.null(backups)) paste("Backups:       ", backups)
  )
}

# A learning rate as the core reports it: a number, one of our schedule specs,
# or another Keras schedule (its class name and config).
format_learning_rate <- function(rate) {
  if (is.numeric(rate)) {
    return(sprintf("%s (constant)", format_rate(rate)))
  }
  if (is.list(rate) && isTRUE(rate$schedule %in% c("warmup_cosine", "exponential", "cyclical"))) {
    return(sub("^<gpukeras lr schedule> ", "", format(structure(rate, class = "gpukeras_lr_schedule"))))
  }
  if (is.list(rate) && !is.null(rate$schedule)) {
    details <- rate[names(rate) != "schedule" & vapply(rate, function(v) is.atomic(v) && length(v) == 1L, logical(1))]
    return(sprintf(
      "%s(%s)", rate$schedule,
      paste(names(details), vapply(details, format, character(1)), sep = " = ", collapse = ", ")
    ))
  }
  describe(rate)
}

#' @export
format.gpukeras_fit <- function(x, n = 5, ...) {
  history <- x$history
  settings <- x$settings
  epochs <- nrow(history)
  shown <- utils::tail(history, n)
  table <- if (epochs) utils::capture.output(print(shown, row.names = FALSE, digits = 4)) else "(no epochs ran)"
  where <- c(settings$backend, settings$dtype_policy)
  data <- c(settings$data, if (!is.null(settings$validation_data)) paste("validation:", settings$validation_data))
  c(
    paste0(
      sprintf("<gpukeras fit> %d epoch%s", epochs, if (epochs == 1) "" else "s"),
      if (length(settings$device)) sprintf(" on %s", paste(unlist(settings$device), collapse = ", ")),
      if (length(where)) sprintf(" (%s)", paste(where, collapse = ", ")),
      if (!is.null(settings$seconds)) sprintf(" in %s", format_seconds(settings$seconds))
    ),
    if (length(data)) paste("Data:          ", paste(data, collapse = "; ")),
    if (epochs > n) sprintf("History (last %d of %d epochs):", n, epochs) else "History:",
    paste0("  ", table),
    format_fit_monitor(x$monitor),
    format_fit_settings(settings)
  )
}

format_seconds <- function(seconds) {
  if (seconds < 60) sprintf("%.1f s", seconds) else if (seconds < 3600) sprintf("%.1f min", seconds / 60) else sprintf("%.1f h", seconds / 3600)
}

# FLOP/s in the unit that keeps the number readable.
format_flops <- function(tflops) {
  units <- c("TFLOP/s" = 1, "GFLOP/s" = 1e-3, "MFLOP/s" = 1e-6, "kFLOP/s" = 1e-9)
  unit <- units[tflops >= units | units == min(units)][1]
  sprintf("%.3g %s", tflops / unit, names(unit))
}

#' @export
print.gpukeras_fit <- function(x, ...) {
  writeLines(format(x, ...))
  invisible(x)
}

#' Plot a gpu_fit() run
#'
#' Draws, with base graphics, the loss and each metric per epoch (with its
#' validation counterpart, dashed), and, when a GPU was monitored, a panel of
#' GPU utilization (%, left axis) and memory used (MiB, right axis) over the
#' training time.
#'
#' @param x A `gpukeras_fit` from [gpu_fit()].
#' @param metrics The metrics to draw (names of history columns without
#'   `val_`); `NULL` for all.
#' @param timeline Draw the GPU timeline panel when there are GPU samples.
#' @param ... Passed to the per-epoch [graphics::plot()] calls.
#' @return `x`, invisibly.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(keras$Input(shape = list(2L)), keras$layers$Dense(1L)))
#'   model$compile(optimizer = "sgd", loss = "mse")
#'   x <- matrix(runif(200), ncol = 2)
#'   fit <- gpu_fit(model, list(x = x, y = x %*% c(1, -1)), epochs = 4, verbose = 0)
#'   plot(fit)
#' }
plot.gpukeras_fit <- function(x, metrics = NULL, timeline = TRUE, ...) {
  check_flag(timeline)
  history <- x$history
  available <- setdiff(names(history), "epoch")
  base <- unique(sub("^val_", "", available))
  base <- base[order(base != "loss")]
  if (!is.null(metrics)) {
    unknown <- setdiff(metrics, base)
    if (!is.character(metrics) || length(unknown)) {
      gpukeras_abort(
        sprintf(
          "`metrics` must name history columns (%s), not %s.",
          paste0("\"", base, "\"", collapse = ", "), describe(if (length(unknown)) unknown else metrics)
        ),
        "gpukeras_error_bad_argument"
      )
    }
    base <- metrics
  }
  gpu <- x$timeline$gpu
  draw_gpu <- timeline && !is.null(gpu) && nrow(gpu) > 0
  panels <- length(base) + draw_gpu
  if (panels == 0L) {
    gpukeras_abort("There is nothing to plot: the history has no epochs or metrics.", "gpukeras_error_bad_argument")
  }
  layout <- if (panels <= 3) c(panels, 1) else c(ceiling(panels / 2), 2)
  old <- graphics::par(mfrow = layout, mar = c(4, 4.5, 2.5, if (draw_gpu) 4.5 else 1))
  on.exit(graphics::par(old), add = TRUE)
  for (metric in base) {
    plot_metric(history, metric, ...)
  }
  if (draw_gpu) {
    plot_gpu_timeline(gpu)
  }
  invisible(x)
}

plot_metric <- function(history, metric, ...) {
  train <- history[[metric]]
  validation <- history[[paste0("val_", metric)]]
  values <- c(train, validation)
  ylim <- if (all(is.na(values))) c(0, 1) else range(values, na.rm = TRUE)
  graphics::plot(
    history$epoch, if (is.null(train)) rep(NA_real_, nrow(history)) else train,
    type = "b", pch = 19, ylim = ylim, xlab = "epoch", ylab = metric, main = metric,
    xaxt = "n", ...
  )
  graphics::axis(1, at = unique(round(pretty(history$epoch))))
  if (!is.null(validation)) {
    graphics::lines(history$epoch, validation, type = "b", pch = 1, lty = 2, col = "firebrick")
    graphics::legend(legend_corner(c(right_third(train), right_third(validation)), ylim),
      c("train", "validation"), lty = c(1, 2), pch = c(19, 1),
      col = c("black", "firebrick"), bty = "n", cex = 0.8)
  }
}

right_third <- function(x) if (length(x)) x[seq_along(x) > 2 * length(x) / 3] else x

# The right-hand corner with fewer of `values` near it: top when the curves
# end in the lower half of the panel, bottom otherwise.
legend_corner <- function(values, ylim) {
  values <- values[!is.na(values)]
  if (!length(values) || diff(ylim) == 0) {
    return("topright")
  }
  if (mean((values - ylim[1]) / diff(ylim)) > 0.5) "bottomright" else "topright"
}

plot_gpu_timeline <- function(gpu) {
  indices <- sort(unique(gpu$nvml_index))
  colours <- grDevices::hcl.colors(max(2L, length(indices)), "Dark 3")[seq_along(indices)]
  graphics::plot(
    range(gpu$time_s, na.rm = TRUE), c(0, 100),
    type = "n", xlab = "seconds", ylab = "GPU utilization (%)", main = "GPU utilization and memory"
  )
  for (i in seq_along(indices)) {
    rows <- gpu[gpu$nvml_index == indices[i], , drop = FALSE]
    graphics::lines(rows$time_s, rows$utilization, col = colours[i])
  }
  memory <- gpu$memory_used_mib
  if (any(!is.na(memory))) {
    graphics::par(new = TRUE)
    graphics::plot(
      range(gpu$time_s, na.rm = TRUE), c(0, max(memory, na.rm = TRUE)),
      type = "n", axes = FALSE, xlab = "", ylab = ""
    )
    for (i in seq_along(indices)) {
      rows <- gpu[gpu$nvml_index == indices[i], , drop = FALSE]
      graphics::lines(rows$time_s, rows$memory_used_mib, col = colours[i], lty = 2)
    }
    graphics::axis(4)
    graphics::mtext("memory used (MiB)", side = 4, line = 3, cex = 0.7)
  }
  graphics::legend(
    "bottomright", c(sprintf("GPU %d utilization", indices), sprintf("GPU %d memory", indices)),
    col = rep(colours, 2), lty = rep(1:2, each = length(indices)), bty = "n", cex = 0.8
  )
}
