# gpu_cv() against the same folds fitted by hand in one R session, and the start of each
# fold's fresh worker process.
#
# gpu_cv() runs every fold in a fresh worker R process (R/workers.R): a pool of slots
# (on a machine without a GPU, one), each readying the next process (R, gpukeras,
# Python, Keras) while its fit trains; on JAX by default its folds train as one population
# in one worker (R/cv-population.R, train/population.py). This script measures
#   * cost: the wall time of a 5-fold gpu_cv(model_fn, data, folds = 5, seed, epochs,
#     batch_size) against five gpu_fit() calls in this session on the same folds' rows,
#     each after keras$utils$set_random_seed(the fold's seed) with a fresh model from
#     the same model_fn, gpu_fit(seed = the fold's seed), then evaluate() and predict()
#     of the held-out rows, as each fold's worker does (a population also validates each
#     fold on its held-out rows after each epoch, which the others do not: more work). The session's Python and Keras are started before (a warm-up round of each),
#     as a user's would be. Rounds rotate the order of the four ways (gpu_cv() a process
#     per fold plain and probed, gpu_cv() as a population, in-session); ratio = median
#     over rounds of cv / in-session with a bootstrap 95 % interval. Goals: a process per
#     fold <= 1.3; the population (JAX; issue #61) <= 0.8, with equal held-out metrics;
#   * overhead of a fresh worker per fold, in the probed gpu_cv() (its model_fn times
#     the worker's parts; the plain one is what a user runs): for each fold after the first, from its
#     task's submission (given to a process that was readied while the
#     previous fold trained) to the start of its first training step (Keras'
#     first on_train_batch_begin in the worker), and its parts: picking the task up,
#     the setup (gpu_setup(), the runtime's start, the seed), model_fn, the data copy,
#     gpu_fit()'s own start (see bench/lib/workers.R for how each is read). Goal: <= 1 s.
#   * that cv and the in-session fits agree: each fold's held-out loss and accuracy.
#
# Data: 20,000 rows x 20 standard-normal features, two classes from a linear score plus
# noise (bench_data()); model: MLP 20-64-64-2 (relu, softmax), adam, sparse categorical
# cross-entropy, accuracy; 10 epochs of batch 32 (gpu_fit()'s default) per fold.
#
# Usage (from the repository root): [KERAS_BACKEND=jax] Rscript bench/cv.R [--quick | --smoke]
# Writes bench/results/cv-<device>[-jax][-quick].json (a smoke run: see bench/lib/common.R).
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/lib/load.R")
source("bench/lib/common.R")
source("bench/lib/workers.R")
mode <- bench_mode()
code <- code_state() # before the run: the code measured, not what changed while it ran

rows <- if (mode$smoke) 1000L else 20000L
folds <- if (mode$smoke) 2L else 5L
epochs <- if (mode$smoke) 1L else 10L
batch_size <- 32L
rounds <- if (mode$smoke) 1L else if (mode$quick) 3L else 5L
seed <- 1L
goal <- list(cv_vs_in_session = 1.3, population_vs_in_session = 0.8, overhead_seconds = 1)

data <- bench_data(rows)
keras <- gpu_keras()
# the compilation cache (JAX) as the run starts: a second run of this script in a fresh
# session finds every program the first compiled there (issue #78's CPU goal)
cache_before <- gpu_compile_cache()
session_pid <- Sys.getpid()
probe_dir <- tempfile("bench-cv-probe-")

build_model <- function() {
  keras <- gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = list(20L)),
    keras$layers$Dense(64L, activation = "relu"),
    keras$layers$Dense(64L, activation = "relu"),
    keras$layers$Dense(2L, activation = "softmax")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  model
}
# The same model, its worker timed by the probe (bench/lib/workers.R); the probe's own
# work in each worker (about 0.2-0.3 s a fold) is the benchmark's, not gpu_cv()'s
probed_model_fn <- function() {
  worker_probe_begin(probe_dir, session_pid)
  model <- build_model() # built before worker_probe_end() takes the time
  worker_probe_end(model)
}

# The folds and seeds gpu_cv() draws from `seed` (its own functions), so the session
# fits the same rows.
internal <- function(name) utils::getFromNamespace(name, "gpukeras")
cv_folds <- internal("cv_split")(folds, NULL, internal("read_training_data")(data, FALSE), seed, environment())
seeds <- vapply(seq_len(folds), function(i) internal("derived_seed")(seed, i), integer(1))

cv_runs <- list()
in_session_seconds <- numeric()
session_metrics <- NULL
loads <- character()

# One timed gpu_cv() of `model_fn`, checked to fit the session's folds with its seeds:
# its times (timed(), with other processes' CPU) and the cv object.
# `population`: gpu_workers()' (FALSE: a process per fold, as the probe needs).
cv_call <- function(model_fn, population = FALSE) {
  cpu_before <- cpu_snapshot()
  workers <- gpu_workers(population = population)
  took <- timed(cv <- gpu_cv(model_fn, data, folds = folds, seed = seed, epochs = epochs, batch_size = batch_size, workers = workers))
  took <- c(took, foreign_cpu(cpu_before, cpu_snapshot(), took[["wall"]]))
  stopifnot(identical(cv$folds, cv_folds$held_out), identical(cv$seeds, seeds))
  loads <<- c(loads, readLines("/proc/loadavg"))
  list(took = took, cv = cv)
}
population_runs <- list()

ways <- list(
  cv = function() {
    probe_dir <<- tempfile("bench-cv-probe-")
    dir.create(probe_dir)
    on.exit(unlink(probe_dir, recursive = TRUE), add = TRUE)
    recorder <- probe_session_start()
    on.exit(probe_session_stop(), add = TRUE)
    began <- as.numeric(Sys.time())
    call <- cv_call(probed_model_fn)
    took <- call$took
    fits <- probe_fits(recorder, probe_dir, began)
    fits$run <- length(cv_runs) + 1L
    cv_runs[[length(cv_runs) + 1L]] <<- list(
      seconds = took[["wall"]], fits = fits, time_split = time_split(fits, took[["wall"]]),
      metrics = call$cv$metrics, fold_seconds = call$cv$seconds, workers = call$cv$workers
    )
    took
  },
  cv_unprobed = function() cv_call(build_model)$took,
  cv_population = function() {
    call <- cv_call(build_model, population = "auto")
    population_runs[[length(population_runs) + 1L]] <<- list(
      trained = call$cv$trained, why = call$cv$trained_why, metrics = call$cv$metrics, fold_seconds = call$cv$seconds
    )
    call$took
  },
  in_session = function() {
    metrics <- list()
    cpu_before <- cpu_snapshot()
    took <- timed(for (i in seq_len(folds)) {
      train <- cv_folds$train[[i]]
      held <- cv_folds$held_out[[i]]
      keras$utils$set_random_seed(seeds[i])
      model <- build_model()
      fit <- gpu_fit(model, list(x = data$x[train, , drop = FALSE], y = data$y[train]),
        seed = seeds[i], epochs = epochs, batch_size = batch_size, verbose = 0
      )
      metrics[[i]] <- evaluate(fit, data$x[held, , drop = FALSE], data$y[held], batch_size = batch_size)
      predict(fit, data$x[held, , drop = FALSE], batch_size = batch_size)
    })
    took <- c(took, foreign_cpu(cpu_before, cpu_snapshot(), took[["wall"]]))
    session_metrics <<- metrics
    in_session_seconds <<- c(in_session_seconds, took[["wall"]])
    loads <<- c(loads, readLines("/proc/loadavg"))
    took
  }
)

measured <- run_rounds(ways, rounds, mode)
seconds <- measured$seconds
cpu_seconds <- measured$cpu_seconds
warmup <- length(cv_runs) - rounds # the warm-up's cv run, left out of the overheads
measured_runs <- cv_runs[seq(warmup + 1L, length(cv_runs))]
fits <- do.call(rbind, lapply(measured_runs, `[[`, "fits"))
overhead <- overhead_summary(fits)
# the goal's measure: gpu_cv() as a user runs it, without the benchmark's probe
ratio <- ratio_summary(seconds$cv_unprobed / seconds$in_session)
ratio_probed <- ratio_summary(seconds$cv / seconds$in_session)
ratio_population <- ratio_summary(seconds$cv_population / seconds$in_session)

# The last cv run's held-out metrics against the last in-session round's.
last_cv <- cv_runs[[length(cv_runs)]]$metrics
session_table <- do.call(rbind, lapply(session_metrics, function(m) as.data.frame(as.list(unlist(m)))))
agreement <- list(
  cv_loss = last_cv$loss, in_session_loss = session_table$loss,
  cv_accuracy = last_cv$accuracy, in_session_accuracy = session_table$accuracy,
  max_abs_loss_difference = max(abs(last_cv$loss - session_table$loss))
)
last_population <- population_runs[[length(population_runs)]]
population_agreement <- list(
  trained = last_population$trained, why = last_population$why,
  population_loss = last_population$metrics$loss, population_accuracy = last_population$metrics$accuracy,
  max_abs_loss_difference = max(abs(last_population$metrics$loss - session_table$loss)),
  max_abs_accuracy_difference = max(abs(last_population$metrics$accuracy - session_table$accuracy))
)

cache_after <- gpu_compile_cache()
compile_cache <- list(
  folder = cache_after$folder, whose = cache_after$whose, programs_before = cache_before$programs,
  programs_after = cache_after$programs,
  # each program compiled anywhere (the session and every worker) writes one entry
  programs_compiled = cache_after$programs - cache_before$programs,
  session_misses = cache_after$misses, session_hits = cache_after$hits
)
machine <- machine_facts(load_before)
device <- if (identical(machine$gpu, "none")) paste("CPU:", machine$cpu) else machine$gpu[[1]]
short <- if (identical(machine$gpu, "none")) "cpu" else "gpu"
result <- list(
  benchmark = "cv",
  command = bench_command("bench/cv.R", mode),
  date = format(Sys.time(), "%Y-%m-%d"),
  quick = mode$quick,
  smoke = mode$smoke,
  device = device,
  machine = machine,
  loadavg_after_each_way = loads,
  foreign_cpu_seconds_rounds = measured$foreign_cpu_seconds,
  foreign_share_rounds = measured$foreign_share,
  code = code,
  backend = keras$backend$backend(),
  versions = version_facts(),
  workload = list(
    rows = rows, features = 20L, classes = 2L, folds = folds, seed = seed, fold_seeds = seeds,
    model = "MLP 20-64-64-2 (relu, softmax), adam, sparse categorical cross-entropy, accuracy",
    epochs = epochs, batch_size = batch_size, train_rows_per_fold = length(cv_folds$train[[1]]),
    steps_per_epoch = ceiling(length(cv_folds$train[[1]]) / batch_size)
  ),
  workers = cv_runs[[length(cv_runs)]]$workers,
  rounds = rounds,
  goal = goal,
  seconds = lapply(seconds, stats::median),
  seconds_rounds = seconds,
  cpu_seconds = lapply(cpu_seconds, stats::median),
  cpu_seconds_rounds = cpu_seconds,
  cv_vs_in_session = ratio,
  cv_probed_vs_in_session = ratio_probed,
  population_vs_in_session = ratio_population,
  population = population_agreement,
  cv_fixed_cost_seconds = stats::median(seconds$cv_unprobed - seconds$in_session),
  # the warm-up: each way's first call in the session, nothing of this model compiled yet
  first_call_seconds = if (mode$smoke) NULL else list(cv_probed = cv_runs[[1]]$seconds, in_session = in_session_seconds[1]),
  overhead_seconds = overhead,
  compile_cache = compile_cache,
  time_split = lapply(measured_runs, `[[`, "time_split"),
  fold_fit_seconds = lapply(measured_runs, `[[`, "fold_seconds"),
  fits = lapply(split(fits, fits$run), function(run) lapply(run[setdiff(names(run), "run")], function(v) if (is.numeric(v)) round(v, 3) else v)),
  agreement = agreement,
  meets_goal = list(
    cv_vs_in_session = ratio$median <= goal$cv_vs_in_session,
    population_vs_in_session = ratio_population$median <= goal$population_vs_in_session &&
      identical(last_population$trained, "population") && population_agreement$max_abs_loss_difference <= 1e-5,
    overhead_seconds = isTRUE(overhead$max <= goal$overhead_seconds),
    overhead_seconds_all_fits = isTRUE(overhead$all_fits$max <= goal$overhead_seconds),
    # on JAX, a run after one that filled the cache: nothing compiled, by any process
    compiled_nothing = compile_cache$programs_before > 0 && compile_cache$programs_compiled == 0 &&
      compile_cache$session_misses == 0
  ),
  notes = c(
    "seconds: wall-clock of gpu_cv() (call to return) and of the five in-session fits with their evaluate() and predict(); cpu_seconds: this session's CPU time only (the workers' is not in it). The ways run in rounds whose order alternates, after one warm-up of each; ratios are per round, their median with a bootstrap 95% interval.",
    "overhead_seconds: for each fold after the first of each measured cv run, first_step - submitted - probe: from the task given to its slot (the session's clock, worker_submit() traced) to Keras' first on_train_batch_begin in the worker (time.time()). Its parts: pickup (submitted -> worker_task() entered: callr's call into the worker's r_session, or the wait for a process that was not ready yet), setup (set_random_seed(): the worker started its runtime with the session's gpu_setup() and compiled a small step while it waited, R/workers.R worker_ready()), attach (the packages attached for model_fn), model_fn (building and compiling the model), data_copy (load_arrays(): the rows out of the memory-mapped .npy files), other (a search's pruning callback; the memory plan on a GPU), fit_start (gpu_fit() entered -> its first training step: R's checks and conversion, the core's request, the data adapter, the monitor, Keras' fit() before its first step). before_model_fn = pickup + setup + attach. probe: the probe's own setup in the worker (trace(), a Python patch), timed and subtracted. median, max and parts: the fits whose process was waiting when the task was written (pickup <= 0.1 s), the goal's measure; all_fits: every fit after the first; not_ready: those whose process was still starting (their pickup is the wait for it). less_jax_compiling (JAX): the overhead less what JAX lowered and compiled in the worker from model_fn to the first step (jax_before_first_step: the model's initializers, the training loop; not its tracing, whose timings nest), work a new architecture costs a fit in the session too.",
    "first_fit: a run's first fold waits for its process: a callr r_session started by the pool, which loads gpukeras, Python and Keras and prepares its runtime (R/workers.R worker_ready()) before it takes the fold. between_fits: from a fold's gpu_fit() returning in its worker to the next fold's submission (the held-out rows' evaluate() and predict(), the result sent back by callr, the worker ended).",
    "foreign_cpu_seconds_rounds: CPU seconds other processes (not this session, not its workers) took while each way ran, from /proc/stat and /proc/<pid>/stat (bench/lib/workers.R cpu_snapshot()); foreign_share: of the machine's cores over the way's wall time. The load averages include this benchmark's own processes (about 1-2 while it trains, 2-3 while a worker is readied).",
    "first_call_seconds: the warm-up's gpu_cv() (probed; its workers start from scratch as every call's do) and in-session fits, the session's first of each, when nothing of the model had been compiled in the session. The measured calls come after, as a user's repeated ones: in-session fits find the model's programs in the session's memory, gpu_cv()'s workers in the compilation cache (on JAX: gpu_compile_cache(), kept across sessions).",
    "cv_vs_in_session: gpu_cv() with a process per fold (gpu_workers(population = FALSE)) and a plain model_fn (the way cv_unprobed) over the in-session fits; cv_probed_vs_in_session: the way cv, whose model_fn runs the probe that times each worker's parts (overhead_seconds, time_split, fits), over the same (the probe's own work, about 0.2-0.3 s a fold, is the benchmark's instrument, not gpu_cv()'s cost).",
    "time_split: where each measured cv run's seconds went (bench/lib/workers.R time_split()): training (first step -> gpu_fit() returning, summed over the folds), the first fold's start, the later folds' starts, between folds, the probe, the rest (the data carried, the pool closed, the result built).",
    "compile_cache: JAX's compilation cache (gpu_compile_cache()) before and after the run: programs_compiled is the entries written by the session and every worker (one per program compiled, none loaded); session_misses and session_hits are the session's own. A second run in a fresh session compiles nothing when the first filled the cache.",
    "fits: each measured cv run's folds, times in seconds from the gpu_cv() call.",
    "agreement: the last cv run's held-out metrics per fold against the last in-session round's (the docs say the same within float rounding, exactly on a CPU).",
    "population_vs_in_session: gpu_cv() with its default workers (gpu_workers(population = \"auto\"): on JAX the five folds as one population in one worker, Keras' train step vmapped over their states; the ways cv and cv_unprobed are gpu_workers(population = FALSE)) over the in-session fits; population: how the last such run trained (trained, why) and its held-out metrics against the last in-session round's (goal: within 1e-5). The population also validates each fold on its held-out rows after each epoch (its history's val_ columns); the other ways do not: it does more work than they do.",
    "The machine is shared with other engineers' work (2 cores): see the load averages and foreign_cpu_seconds_rounds for what else ran."
  ),
  wall_seconds = NA_real_
)
result$wall_seconds <- round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
out <- write_result(result, on_backend(paste0("cv-", short), result$backend), mode)
cat(sprintf("Compilation cache (%s): %d programs compiled in this run (the session's own: %d compiled, %d loaded)\n",
            compile_cache$whose, compile_cache$programs_compiled, compile_cache$session_misses, compile_cache$session_hits))

cat(sprintf(
  "\n%d-fold gpu_cv() / %d in-session fits (%d epochs): %s (goal <= %.1f); medians %.1f s vs %.1f s\n",
  folds, folds, epochs, interval(ratio), goal$cv_vs_in_session, result$seconds$cv_unprobed, result$seconds$in_session
))
cat(sprintf("  gpu_cv() with the probe that times its workers: %s\n", interval(ratio_probed)))
cat(sprintf(
  "  gpu_cv() as %s / in-session fits: %s (goal <= %.1f); median %.1f s; held-out loss max difference %.2g\n",
  last_population$trained, interval(ratio_population), goal$population_vs_in_session, result$seconds$cv_population,
  population_agreement$max_abs_loss_difference
))
if (!mode$smoke) {
  cat(sprintf(
    "  the session's first calls (the warm-up, nothing compiled yet): gpu_cv() %.1f s (probed), in-session fits %.1f s\n",
    result$first_call_seconds$cv_probed, result$first_call_seconds$in_session
  ))
}
cat(sprintf(
  "overhead submission -> first step, folds after the first whose process was waiting (%d of %d): median %.2f s, max %.2f s (goal <= %.0f s); first fold %.2f s\n",
  overhead$ready_fits, overhead$fits, overhead$median, overhead$max, goal$overhead_seconds, overhead$first_fit$median
))
cat(sprintf(
  "  all %d after the first: median %.2f s, max %.2f s; %d waited for their process to be ready (%.1f s in all, at most %.2f s); the probe's own time %.2f s (left out)\n",
  overhead$fits, overhead$all_fits$median, overhead$all_fits$max, overhead$not_ready$fits, overhead$not_ready$wait_total,
  overhead$not_ready$wait$max, overhead$probe$median
))
print_overhead_parts(overhead)
for (r in measured_runs) {
  t <- r$time_split
  cat(sprintf(
    "  cv %5.1f s: training %5.1f, first start %4.1f, later starts %4.1f, between %4.1f, probe %4.1f, rest %4.1f\n",
    t$seconds, t$training, t$first_start, t$later_starts, t$between, t$probe, t$rest
  ))
}
cat(sprintf(
  "other processes' share of the 2 cores per round: cv %s; cv probed %s; in-session %s\n",
  paste(sprintf("%.0f %%", 100 * measured$foreign_share$cv_unprobed), collapse = ", "),
  paste(sprintf("%.0f %%", 100 * measured$foreign_share$cv), collapse = ", "),
  paste(sprintf("%.0f %%", 100 * measured$foreign_share$in_session), collapse = ", ")
))
cat(sprintf("held-out loss, cv vs in-session: max difference %.2g\n", agreement$max_abs_loss_difference))
cat(sprintf("wrote %s (%.0f s)\n", out, result$wall_seconds))
