# Input pipelines from R: does gpu_dataset() keep the model fed?
#
# Trains the same model from R three ways, in one run, for two workloads:
#   (a) array_fit:   model$fit(gpu_as_numpy(x), gpu_as_numpy(y), batch_size, shuffle = TRUE)
#   (b) gpu_dataset: gpu_fit(model, gpu_dataset(x, y, batch_size, augment = ...)), with
#                    one batch per step, no XLA and no monitor, as in (a) and (c)
#   (c) ceiling:     one batch, tf.data.Dataset$from_tensors(batch)$`repeat`() (copied to
#                    the GPU when TensorFlow sees one), the same number of steps
# and, for comparison, gpu_dataset_keras_fit: model$fit(gpu_dataset(...)), Keras' own
# fit() on the same dataset. Keras makes a new iterator of a finite dataset at every
# epoch's end (keras/src/trainers/epoch_iterator.py), which for a tf.data pipeline with
# functions costs ~13 ms here, inside the last step of the epoch; gpu_fit() hands Keras
# dataset$repeat() and steps_per_epoch, so one iterator serves every epoch, as the
# ceiling's does.
# Workloads: an MLP on synthetic tabular data (20 features, two classes) and a CNN on
# the UCI digits (inst/extdata/digits.csv.gz, replicated so an epoch lasts long enough
# to time) with random flips and rotations: for (a) as Keras preprocessing layers at
# the model's start, for (b) as gpu_dataset()'s augment presets.
#
# Each way gets a fresh model (same architecture, same batch size) and untimed warm-up
# epochs; then `rounds` rounds time one fit of each way in turn (in a rotating order)
# and the median counts, with a bootstrap 95% interval for the median of the per-round
# ratios. Samples/s come from fits timed with gpukeras.train.timing.step_timer(measure_input =
# FALSE) (step timestamps only).
#
# The input wait share comes from a profiler trace of 200 steps of each way, as Keras
# runs them: the time TensorFlow's IteratorGetNext ops took within the traced steps
# (gpukeras.tools.profile_logs.read_trace()$input_share, the time TensorFlow's own profiler counts
# as input). The step timer's eager measure (measure_input = TRUE: it times a Python
# next(iterator) before Keras' step, less what taking an always-ready batch from Python
# took, its fetch floor) is kept as input_wait_share_eager for comparison.
#
# Usage (from the repository root): Rscript bench/pipeline.R [--quick | --smoke]
# Writes bench/results/pipeline.json (pipeline-quick.json with --quick; a smoke run: see
# bench/lib/common.R).
# The bar (issue #4): ratio_vs_ceiling (b/c) >= 0.97, ratio_vs_array_fit (b/a) >= 1.0,
# input_wait_share of (b) < 0.05.
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/lib/load.R")
source("bench/lib/common.R")
mode <- bench_mode()
quick <- mode$quick
core_call <- utils::getFromNamespace("core_call", "gpukeras")


# Timed epochs per fit: an MLP epoch of 20,480 rows lasts ~0.1 s here, too short to
# time alone on a busy 2-core machine.
# Other work on this 2-core machine changes the speed by 10-30 % from one fit to the
# next, so many short rounds: the interval of the median narrows with their number.
sizes <- if (mode$smoke) {
  list(mlp_rows = 2048L, mlp_epochs = 1L, digits_copies = 1L, cnn_epochs = 1L, mlp_rounds = 1L, cnn_rounds = 1L)
} else if (quick) {
  list(mlp_rows = 20480L, mlp_epochs = 3L, digits_copies = 8L, cnn_epochs = 1L, mlp_rounds = 9L, cnn_rounds = 7L)
} else {
  list(mlp_rows = 102400L, mlp_epochs = 2L, digits_copies = 16L, cnn_epochs = 1L, mlp_rounds = 41L, cnn_rounds = 31L)
}
traced_steps <- if (mode$smoke) 4L else 200L
mlp_batch <- 256L
cnn_batch <- 128L
augment <- list(flip_horizontal = list(), rotation = list(factor = 0.05))

keras <- gpu_keras()
tf <- reticulate::import("tensorflow")
np <- reticulate::import("numpy", convert = FALSE)
timing <- reticulate::import("gpukeras.train.timing")
profiling <- reticulate::import("gpukeras.tools.profile")
profile_logs <- reticulate::import("gpukeras.tools.profile_logs")
pathlib <- reticulate::import("pathlib")
gpus <- tf$config$list_logical_devices("GPU")

# ---- data -------------------------------------------------------------------
set.seed(1)
mlp_x <- matrix(stats::rnorm(sizes$mlp_rows * 20), ncol = 20)
score <- mlp_x[, 1] * mlp_x[, 2] + sin(2 * mlp_x[, 3]) + 0.5 * mlp_x[, 4] - 0.3 * mlp_x[, 5]^2
mlp_y <- factor(ifelse(score + stats::rnorm(sizes$mlp_rows, sd = 0.3) > -0.3, "yes", "no"))

digits_file <- if (in_source_tree) "inst/extdata/digits.csv.gz" else system.file("extdata", "digits.csv.gz", package = "gpukeras")
digits <- utils::read.csv(digits_file, header = FALSE)
pixels <- as.matrix(digits[, 1:64]) / 16
# Each row is an 8 x 8 image row by row; R fills arrays column by column.
images <- aperm(array(pixels, c(nrow(pixels), 8, 8)), c(1, 3, 2))
dim(images) <- c(dim(images), 1L)
labels <- digits[[65]]
copies <- rep(seq_len(nrow(images)), sizes$digits_copies)
keep <- seq_len(length(copies) %/% cnn_batch * cnn_batch) # whole batches only
cnn_x <- images[copies[keep], , , , drop = FALSE]
cnn_y <- as.integer(labels[copies[keep]])

# ---- models -----------------------------------------------------------------
mlp_model <- function(augmented = FALSE) {
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(20L)),
    keras$layers$Dense(128L, activation = "relu"),
    keras$layers$Dense(128L, activation = "relu"),
    keras$layers$Dense(2L)
  ))
  model$compile(
    optimizer = "adam",
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE)
  )
  model
}

cnn_model <- function(augmented = FALSE) {
  keras$utils$set_random_seed(1L)
  front <- if (augmented) {
    list(
      keras$layers$RandomFlip("horizontal", seed = 1L),
      keras$layers$RandomRotation(augment$rotation$factor, seed = 2L)
    )
  }
  model <- keras$Sequential(c(
    list(keras$Input(shape = list(8L, 8L, 1L))),
    front,
    list(
      keras$layers$Conv2D(32L, 3L, padding = "same", activation = "relu"),
      keras$layers$Conv2D(64L, 3L, padding = "same", activation = "relu"),
      keras$layers$MaxPooling2D(2L),
      keras$layers$Flatten(),
      keras$layers$Dropout(0.3),
      keras$layers$Dense(10L)
    )
  ))
  model$compile(
    optimizer = "adam",
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE)
  )
  model
}

# ---- the three ways ---------------------------------------------------------
# A "way" is a model and a function that runs one epoch of it with some callbacks.
# The ceiling's data: one batch repeated. With a GPU, the batch is copied to it once
# and repeated there; where TensorFlow cannot do that, it stays on the host (Keras then
# copies it in each step) and the JSON says so.
ceiling_dataset <- function(batch) {
  host <- tf$data$Dataset$from_tensors(batch)$`repeat`()
  if (!length(gpus)) {
    return(list(dataset = host, placement = "host (no GPU visible)"))
  }
  # Untested: no GPU machine with TensorFlow was available when this was written.
  tryCatch(
    {
      on_gpu <- tf$data$Dataset$from_tensors(batch)$apply(tf$data$experimental$copy_to_device("/GPU:0"))
      on_gpu <- with(tf$device("/GPU:0"), on_gpu$`repeat`())
      element <- reticulate::iter_next(reticulate::as_iterator(on_gpu))
      list(dataset = on_gpu, placement = element[[1]]$device)
    },
    error = function(e) list(dataset = host, placement = paste("host (copy_to_device failed:", conditionMessage(e), ")"))
  )
}

make_ways <- function(x, y, batch_size, epochs, build, augment_presets) {
  steps <- nrow(x) %/% batch_size
  conversion <- system.time({
    x_numpy <- gpu_as_numpy(x)
    y_numpy <- gpu_as_numpy(y)
  })[["elapsed"]]
  dataset_seconds <- system.time(
    dataset <- gpu_dataset(x, y, batch_size = batch_size, seed = 1, augment = augment_presets)
  )[["elapsed"]]
  first <- seq_len(batch_size)
  first_x <- if (length(dim(x)) == 4L) x[first, , , , drop = FALSE] else x[first, , drop = FALSE]
  batch <- reticulate::tuple(gpu_as_numpy(first_x), gpu_as_numpy(y[first]))
  ceiling <- ceiling_dataset(batch)
  models <- list(
    array_fit = build(augmented = !is.null(augment_presets)),
    gpu_dataset = build(augmented = FALSE),
    gpu_dataset_keras_fit = build(augmented = FALSE),
    ceiling = build(augmented = FALSE)
  )
  run <- list(
    array_fit = function(callbacks) {
      models$array_fit$fit(x_numpy, y_numpy,
        batch_size = batch_size, shuffle = TRUE,
        epochs = epochs, verbose = 0L, callbacks = callbacks
      )
    },
    # gpukeras' own way, with the speed options the other ways have (one batch per
    # step, no XLA), and no monitor.
    gpu_dataset = function(callbacks) {
      gpu_fit(models$gpu_dataset, dataset,
        epochs = epochs, step = gpu_step(steps_per_execution = 1, jit_compile = FALSE),
        monitor = FALSE, callbacks = if (length(callbacks)) callbacks, verbose = 0
      )
    },
    gpu_dataset_keras_fit = function(callbacks) {
      models$gpu_dataset_keras_fit$fit(dataset, epochs = epochs, shuffle = FALSE, verbose = 0L, callbacks = callbacks)
    },
    ceiling = function(callbacks) {
      models$ceiling$fit(ceiling$dataset,
        steps_per_epoch = steps, epochs = epochs, shuffle = FALSE, verbose = 0L,
        callbacks = callbacks
      )
    }
  )
  list(
    run = run, models = models, steps = steps, rows = nrow(x), batch_size = batch_size,
    epochs = epochs, ceiling_placement = ceiling$placement,
    conversion_seconds = conversion, dataset_seconds = dataset_seconds,
    pipeline_steps = unlist(attr(dataset, "gpukeras")$steps)
  )
}

# The input share of `traced_steps` steps of one way from a profiler trace (after the
# first 20, which the warm-up has compiled already; training stops after the last).
traced_input <- function(run, steps_in_fit) {
  first <- min(21L, steps_in_fit)
  last <- min(steps_in_fit, first + traced_steps - 1L)
  profiler <- profiling$Profiler("tensorflow")
  profiler$warm_up()
  run_dir <- tempfile("gpukeras-bench-trace-")
  on.exit(unlink(run_dir, recursive = TRUE))
  tracer <- profiling$range_callback(profiler, run_dir, first, last)
  run(list(tracer))
  files <- list.files(reticulate::py_str(tracer$trace_dir), full.names = TRUE)
  trace <- profile_logs$read_trace(lapply(files, pathlib$Path), "tensorflow")
  list(steps = length(trace$steps), input_share = trace$input_share, input_ms_per_step = trace$input_ms / length(trace$steps), step_time_mean_ms = trace$step_time_mean_ms)
}


measure <- function(name, ways, rounds) {
  cat(sprintf("%s: warming up ...\n", name))
  for (way in names(ways$run)) {
    ways$run[[way]](list()) # compiles the step Keras runs
    ways$run[[way]](list(timing$step_timer(skip = 0L))) # and the one the input timer runs
  }
  throughput <- setNames(vector("list", length(ways$run)), names(ways$run))
  plain <- throughput
  for (round in seq_len(rounds)) {
    # Rotate the order each round, so no way always runs first or last.
    order <- names(ways$run)[(seq_along(ways$run) + round - 2L) %% length(ways$run) + 1L]
    for (way in order) {
      timer <- timing$step_timer(batch_size = ways$batch_size, skip = 0L, measure_input = FALSE)
      ways$run[[way]](list(timer))
      report <- timer$report()
      throughput[[way]] <- c(throughput[[way]], report$samples_per_second)
      plain[[way]] <- c(plain[[way]], report$step_time_mean_ms)
    }
    cat(sprintf(
      "%s round %d: %s samples/s\n", name, round,
      paste(sprintf("%s %.0f", names(throughput), vapply(throughput, utils::tail, numeric(1), 1)), collapse = ", ")
    ))
  }
  waits <- lapply(names(ways$run), function(way) {
    timer <- timing$step_timer(skip = 0L, measure_input = TRUE)
    ways$run[[way]](list(timer))
    timer$report()
  })
  names(waits) <- names(ways$run)
  traces <- lapply(ways$run, traced_input, steps_in_fit = ways$steps * ways$epochs)
  median_sps <- vapply(throughput, stats::median, numeric(1))
  # Ratios within a round (the three ways ran back to back), then their median: other
  # load on the machine drifts between rounds more than within one.
  vs_ceiling <- throughput$gpu_dataset / throughput$ceiling
  vs_array <- throughput$gpu_dataset / throughput$array_fit
  keras_fit_vs_ceiling <- throughput$gpu_dataset_keras_fit / throughput$ceiling
  list(
    rows = ways$rows,
    batch_size = ways$batch_size,
    steps_per_epoch = ways$steps,
    epochs_per_timed_fit = ways$epochs,
    ceiling_placement = ways$ceiling_placement,
    parameters = ways$models$gpu_dataset$count_params(),
    jit_compile = vapply(ways$models, function(model) isTRUE(model$jit_compile), logical(1)),
    gpu_as_numpy_seconds = ways$conversion_seconds,
    gpu_dataset_build_seconds = ways$dataset_seconds,
    gpu_dataset_steps = ways$pipeline_steps,
    samples_per_second = as.list(median_sps),
    samples_per_second_rounds = throughput,
    step_time_mean_ms = as.list(vapply(plain, stats::median, numeric(1))),
    ratio_vs_ceiling = stats::median(vs_ceiling),
    ratio_vs_array_fit = stats::median(vs_array),
    ratio_vs_ceiling_ci95 = median_interval(vs_ceiling),
    ratio_vs_array_fit_ci95 = median_interval(vs_array),
    keras_fit_ratio_vs_ceiling = stats::median(keras_fit_vs_ceiling),
    keras_fit_ratio_vs_ceiling_ci95 = median_interval(keras_fit_vs_ceiling),
    ratio_vs_ceiling_rounds = vs_ceiling,
    ratio_vs_array_fit_rounds = vs_array,
    input_wait_share = traces$gpu_dataset$input_share,
    input_wait_share_by_way = lapply(traces, `[[`, "input_share"),
    input_wait_ms_per_step_by_way = lapply(traces, `[[`, "input_ms_per_step"),
    traced_steps = traces$gpu_dataset$steps,
    traced_step_time_mean_ms_by_way = lapply(traces, `[[`, "step_time_mean_ms"),
    input_wait_method = "time in TensorFlow's IteratorGetNext ops within the traced steps, from a profiler trace (gpukeras.tools.profile_logs.read_trace)",
    input_wait_share_eager = waits$gpu_dataset$input_wait_share,
    input_wait_share_eager_by_way = lapply(waits, `[[`, "input_wait_share"),
    input_wait_mean_ms_eager_by_way = lapply(waits, `[[`, "input_wait_mean_ms"),
    between_steps_share_by_way = lapply(waits, `[[`, "between_steps_share"),
    instrumented_samples_per_second = lapply(waits, `[[`, "samples_per_second"),
    eager_timing_method = waits$gpu_dataset$method
  )
}

mlp <- measure(
  "mlp",
  make_ways(mlp_x, mlp_y, mlp_batch, sizes$mlp_epochs, mlp_model, NULL),
  sizes$mlp_rounds
)
mlp$description <- sprintf(
  "MLP 20-128-128-2 on %s synthetic rows x 20 features, 2 classes, batch %d",
  format(sizes$mlp_rows, big.mark = ","), mlp_batch
)
cnn <- measure(
  "cnn",
  make_ways(cnn_x, cnn_y, cnn_batch, sizes$cnn_epochs, cnn_model, augment),
  sizes$cnn_rounds
)
cnn$description <- sprintf(
  "digits CNN (conv 32, conv 64, pool, dense 10) on %s 8x8 images (%d copies of the 1,797 UCI digits), batch %d, augment: horizontal flip + rotation 0.05",
  format(nrow(cnn_x), big.mark = ","), sizes$digits_copies, cnn_batch
)

# ---- machine and report -----------------------------------------------------
python <- reticulate::import("sys")
command <- bench_command("bench/pipeline.R", mode)
bar <- list(ratio_vs_ceiling = 0.97, ratio_vs_array_fit = 1.0, input_wait_share = 0.05)
meets <- function(workload) {
  list(
    ratio_vs_ceiling = workload$ratio_vs_ceiling >= bar$ratio_vs_ceiling,
    ratio_vs_array_fit = workload$ratio_vs_array_fit >= bar$ratio_vs_array_fit,
    input_wait_share = workload$input_wait_share < bar$input_wait_share
  )
}
mlp$meets_bar <- meets(mlp)
cnn$meets_bar <- meets(cnn)
result <- list(
  benchmark = "pipeline",
  command = command,
  date = format(Sys.time(), "%Y-%m-%d"),
  quick = quick,
  smoke = mode$smoke,
  machine = machine_facts(load_before),
  code = code_state(),
  backend = keras$backend$backend(),
  versions = version_facts(),
  rounds = list(mlp = sizes$mlp_rounds, cnn = sizes$cnn_rounds),
  bar = bar,
  workloads = list(mlp = mlp, cnn = cnn),
  notes = c(
    "samples_per_second: median over rounds of timed fits (step timestamps only, gpukeras.train.timing.step_timer(measure_input = FALSE)); ratio_vs_ceiling (b / c) and ratio_vs_array_fit (b / a): the median of the ratios within each round (the three ways run back to back, in a rotating order); *_ci95: a bootstrap 95% interval of that median.",
    "input_wait_share: share of (b)'s traced steps spent in TensorFlow's IteratorGetNext op (taking a batch from the pipeline, waiting for it included) while Keras runs its compiled step, from a profiler trace; the ceiling's (input_wait_share_by_way$ceiling) is what taking an always-ready batch costs.",
    "input_wait_share_eager: the step timer's measure (gpukeras.train.timing.step_timer(measure_input = TRUE)): a Python next(iterator) timed before each step, less the time taking an always-ready batch from Python took (its fetch floor, measured once per fit; before 5342619 it was not subtracted); the fetch itself varies by about as much as that floor, so this measure cannot resolve a few percent of a 1 ms step; kept to compare with earlier results.",
    "Without a GPU, tf.data's threads and the model's compute share the same CPU cores; the ceiling does no input work at all.",
    "Other processes on the machine change the speed from round to round (see loadavg_before/after and the *_rounds vectors)."
  ),
  wall_seconds = NA_real_
)
result$wall_seconds <- round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)

out <- write_result(result, "pipeline", mode)

row <- function(name, w) {
  sps <- w$samples_per_second
  sprintf(
    "%-4s %11.0f %12.0f %10.0f %5.3f [%.2f-%.2f] %5.3f [%.2f-%.2f] %5.1f%% (ceiling %.1f%%)",
    name, sps$array_fit, sps$gpu_dataset, sps$ceiling,
    w$ratio_vs_ceiling, w$ratio_vs_ceiling_ci95[1], w$ratio_vs_ceiling_ci95[2],
    w$ratio_vs_array_fit, w$ratio_vs_array_fit_ci95[1], w$ratio_vs_array_fit_ci95[2],
    100 * w$input_wait_share, 100 * w$input_wait_share_by_way$ceiling
  )
}
cat(sprintf("\nsamples/s, median of %d (mlp) and %d (cnn) rounds; ratios: median of per-round ratios [95%% interval] (%s; backend %s; GPU: %s)\n", sizes$mlp_rounds, sizes$cnn_rounds, result$machine$cpu, result$backend, paste(result$machine$gpu, collapse = ", ")))
cat(sprintf("%-4s %11s %12s %10s %17s %17s %9s\n", "", "(a) arrays", "(b) dataset", "(c) ceil.", "b/c", "b/a", "wait (b)"))
cat(row("mlp", mlp), row("cnn", cnn), sep = "\n")
cat(sprintf("bar: b/c >= %.2f, b/a >= %.1f, wait < %.0f%%\n", bar$ratio_vs_ceiling, bar$ratio_vs_array_fit, 100 * bar$input_wait_share))
cat(sprintf("wrote %s (%.0f s)\n", out, result$wall_seconds))
