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
#' @section Weights:
#' As in Keras' `fit()`, each row's loss can be weighed: by sample weights
#' given with the data, `list(x = , y = , sample_weight = )` or
#' `gpu_dataset(x, y, sample_weight = )` (one number >= 0 per row), or by
#' `class_weight`, which gives each row the weight of its class. Keras takes
#' one of the two, not both, and class weights only for a model with one
#' output; a class not named weighs 1. Keras' losses divide the weighted sum
#' by the number of rows, not by the sum of the weights, so weights scale the
#' loss (and the learning rate's effect) as in Keras. The weights are made
#' with Keras' own functions on every path: R data, a [gpu_dataset()], data
#' on the device, several devices or workers, and `background = TRUE`.
#' Validation data is not weighed by `class_weight` (Keras does not either);
#' its own sample weights, `list(x = , y = , sample_weight = )`, are used, and
#' `gpu_dataset(sample_weight = , validation_split = )` splits the weights
#' with the rows (as Keras' `validation_split` does). Metrics from
#' `compile(metrics = )` are not weighted, those from
#' `compile(weighted_metrics = )` are. The print and `settings$weights` say
#' which weights were used and whether the validation loss is weighted too:
#' a weighted training loss and an unweighted validation loss are not on one
#' scale.
#'
#' @section Accumulation:
#' `gpu_fit(batch_size = 512, accumulate = 4)` trains micro-batches of 128 rows
#' and the optimizer (Keras' `gradient_accumulation_steps`) applies the mean of
#' each 4 micro-batches' gradients as one update: for a model without
#' batch-dependent layers the weights are those of `batch_size = 512` (the same
#' seed shuffles the rows the same way), within float rounding.
#' BatchNormalization normalizes each micro-batch by its own statistics and
#' updates its moving mean and variance once per micro-batch, so it trains as
#' with batches of 128. A dataset's batches are the micro-batches. Steps count
#' micro-batches (`steps_per_epoch`, `steps_per_execution`, `gpu_backup(every = )`,
#' the monitor); the optimizer's `iterations` counts updates, but a learning-
#' rate schedule counts micro-batches (Keras' rule). Rows not a multiple of
#' `batch_size` make a smaller last micro-batch, weighted like the others in
#' its update; an epoch whose micro-batches are not a multiple of `accumulate`
#' (`gpukeras_warning_accumulation`) carries its last ones into the next
#' epoch's first update, and the last epoch's are dropped. The optimizer is
#' given back as it was. `"auto"` takes the smallest factor of `batch_size`
#' whose micro-batch fits the GPU's free memory by [gpu_memory_plan()] (1 on
#' the CPU; `settings$accumulate_reason` says why); where none fits,
#' `gpukeras_error_out_of_memory` names mixed precision and rematerialization
#' (`keras$RematScope()`). A strategy on JAX accumulates; under a TensorFlow
#' strategy Keras cannot (its update's cond holds the replicas' all-reduce).
#'
#' @section Precision and batch size chosen by the memory plan:
#' On a GPU, where the model's dtype policy does not fit the free memory at
#' `batch_size` by [gpu_memory_plan()]'s `precisions` but a lower one does,
#' the model is given that policy in place before it trains: mixed_bfloat16,
#' or, where that does not fit either, bfloat16 weights (and optimizer
#' slots; compute capability >= 8.0). A policy the user chose is kept:
#' `gpu_setup(mixed_precision = )` given, or a model built under a policy
#' gpu_setup()'s `"auto"` did not choose (a preset's own dtype may change).
#' `settings$precision_choice` (`policy`, `changed`, `reason`; `NULL` where
#' nothing needed choosing) says what and why, and `print()` shows it.
#'
#' `batch_size = "auto"` (R data, one device) takes, on a GPU, the largest
#' power of two that fits the free memory by the `precisions` row of
#' [gpu_memory_plan()] for the policy the model trains under (the precision
#' is judged first, at a batch of 32, or of the rows where fewer), at most
#' 1,024 and small enough for 8 or more updates per epoch of the rows. A
#' numeric `accumulate` makes each update that many micro-batches of that
#' size (the plan then counts the gradients' accumulators too);
#' `accumulate = "auto"` is then 1, as the batch fits. On the CPU, and for a
#' model not built, it is 32, the batch R data gets without a `batch_size`:
#' the plan is for a GPU's memory, and the host's memory is
#' [gpu_batch_size()]'s to judge. Where not even one row fits,
#' `gpukeras_error_out_of_memory` says what to lower.
#' `settings$batch_choice` (`batch_size`, `micro_batch_size`, `reason`;
#' `NULL` for a batch size given) says what and why, and `print()` shows it.
#' A batch size given as a number is never changed by the plan.
#'
#' @section Stopping at a scheduler's signal:
#' A batch scheduler stops a job with SIGTERM (SLURM at the time limit and on
#' preemption, Kubernetes when it evicts a pod), often after a warning signal
#' (`sbatch --signal=USR1@120`). R dies at SIGTERM at once, losing the work
#' since the last backup. During `gpu_fit()`, each signal named in `gpu_backup(signals = )`
#' only takes note instead: at the next step boundary training backs up the
#' exact step to the backup folder (in the middle of an epoch too) and stops with a
#' `gpukeras_error_preempted` error that says where the backup is. The same
#' call run again (`sbatch --requeue`) resumes there and ends with the weights
#' of an unbroken run. Without a backup folder it stops the same way, the model
#' holding the weights trained so far, and says that nothing was kept. With
#' several workers ([gpu_strategy()]), all stop at the same step, agreeing
#' about once a second (about 1 % of the training time), and the chief writes
#' the backup. A signal that arrives after the last step stops nothing:
#' training completed, and a `gpukeras_warning_signal` warning says so. R's
#' own handlers (R saves and quits at SIGUSR1, and quits at SIGUSR2) are set
#' back when `gpu_fit()` returns, and rule outside it. `vignette("distributed",
#' package = "gpukeras")` has a SLURM recipe.
#'
#' @section Progress:
#' `verbose = "auto"` shows a progress bar in an interactive session (`1`) and
#' one line per epoch otherwise (`2`), so logs of scripts and batch jobs get no
#' flood of progress lines. `0` is silent. Beside the loss, the live columns
#' show GPU use, host CPU and `input_wait_%`: the share of the recent steps'
#' time spent waiting for input, and on each epoch's line that epoch's share.
#'
#' @section The input verdict:
#' The live `input_wait_%` column and the report's `input_wait_share` are one
#' measurement: the same timed steps, each with its time and its wait, so the
#' report's share is the total over the run of what the epoch lines showed
#' (each epoch weighted by its steps' time). The verdict uses the TensorFlow
#' profiler's lines (5 % and 20 % of step time) with a stated margin:
#' `input_wait_margin` is the 95 % margin of the share, from how much
#' consecutive windows of steps differ (up to 10 windows of 5 steps or more;
#' at least 1 point; `NULL` with fewer than 15 timed steps, when the share
#' alone is judged). The run is "highly input-bound" only when its share less
#' the margin is at least 20 %, "moderately input-bound" when it is at least
#' 5 %, else "not input-bound"; so noise within the margin does not raise the
#' verdict, and a share within its margin of a line says so
#' (`input_near_line`, and "near the 5% line" in the print). A wait shorter
#' than taking a ready batch takes (`fetch_floor_ms`) is not input-bound
#' whatever its share. Where the wait cannot be timed in Keras' loop
#' (TensorFlow with several batches per call), the verdict rests on the
#' pipeline timed alone after training, marked as an estimate
#' (`input_wait_estimated`), and the live column shows no figure. The advice
#' fits the data: for R data in memory a larger `batch_size`,
#' `steps_per_execution` and, on JAX, training on the device; for a
#' [gpu_dataset()] its own options (caching, the `map`, and `image_size` for
#' an image folder); for another dataset the steps it lacks. A fit that
#' trained for less than 5 seconds, or on the CPU, gets its input-bound
#' verdict as a note (`monitor$notes`), not as advice: in a few seconds
#' compiling and the first batches weigh too much, and on the CPU the host
#' both prepares the batches and runs the model.
#'
#' @param model A compiled Keras 3 model (from keras3, [gpu_keras()] or
#'   reticulate).
#' @param data The training data: a [gpu_dataset()], the `list(train = ,
#'   validation = )` it returns with a validation split, or R data as
#'   `list(x = , y = )` (see Data).
#' @param epochs Passes over the training data.
#' @param validation_data Data evaluated at the end of every epoch, in the same
#'   forms as `data`; `NULL` for none.
#' @param batch_size Rows per batch when `data` is R data (default 32), or
#'   `"auto"`: on a GPU, the largest that fits by the memory plan (see
#'   Precision and batch size chosen by the memory plan). Must be `NULL` for a
#'   dataset, which is batched already. One larger than the rows is the rows
#'   (one batch per epoch, as Keras makes it), with a
#'   `gpukeras_warning_batch_size` warning.
#' @param accumulate Micro-batches per update (gradient accumulation): a whole
#'   number that divides `batch_size` (then the batch of each update), or
#'   `"auto"`. Each update has the
#'   mean gradient of `accumulate` micro-batches of `batch_size / accumulate`
#'   rows, which is the gradient of the whole batch, in the memory of one
#'   micro-batch (plus one copy of the gradients). See Accumulation.
#' @param step How the training step is compiled and run: a [gpu_step()]
#'   (`steps_per_execution`, `jit_compile`, `remat`); the default keeps what
#'   the model was compiled with and Keras' own XLA choice. These three were
#'   gpu_fit()'s own arguments, still taken with a
#'   `gpukeras_warning_deprecated` warning.
#' @param learning_rate `NULL` keeps the optimizer's, a positive number sets a
#'   constant rate, or a schedule: [lr_warmup_cosine()], [lr_exponential()],
#'   [lr_cyclical()] (or a Keras `LearningRateSchedule` object).
#' @param clipnorm Clip each gradient to this L2 norm; `NULL` for no clipping.
#' @param clipvalue Clip each gradient element to `[-clipvalue, clipvalue]`;
#'   `NULL` for no clipping. Give `clipnorm` or `clipvalue`, not both.
#' @param monitor Measure throughput, input wait, GPU utilization and memory,
#'   and host CPU while training. `FALSE` trains without measuring (`monitor`
#'   of the result is then `NULL`).
#' @param backup `NULL` (no backup; SIGTERM still stops training cleanly), or
#'   a [gpu_backup()]: the folder training state is backed up to, how often,
#'   and the signals that stop training with a backup there. An interrupted
#'   `gpu_fit()` called again with the same arguments and folder resumes
#'   where it stopped and ends with the weights of an unbroken run (give a
#'   `seed` too). `backup_dir`, `backup_freq` and `signals`, gpu_fit()'s
#'   arguments before, are an error that shows this form.
#' @param strategy `NULL` to train on one device, or a [gpu_strategy()] (or a
#'   `tf.distribute` strategy / Keras `Distribution` made in Python) to train
#'   on several devices or machines. `batch_size` is then the global batch,
#'   split over the replicas; a model built outside the strategy is copied
#'   into it and the trained weights copied back (see [gpu_strategy()]).
#' @param callbacks A Keras callback (a Python object, e.g. from keras3 or
#'   `gpu_keras()$callbacks`) or a list of them. R functions cannot be
#'   callbacks: Keras may call them from a worker thread. An error raised in
#'   one of them stops training with `gpukeras_error_callback`, naming the
#'   callback, its method and the line.
#' @param seed A whole number: seeds Keras and TensorFlow before training
#'   (weights initialised from here on, dropout) and the shuffling of R data,
#'   for repeatable runs. A dataset's own order is fixed where it was made
#'   (`gpu_dataset(seed = )`). `NULL` takes [gpu_setup()]'s `seed` when it was
#'   given one (so `gpu_setup(deterministic = TRUE, seed = )` needs none here).
#' @param verbose `"auto"`, `0` (silent), `1` (progress bar) or `2` (one line
#'   per epoch); see Progress.
#' @param background `FALSE` to train in this session, or `TRUE` (or a
#'   [gpu_background()], which says how often a crashed child is restarted)
#'   to train in a supervised child R process and return a `gpukeras_job` at
#'   once (see [gpu_job_status()]): a crash there (a segfault, an abort, an
#'   out-of-memory kill) cannot take this session down, the child starts
#'   again from its backup, and all the memory it held is given back when it
#'   ends. The model (saved as `.keras`), R data (as `.npy` files the child
#'   memory-maps), a [gpu_dataset()] (of files, or of R data as `.npy`
#'   files), callbacks (pickled) and this session's [gpu_setup()] settings
#'   are carried to the child; what cannot be is a
#'   `gpukeras_error_not_carriable` error before any child starts.
#'   [gpu_job_cancel()] keeps the job's backup and says where; without
#'   `backup`, it is in the session's temporary folder, removed when R ends.
#' @param tuned A [gpu_tune()] result: its recommended `batch_size` (for R
#'   data), `steps_per_execution` and `jit_compile` are used (give `tuned` or
#'   those). Its precision cannot be applied to a built model: a model built
#'   under another dtype policy is refused, with how to rebuild it. The fit's
#'   advice then does not advise changing what the tune chose (batch size,
#'   `steps_per_execution`, `jit_compile`, precision); where it held such
#'   advice back, `monitor$notes` says so. `settings$tuned` of the result
#'   holds the tune's choice. (It was `settings`, still taken with a
#'   `gpukeras_warning_deprecated` warning.)
#' @param class_weight `NULL`, or a weight per class for imbalanced
#'   classification (see Weights): a named numeric vector or list, by the
#'   labels' levels (`c(no = 1, yes = 10)` for a factor, an image folder's
#'   class names) or by class number (`c("0" = 1, "1" = 10)`).
#' @param ... Not used: an argument gpu_fit() does not have is an error that
#'   says what to use instead (Keras' `validation_split` is [gpu_dataset()]'s;
#'   `backup_dir` is `backup = gpu_backup()`'s). `ema = 0.999` is short for
#'   `step = gpu_step(ema = 0.999)` (a moving average of the weights, see
#'   [gpu_step()]). Its deprecated arguments (`steps_per_execution`,
#'   `jit_compile`, `remat`, `settings`) arrive here.
#' @return An object of class `gpukeras_fit` (with `background = TRUE`, a
#'   `gpukeras_job` whose [gpu_job_wait()] returns it), a list with
#'   * `history`: a data.frame with a row per epoch: `epoch` and the loss and
#'     metrics (`val_` ones for validation data);
#'   * `monitor`: `NULL` with `monitor = FALSE`, else a list with
#'     `samples_per_second` (over the timed steps' own time, the first steps
#'     left out), `wall_samples_per_second` (over the epochs' wall-clock
#'     time, compiling and stalls included), `step_time_mean_ms`, `step_time_sd_ms`
#'     (a step: one call of Keras' train function, `steps_per_execution`
#'     batches), `batch_time_mean_ms` and `batches_timed` (per training step
#'     of one batch), `input_wait_share` (time waiting for the next batch
#'     beyond what taking an always-ready one costs, `fetch_floor_ms`; `0`
#'     with `input_on_device = TRUE`, batches gathered on the device; where
#'     the wait cannot be timed inside Keras' loop, the pipeline is read alone
#'     after training: `pipeline_batch_ms`, and `input_share_alone`, its share
#'     of a training step, an estimate, and `input_wait_estimated` is `TRUE`;
#'     the live `input_wait_%` column then shows nothing), `input_wait_margin`
#'     and `input_verdict` (see The input verdict), `input_near_line`,
#'     `gpu_utilization_mean`,
#'     `gpu_utilization_p95`, `gpu_memory_used_max_mib`,
#'     `host_cpu_percent_mean`, `flops_per_step`, `achieved_tflops`, `mfu`,
#'     `advice` and `notes` (findings not to act on: the input verdict of a
#'     fit shorter than 5 seconds or on the CPU) (`NULL` where not known, e.g. GPU numbers without a GPU, and
#'     then `gpu_not_measured` says why), `gpus` (a list with one entry per
#'     GPU in use, the ones the strategy or device scope trains on: `device`,
#'     `name`, `nvml_index`, `utilization_mean`, `utilization_p95`,
#'     `memory_used_max_mib` and `power_mean_w`, `NULL` where NVML gave none),
#'     `gpu_utilization_imbalance` (points of utilization between the busiest
#'     and the idlest GPU) and `gpu_memory_imbalance_mib` (the same for memory;
#'     both `NULL` unless two or more GPUs were measured), and more detail from
#'     the core (`steps_timed`, `gpu_sample_hz`, `peak_tflops`, ...; `mfu` is
#'     against the sum of the GPUs' peaks);
#'   * `timeline`: a list of data.frames, `gpu` (`time_s`, `nvml_index`,
#'     `utilization`, `memory_used_mib`, `power_w`; no rows without a GPU) and
#'     `host` (`time_s`, `cpu_percent`);
#'   * `settings`: the settings in force, read back by the core (`epochs`,
#'     `batch_size`, `accumulate`, `micro_batch_size`, `steps_per_epoch`, `jit_compile`, `steps_per_execution`,
#'     `learning_rate`, `clipnorm`, `clipvalue`, `backup_dir`, `seed`,
#'     `deterministic` (whether the backend's ops were deterministic, see
#'     [gpu_setup()]), `backend`, `device`, `dtype_policy`, `seconds`, `weights`: `NULL`
#'     unweighted, else `training`, `class_weight`, `validation` and `note`,
#'     ...), with `verbose`,
#'     `data` (and `validation_data`), a description of the data, and
#'     `data_kind`, how the core fed it to Keras;
#'   * `model`: the trained model (the one given, which Keras trained in place);
#'   * `encoding`: how R data became numbers (columns, factor levels, NA rule;
#'     `NULL` for NumPy arrays and datasets not made by [gpu_dataset()]), which
#'     [predict.gpukeras_fit()], [evaluate.gpukeras_fit()], `gpu_dataset(like
#'     = )` and [gpu_save()] apply to new data.
#'
#'   It has `print()`, `plot()`, `predict()`, `evaluate()` and
#'   `as.data.frame()` (the history) methods.
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
gpu_fit <- function(model, data, epochs = 1, validation_data = NULL, batch_size = NULL, accumulate = 1,
                    step = gpu_step(), learning_rate = NULL, clipnorm = NULL, clipvalue = NULL,
                    monitor = TRUE, backup = NULL, callbacks = NULL, seed = NULL, verbose = "auto",
                    strategy = NULL, background = FALSE, tuned = NULL, class_weight = NULL, ...) {
  # Every check that needs no Python comes first, so a mistake fails at once.
  old <- if (...length() > 0L) fit_dots(list(...)) else list()
  step_given <- !missing(step)
  if (!missing(epochs) && length(epochs) > 1L && is.numeric(epochs)) {
    # keras3's fit(model, x, y) habit: y landed in `epochs`.
    abort_bad_argument(
      c(
        sprintf("`epochs` must be one whole number >= 1, not %s.", describe(epochs)),
        "gpu_fit() takes features and labels together: gpu_fit(model, list(x = x, y = y), epochs = )."
      )
    )
  }
  # Each check returns the value as the core takes it (an integer, a double), so the request
  # reaches Python in its types (train/fit_request.py converts nothing).
  epochs <- check_count(epochs)
  batch_size <- check_auto_count(batch_size, allow_null = TRUE)
  accumulate <- check_auto_count(accumulate)
  step <- if (is.null(step)) gpu_step() else check_fit_option(step, "step", gpu_step)
  given_step <- intersect(names(old), names(step))
  if (length(given_step)) {
    if (step_given) abort_bad_argument(sprintf("Give `step` or `%s`, not both.", given_step[1]))
    step <- do.call(gpu_step, old[given_step])
  }
  # nolint start: object_usage_linter. fit_request(environment()) reads these by name.
  steps_per_execution <- step$steps_per_execution
  jit_compile <- step$jit_compile
  remat <- step$remat
  ema <- step$ema
  learning_rate <- check_learning_rate(learning_rate)
  clipnorm <- check_positive_number(clipnorm, allow_null = TRUE)
  clipvalue <- check_positive_number(clipvalue, allow_null = TRUE)
  check_flag(monitor)
  backup <- if (is.null(backup)) gpu_backup(NULL) else check_fit_option(backup, "backup", gpu_backup)
  backup_dir <- backup$dir
  backup_freq <- backup$every
  signals <- as_python(backup$signals)
  keep_best <- backup$keep_best
  keep_best_monitor <- backup$monitor
  # nolint end
  callbacks <- check_callbacks(callbacks)
  seed <- check_seed(seed)
  verbose <- resolve_verbose(verbose)
  background <- if (is.null(background)) NULL else
    check_fit_option(background, "background", gpu_background, flag = TRUE)
  if (!is.null(old$settings)) {
    if (!is.null(tuned)) abort_bad_argument("Give `tuned` or `settings`, not both.")
    tuned <- old$settings
  }
  if (!is.null(strategy)) strategy <- strategy_object(strategy)
  data <- read_training_data(data, missing(data))
  # the labels' levels as the core records them, once for the fit (data$recorded), read for a class_weight
  class_weight <- as_python(
    check_class_weight(class_weight, (data$recorded <- fit_encoding(data))$y$levels), int_keys = TRUE
  )
  if (!is.null(data$validation)) {
    if (!is.null(validation_data)) {
      abort_bad_argument(
        c(
          paste0(
            "`data` holds a validation pipeline (from gpu_dataset(validation_split = )) and `validation_data` is ",
            "given too."
          ),
          "Give one of them."
        )
      )
    }
    validation_data <- data$validation
  }
  validation <- if (!is.null(validation_data)) fit_data(validation_data, "validation_data")
  if (!is.null(validation$validation)) {
    abort_bad_argument("`validation_data` must be one dataset or list(x = , y = ), not a train/validation split.")
  }
  if (!is.null(clipnorm) && !is.null(clipvalue)) abort_bad_argument("Give `clipnorm` or `clipvalue`, not both.")
  check_python_object(model, "model", "a compiled Keras 3 model")
  # made by the core once per fit, after every check that needs no Python: what it trains
  # on, its report and its saved files use it
  data$recorded <- fit_encoding(data)
  validation <- with_training_encoding(validation, data)
  check_widths(model, data$recorded, data$recorded$y$levels)
  if (!is.null(tuned)) {
    chosen <- tune_fit_settings(tuned, data$kind, batch_size, steps_per_execution, jit_compile)
    batch_size <- chosen$batch_size
    steps_per_execution <- chosen$steps_per_execution
    jit_compile <- chosen$jit_compile
    # the request carries the choice, so the core's advice leaves it alone
    tuned <- chosen$record
  }
  check_auto_batch(batch_size, strategy)
  accumulate <- check_accumulate_for(accumulate, batch_size, data)

  # The request, one object: every formal but the model, the data, the strategy and how the
  # call runs, as checked above (the core declares the same fields: train/fit_request.py).
  request <- fit_request(environment())
  if (!is.null(background)) {
    return(fit_in_background(model, data, validation, request, strategy, background$max_restarts))
  }
  train <- fit_input(data)
  validation_input <- if (!is.null(validation)) fit_input(validation)

  track <- track_request(encoding = fit_encoding(data))
  result <- core_call(
    "fit",
    model = model, data = train, validation_data = validation_input, strategy = strategy,
    request = request, track = track
  )
  fit <- fit_result(result, model, data, train, validation, validation_input, verbose)
  track_plot(fit, track)
  fit
}

# gpu_fit()'s request as the core takes it (train/fit_request.py declares the same fields):
# every formal of gpu_fit() but these, an option object as its fields (option_fields: the
# constructor's argument = the request's field), each with its checked value from gpu_fit()'s
# frame `env`.
not_requested <- c("model", "data", "validation_data", "strategy", "background", "...")
option_fields <- list(
  step = c(steps_per_execution = "steps_per_execution", jit_compile = "jit_compile", remat = "remat", ema = "ema"),
  backup = c(
    dir = "backup_dir", every = "backup_freq", signals = "signals", keep_best = "keep_best",
    monitor = "keep_best_monitor"
  )
)
fit_request <- function(env) {
  formal <- setdiff(names(formals(gpu_fit)), not_requested)
  mget(unname(unlist(lapply(formal, function(name) option_fields[[name]] %||% name))), envir = env)
}

# A request as gpu_fit()'s arguments again, its option objects rebuilt (a background job's
# child calls gpu_fit() with them).
fit_args_of <- function(request) {
  for (formal in names(option_fields)) {
    fields <- option_fields[[formal]]
    values <- stats::setNames(request[unname(fields)], names(fields))
    request <- request[setdiff(names(request), fields)]
    request[[formal]] <- do.call(match.fun(paste0("gpu_", formal)), values)
  }
  request
}
