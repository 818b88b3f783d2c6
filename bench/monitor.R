# The monitor's cost, seen from R: gpu_fit(monitor = TRUE) against monitor = FALSE.
#
# gpu_fit() measures while it trains (a step timer inside Keras' train step and
# two sampler threads: NVML where there is a GPU, /proc/stat for the host), and
# after training turns the samples into the report R prints. This script trains
# one model from R in alternating rounds, monitor on and off, and compares
#   * the steady-state epoch time: epochs after each fit's first (which traces
#     the step), timed by a Keras callback that only reads the clock at each
#     epoch's start and end (a Python callback: R code must not run inside
#     Keras' loop);
#   * the whole gpu_fit() call, as an R user waits for it: conversion, the
#     fit, building the report and the R object.
# overhead = median over rounds of (time with the monitor / without) - 1, for
# each. The bar (issue #5): epoch overhead < 1 % of throughput.
#
# Usage (from the repository root): Rscript bench/monitor.R [--quick | --smoke]
# Writes bench/results/monitor-r-<backend>-<device>[-quick].json (a smoke run: see
# bench/lib/common.R).
wall_started <- Sys.time()

source("bench/lib/load.R")
source("bench/lib/common.R")
mode <- bench_mode()
quick <- mode$quick

keras <- gpu_keras()
reticulate::py_run_string("
import time
import keras

class EpochClock(keras.callbacks.Callback):
    '''Seconds per epoch, and nothing else.'''

    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self.began = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.began)
")
epoch_clock <- reticulate::py$EpochClock

devices <- gpu_devices()
gpu_rows <- devices[devices$type == "GPU", , drop = FALSE]
on_gpu <- nrow(gpu_rows) > 0
device <- if (on_gpu) gpu_rows$name[[1]] else "CPU"
short <- if (on_gpu) tolower(strsplit(trimws(sub("NVIDIA", "", device)), " ")[[1]][1]) else "cpu"

# An MLP whose steps take milliseconds: short enough that a per-step cost would show.
sizes <- if (mode$smoke) {
  list(width = 64L, rows = 1024L, batch = 256L)
} else if (on_gpu) {
  list(width = 4096L, rows = 65536L, batch = 1024L)
} else {
  list(width = 512L, rows = 10240L, batch = 256L)
}
rounds <- if (mode$smoke) 1L else if (quick) 4L else 8L
epochs <- if (mode$smoke) 2L else if (quick) 3L else 4L

set.seed(1)
x <- matrix(stats::rnorm(sizes$rows * 256), ncol = 256)
y <- sample.int(10, sizes$rows, replace = TRUE) - 1L
keras$utils$set_random_seed(0L)
model <- keras$Sequential(list(
  keras$Input(shape = list(256L)),
  keras$layers$Dense(sizes$width, activation = "relu"),
  keras$layers$Dense(sizes$width, activation = "relu"),
  keras$layers$Dense(10L)
))
model$compile(
  optimizer = "adam",
  loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE)
)
data <- gpu_dataset(x, y, batch_size = sizes$batch, seed = 1)

run <- function(monitor) {
  clock <- epoch_clock()
  started <- Sys.time()
  fit <- gpu_fit(model, data, epochs = epochs, monitor = monitor, callbacks = clock, verbose = 0)
  call_seconds <- as.numeric(difftime(Sys.time(), started, units = "secs"))
  epoch_seconds <- unlist(clock$seconds)
  list(epoch = stats::median(epoch_seconds[-1]), call = call_seconds, monitor = fit$monitor)
}

invisible(run(TRUE))
invisible(run(FALSE)) # trace both ways of stepping first
on <- off <- list()
for (position in seq_len(rounds)) {
  order <- if (position %% 2 == 1) c(TRUE, FALSE) else c(FALSE, TRUE)
  for (monitor in order) {
    result <- run(monitor)
    if (monitor) on[[position]] <- result else off[[position]] <- result
  }
}
pick <- function(results, what) vapply(results, `[[`, numeric(1), what)
epoch_ratios <- pick(on, "epoch") / pick(off, "epoch")
call_ratios <- pick(on, "call") / pick(off, "call")
report <- on[[rounds]]$monitor
overhead <- stats::median(epoch_ratios) - 1
bar <- list(overhead = 0.01)

result <- list(
  benchmark = "monitor-r",
  command = bench_command("bench/monitor.R", mode),
  date = format(Sys.Date()),
  quick = quick,
  smoke = mode$smoke,
  machine = list(cores = parallel::detectCores(), device = device),
  backend = keras$backend$backend(),
  versions = list(
    r = as.character(getRversion()),
    reticulate = as.character(utils::packageVersion("reticulate")),
    keras = keras$`__version__`
  ),
  workload = list(
    model = sprintf("MLP 256-%d-%d-10", sizes$width, sizes$width),
    rows = sizes$rows,
    batch_size = sizes$batch,
    steps_per_epoch = ceiling(sizes$rows / sizes$batch),
    epochs_per_fit = epochs,
    step_time_mean_ms = report$step_time_mean_ms,
    input_wait_share = report$input_wait_share
  ),
  rounds = rounds,
  epoch_seconds_with_monitor = pick(on, "epoch"),
  epoch_seconds_without_monitor = pick(off, "epoch"),
  epoch_ratio_rounds = epoch_ratios,
  overhead = overhead,
  call_seconds_with_monitor = pick(on, "call"),
  call_seconds_without_monitor = pick(off, "call"),
  call_overhead = stats::median(call_ratios) - 1,
  bar = bar,
  meets_bar = overhead < bar$overhead,
  notes = c(
    "overhead: median over rounds of (median steady-state epoch time with the monitor / without) - 1; epochs after each fit's first; rounds alternate the order.",
    "call_overhead: the same for the whole gpu_fit() call from R, including the first epoch, the report and the R object.",
    "On TensorFlow the step timer hands Keras the batch it fetched, so Keras runs its per-batch step function rather than the one that reads the iterator in the graph (inst/python/gpukeras/timing.py): monitored epochs can come out a little faster as well as slower."
  ),
  wall_seconds = round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
)
out <- write_result(result, sprintf("monitor-r-%s-%s", result$backend, short), mode)
cat(sprintf(
  "%s, %s: step %.2f ms, monitor overhead %+.2f %% per epoch (bar < 1 %%), %+.2f %% per gpu_fit() call -> %s\n",
  device, result$backend, report$step_time_mean_ms, 100 * overhead, 100 * result$call_overhead, out
))
