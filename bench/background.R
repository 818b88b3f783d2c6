# The cost of gpu_fit(background = TRUE), and the parent's memory over ten of them.
#
# A background fit starts one R process (the training child, a callr session,
# which starts Python and TensorFlow; or takes the standby that did), carries
# the model (.keras) and the data (.npy files the child memory-maps) and, at the end, loads the
# trained weights into the parent's model. This script measures
#   * cost: the wall time of gpu_job_wait(gpu_fit(background = TRUE)) against
#     the same gpu_fit() in the session, several epochs, in alternating rounds;
#     ratio = median over rounds of background / in-session, with a bootstrap
#     95 % interval, and the fixed cost (median difference in seconds), from
#     which the cost for a fit of one minute follows (the bar: <= 10 %);
#   * start-up: seconds from gpu_fit() returning to the child's first batch;
#   * memory: the parent's resident memory (VmRSS) before and after each of ten
#     background fits in a loop (and NVML memory used where there is a GPU).
#
# Usage (from the repository root): Rscript bench/background.R [--quick | --smoke]
# Writes bench/results/background[-quick].json (a smoke run: see bench/lib/common.R). The child loads gpukeras the
# way this session did (the source tree here).
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/lib/load.R")
source("bench/lib/common.R")
mode <- bench_mode()
quick <- mode$quick

keras <- gpu_keras()
rss_mib <- function() {
  gc()
  as.numeric(gsub("\\D", "", grep("^VmRSS:", readLines("/proc/self/status"), value = TRUE))) / 1024
}
nvml_used_mib <- function() {
  check <- tryCatch(gpu_devices(), error = function(e) NULL)
  used <- check$memory_used_mib[check$type == "GPU"]
  if (length(used)) sum(used) else NULL
}

set.seed(1)
rows <- if (mode$smoke) 512L else 20000L
x <- matrix(stats::rnorm(rows * 64), ncol = 64)
y <- sample.int(10, rows, replace = TRUE) - 1L
keras$utils$set_random_seed(0L)
model <- keras$Sequential(list(
  keras$Input(shape = list(64L)),
  keras$layers$Dense(256L, activation = "relu"),
  keras$layers$Dense(256L, activation = "relu"),
  keras$layers$Dense(10L)
))
model$compile(optimizer = "adam", loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE))
data <- list(x = x, y = y)
epochs <- if (mode$smoke) 1L else if (quick) 4L else 20L
rounds <- if (mode$smoke) 1L else if (quick) 3L else 5L

in_session <- function() {
  started <- Sys.time()
  gpu_fit(model, data, epochs = epochs, batch_size = 64, seed = 1, verbose = 0)
  as.numeric(difftime(Sys.time(), started, units = "secs"))
}
in_background <- function(epochs_here = epochs) {
  started <- Sys.time()
  job <- gpu_fit(model, data, epochs = epochs_here, batch_size = 64, seed = 1, verbose = 0, background = TRUE)
  first_batch <- NA_real_
  repeat {
    status <- gpu_job_status(job)
    if (is.na(first_batch) && identical(status$state, "running") && isTRUE(status$batch > 0 || status$epoch > 1)) {
      first_batch <- as.numeric(difftime(Sys.time(), started, units = "secs"))
    }
    if (status$state %in% c("done", "failed", "cancelled")) break
    Sys.sleep(0.1)
  }
  gpu_job_wait(job)
  c(wall = as.numeric(difftime(Sys.time(), started, units = "secs")), first_batch = first_batch)
}

invisible(in_session()) # trace the step once in this session
session_seconds <- background_seconds <- first_batch_seconds <- numeric()
for (position in seq_len(rounds)) {
  order <- if (position %% 2 == 1) c("session", "background") else c("background", "session")
  for (way in order) {
    if (way == "session") {
      session_seconds[position] <- in_session()
    } else {
      timed <- in_background()
      background_seconds[position] <- timed[["wall"]]
      first_batch_seconds[position] <- timed[["first_batch"]]
    }
  }
}
ratios <- background_seconds / session_seconds
fixed_seconds <- stats::median(background_seconds - session_seconds)

# Ten background fits in a loop: the parent's memory after each.
loop_fits <- if (mode$smoke) 0L else 10L
rss <- rss_mib()
nvml <- list(nvml_used_mib())
for (i in seq_len(loop_fits)) {
  in_background(1L)
  rss <- c(rss, rss_mib())
  nvml <- c(nvml, list(nvml_used_mib()))
}

result <- list(
  benchmark = "background",
  command = bench_command("bench/background.R", mode),
  date = format(Sys.Date()),
  quick = quick,
  code = code_state(),
  machine = machine_facts(load_before),
  versions = version_facts(),
  backend = keras$backend$backend(),
  workload = list(
    model = "MLP 64-256-256-10", rows = rows, batch_size = 64L,
    steps_per_epoch = ceiling(rows / 64), epochs_per_fit = epochs
  ),
  rounds = rounds,
  session_seconds = session_seconds,
  background_seconds = background_seconds,
  ratio_rounds = ratios,
  ratio_median = stats::median(ratios),
  ratio_interval = median_interval(ratios),
  fixed_cost_seconds = fixed_seconds,
  cost_for_one_minute_fit = fixed_seconds / 60,
  bar = list(cost_for_one_minute_fit = 0.10),
  meets_bar = fixed_seconds / 60 <= 0.10,
  first_batch_seconds = first_batch_seconds,
  loop = list(
    fits = loop_fits,
    epochs_per_fit = 1L,
    parent_rss_mib = round(rss, 1),
    parent_rss_growth_mib = round(rss[length(rss)] - rss[1], 1),
    nvml_memory_used_mib = nvml
  ),
  notes = c(
    "ratio: wall time of gpu_job_wait(gpu_fit(background = TRUE)) over the same gpu_fit() in the session, per round; rounds alternate the order.",
    "fixed_cost_seconds: median over rounds of (background - in-session) seconds: starting the child (R, Python, TensorFlow), carrying the model and data, loading the weights back. cost_for_one_minute_fit = fixed_cost_seconds / 60.",
    "first_batch_seconds: from calling gpu_fit(background = TRUE) to the child's progress file showing a trained batch (read every 0.1 s).",
    "loop: the parent's VmRSS after gc() before the first and after each of ten background fits; nvml_memory_used_mib is null without a GPU."
  ),
  wall_seconds = round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
)
out <- write_result(result, "background", mode)
cat(sprintf(
  "background fit: %.2fx the in-session wall time [%.2f-%.2f], fixed cost %.1f s (%.0f %% of a 1-minute fit), first batch after %.1f s; parent RSS %+.1f MiB over %d fits -> %s\n",
  result$ratio_median, result$ratio_interval[1], result$ratio_interval[2], fixed_seconds,
  100 * fixed_seconds / 60, stats::median(first_batch_seconds), result$loop$parent_rss_growth_mib, loop_fits, out
))
