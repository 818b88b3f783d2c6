# gpu_search()'s trials as populations (JAX, issue #61) against the same trials with a
# process per trial.
#
# On JAX gpu_search() asks Optuna for a batch of trials at a time (8, or the whole budget
# where nothing learns from completed trials) and trains those of one architecture as one
# population in one worker (R/search-population.R,
# search/search_population.py); with gpu_workers(population = FALSE) each trial trains in a
# fresh worker process (R/workers.R). This script runs the same 20-trial search over the
# learning rate alone (units fixed; sampler "random", whose draws depend on the trial's
# number, so both ways train the same trials with the same seeds; pruner "none", so both
# train every epoch) each way, in rounds whose order alternates, and measures
#   * time: the wall time of each gpu_search() call, each on a fresh study; ratio = median
#     over rounds of populations / processes. Goal (issue #61, 2 CPU cores): <= 0.5;
#   * that they agree: each trial's objective (val_loss at its last epoch) in the last
#     round's two searches, by trial number (the docs say within 1e-5 on a CPU).
#
# Data: 20,000 rows x 20 standard-normal features, two classes from a linear score plus
# noise (bench_data()); 20 % held out by gpu_search() (stratified, by the seed). Model:
# MLP 20-64-64-2 (relu, softmax), adam with the trial's learning rate (1e-4 to 1e-1, log);
# 5 epochs of batch 256 per trial (bench/r_on_gpu.R's search).
#
# With --tpe the sampler is TPE (pruner "none" still): populations then ask 8 trials at a
# time (20 trials: batches of 8, 8 and 4), the case of any search whose sampler or pruner
# learns from completed trials. TPE's first 10 trials are random draws by the trial's
# number, alike both ways; its later ones differ between the ways (a batch's trials are
# drawn before any of them completes), so the objectives are compared where the drawn
# learning rates are equal.
#
# With --units (issue #78) the search is over units too: 16 trials, units drawn from 16, 32,
# 64 and 128 (both hidden layers) with the learning rate, in two workers each way
# (gpu_workers(workers = 2), with population = FALSE for processes): the populations' batch
# is split by architecture, each group a task in a worker of its own (a group of one a
# process). Goal: never slower than the processes (ratio <= 1); trials/hour each way. With
# --quick, one round (after the warm-up) where the others run 3.
#
# Usage (from the repository root):
#   KERAS_BACKEND=jax Rscript bench/search_population.R [--quick | --smoke] [--tpe] [--units]
# Writes bench/results/search-population-<device>[-tpe][-units][-jax][-quick].json (a smoke run: see
# bench/lib/common.R). On TensorFlow both ways train a process per trial.
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/lib/load.R")
source("bench/lib/common.R")
source("bench/lib/workers.R")
mode <- bench_mode()
sampler <- if ("--tpe" %in% commandArgs(trailingOnly = TRUE)) "tpe" else "random"
units <- "--units" %in% commandArgs(trailingOnly = TRUE)
code <- code_state() # before the run: the code measured, not what changed while it ran

rows <- if (mode$smoke) 1000L else 20000L
trials <- if (mode$smoke) 2L else if (units) 16L else 20L
epochs <- if (mode$smoke) 1L else 5L
batch_size <- 256L
rounds <- if (mode$smoke || (mode$quick && units)) 1L else if (mode$quick) 3L else 5L
seed <- 1L
goal <- list(populations_vs_processes = if (units) 1 else 0.5, max_abs_value_difference = 1e-5)
space <- if (units) list(units = search_choice(16L, 32L, 64L, 128L)) else list()
workers <- if (units) 2L # NULL: gpu_workers()' default

data <- bench_data(rows)
keras <- gpu_keras()

model_fn <- function(params) {
  keras <- gpu_keras()
  hidden <- if (is.null(params$units)) 64L else params$units
  model <- keras$Sequential(list(
    keras$Input(shape = list(20L)),
    keras$layers$Dense(hidden, activation = "relu"),
    keras$layers$Dense(hidden, activation = "relu"),
    keras$layers$Dense(2L, activation = "softmax")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  model
}

last <- list()
search_way <- function(name, workers) {
  force(workers)
  function() {
    folder <- tempfile("bench-search-population-")
    on.exit(unlink(folder, recursive = TRUE))
    # each search compiles its trials' programs itself, as bench/search.R's do
    gpu_compile_cache(clear = TRUE)
    took <- timed(found <- gpu_search(
      model_fn, data, space = space, learning_rate = search_float(1e-4, 1e-1, log = TRUE),
      trials = trials, sampler = sampler, pruner = "none", seed = seed, epochs = epochs,
      batch_size = batch_size, storage = folder, workers = workers
    ))
    found$best$path <- NULL # removed with its folder
    last[[name]] <<- found
    took
  }
}
measured <- run_rounds(list(
  populations = search_way("populations", gpu_workers(workers = workers)),
  processes = search_way("processes", gpu_workers(workers = workers, population = FALSE))
), rounds, mode)
ratio <- ratio_summary(measured$seconds$populations / measured$seconds$processes)

by_number <- function(search) {
  columns <- intersect(c("number", "units", "learning_rate", "value", "state"), names(search$trials))
  search$trials[order(search$trials$number), columns]
}
populations <- by_number(last$populations)
processes <- by_number(last$processes)
same_rate <- populations$learning_rate == processes$learning_rate
agreement <- list(
  same_trials = identical(populations$number, processes$number) && all(same_rate),
  trials_compared = sum(same_rate),
  max_abs_value_difference = max(abs(populations$value - processes$value)[same_rate]),
  states = list(populations = as.list(table(populations$state)), processes = as.list(table(processes$state)))
)

machine <- machine_facts(load_before)
device <- if (identical(machine$gpu, "none")) paste("CPU:", machine$cpu) else machine$gpu[[1]]
short <- if (identical(machine$gpu, "none")) "cpu" else "gpu"
result <- list(
  benchmark = "search_population",
  command = paste(
    bench_command("bench/search_population.R", mode), if (sampler == "tpe") "--tpe", if (units) "--units"
  ),
  date = format(Sys.time(), "%Y-%m-%d"),
  quick = mode$quick,
  smoke = mode$smoke,
  device = device,
  machine = machine,
  code = code,
  backend = keras$backend$backend(),
  versions = version_facts(),
  workload = list(
    rows = rows, features = 20L, classes = 2L, trials = trials, seed = seed, sampler = sampler, pruner = "none",
    space = paste0(
      if (units) "units: search_choice(16, 32, 64, 128); ", "learning_rate: search_float(1e-4, 1e-1, log = TRUE)"
    ),
    model = sprintf(
      "MLP 20-%s-2 (relu, softmax), adam, sparse categorical cross-entropy, accuracy", if (units) "u-u" else "64-64"
    ),
    workers = if (is.null(workers)) "gpu_workers()' default" else workers,
    epochs = epochs, batch_size = batch_size, objective = "val_loss (20 % held out)"
  ),
  trained = list(populations = last$populations$trained, populations_why = last$populations$trained_why, processes = last$processes$trained),
  rounds = rounds,
  goal = goal,
  seconds = lapply(measured$seconds, stats::median),
  trials_per_hour = lapply(measured$seconds, function(seconds) round(trials / stats::median(seconds) * 3600)),
  seconds_rounds = measured$seconds,
  cpu_seconds_rounds = measured$cpu_seconds,
  populations_vs_processes = ratio,
  agreement = agreement,
  trials = list(populations = populations, processes = processes),
  meets_goal = list(
    populations_vs_processes = ratio$median <= goal$populations_vs_processes && identical(last$populations$trained, "populations"),
    agreement = (agreement$same_trials || sampler == "tpe") &&
      agreement$max_abs_value_difference <= goal$max_abs_value_difference
  ),
  notes = c(
    "seconds: wall-clock of each gpu_search() call (call to return), each on a fresh study in a temporary folder, after one warm-up of each way (run_rounds()); ratios are per round, their median with a bootstrap 95% interval. cpu_seconds: this session's CPU time only (the workers' is not in it).",
    "populations: gpu_search()'s default workers (gpu_workers(population = \"auto\"): on JAX the trials asked a batch at a time, the whole budget with the random sampler and no pruner, 8 at a time with TPE, each batch trained as one population in a worker of its own, a short last batch padded to 8 members); processes: gpu_workers(population = FALSE), a fresh worker process per trial.",
    "agreement: the last round's two searches, trial by trial: the same numbers and learning rates (the random sampler draws by the trial's number), and their objectives' largest difference where the learning rates are equal (TPE's later draws differ between the ways: trials_compared counts those compared).",
    if (units) paste(
      "--units: the populations' batch split by architecture (the core's search/search_population.py next_task()), each",
      "group a task for one of the 2 workers, a group of one a process of its own; processes: gpu_workers(workers = 2,",
      "population = FALSE)."
    ),
    "The machine is shared with other engineers' work (2 cores): see the load averages."
  ),
  wall_seconds = NA_real_
)
result$wall_seconds <- round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
name <- paste0("search-population-", short, if (sampler == "tpe") "-tpe", if (units) "-units")
out <- write_result(result, on_backend(name, result$backend), mode)

cat(sprintf(
  "\n%d-trial search, populations / a process per trial (%d epochs): %s (goal <= %.1f); medians %.1f s vs %.1f s (%s)\n",
  trials, epochs, interval(ratio), goal$populations_vs_processes, result$seconds$populations, result$seconds$processes,
  last$populations$trained
))
cat(sprintf(
  "objectives, populations vs processes: same trials %s (%d compared), max difference %.2g\n", agreement$same_trials,
  agreement$trials_compared, agreement$max_abs_value_difference
))
cat(sprintf("wrote %s (%.0f s)\n", out, result$wall_seconds))
