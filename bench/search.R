# gpu_search() with pruning against the same search without it, and the start of each
# trial's fresh worker process.
#
# gpu_search() asks Optuna for each trial's parameters and runs every trial in a fresh
# worker R process (R/workers.R: on a machine without a GPU one slot, which readies the
# next process while its trial trains); the pruner stops a trial whose objective at an
# epoch is worse than the median of the earlier trials' at that epoch (pruner =
# "median", the default: after 5 trials, from the first epoch); "asha" (Optuna's
# successive halving: at epochs 2 and 5 only the best quarter of the trials that got there
# goes on) and "hyperband" (brackets of it) stop more. This script runs the same 20-trial
# search (same data, space, seed: the sampler proposes the same first trials, each
# trial gets the same seed) with each pruner and with pruner = "none", in rounds
# whose order alternates, and measures, for each pruner against none,
#   * time: wall time of each gpu_search() call; ratio = median over rounds of
#     pruned / unpruned. Goal: <= 0.6;
#   * quality: each search's best val_loss, and (pruned - unpruned) / unpruned.
#     Goal: the pruned search's best within 2 % of the unpruned one's;
#   * how many trials were pruned, and the epochs trained in all;
#   * overhead of a fresh worker per trial: for each trial after a search's first, from
#     its task's submission (given to a process that was readied while
#     the previous trial trained) to the start of its first training step, and its parts
#     (see bench/lib/workers.R). Goal: <= 1 s. And what of it the fresh worker adds: each
#     trial of the last search started again in this session (model_fn and gpu_fit() to
#     the first step), its overhead less that: a new model's building, and on JAX its
#     compiling, cost a fit in any process.
#
# Data: 20,000 rows x 20 standard-normal features, two classes from a linear score plus
# noise (bench_data()); 20 % held out for validation by gpu_search() (stratified, by the
# seed). Model: MLP 20-(units x layers)-2, dropout, adam(learning_rate); space: units
# 8-256 (log), layers 1-3, dropout 0-0.5, learning_rate 1e-5-1e-1 (log). 10 epochs of batch
# 32 (gpu_fit()'s default) per trial; objective val_loss.
#
# Usage (from the repository root): [KERAS_BACKEND=jax] Rscript bench/search.R [--quick | --smoke]
# Writes bench/results/search-<device>[-jax][-quick].json (a smoke run: see bench/lib/common.R).
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/lib/load.R")
source("bench/lib/common.R")
source("bench/lib/workers.R")
mode <- bench_mode()
code <- code_state() # before the run: the code measured, not what changed while it ran

rows <- if (mode$smoke) 1000L else 20000L
trials <- if (mode$smoke) 1L else 20L
epochs <- if (mode$smoke) 1L else 10L
batch_size <- 32L
rounds <- if (mode$smoke) 1L else if (mode$quick) 1L else 2L
seed <- 1L
goal <- list(pruned_vs_unpruned_seconds = 0.6, best_relative_difference = 0.02, overhead_seconds = 1)
# Other processes' share of the cores (a virtual machine's stolen time too) over which a
# search's time measures the machine rather than the search: one such search on 2 cores
# took 1.5x the same search an hour before (at 23 % against 1 %; 2026-11-26).
foreign_limit <- 0.1

data <- bench_data(rows)
keras <- gpu_keras()
session_pid <- Sys.getpid()
probe_dir <- tempfile("bench-search-probe-")

model_fn <- function(params) {
  worker_probe_begin(probe_dir, session_pid)
  keras <- gpu_keras()
  layers <- list(keras$Input(shape = list(20L)))
  for (i in seq_len(params$layers)) {
    layers <- c(layers, keras$layers$Dense(as.integer(params$units), activation = "relu"), keras$layers$Dropout(params$dropout))
  }
  model <- keras$Sequential(c(layers, keras$layers$Dense(2L, activation = "softmax")))
  model$compile(
    optimizer = keras$optimizers$Adam(learning_rate = params$learning_rate),
    loss = "sparse_categorical_crossentropy", metrics = list("accuracy")
  )
  worker_probe_end(model)
}
space <- list(
  units = search_int(8, 256, log = TRUE),
  layers = search_int(1, 3),
  dropout = search_float(0, 0.5),
  learning_rate = search_float(1e-5, 1e-1, log = TRUE)
)

runs <- list()
best_value <- function(best) if (is.null(best$value)) NA_real_ else best$value
search <- function(pruner, trials_here = trials, epochs_here = epochs, record = TRUE) {
  probe_dir <<- tempfile("bench-search-probe-")
  dir.create(probe_dir)
  on.exit(unlink(probe_dir, recursive = TRUE), add = TRUE)
  recorder <- probe_session_start()
  on.exit(probe_session_stop(), add = TRUE)
  # Each search starts without what the session's earlier ones compiled (on JAX, kept in
  # the compilation cache): the second search of a round would otherwise load the
  # programs of the trials both draw, and the ratio compares one search with another.
  gpu_compile_cache(clear = TRUE)
  began <- as.numeric(Sys.time())
  cpu_before <- cpu_snapshot()
  took <- timed(found <- gpu_search(
    model_fn, data, space,
    trials = trials_here, pruner = pruner, seed = seed, epochs = epochs_here, batch_size = batch_size,
    # a process per trial, what this benchmark measures (on JAX, populations are issue #61's)
    workers = gpu_workers(population = FALSE)
  ))
  foreign <- foreign_cpu(cpu_before, cpu_snapshot(), took[["wall"]])
  if (record) {
    fits <- probe_fits(recorder, probe_dir, began)
    fits$run <- length(runs) + 1L
    fits$pruner <- pruner
    runs[[length(runs) + 1L]] <<- list(
      pruner = pruner, seconds = took[["wall"]], cpu_seconds = took[["cpu"]], fits = fits,
      time_split = time_split(fits, took[["wall"]]),
      trials = found$trials, best = found$best[c("number", "params", "value")], workers = found$workers, validation_rows = found$validation_rows,
      loadavg_after = readLines("/proc/loadavg"), foreign_cpu_seconds = foreign[["foreign_cpu_seconds"]], foreign_share = foreign[["foreign_share"]]
    )
  }
  took
}

# Warm-up (this session's Python, Optuna, SQLite): one short trial, not measured.
if (!mode$smoke) invisible(search("none", trials_here = 1L, epochs_here = 1L, record = FALSE))
# each against "none"; a smoke run shows the comparison runs with the default alone
pruners <- if (mode$smoke) "median" else c("median", "asha", "hyperband")
for (round in seq_len(rounds)) {
  order <- if (round %% 2 == 1) c(pruners, "none") else rev(c(pruners, "none"))
  for (pruner in order) {
    search(pruner)
    run <- runs[[length(runs)]]
    cat(sprintf(
      "round %d, pruner %-9s: %6.1f s, best %.5f, %d pruned, %d failed; other processes %.0f %% of the cores%s\n", round, pruner, run$seconds,
      best_value(run$best), sum(run$trials$state == "pruned"), sum(run$trials$state == "failed"), 100 * run$foreign_share,
      if (run$foreign_share > foreign_limit) " (over 10 %: its time is not this search's alone)" else ""
    ))
  }
}

by_pruner <- function(pruner, what) lapply(Filter(function(r) r$pruner == pruner, runs), `[[`, what)
split_of <- function(pruner, part) vapply(by_pruner(pruner, "time_split"), `[[`, 0, part)
epochs_of <- function(pruner) vapply(by_pruner(pruner, "trials"), function(t) sum(t$epochs, na.rm = TRUE), numeric(1))
# One pruner's searches against the unpruned ones of the same rounds.
against_none <- function(pruner) {
  seconds <- list(pruned = unlist(by_pruner(pruner, "seconds")), none = unlist(by_pruner("none", "seconds")))
  best <- list(pruned = vapply(by_pruner(pruner, "best"), best_value, numeric(1)), none = vapply(by_pruner("none", "best"), best_value, numeric(1)))
  # less the probe's own time in the workers (bench/lib/workers.R): the benchmark's, not gpu_search()'s
  probe <- list(pruned = split_of(pruner, "probe"), none = split_of("none", "probe"))
  # val_loss is minimized: a positive difference is a worse best with pruning
  relative <- (best$pruned - best$none) / abs(best$none)
  list(
    seconds = seconds, best = best,
    ratio = ratio_summary(seconds$pruned / seconds$none),
    ratio_without_probe = ratio_summary((seconds$pruned - probe$pruned) / (seconds$none - probe$none)),
    # The ratio if trials cost only their training: pruning's own saving.
    training_ratio = ratio_summary(split_of(pruner, "training") / split_of("none", "training")),
    relative_rounds = relative, relative = stats::median(relative),
    pruned = vapply(by_pruner(pruner, "trials"), function(t) sum(t$state == "pruned"), integer(1)),
    epochs = epochs_of(pruner)
  )
}
compared <- lapply(stats::setNames(pruners, pruners), against_none)
meets <- function(one) {
  one$ratio$median <= goal$pruned_vs_unpruned_seconds && isTRUE(one$relative <= goal$best_relative_difference)
}
# the default pruner's, as this benchmark reported before it compared the others
median_pruner <- compared$median
seconds <- list(median = median_pruner$seconds$pruned, none = median_pruner$seconds$none)
best <- list(median = median_pruner$best$pruned, none = median_pruner$best$none)
ratio <- median_pruner$ratio
ratio_without_probe <- median_pruner$ratio_without_probe
relative <- median_pruner$relative_rounds
pruned <- median_pruner$pruned
epochs_trained <- list(median = median_pruner$epochs, none = epochs_of("none"))
fits <- do.call(rbind, lapply(runs, `[[`, "fits"))
training_ratio <- median_pruner$training_ratio
overhead <- overhead_summary(fits)
# The last search's trials started again in this session: what a fresh worker adds
last <- runs[[length(runs)]]
take <- function(rows) list(x = data$x[rows, , drop = FALSE], y = data$y[rows])
starts <- session_starts(
  model_fn, last$trials, names(space), take(-last$validation_rows), take(last$validation_rows), batch_size
)
fresh <- fresh_overhead(last$fits, starts)
overhead_by_pruner <- lapply(list(median = "median", none = "none"), function(p) overhead_summary(fits[fits$pruner == p, , drop = FALSE]))

machine <- machine_facts(load_before)
device <- if (identical(machine$gpu, "none")) paste("CPU:", machine$cpu) else machine$gpu[[1]]
short <- if (identical(machine$gpu, "none")) "cpu" else "gpu"
result <- list(
  benchmark = "search",
  command = bench_command("bench/search.R", mode),
  date = format(Sys.time(), "%Y-%m-%d"),
  quick = mode$quick,
  smoke = mode$smoke,
  device = device,
  machine = machine,
  code = code,
  backend = keras$backend$backend(),
  versions = c(version_facts(), optuna = reticulate::import("optuna")$`__version__`),
  workload = list(
    rows = rows, features = 20L, classes = 2L, trials = trials,
    validation = "20 % of the rows held out by gpu_search() (stratified by class, by the seed)",
    epochs = epochs, batch_size = batch_size, seed = seed, sampler = "tpe", objective = "val_loss",
    model = "MLP 20-(units x layers, relu, dropout)-2 (softmax), adam(learning_rate), sparse categorical cross-entropy",
    space = "units search_int(8, 256, log = TRUE), layers search_int(1, 3), dropout search_float(0, 0.5), learning_rate search_float(1e-5, 1e-1, log = TRUE)"
  ),
  workers = runs[[length(runs)]]$workers,
  rounds = rounds,
  goal = goal,
  seconds = lapply(seconds, stats::median),
  seconds_rounds = seconds,
  pruned_vs_unpruned_seconds = ratio,
  pruned_vs_unpruned_seconds_without_probe = ratio_without_probe,
  time_split = lapply(runs, function(r) c(list(pruner = r$pruner), r$time_split)),
  pruned_vs_unpruned_training_seconds = training_ratio,
  best_value = lapply(best, stats::median),
  best_value_rounds = best,
  best_relative_difference_rounds = relative,
  best_relative_difference = stats::median(relative),
  best_params = lapply(runs, function(r) c(list(pruner = r$pruner), r$best)),
  # every pruner against none (the fields above are the median pruner's)
  pruners = lapply(compared, function(one) {
    list(
      pruned_vs_unpruned_seconds = one$ratio, pruned_vs_unpruned_seconds_without_probe = one$ratio_without_probe,
      pruned_vs_unpruned_training_seconds = one$training_ratio, seconds_rounds = one$seconds$pruned, best_value_rounds = one$best$pruned,
      best_relative_difference = one$relative, pruned_trials_rounds = one$pruned, epochs_trained_rounds = one$epochs,
      meets_goal = meets(one)
    )
  }),
  pruned_trials_rounds = pruned,
  epochs_trained_rounds = epochs_trained,
  overhead_seconds = overhead,
  overhead_seconds_by_pruner = overhead_by_pruner,
  overhead_beyond_session_seconds = fresh,
  trials = lapply(runs, function(r) c(list(pruner = r$pruner), lapply(r$trials, function(v) if (is.numeric(v)) round(v, 5) else v))),
  fits = lapply(runs, function(r) c(list(pruner = r$pruner), lapply(r$fits[setdiff(names(r$fits), c("run", "pruner"))], function(v) if (is.numeric(v)) round(v, 3) else v))),
  loadavg_after_each_search = vapply(runs, `[[`, "", "loadavg_after"),
  foreign_cpu_seconds_each_search = vapply(runs, `[[`, 0, "foreign_cpu_seconds"),
  foreign_share_each_search = vapply(runs, `[[`, 0, "foreign_share"),
  searches_under_foreign_load = sum(vapply(runs, `[[`, 0, "foreign_share") > foreign_limit),
  meets_goal = list(
    # both goals by one search with pruning, whichever pruner it asked for
    pruning_with_some_pruner = any(vapply(compared, meets, logical(1))),
    pruned_vs_unpruned_seconds = ratio$median <= goal$pruned_vs_unpruned_seconds,
    best_relative_difference = isTRUE(stats::median(relative) <= goal$best_relative_difference),
    overhead_seconds = isTRUE(overhead$max <= goal$overhead_seconds),
    overhead_seconds_all_fits = isTRUE(overhead$all_fits$max <= goal$overhead_seconds),
    overhead_beyond_session_seconds = isTRUE(fresh$max <= goal$overhead_seconds)
  ),
  notes = c(
    "seconds: wall-clock of each gpu_search() call (study opened in a fresh SQLite folder, trials run, result built), after one unmeasured 1-trial search that starts this session's Python, Optuna and SQLite. Rounds alternate the order (median, asha, hyperband, none, then the reverse; --smoke: median and none); the ratio is per round, its median with a bootstrap 95% interval.",
    "time_split: where each search's seconds went (bench/lib/workers.R time_split()); pruned_vs_unpruned_training_seconds: the ratio of the training alone (each trial's first step to its gpu_fit() returning), what pruning saves when trials cost nothing else.",
    "foreign_cpu_seconds_each_search: CPU seconds other processes (not this session, not its workers) took during each search (bench/lib/workers.R cpu_snapshot(); a virtual machine's stolen time counts); foreign_share: of the machine's cores over its wall time; searches_under_foreign_load: those over 10 %, whose times measure the machine more than the search. The load averages include this benchmark's own processes.",
    "best_relative_difference: (best val_loss with pruning - without) / without; negative: pruning found a better one.",
    "overhead_seconds: for each trial after a search's first, first_step - submitted - probe (see bench/cv.R's notes for its parts, the probe, and the fits whose process was waiting or not); `other` here is mostly the trial's pruning callback (Optuna's storage, opened ahead by the worker while it waited). between_fits: a trial's gpu_fit() returning in its worker -> the next trial's submission (the result sent back by callr, the study's tell and ask).",
    "overhead_beyond_session_seconds: what the fresh worker adds: for each trial of the last search in overhead_seconds, its overhead less the same trial's start in this session (bench/lib/workers.R session_starts(): Keras' seed, model_fn(params) and gpu_fit() on the same rows, from model_fn's call to the first training step, after one unmeasured fit). A model never built before costs its building, and on JAX its compiling, in any process; that part of overhead_seconds is not the worker's.",
    "trials: each search's trials as gpu_search() returns them (seconds: from its submission to its collection); fits: the probe's times in seconds from the gpu_search() call."
  ),
  wall_seconds = NA_real_
)
result$wall_seconds <- round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
out <- write_result(result, on_backend(paste0("search-", short), result$backend), mode)

cat(sprintf("\n%d-trial search, pruned / unpruned time (goal <= %.1f) and best val_loss against the unpruned one's (goal <= %.0f %%):\n", trials, goal$pruned_vs_unpruned_seconds, 100 * goal$best_relative_difference))
for (name in pruners) {
  one <- compared[[name]]
  cat(sprintf(
    "  %-9s %s, best %s, %s trials pruned, %s epochs of %s%s\n", name, interval(one$ratio), paste(sprintf("%+.2f %%", 100 * one$relative_rounds), collapse = ", "),
    paste(one$pruned, collapse = ", "), paste(one$epochs, collapse = ", "), paste(epochs_trained$none, collapse = ", "), if (meets(one)) ": both goals" else ""
  ))
}
cat(sprintf(
  "median pruner (the default): medians %.1f s vs %.1f s\n", result$seconds$median, result$seconds$none
))
cat(sprintf("  less the probe's own time in the workers: %s\n", interval(ratio_without_probe)))
cat(sprintf("  training alone (first step -> fit end, summed over the trials): pruned / unpruned %s\n", interval(training_ratio)))
for (r in runs) {
  t <- r$time_split
  cat(sprintf(
    "  %-9s %6.1f s: training %5.1f, first start %4.1f, later starts %4.1f, between %4.1f, probe %4.1f, rest %4.1f\n",
    r$pruner, t$seconds, t$training, t$first_start, t$later_starts, t$between, t$probe, t$rest
  ))
}
cat(sprintf(
  "best val_loss with the median pruner %s, unpruned %s; relative difference %s (goal <= %.0f %%)\n",
  paste(sprintf("%.5f", best$median), collapse = ", "), paste(sprintf("%.5f", best$none), collapse = ", "),
  paste(sprintf("%+.2f %%", 100 * relative), collapse = ", "), 100 * goal$best_relative_difference
))
cat(sprintf(
  "overhead submission -> first step, trials after the first whose process was waiting (%d of %d): median %.2f s, max %.2f s (goal <= %.0f s); first trial %.2f s\n",
  overhead$ready_fits, overhead$fits, overhead$median, overhead$max, goal$overhead_seconds, overhead$first_fit$median
))
cat(sprintf(
  "  all %d after the first: median %.2f s, max %.2f s; %d waited for their process to be ready (%.1f s in all, at most %.2f s); the probe's own time %.2f s (left out)\n",
  overhead$fits, overhead$all_fits$median, overhead$all_fits$max, overhead$not_ready$fits, overhead$not_ready$wait_total,
  overhead$not_ready$wait$max, overhead$probe$median
))
print_overhead_parts(overhead)
cat(sprintf(
  "  less the same trial's start in this session (median %.2f s), the last search's %d: median %.2f s, max %.2f s (goal <= %.0f s)\n",
  fresh$session_start$median, fresh$fits, fresh$median, fresh$max, goal$overhead_seconds
))
cat(sprintf("wrote %s (%.0f s)\n", out, result$wall_seconds))
