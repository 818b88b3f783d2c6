# Device-resident training on JAX, from R: gpu_fit() against Keras' own fit() (issue #23).
#
# Data: 102,400 x 20 doubles (R matrix) and a 0/1 label, an MLP 20-128-128-2 (relu,
# logits, adam, sparse categorical cross-entropy), batch 256, on the JAX backend, from R.
# Each way builds a fresh model (same seed), trains one untimed warm-up epoch (tracing and
# compiling), then 2 timed epochs; the ways run back to back in an order that rotates
# from round to round:
#   keras_fit_spe1/8/32/128: model$fit() on np_array(x, "float32") as keras3 converts
#                            (the conversion timed in), steps_per_execution 1, 8, 32, 128;
#   gpukeras_fit:            gpu_fit(model, list(x = x, y = y), batch_size = 256), its
#                            defaults otherwise (the data on the device, k = "auto",
#                            the monitor on);
#   gpukeras_fit_dataset:    gpu_fit() of a gpu_dataset(x, y, batch_size = 256, seed = 1)
#                            made before the warm-up;
#   gpukeras_fit_order_on_device: gpukeras_fit with each epoch's order drawn by jax.random
#                            on the device, as on a GPU (and on the CPU before issue #63),
#                            instead of by NumPy on the host (data/adapters/resident.py,
#                            draws_on_host): what the host's draw gains on the CPU.
# Ratios are taken within each round, then their median with a bootstrap 95% interval:
# Keras' default (steps_per_execution 1) over gpu_fit(), goal >= 1.5; Keras' best
# steps_per_execution in that round over gpu_fit(), goal >= 1.2; the same for the dataset;
# and the order drawn on the device over on the host (no goal).
#
# Usage (from the repository root): Rscript bench/resident.R [--quick | --smoke]
# Writes bench/results/resident.json (resident-quick.json with --quick; a smoke run: see
# bench/lib/common.R).
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")
Sys.setenv(KERAS_BACKEND = "jax") # before gpukeras starts Python

source("bench/lib/load.R")
source("bench/lib/common.R")
mode <- bench_mode()

code <- code_state()
rows <- if (mode$smoke) 2048L else 102400L
columns <- 20L
batch_size <- 256L
epochs <- 2L
rounds <- if (mode$smoke) 1L else if (mode$quick) 3L else 9L
spes <- c(1L, 8L, 32L, 128L)
goal <- list(vs_keras_default = 1.5, vs_keras_best = 1.2)

keras <- gpu_keras()
stopifnot(keras$backend$backend() == "jax")

set.seed(1)
x <- matrix(stats::rnorm(rows * columns), rows, columns)
y <- as.integer(x[, 1] * x[, 2] + sin(2 * x[, 3]) > 0)

mlp <- function(spe = 1L) {
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(columns)),
    keras$layers$Dense(128L, activation = "relu"),
    keras$layers$Dense(128L, activation = "relu"),
    keras$layers$Dense(2L)
  ))
  model$compile(
    optimizer = "adam", steps_per_execution = spe,
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE)
  )
  model
}

keras_way <- function(spe) {
  force(spe)
  function() {
    model <- mlp(spe)
    fit <- function(epochs) {
      model$fit(
        reticulate::np_array(x, dtype = "float32", order = "C"),
        reticulate::np_array(y, dtype = "int32", order = "C"),
        epochs = epochs, batch_size = batch_size, verbose = 0L
      )
    }
    fit(1L)
    timed(fit(epochs))
  }
}

ways <- stats::setNames(lapply(spes, keras_way), sprintf("keras_fit_spe%d", spes))
ways$gpukeras_fit <- function() {
  model <- mlp()
  gpu_fit(model, list(x = x, y = y), epochs = 1, batch_size = batch_size, verbose = 0)
  took <- timed(fit <- gpu_fit(model, list(x = x, y = y), epochs = epochs, batch_size = batch_size, verbose = 0))
  c(took, k = fit$settings$steps_per_execution)
}
ways$gpukeras_fit_dataset <- function() {
  model <- mlp()
  data <- gpu_dataset(x, y, batch_size = batch_size, seed = 1)
  gpu_fit(model, data, epochs = 1, verbose = 0)
  took <- timed(fit <- gpu_fit(model, data, epochs = epochs, verbose = 0))
  c(took, k = fit$settings$steps_per_execution)
}

# The same fit with the order drawn on the device (the GPU's way), for the host draw's gain.
resident_data <- reticulate::import("gpukeras.data.adapters.resident")
host_rule <- resident_data$draws_on_host
ways$gpukeras_fit_order_on_device <- function() {
  resident_data$draws_on_host <- reticulate::py_eval("lambda jax: False")
  on.exit(resident_data$draws_on_host <- host_rule)
  ways$gpukeras_fit()
}

measured <- run_rounds(ways, rounds, mode)
seconds <- measured$seconds
keras_names <- sprintf("keras_fit_spe%d", spes)
keras_best <- do.call(pmin, unname(seconds[keras_names]))
best_spe <- spes[apply(do.call(cbind, unname(seconds[keras_names])), 1, which.min)]

ratios <- list(
  arrays_vs_keras_default = ratio_summary(seconds$keras_fit_spe1 / seconds$gpukeras_fit),
  arrays_vs_keras_best = ratio_summary(keras_best / seconds$gpukeras_fit),
  dataset_vs_keras_default = ratio_summary(seconds$keras_fit_spe1 / seconds$gpukeras_fit_dataset),
  dataset_vs_keras_best = ratio_summary(keras_best / seconds$gpukeras_fit_dataset),
  order_on_device_vs_on_host = ratio_summary(seconds$gpukeras_fit_order_on_device / seconds$gpukeras_fit)
)

result <- list(
  benchmark = "resident",
  command = bench_command("bench/resident.R", mode),
  date = format(Sys.time(), "%Y-%m-%d"),
  quick = mode$quick,
  smoke = mode$smoke,
  machine = machine_facts(load_before),
  code = code,
  backend = keras$backend$backend(),
  versions = c(version_facts(), list(jax = reticulate::import("jax")$`__version__`)),
  data = list(rows = rows, columns = columns),
  model = "MLP 20-128-128-2 (relu, logits), adam, sparse categorical cross-entropy",
  batch_size = batch_size,
  epochs_timed = epochs,
  rounds = rounds,
  goal = goal,
  seconds = lapply(seconds, stats::median),
  seconds_rounds = seconds,
  cpu_seconds = lapply(measured$cpu_seconds, stats::median),
  keras_best_steps_per_execution = best_spe,
  gpukeras_steps_per_dispatch = list(
    arrays = measured$k$gpukeras_fit, dataset = measured$k$gpukeras_fit_dataset,
    order_on_device = measured$k$gpukeras_fit_order_on_device
  ),
  ratios = ratios,
  meets_goal = list(
    arrays_vs_keras_default = ratios$arrays_vs_keras_default$median >= goal$vs_keras_default,
    arrays_vs_keras_best = ratios$arrays_vs_keras_best$median >= goal$vs_keras_best,
    dataset_vs_keras_default = ratios$dataset_vs_keras_default$median >= goal$vs_keras_default,
    dataset_vs_keras_best = ratios$dataset_vs_keras_best$median >= goal$vs_keras_best
  ),
  notes = c(
    "seconds: median over rounds of the wall-clock time of 2 epochs after an untimed warm-up epoch on the same model; ratios: the median of the ratios within each round (the ways run back to back, in a rotating order), ci95 a bootstrap 95% interval of that median.",
    "keras best: in each round, the fastest of Keras' fit() at steps_per_execution 1, 8, 32 and 128.",
    "gpukeras: the rows on the device (gpukeras.data.adapters' ResidentAdapter, trained by gpukeras.train.resident), each epoch's order drawn by NumPy on the host and copied there (on a GPU: drawn on the device), k steps per dispatch in calls of a compiled loop of 8 steps; k chosen by gpu_fit() (steps_per_execution 'auto'). gpukeras_fit_order_on_device: the same with the order drawn by jax.random on the device.",
    "No GPU: JAX's CPU backend, with the model's compute and Keras' host loop on the same 2 cores."
  ),
  wall_seconds = NA_real_
)
result$wall_seconds <- round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
out <- write_result(result, "resident", mode)

cat(sprintf("\nmedians of %d rounds (%s), wall-clock:\n", rounds, result$machine$cpu))
cat(sprintf("  %-22s %7.3f s\n", names(result$seconds), unlist(result$seconds)), sep = "")
for (name in names(ratios)) {
  wanted <- if (grepl("default", name)) goal$vs_keras_default else if (grepl("best", name)) goal$vs_keras_best
  said <- if (is.null(wanted)) "" else sprintf(" (goal >= %.1f)", wanted)
  cat(sprintf("%-26s %s%s\n", name, interval(ratios[[name]]), said))
}
cat("written to", out, "\n")
