# The hand-over of R data: what gpu_dataset() costs against the fastest one-pass R ->
# NumPy copy, and what building it and training cost end to end against Keras' own fit()
# on arrays converted as keras3 converts them, with the wait at the end of each fit.
#
# Data: a 60,000 x 784 double matrix (R stores it column-major, 359 MiB) and integer
# labels 0-9 (the index of the largest of the first 10 columns, so the MLP learns).
# In each round, in an order that rotates from round to round:
#   (1) one_pass_copy: np$ascontiguousarray(reticulate::r_to_py(x), dtype = "float32") and
#                      the labels as int32: the fastest single copy of R's memory into a
#                      C-ordered float32 array measured here;
#       keras3_copy:   reticulate::np_array(x, dtype = "float32", order = "C") and the labels:
#                      keras3's conversion, on every fit() call;
#   (2) gpu_dataset:   gpu_dataset(x, y, batch_size, seed = 1), and its two halves, timed
#                      apart: the R side (as_pipeline_data(): checks, no copy) and the core
#                      (pipeline.from_arrays(): the one copy, tensors, the tf.data pipeline);
#   (3) end to end, each with a fresh model (MLP 784-512-512-10, the same seed, compiled the
#       same), `epochs` epochs of batch_size rows:
#       keras_fit:     model$fit(np_array(x, "float32"), np_array(y, "int32"), epochs,
#                      batch_size), converting as keras3 does (the model's input dtype), the
#                      conversion timed in;
#       gpukeras_fit:  gpu_fit(model, gpu_dataset(x, y, batch_size, seed = 1), epochs) with
#                      gpu_fit()'s defaults (monitor on), building the dataset timed in.
#       Both also record their tail: the seconds from Keras' on_train_end (a Python callback
#       that reads the clock) to the call returning to R. Keras' own fit() tears its
#       iterators down there; gpu_fit() also builds its report.
# Ratios are taken within each round (the ways ran back to back), then their median, with
# a bootstrap 95% interval: gpu_dataset / one_pass_copy, goal <= 2; keras_fit /
# gpukeras_fit, goal >= 1.1; and no gpukeras_fit tail over 1 s in any round. Wall-clock
# time; the process's CPU time (user + system, all threads) is kept too: other work on the
# machine stretches it less than the wall-clock time. R's and Python's garbage is collected
# before each timed call, outside the time.
#
# Usage (from the repository root): Rscript bench/handover.R [--quick | --smoke]
# Writes bench/results/handover.json (handover-quick.json with --quick; a smoke run: see
# bench/lib/common.R).
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/lib/load.R")
source("bench/lib/common.R")
mode <- bench_mode()
as_pipeline_data <- utils::getFromNamespace("as_pipeline_data", "gpukeras")
handover_call <- utils::getFromNamespace("handover_call", "gpukeras")

code <- code_state() # before the run: the code measured, not what changed while it ran
rows <- if (mode$smoke) 1024L else 60000L
columns <- 784L
batch_size <- 128L
epochs <- if (mode$smoke) 1L else 2L
rounds <- if (mode$smoke) 1L else if (mode$quick) 5L else 15L
goal <- list(dataset_vs_one_pass_copy = 2, keras_fit_vs_gpukeras_fit = 1.1, gpukeras_fit_tail_seconds = 1)

keras <- gpu_keras()
np <- reticulate::import("numpy", convert = FALSE)
reticulate::py_run_string("
import time
import keras

class TrainEnd(keras.callbacks.Callback):
    '''When Keras' fit() called on_train_end (time.time()), and nothing else.'''

    def on_train_end(self, logs=None):
        self.at = time.time()
")
train_end <- reticulate::py$TrainEnd

set.seed(1)
x <- stats::runif(rows * columns)
dim(x) <- c(rows, columns) # dim<- on a fresh vector does not copy it
y <- max.col(x[, 1:10], ties.method = "first") - 1L
y_array <- array(y) # a vector crosses reticulate as a list; a 1-d array as a NumPy view

mlp <- function() {
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(
    keras$Input(shape = list(columns)),
    keras$layers$Dense(512L, activation = "relu"),
    keras$layers$Dense(512L, activation = "relu"),
    keras$layers$Dense(10L)
  ))
  model$compile(
    optimizer = "adam",
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE)
  )
  model
}

keras3_copy <- function(model = NULL) {
  dtype <- if (is.null(model)) "float32" else model$inputs[[1]]$dtype
  list(
    reticulate::np_array(x, dtype = dtype, order = "C"),
    reticulate::np_array(y, dtype = "int32", order = "C")
  )
}

# timed() of a fit, and its tail: from on_train_end to the call returning.
timed_fit <- function(fit) {
  clock <- train_end()
  took <- timed(fit(clock))
  c(took, tail = as.numeric(Sys.time()) - clock$at)
}

# Each way returns timed(); what it builds is dropped before the next way runs.
ways <- list(
  one_pass_copy = function() {
    timed(list(
      np$ascontiguousarray(reticulate::r_to_py(x), dtype = "float32"),
      np$ascontiguousarray(reticulate::r_to_py(y_array), dtype = "int32")
    ))
  },
  keras3_copy = function() timed(keras3_copy()),
  gpu_dataset = function() timed(gpu_dataset(x, y, batch_size = batch_size, seed = 1)),
  gpu_dataset_r_side = function() timed(as_pipeline_data(x, y, "error")),
  gpu_dataset_core = function() {
    data <- as_pipeline_data(x, y, "error")
    timed(handover_call(
      "dataset_from_arrays", data,
      list(copy = FALSE, x_dtype = "float32", batch_size = batch_size, seed = 1L)
    ))
  },
  keras_fit = function() {
    model <- mlp()
    timed_fit(function(clock) {
      arrays <- keras3_copy(model)
      model$fit(arrays[[1]], arrays[[2]],
        epochs = epochs, batch_size = batch_size, verbose = 0L,
        callbacks = list(clock)
      )
    })
  },
  gpukeras_fit = function() {
    model <- mlp()
    timed_fit(function(clock) {
      gpu_fit(model, gpu_dataset(x, y, batch_size = batch_size, seed = 1),
        epochs = epochs, verbose = 0, callbacks = clock
      )
    })
  }
)

measured <- run_rounds(ways, rounds)
seconds <- measured$seconds
cpu_seconds <- measured$cpu_seconds
tails <- measured$tail[c("keras_fit", "gpukeras_fit")]

dataset_vs_copy <- ratio_summary(seconds$gpu_dataset / seconds$one_pass_copy)
end_to_end <- ratio_summary(seconds$keras_fit / seconds$gpukeras_fit)
end_to_end_cpu <- ratio_summary(cpu_seconds$keras_fit / cpu_seconds$gpukeras_fit)

result <- list(
  benchmark = "handover",
  command = bench_command("bench/handover.R", mode),
  date = format(Sys.time(), "%Y-%m-%d"),
  quick = mode$quick,
  smoke = mode$smoke,
  machine = machine_facts(load_before),
  code = code,
  backend = keras$backend$backend(),
  versions = version_facts(),
  data = list(rows = rows, columns = columns, r_type = "double", r_mib = rows * columns * 8 / 2^20, float32_mib = rows * columns * 4 / 2^20),
  model = "MLP 784-512-512-10 (relu), adam, sparse categorical cross-entropy from logits",
  batch_size = batch_size,
  epochs = epochs,
  rounds = rounds,
  goal = goal,
  seconds = lapply(seconds, stats::median),
  seconds_rounds = seconds,
  cpu_seconds = lapply(cpu_seconds, stats::median),
  cpu_seconds_rounds = cpu_seconds,
  tail_seconds_rounds = tails,
  tail_seconds_max = lapply(tails, max),
  dataset_vs_one_pass_copy = dataset_vs_copy,
  dataset_vs_keras3_copy = ratio_summary(seconds$gpu_dataset / seconds$keras3_copy),
  keras_fit_vs_gpukeras_fit = end_to_end,
  keras_fit_vs_gpukeras_fit_cpu = end_to_end_cpu,
  meets_goal = list(
    dataset_vs_one_pass_copy = dataset_vs_copy$median <= goal$dataset_vs_one_pass_copy,
    keras_fit_vs_gpukeras_fit = end_to_end$median >= goal$keras_fit_vs_gpukeras_fit,
    gpukeras_fit_tail_seconds = max(tails$gpukeras_fit) <= goal$gpukeras_fit_tail_seconds
  ),
  notes = c(
    "seconds: median over rounds of wall-clock time; cpu_seconds: of the process's CPU time (user + system, all its threads); ratios: the median of the ratios within each round (the ways run back to back, in a rotating order), ci95 a bootstrap 95% interval of that median.",
    "one_pass_copy is np$ascontiguousarray(r_to_py(x), dtype = 'float32') and the labels as int32, the fastest single copy measured here; keras3_copy is reticulate::np_array() of x (float32, C order) and y (int32): what keras3's fit() pays on every call. keras_fit includes keras3_copy in the model's input dtype, as keras3 does; Keras then copies the arrays into tensors itself.",
    "gpukeras_fit runs gpu_fit() with its defaults (monitor on, steps_per_execution and jit_compile 'auto'), verbose = 0; gpu_dataset() is built inside the timed call.",
    "tail_seconds: from Keras calling on_train_end to the fit returning to R. TensorFlow 2.21 joins tf.data's autotuning thread when an iterator is dropped, and that join can wait out the thread's sleep (seconds, up to a minute: see pipeline._without_autotune_thread); gpu_dataset() pipelines run without that thread. Keras' own fit() on arrays builds its own tf.data pipeline with it.",
    "Without a GPU, tf.data's threads and the model's compute share the same CPU cores. Other processes on the machine change the speed from round to round (see loadavg_before/after and seconds_rounds)."
  ),
  wall_seconds = NA_real_
)
result$wall_seconds <- round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)

out <- write_result(result, "handover", mode)

cat(sprintf("\nmedians of %d rounds (%s), wall-clock and CPU:\n", rounds, result$machine$cpu))
cat(sprintf("  %-20s %7.3f s %7.3f s\n", names(result$seconds), unlist(result$seconds), unlist(result$cpu_seconds)), sep = "")
cat(sprintf(
  "gpu_dataset / one-pass copy:         %s (goal <= %.1f); / keras3's copy %s\nkeras fit / gpu_fit, %d epochs:       %s (goal >= %.1f); CPU time %s\nlongest tail (on_train_end -> return): keras fit %.2f s, gpu_fit %.2f s (goal <= %.0f s)\n",
  interval(dataset_vs_copy), goal$dataset_vs_one_pass_copy, interval(result$dataset_vs_keras3_copy),
  epochs, interval(end_to_end), goal$keras_fit_vs_gpukeras_fit, interval(end_to_end_cpu),
  max(tails$keras_fit), max(tails$gpukeras_fit), goal$gpukeras_fit_tail_seconds
))
cat(sprintf("wrote %s (%.0f s)\n", out, result$wall_seconds))
