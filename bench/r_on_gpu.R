# The whole promise from R (issue #35, part 2): what an R user runs, on the GPU machine.
#
#   1. many models on one GPU (issue #33's GPU goal): the same 16-trial gpu_search()
#      (random sampler, no pruning, so both draw the same trials) with one worker on the
#      GPU and with two sharing it (gpu_workers(per_device = 1), then 2; on a CPU, workers = 1
#      and 2): seconds, trials per hour, their ratio (goal >= 1.6), each trial's device,
#      and the GPU memory NVML shows this session holding meanwhile (it must hold none).
#      It runs first, while the session has not yet started the GPU runtime;
#   2. gpu_check(): the verdict and its evidence;
#   3. gpu_fit() of the README's digits model (R matrix and factor), and its report;
#   4. gpu_fit() of the MLP 20-128-128-2 on 102,400 rows, batch 256 (device-resident on
#      JAX: the data on the device, several steps per dispatch), and its report;
#   5. a background job (gpu_fit(background = TRUE)), then the standby process gpukeras
#      keeps waiting for the next one: NVML's memory used before, during and after, and
#      the GPU memory each of this session's child processes holds (it must hold none);
#   6. populations (issue #78's GPU goals), in the session whose runtime 2-5 started (on a
#      GPU, a worker started ahead first: gpu_setup(workers_ahead = "auto")): a
#      5-fold gpu_cv() of the MLP 20-128-128-2 against one gpu_fit() of a fold's rows
#      (goal <= 2x), a 16-trial search over the learning rate (goal >= 6,650 trials per
#      hour), the same again in the session (>= 30,000) and one over units too (>= 2,660);
#      what the compilation cache kept (gpu_compile_cache(): run it twice, each a fresh
#      session, for a second run's figures: bench/gpu_verify.sh starting).
#
# Every output is written as Markdown to bench/results/r-on-gpu-<device>-<date>.md (a
# smoke run, --smoke: tiny sizes, part 1's search with two workers alone, the file in
# GPUKERAS_BENCH_OUT; --out FILE: there).
# --parts 6 (say; comma-separated): only those parts, with part 2 always (bench/gpu_verify.sh's
# populations part runs --parts 6).
# On a GPU machine, through the bundle of bench/gpu_r_bundle.sh:
#   KERAS_BACKEND=jax .gpu-r/Rscript bench/r_on_gpu.R
# The installed gpukeras is used (the bundle's), as an R user has it.
suppressPackageStartupMessages(library(gpukeras))
source("bench/lib/common.R")
source("bench/lib/workers.R")
mode <- bench_mode()
args <- commandArgs(trailingOnly = TRUE)
out_arg <- match("--out", args)
parts_arg <- match("--parts", args)
parts <- if (is.na(parts_arg)) 1:6 else as.integer(strsplit(args[parts_arg + 1L], ",")[[1]])
# --searches learning_rate,learning_rate_again (say): only those of part 6's searches
searches_arg <- match("--searches", args)

lines <- character()
say <- function(...) {
  text <- paste0(...)
  cat(text, "\n", sep = "")
  lines <<- c(lines, text)
}
block <- function(title, expr_text, value) {
  say("\n## ", title, "\n")
  say("```r\n", expr_text, "\n```\n")
  say("```\n", paste(utils::capture.output(print(value)), collapse = "\n"), "\n```")
}
# NVML's view: each GPU's memory in use, and the compute processes holding memory
nvml_memory <- function() {
  devices <- gpu_devices()
  gpus <- devices$type == "GPU"
  if (any(gpus)) sum(devices$memory_total_mib[gpus] - devices$memory_free_mib[gpus]) else NA_real_
}
gpu_processes <- function() {
  smi <- Sys.which("nvidia-smi")
  if (!nzchar(smi)) {
    return(data.frame(pid = integer(), used_mib = numeric()))
  }
  rows <- system2(smi, c("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"),
                  stdout = TRUE, stderr = FALSE)
  rows <- strsplit(rows[nzchar(rows)], ",\\s*")
  data.frame(pid = as.integer(vapply(rows, `[`, "", 1)), used_mib = as.numeric(vapply(rows, `[`, "", 2)))
}
# NVML sampled every 200 ms while a search runs: the compute processes holding GPU memory
# at once (the fits, and the workers waiting beside them with their runtime started, as
# worker_ready() starts it) and the GPU's memory used in all
nvml_sampler <- function() {
  if (!nzchar(Sys.which("nvidia-smi"))) return(NULL)
  files <- c(apps = tempfile("nvml-apps-"), gpu = tempfile("nvml-gpu-"))
  query <- c(apps = "--query-compute-apps=timestamp,pid,used_memory", gpu = "--query-gpu=timestamp,memory.used")
  processes <- lapply(names(files), function(part) processx::process$new(
    "nvidia-smi", c(query[[part]], "--format=csv,noheader,nounits", "-lms", "200"),
    stdout = files[[part]], stderr = NULL))
  list(processes = processes, files = files)
}
nvml_summary <- function(sampler) {
  if (is.null(sampler)) return("NVML: no nvidia-smi here")
  for (process in sampler$processes) process$kill()
  read <- function(file, names) {
    rows <- tryCatch(utils::read.csv(file, header = FALSE, strip.white = TRUE, col.names = names),
                     error = function(e) NULL)
    if (is.null(rows)) return(NULL)
    rows$mib <- suppressWarnings(as.numeric(rows$mib))
    rows[!is.na(rows$mib), ]
  }
  apps <- read(sampler$files[["apps"]], c("time", "pid", "mib"))
  gpu <- read(sampler$files[["gpu"]], c("time", "mib"))
  if (is.null(gpu) || !nrow(gpu)) return("NVML: its samples could not be read")
  if (is.null(apps)) apps <- data.frame(time = character(), pid = integer(), mib = numeric())
  per_sample <- split(apps$mib, apps$time)
  sprintf(paste0("NVML every 200 ms while it ran (%d samples): at most %d processes held GPU memory at once,",
                 " %.0f MiB together; one process at most %.0f MiB; the GPU's memory used at most %.0f MiB"),
          nrow(gpu), max(0L, lengths(per_sample)), max(0, vapply(per_sample, sum, 0)),
          max(0, apps$mib), max(gpu$mib))
}
# This session's child processes (all generations), by pid. ps reads /proc for each child as
# it walks the tree, and a child that ends meanwhile fails the walk ("Unknown error
# fs_error"): walked again, at most five times.
descendants <- function() {
  for (attempt in 1:5) {
    kids <- tryCatch(ps::ps_children(ps::ps_handle(), recursive = TRUE), error = function(e) if (attempt == 5L) stop(e))
    if (!is.null(kids)) break
    Sys.sleep(0.1)
  }
  data.frame(pid = vapply(kids, ps::ps_pid, 1L),
             name = vapply(kids, function(p) tryCatch(ps::ps_name(p), error = function(e) NA_character_), ""))
}

started <- Sys.time()
say("# gpukeras from R on ", Sys.getenv("GPUKERAS_DEVICE_NAME", "this machine"), ", ", format(Sys.Date()))
say("\nCommand: `", bench_command("bench/r_on_gpu.R", mode), if (!is.na(parts_arg)) paste(" --parts", args[parts_arg + 1L]),
    "` (KERAS_BACKEND=", Sys.getenv("KERAS_BACKEND", "unset"), "). Code: ", code_state()$commit,
    if (length(code_state()$uncommitted)) " (with changes to R/ or inst/python not committed)", ".")

# 1. Many models on one GPU: one worker, then two sharing it ---------------------------
# NVML's list, not gpu_devices(): that would start the GPU runtime in this session
on_gpu <- nzchar(Sys.which("nvidia-smi")) &&
  length(suppressWarnings(system2("nvidia-smi", "-L", stdout = TRUE, stderr = FALSE))) > 0L
search_rows <- if (mode$smoke) 512L else 20000L
search_x <- matrix(stats::rnorm(search_rows * 20), ncol = 20)
search_y <- factor(as.integer(search_x[, 1] - search_x[, 3] + stats::rnorm(search_rows) > 0))
search_space <- list(units = search_int(16, 128, log = TRUE), learning_rate = search_float(1e-4, 1e-2, log = TRUE))
# Part 6 as a GPU user who trains populations runs it (issue #78 item 2, ?gpu_setup's "Workers
# started ahead"): a worker started ahead imports Python, Keras and JAX and starts its runtime
# while the session goes on, so that gpu_cv()'s population finds it ready. Float32, as when
# nothing is set; memory growing on demand (gpu_setup()'s default), as the workers' does.
if (on_gpu && 6 %in% parts) {
  ahead <- tryCatch(gpu_setup(mixed_precision = "float32", workers_ahead = "auto")$workers_ahead,
                    error = function(e) paste("none: gpu_setup() failed:", conditionMessage(e)))
  say("\nSet first: `gpu_setup(mixed_precision = \"float32\", workers_ahead = \"auto\")` (workers ahead: ",
      paste(ahead, collapse = ", "), ").")
}
if (1 %in% parts) {
  session_pid <- Sys.getpid()
  probe_dir <- tempfile("r-on-gpu-probe-")
  search_model <- function(params) {
    worker_probe_begin(probe_dir, session_pid) # where each trial's time goes (bench/lib/workers.R)
    keras <- gpu_keras()
    model <- keras$Sequential(list(
      keras$Input(shape = list(20L)),
      keras$layers$Dense(as.integer(params$units), activation = "relu"),
      keras$layers$Dense(as.integer(params$units), activation = "relu"),
      keras$layers$Dense(2L, activation = "softmax")
    ))
    model$compile(optimizer = keras$optimizers$Adam(params$learning_rate),
                  loss = "sparse_categorical_crossentropy")
    worker_probe_end(model)
  }
  search_trials <- if (mode$smoke) 2L else 16L
  run_search <- function(workers_here, trials = search_trials) {
    folder <- tempfile("r-on-gpu-search-")
    probe_dir <<- tempfile("r-on-gpu-probe-")
    dir.create(probe_dir)
    on.exit(unlink(c(folder, probe_dir), recursive = TRUE))
    recorder <- probe_session_start()
    on.exit(probe_session_stop(), add = TRUE)
    # each search compiles its trials' shapes itself: the second would load the first's
    gpu_compile_cache(clear = TRUE)
    # a process per trial, as issue #33's goal measures it (populations: issue #61's goals)
    sharing <- list(workers = if (on_gpu) gpu_workers(per_device = workers_here, population = FALSE) else gpu_workers(workers = workers_here, population = FALSE))
    began <- as.numeric(Sys.time())
    sampler <- nvml_sampler()
    started_search <- Sys.time()
    result <- do.call(gpu_search, c(list(
      search_model, list(x = search_x, y = search_y), search_space, trials = trials,
      sampler = "random", pruner = "none", storage = folder, seed = 1,
      epochs = if (mode$smoke) 1 else 5, batch_size = 256
    ), sharing))
    seconds <- as.numeric(difftime(Sys.time(), started_search, units = "secs"))
    nvml <- nvml_summary(sampler)
    holding <- gpu_processes()
    list(result = result, seconds = seconds, fits = probe_fits(recorder, probe_dir, began),
         session_mib = sum(holding$used_mib[holding$pid == Sys.getpid()]), nvml = nvml)
  }
  # Where a trial's seconds go, in its worker: the runtime's start (setup: CUDA's too),
  # model_fn, gpu_fit() to its first step, the fit (XLA's compiling of the new shapes,
  # autotuning included, and the training), and the rest (gpu_fit() returning -> the
  # session collecting it: the best model saved, the result written, the process's end)
  trial_split <- function(fits) {
    data.frame(
      number = fits$number, start = round(fits$submitted, 1), setup = round(fits$setup, 2),
      model_fn = round(fits$model_fn, 2), fit_start = round(fits$fit_start, 2),
      fit = round(fits$fit_exit - fits$first_step, 2), compile = round(fits$compile_seconds, 2),
      trace = round(fits$trace_seconds, 2), after = round(fits$collected - fits$fit_exit, 2)
    )
  }
  if (!mode$smoke) invisible(run_search(1L, trials = 1L)) # Python, Keras and Optuna first load here, untimed
  # a smoke run takes the two workers' search alone: the one worker's is the same code
  shared <- lapply(if (mode$smoke) c(two = 2L) else c(one = 1L, two = 2L), run_search)
  say("\n## 1. Many models on one ", if (on_gpu) "GPU" else "CPU (smoke)", ": one worker, then two sharing it\n")
  say("```r\n", paste(
    "search <- gpu_search(model_fn, list(x = x, y = y), space, trials = 16, sampler = \"random\",",
    "                     pruner = \"none\", seed = 1, epochs = 5, batch_size = 256,",
    if (on_gpu) "                     workers = gpu_workers(per_device = 1))  # then 2" else "                     workers = 1)  # then 2",
    sep = "\n"), "\n```\n")
  for (name in names(shared)) {
    trials <- shared[[name]]$result$trials
    say("```\n", paste(utils::capture.output(print(trials[, c("number", "units", "learning_rate", "value", "state", "seconds", "device")], row.names = FALSE)), collapse = "\n"), "\n```")
    say("\nWhere each trial's seconds went (seconds; start: its submission, from the search's):\n")
    say("```\n", paste(utils::capture.output(print(trial_split(shared[[name]]$fits), row.names = FALSE)), collapse = "\n"), "\n```")
    say("\n", if (name == "one") "One worker" else "Two workers", ": ", search_trials, " trials in ",
        sprintf("%.1f s (%.0f trials per hour); devices: %s; GPU memory NVML shows this session holding after it: %s MiB\n",
                shared[[name]]$seconds, 3600 * search_trials / shared[[name]]$seconds,
                paste(unique(trials$device), collapse = ", "), shared[[name]]$session_mib))
    say("\n", shared[[name]]$nvml, "\n")
  }
  if (!mode$smoke) {
    speedup <- shared$one$seconds / shared$two$seconds
    same_trials <- isTRUE(all.equal(shared$one$result$trials$units, shared$two$result$trials$units))
    say("Trials per hour, two workers against one: **", sprintf("%.2fx", speedup), "** (goal >= 1.6 on a GPU)",
        if (same_trials) "; both searches drew the same trials" else "; the searches drew different trials")
  }
}

# 2. Is the GPU used? -------------------------------------------------------------
check <- gpu_check(probe_seconds = if (mode$smoke) 0.5 else 3)
block("2. gpu_check()", "check <- gpu_check(probe_seconds = 3)\ncheck", check)
device <- if (identical(check$verdict, "gpu_used")) {
  rows <- gpu_devices()
  rows$name[rows$type == "GPU"][1]
} else {
  "cpu"
}
config <- reticulate::py_config()
numpy <- reticulate::py_to_r(reticulate::import("numpy", convert = FALSE)$`__version__`)
say("\nStack: R ", paste(R.version$major, R.version$minor, sep = "."), " (", R.home(), "), reticulate ",
    format(utils::packageVersion("reticulate")), ", gpukeras ", format(utils::packageVersion("gpukeras")),
    ", Python ", config$version, " (", config$python, "; libpython ", config$libpython, "), NumPy ", numpy,
    ", Keras backend ", reticulate::import("keras")$backend$backend(), ".")
say("Verdict: **", check$verdict, "**")

keras <- gpu_keras()

# 3. The README's digits model, from an R matrix and a factor ------------------------
if (3 %in% parts) {
  digits <- utils::read.csv(system.file("extdata", "digits.csv.gz", package = "gpukeras"), header = FALSE)
  x <- as.matrix(digits[, 1:64]) / 16
  y <- factor(digits$V65)
  set.seed(1)
  held_out <- sample.int(nrow(x), round(0.2 * nrow(x)))
  model <- keras$Sequential(list(
    keras$Input(shape = list(64L)),
    keras$layers$Dense(100L, activation = "relu"),
    keras$layers$Dense(10L, activation = "softmax")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  digits_fit <- gpu_fit(model, list(x = x[-held_out, ], y = y[-held_out]),
                        validation_data = list(x = x[held_out, ], y = y[held_out]),
                        epochs = if (mode$smoke) 1 else 5, batch_size = 64, seed = 1, verbose = 0)
  block("3. gpu_fit(): the README's digits model", paste(
    "fit <- gpu_fit(model, list(x = x[-held_out, ], y = y[-held_out]),",
    "               validation_data = list(x = x[held_out, ], y = y[held_out]),",
    "               epochs = 5, batch_size = 64, seed = 1, verbose = 0)\nfit", sep = "\n"), digits_fit)

}
# 4. The MLP, device-resident on JAX -------------------------------------------------
if (4 %in% parts) {
  rows <- if (mode$smoke) 2048L else 102400L
  features <- matrix(stats::rnorm(rows * 20), ncol = 20)
  labels <- as.integer(features[, 1] + 0.5 * features[, 2] > 0)
  keras$utils$set_random_seed(1L)
  mlp <- keras$Sequential(list(
    keras$Input(shape = list(20L)),
    keras$layers$Dense(128L, activation = "relu"),
    keras$layers$Dense(128L, activation = "relu"),
    keras$layers$Dense(2L)
  ))
  mlp$compile(optimizer = "adam", loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE),
              metrics = list("accuracy"))
  mlp_fit <- gpu_fit(mlp, list(x = features, y = labels), epochs = if (mode$smoke) 1 else 10,
                     batch_size = 256, seed = 1, verbose = 0)
  block("4. gpu_fit(): the MLP 20-128-128-2, batch 256", paste(
    "mlp_fit <- gpu_fit(mlp, list(x = features, y = labels), epochs = 10, batch_size = 256,",
    "                   seed = 1, verbose = 0)\nmlp_fit", sep = "\n"), mlp_fit)
  say("\nData path: ", mlp_fit$settings$data, "; steps per dispatch: ", mlp_fit$settings$steps_per_execution)

}
# 5. A background job, and the standby that waits for the next one --------------------
if (5 %in% parts) {
  memory <- c(before_job = nvml_memory())
  job <- gpu_fit(mlp, list(x = features, y = labels), epochs = if (mode$smoke) 1 else 5,
                 batch_size = 256, seed = 1, verbose = 0, background = TRUE)
  while (!gpu_job_status(job)$state %in% c("training", "done", "failed", "cancelled")) Sys.sleep(0.2)
  memory["while_training"] <- nvml_memory()
  job_fit <- gpu_job_wait(job, timeout = 600)
  block("5. gpu_fit(background = TRUE)", paste(
    "job <- gpu_fit(mlp, list(x = features, y = labels), epochs = 5, batch_size = 256,",
    "               seed = 1, verbose = 0, background = TRUE)\njob_fit <- gpu_job_wait(job)\njob_fit", sep = "\n"),
    job_fit)
  # the standby starts once a job trains, and is ready when it has started Python
  deadline <- Sys.time() + 60
  repeat {
    children <- descendants()
    if (nrow(children) >= 1L || Sys.time() > deadline) break
    Sys.sleep(0.5)
  }
  Sys.sleep(if (mode$smoke) 1 else 10) # time for the standby to import Keras and JAX
  children <- descendants()
  memory["standby_waiting"] <- nvml_memory()
  holding <- gpu_processes()
  children$gpu_memory_mib <- holding$used_mib[match(children$pid, holding$pid)]
  say("\nNVML memory used (MiB, all processes): ", paste(names(memory), round(memory), sep = " = ", collapse = ", "))
  say("\nThis session's child processes after the job (the standby), and the GPU memory NVML",
      " shows each holding (NA: none listed):\n")
  say("```\n", paste(utils::capture.output(print(children, row.names = FALSE)), collapse = "\n"), "\n```")
  say("\nCompute processes NVML lists (pid, MiB; inside a container these may be the host's pids):\n")
  say("```\n", paste(utils::capture.output(print(holding, row.names = FALSE)), collapse = "\n"), "\n```")
  standby_mib <- sum(children$gpu_memory_mib, na.rm = TRUE)
  say("\nStandby's GPU memory: ", standby_mib, " MiB",
      if (nrow(holding) && !any(holding$pid %in% c(Sys.getpid(), children$pid))) {
        " (NVML's pids are not this machine's: see the memory used before and after instead)"
      } else "")
}
# 6. Populations: folds and trials trained together (issue #61's GPU goals) -------------
if (6 %in% parts) {
  # each program compiled by the session or a worker writes one entry to the cache
  cache_start <- gpu_compile_cache()$programs
  # GPU utilization NVML reports every 200 ms while `expr` runs: its mean, in percent
  nvml_utilization <- function(expr) {
    file <- tempfile("nvml-utilization-")
    sampler <- if (on_gpu) {
      processx::process$new("nvidia-smi", c("--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "200"),
                            stdout = file, stderr = NULL)
    }
    began <- Sys.time()
    value <- force(expr)
    seconds <- as.numeric(difftime(Sys.time(), began, units = "secs"))
    if (!is.null(sampler)) sampler$kill()
    samples <- suppressWarnings(as.numeric(if (file.exists(file)) readLines(file) else character()))
    list(value = value, seconds = seconds, utilization = if (any(!is.na(samples))) mean(samples, na.rm = TRUE) else NA_real_)
  }
  population_mlp <- function(units = 128L, learning_rate = 1e-3) {
    keras <- gpu_keras()
    model <- keras$Sequential(list(
      keras$Input(shape = list(20L)),
      keras$layers$Dense(as.integer(units), activation = "relu"),
      keras$layers$Dense(as.integer(units), activation = "relu"),
      keras$layers$Dense(2L, activation = "softmax")
    ))
    model$compile(optimizer = keras$optimizers$Adam(learning_rate), loss = "sparse_categorical_crossentropy",
                  metrics = list("accuracy"))
    model
  }
  population_epochs <- if (mode$smoke) 1 else 5
  population_data <- list(x = search_x, y = search_y)
  folds <- if (mode$smoke) 2L else 5L
  # one fit of a fold's size, compiled anew in this session (its runtime started above)
  fold_rows <- seq_len(round(search_rows * (folds - 1) / folds))
  one_fit <- nvml_utilization(gpu_fit(population_mlp(), list(x = search_x[fold_rows, ], y = search_y[fold_rows]),
                                      epochs = population_epochs, batch_size = 256, seed = 1, verbose = 0))
  cv <- nvml_utilization(gpu_cv(population_mlp, population_data, folds = folds, epochs = population_epochs,
                                batch_size = 256, seed = 1))
  say("\n## 6. Populations: ", folds, " folds, and ", if (mode$smoke) "2" else "16", " trials, trained together\n")
  say("```r\n", paste(
    "fit <- gpu_fit(model_fn(), fold_rows, epochs = 5, batch_size = 256, seed = 1)",
    "cv <- gpu_cv(model_fn, list(x = x, y = y), folds = 5, epochs = 5, batch_size = 256, seed = 1)", sep = "\n"), "\n```\n")
  say(sprintf(paste0("gpu_cv(): %.1f s, trained as %s; one gpu_fit() of a fold's rows: %.1f s; **%.2fx** (goal <= 2x",
                     " on an H100); GPU utilization while the folds trained: %.0f %%; the population's own (compiling, training)",
                     " %.1f s of it"),
              cv$seconds, paste(cv$value$trained, collapse = " and "), one_fit$seconds, cv$seconds / one_fit$seconds,
              cv$utilization, max(cv$value$seconds)))
  # The learning rate is gpu_fit()'s (searched through gpu_search()'s `...`), so that trials of
  # one shape (model_fn's parameters: units) make one group and train as one population; a
  # rate given to model_fn would make each trial a group of its own, trained as a process.
  population_search <- function(space, trials) {
    folder <- tempfile("r-on-gpu-population-")
    on.exit(unlink(folder, recursive = TRUE))
    nvml_utilization(gpu_search(function(params) do.call(population_mlp, params),
                                population_data, space, learning_rate = search_float(1e-4, 1e-2, log = TRUE),
                                trials = trials, sampler = "random", pruner = "none",
                                storage = folder, seed = 1, epochs = population_epochs, batch_size = 256))
  }
  # a smoke run takes each path once: the two larger searches run the same code
  searches <- if (mode$smoke) {
    list(learning_rate = function() population_search(list(), 2L))
  } else {
    list(learning_rate = function() population_search(list(), 16L),
         # the same search again in this session: its programs compiled (or loaded) once
         learning_rate_again = function() population_search(list(), 16L),
         units_too = function() population_search(search_space["units"], 16L))
  }
  if (!is.na(searches_arg)) searches <- searches[intersect(names(searches), strsplit(args[searches_arg + 1L], ",")[[1]])]
  searches <- lapply(searches, function(search) search())
  # (the GPU's utilization goal is a wide MLP's population: bench/population_utilization.py)
  goals <- c(learning_rate = "goal >= 6,650 trials per hour in a fresh session",
             learning_rate_again = "goal >= 30,000 trials per hour run again in the session",
             units_too = "goal >= 2,660")
  for (name in names(searches)) {
    run <- searches[[name]]
    trials <- nrow(run$value$trials)
    # a population's members share its seconds (its compiling and training): a group's counted once
    training <- sum(unique(run$value$trials$seconds), na.rm = TRUE)
    say(sprintf(paste("\nSearch (%s): %d trials in %.1f s, **%.0f trials per hour** (%s); trained as %s (%s);",
                      "GPU utilization %.0f %%; the populations' own (compiling, training) %.1f s of it"),
                c(learning_rate = "learning rate", learning_rate_again = "learning rate, the same again",
                  units_too = "units and learning rate")[[name]],
                trials, run$seconds, 3600 * trials / run$seconds, goals[[name]],
                paste(run$value$trained, collapse = " and "), if (is.null(run$value$trained_why)) "no reason given" else run$value$trained_why,
                run$utilization, training))
  }
}
if (6 %in% parts) {
  cache <- gpu_compile_cache()
  say(sprintf(paste("\nCompilation cache (gpu_compile_cache()): %s (%s); %d programs kept, %d of them written",
                    "during part 6 by the session and its workers; the session itself compiled %d and loaded %d"),
              if (is.null(cache$folder)) "none" else cache$folder, cache$whose, cache$programs,
              cache$programs - cache_start, cache$misses, cache$hits))
}
say("\nWall time of this script: ", round(as.numeric(difftime(Sys.time(), started, units = "secs"))), " s.")

out <- if (!is.na(out_arg)) {
  args[out_arg + 1L]
} else if (mode$smoke) {
  file.path(Sys.getenv("GPUKERAS_BENCH_OUT", tempdir()), "r-on-gpu-smoke.md")
} else {
  sprintf("bench/results/r-on-gpu-%s-%s.md", gsub("[^A-Za-z0-9]+", "-", device), Sys.Date())
}
dir.create(dirname(out), showWarnings = FALSE, recursive = TRUE)
writeLines(lines, out)
cat("written to", out, "\n")
