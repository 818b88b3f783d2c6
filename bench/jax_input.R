# In-memory R data on JAX: gpu_fit() against Keras' own fit() on NumPy arrays (issue #17, item 5).
#
# Data: 60,000 x 64 doubles (R matrix) and a 0/1 label (the sign of the first column plus
# the second's), a 64-256-256-1 MLP (relu, sigmoid output, adam, binary cross-entropy), batch
# 256, 2 epochs, on the JAX backend, from R. In each round, in an order that rotates from
# round to round, each way trains a fresh model (same seed, compiled the same):
#   keras_fit:            model$fit(np_array(x, "float32"), np_array(y, "float32"), ...),
#                         converting as keras3 does, the conversion timed in;
#   gpukeras_fit:         gpu_fit(model, list(x = x, y = y), batch_size = 256), defaults
#                         otherwise (monitor on);
#   gpukeras_fit_dataset: gpu_fit(model, gpu_dataset(x, y, batch_size = 256, seed = 1)),
#                         building the dataset timed in.
# Ratios are taken within each round (the ways ran back to back), then their median, with
# a bootstrap 95% interval: keras_fit / gpukeras_fit, goal >= 1.0 (gpu_fit() at least as
# fast as Keras' fit() on arrays). Wall-clock time; the process's CPU time is kept too.
#
# Usage (from the repository root): Rscript bench/jax_input.R [--quick | --smoke]
# Writes bench/results/jax_input.json (jax_input-quick.json with --quick; a smoke run: see
# bench/lib/common.R).
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")
Sys.setenv(KERAS_BACKEND = "jax") # before gpukeras starts Python

source("bench/lib/load.R")
source("bench/lib/common.R")
mode <- bench_mode()
quick <- mode$quick

code <- code_state()
rows <- if (mode$smoke) 2048L else 60000L
columns <- 64L
batch_size <- 256L
epochs <- 2L
rounds <- if (mode$smoke) 1L else if (quick) 3L else 7L
goal <- list(keras_fit_vs_gpukeras_fit = 1.0)

keras <- gpu_keras()
stopifnot(keras$backend$backend() == "jax")

set.seed(1)
x <- matrix(stats::rnorm(rows * columns), rows, columns)
y <- as.numeric(x[, 1] + x[, 2] > 0)

mlp <- function() {
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(columns)),
    keras$layers$Dense(256L, activation = "relu"),
    keras$layers$Dense(256L, activation = "relu"),
    keras$layers$Dense(1L, activation = "sigmoid")
  ))
  model$compile(optimizer = "adam", loss = "binary_crossentropy")
  model
}

ways <- list(
  keras_fit = function() {
    model <- mlp()
    timed(model$fit(
      reticulate::np_array(x, dtype = "float32", order = "C"),
      reticulate::np_array(y, dtype = "float32", order = "C"),
      epochs = epochs, batch_size = batch_size, verbose = 0L
    ))
  },
  gpukeras_fit = function() {
    model <- mlp()
    timed(gpu_fit(model, list(x = x, y = y), epochs = epochs, batch_size = batch_size, verbose = 0))
  },
  gpukeras_fit_dataset = function() {
    model <- mlp()
    timed(gpu_fit(model, gpu_dataset(x, y, batch_size = batch_size, seed = 1), epochs = epochs, verbose = 0))
  }
)

measured <- run_rounds(ways, rounds)
seconds <- measured$seconds
cpu_seconds <- measured$cpu_seconds

arrays <- ratio_summary(seconds$keras_fit / seconds$gpukeras_fit)
dataset <- ratio_summary(seconds$keras_fit / seconds$gpukeras_fit_dataset)

result <- list(
  benchmark = "jax_input",
  command = bench_command("bench/jax_input.R", mode),
  date = format(Sys.time(), "%Y-%m-%d"),
  quick = quick,
  smoke = mode$smoke,
  machine = machine_facts(load_before),
  code = code,
  backend = keras$backend$backend(),
  versions = c(version_facts(), list(jax = reticulate::import("jax")$`__version__`)),
  data = list(rows = rows, columns = columns),
  model = "MLP 64-256-256-1 (relu, sigmoid), adam, binary cross-entropy",
  batch_size = batch_size,
  epochs = epochs,
  rounds = rounds,
  goal = goal,
  seconds = lapply(seconds, stats::median),
  seconds_rounds = seconds,
  cpu_seconds = lapply(cpu_seconds, stats::median),
  keras_fit_vs_gpukeras_fit = arrays,
  keras_fit_vs_gpukeras_fit_dataset = dataset,
  meets_goal = list(keras_fit_vs_gpukeras_fit = arrays$median >= goal$keras_fit_vs_gpukeras_fit),
  notes = c(
    "seconds: median over rounds of wall-clock time; ratios: the median of the ratios within each round (the ways run back to back, in a rotating order), ci95 a bootstrap 95% interval of that median.",
    "gpukeras_fit gives R data to gpu_fit(): on JAX, rows that fit in half the device's free memory go there once (gpukeras.data.adapters' ResidentAdapter, each epoch's order drawn there), others to Keras as NumPy arrays (ArrayAdapter), shuffled by Keras with a per-epoch seed.",
    "gpukeras_fit_dataset trains on a gpu_dataset(), a tf.data pipeline, which JAX reads through TensorFlow.",
    "No GPU: JAX's CPU backend, with the model's compute and the input on the same cores."
  ),
  wall_seconds = NA_real_
)
result$wall_seconds <- round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
out <- write_result(result, "jax_input", mode)

cat(sprintf("\nmedians of %d rounds (%s), wall-clock:\n", rounds, result$machine$cpu))
cat(sprintf("  %-22s %7.3f s\n", names(result$seconds), unlist(result$seconds)), sep = "")
cat(sprintf("keras_fit / gpukeras_fit:         %s (goal >= %.1f)\n", interval(arrays), goal$keras_fit_vs_gpukeras_fit))
cat(sprintf("keras_fit / gpukeras_fit_dataset: %s\n", interval(dataset)))
cat("written to", out, "\n")
