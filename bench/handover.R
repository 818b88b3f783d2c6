# The hand-over of R data: what gpu_dataset() costs against the bare R -> NumPy copy,
# and what building it and training cost end to end against Keras' own fit() on arrays.
#
# Data: a 60,000 x 784 double matrix (R stores it column-major, 359 MiB) and integer
# labels 0-9 (the index of the largest of the first 10 columns, so the MLP learns).
# In each round, in an order that rotates from round to round:
#   (1) bare_copy:   reticulate::np_array(x, dtype = "float32", order = "C") and the labels
#                    as int32: the one copy any R -> Keras hand-over must make, and what
#                    keras3's fit() does on every call;
#   (2) gpu_dataset: gpu_dataset(x, y, batch_size, seed = 1), and its two halves, timed
#                    apart: the R side (as_pipeline_data(): NA check, the copy) and the
#                    core (pipeline.from_arrays(): tensors and the tf.data pipeline);
#   (3) end to end, each with a fresh model (784-256-10 MLP, the same seed, compiled the
#       same), 2 epochs of batch_size rows:
#       keras_fit:      model$fit(np_array(x, "float32"), np_array(y, "int32"), epochs,
#                       batch_size), converting as keras3 does, the conversion timed in;
#       gpukeras_fit:   gpu_fit(model, gpu_dataset(x, y, batch_size, seed = 1), epochs) with
#                       gpu_fit()'s defaults (monitor on), building the dataset timed in.
# Ratios are taken within each round (the ways ran back to back), then their median, with
# a bootstrap 95% interval: (2)/(1), goal <= 2; keras_fit / gpukeras_fit, goal >= 1.1.
# Both on wall-clock time; the process's CPU time (user + system, all threads) is kept
# too: other work on the machine stretches it less than the wall-clock time.
# R's and Python's garbage is collected before each timed call, outside the time.
#
# Usage (from the repository root): Rscript bench/handover.R [--quick]
# Writes bench/results/handover.json (handover-quick.json with --quick).
args <- commandArgs(trailingOnly = TRUE)
quick <- "--quick" %in% args
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/load.R")
source("bench/common.R")
core_call <- utils::getFromNamespace("core_call", "gpukeras")
as_pipeline_data <- utils::getFromNamespace("as_pipeline_data", "gpukeras")


code <- code_state() # before the run: the code measured, not what changed while it ran
rows <- 60000L
columns <- 784L
batch_size <- 128L
epochs <- 2L
rounds <- if (quick) 5L else 15L
goal <- list(dataset_vs_bare_copy = 2, keras_fit_vs_gpukeras_fit = 1.1)

keras <- gpu_keras()
tf <- reticulate::import("tensorflow")
np <- reticulate::import("numpy", convert = FALSE)

set.seed(1)
x <- stats::runif(rows * columns)
dim(x) <- c(rows, columns) # dim<- on a fresh vector does not copy it
y <- max.col(x[, 1:10], ties.method = "first") - 1L

mlp <- function() {
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(columns)),
    keras$layers$Dense(256L, activation = "relu"),
    keras$layers$Dense(10L)
  ))
  model$compile(
    optimizer = "adam",
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE)
  )
  model
}

bare_copy <- function() {
  list(
    reticulate::np_array(x, dtype = "float32", order = "C"),
    reticulate::np_array(y, dtype = "int32", order = "C")
  )
}

# Each way returns timed(); what it builds is dropped before the next way runs.
ways <- list(
  bare_copy = function() timed(bare_copy()),
  gpu_dataset = function() timed(gpu_dataset(x, y, batch_size = batch_size, seed = 1)),
  gpu_dataset_r_side = function() timed(as_pipeline_data(x, y, "error")),
  gpu_dataset_core = function() {
    data <- as_pipeline_data(x, y, "error")
    timed(core_call("pipeline.from_arrays", x = data$x, y = data$y, copy = FALSE, batch_size = batch_size, seed = 1L))
  },
  keras_fit = function() {
    model <- mlp()
    timed({
      arrays <- bare_copy()
      model$fit(arrays[[1]], arrays[[2]], epochs = epochs, batch_size = batch_size, verbose = 0L)
    })
  },
  gpukeras_fit = function() {
    model <- mlp()
    timed(gpu_fit(model, gpu_dataset(x, y, batch_size = batch_size, seed = 1), epochs = epochs, verbose = 0))
  }
)

measured <- run_rounds(ways, rounds)
seconds <- measured$seconds
cpu_seconds <- measured$cpu_seconds

dataset_vs_copy <- ratio_summary(seconds$gpu_dataset / seconds$bare_copy)
end_to_end <- ratio_summary(seconds$keras_fit / seconds$gpukeras_fit)
end_to_end_cpu <- ratio_summary(cpu_seconds$keras_fit / cpu_seconds$gpukeras_fit)

result <- list(
  benchmark = "handover",
  command = trimws(paste("Rscript bench/handover.R", if (quick) "--quick" else "")),
  date = format(Sys.time(), "%Y-%m-%d"),
  quick = quick,
  machine = machine_facts(load_before),
  code = code,
  backend = keras$backend$backend(),
  versions = version_facts(),
  data = list(rows = rows, columns = columns, r_type = "double", r_mib = rows * columns * 8 / 2^20, float32_mib = rows * columns * 4 / 2^20),
  model = "MLP 784-256-10 (relu), adam, sparse categorical cross-entropy from logits",
  batch_size = batch_size,
  epochs = epochs,
  rounds = rounds,
  goal = goal,
  seconds = lapply(seconds, stats::median),
  seconds_rounds = seconds,
  cpu_seconds = lapply(cpu_seconds, stats::median),
  cpu_seconds_rounds = cpu_seconds,
  dataset_vs_bare_copy = dataset_vs_copy,
  keras_fit_vs_gpukeras_fit = end_to_end,
  keras_fit_vs_gpukeras_fit_cpu = end_to_end_cpu,
  meets_goal = list(
    dataset_vs_bare_copy = dataset_vs_copy$median <= goal$dataset_vs_bare_copy,
    keras_fit_vs_gpukeras_fit = end_to_end$median >= goal$keras_fit_vs_gpukeras_fit
  ),
  notes = c(
    "seconds: median over rounds of wall-clock time; cpu_seconds: of the process's CPU time (user + system, all its threads); ratios: the median of the ratios within each round (the ways run back to back, in a rotating order), ci95 a bootstrap 95% interval of that median.",
    "bare_copy is reticulate::np_array() of x (float32, C order) and y (int32): what keras3's fit() pays on every call. keras_fit includes it, as keras3 does; Keras then copies the arrays into tensors itself.",
    "gpukeras_fit runs gpu_fit() with its defaults (monitor on, steps_per_execution and jit_compile 'auto'), verbose = 0; gpu_dataset() is built inside the timed call.",
    "Without a GPU, tf.data's threads and the model's compute share the same CPU cores. Other processes on the machine change the speed from round to round (see loadavg_before/after and seconds_rounds)."
  ),
  wall_seconds = NA_real_
)
result$wall_seconds <- round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)

out <- write_result(result, "handover", quick)

cat(sprintf("\nmedians of %d rounds (%s), wall-clock and CPU:\n", rounds, result$machine$cpu))
cat(sprintf("  %-20s %7.3f s %7.3f s\n", names(result$seconds), unlist(result$seconds), unlist(result$cpu_seconds)), sep = "")
interval <- function(r) sprintf("%.2f [%.2f-%.2f]", r$median, r$ci95[1], r$ci95[2])
cat(sprintf(
  "gpu_dataset / bare copy:        %s (goal <= %.1f)\nkeras fit / gpu_fit, 2 epochs: %s (goal >= %.1f); CPU time %s\n",
  interval(dataset_vs_copy), goal$dataset_vs_bare_copy,
  interval(end_to_end), goal$keras_fit_vs_gpukeras_fit, interval(end_to_end_cpu)
))
cat(sprintf("wrote %s (%.0f s)\n", out, result$wall_seconds))
