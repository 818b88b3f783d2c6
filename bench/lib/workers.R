# What bench/cv.R and bench/search.R share: the data, the model, and the probe that
# times each fit's start in its worker process (R/workers.R), from the task's
# submission to its first training step.
#
# The probe changes nothing in the package. In this session it traces two internal
# functions of gpukeras: worker_submit(), to read the clock when a task is given to a
# slot's worker (the submission), and worker_collect(), to keep
# each ended fit's result (with its worker's `timings`, when R/workers.R records them).
# In the worker, the model function calls worker_probe_begin() (only in a worker: a
# process other than this session), which reads the clock, traces gpu_fit() (its entry
# and exit) and load_arrays() (the data copy) there, and makes Keras' CallbackList read
# the clock at its first on_train_batch_begin, the start of the first training step
# (the step that then traces and compiles). gpu_fit()'s exit writes what the worker
# read to a file in `probe_dir`, one per fit. The probe's own setup in the worker (about
# 0.2 s, mostly trace()) is timed and left out of the overhead.

# The data: `rows` x `features` standard normal, two classes from a linear score
# plus noise (about 88 % separable), integer labels 0/1.
bench_data <- function(rows, features = 20L, noise = 1.5, seed = 1L) {
  withr::with_seed(seed, {
    x <- matrix(stats::rnorm(rows * features), ncol = features)
    w <- stats::rnorm(features)
    y <- as.integer(x %*% w + stats::rnorm(rows, sd = noise) > 0)
  })
  list(x = x, y = y)
}

# The worker's side of the probe: call first thing in the model function. Does nothing
# in the session (`session_pid`, this session's process id).
worker_probe_begin <- function(probe_dir, session_pid) {
  if (Sys.getpid() == session_pid) {
    return(invisible(NULL))
  }
  state <- new.env(parent = emptyenv())
  state$model_fn_start <- as.numeric(Sys.time())
  state$rows_seconds <- 0
  task <- dynGet("task", ifnotfound = NULL) # worker_model(task)'s argument
  state$number <- if (!is.null(task$trial)) task$trial$number else task$number
  state$pid <- Sys.getpid()
  assign(".bench_probe", state, envir = globalenv())
  # trace() runs these closures, which hold `state` (an environment can be called
  # into, not assigned through, inside a traced function's frame)
  rows_began <- function() state$rows_began <- as.numeric(Sys.time())
  rows_ended <- function() state$rows_seconds <- state$rows_seconds + as.numeric(Sys.time()) - state$rows_began
  fit_entered <- function() state$fit_entry <- as.numeric(Sys.time())
  fit_exited <- function() {
    state$fit_exit <- as.numeric(Sys.time())
    state$first_step <- reticulate::py_eval("bench_first_step")
    state$compile <- reticulate::py_eval("bench_compile")
    state$compile_first <- reticulate::py_eval("bench_compile_first")
    saveRDS(as.list(state), file.path(probe_dir, sprintf("fit-%d-%d.rds", state$number, state$pid)))
    # this fit's alone: the worker runs later tasks, of other calls (R/workers.R)
    suppressMessages({
      untrace("load_arrays", where = namespace)
      untrace("gpu_fit", where = namespace)
    })
  }
  namespace <- asNamespace("gpukeras")
  suppressMessages({
    trace("load_arrays", tracer = bquote(.(rows_began)()), exit = bquote(.(rows_ended)()), where = namespace, print = FALSE)
    trace("gpu_fit", tracer = bquote(.(fit_entered)()), exit = bquote(.(fit_exited)()), where = namespace, print = FALSE)
  })
  probe_python()
  # the probe's own time, left out of the overhead (mostly trace())
  state$probe_ready <- as.numeric(Sys.time())
  invisible(state)
}

# The probe's Python side, in this process: the clock at the next fit's first training
# step (`bench_first_step`, armed again by each call) and, on JAX, what it compiles from
# now on (`bench_compile`, `bench_compile_first`; its listener registered once).
probe_python <- function() {
  reticulate::py_run_string("
import time
import keras

bench_first_step = None
# JAX's own timings of what this fit traced, lowered and compiled (seconds by event:
# /jax/core/compile/backend_compile_duration is XLA's compiler, autotuning included)
bench_compile = {}
bench_compile_first = {}  # what it was at the first training step

def _bench_first_step():
    hooks = keras.callbacks.CallbackList
    original = hooks.on_train_batch_begin

    def first(self, batch, logs=None):
        global bench_first_step, bench_compile_first
        hooks.on_train_batch_begin = original
        bench_first_step = time.time()
        bench_compile_first = dict(bench_compile)
        return original(self, batch, logs)

    hooks.on_train_batch_begin = first

_bench_first_step()

def _bench_compile(event, duration, *args, **kwargs):
    if event.startswith('/jax/core/compile/') or event.startswith('/jax/compilation_cache/'):
        name = event.rsplit('/', 1)[-1]
        bench_compile[name] = bench_compile.get(name, 0.0) + duration

if keras.backend.backend() == 'jax' and not globals().get('bench_listening'):
    bench_listening = True
    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_bench_compile)
")
  invisible()
}

# Call last in the model function, with the model.
worker_probe_end <- function(model) {
  state <- get0(".bench_probe", envir = globalenv())
  if (!is.null(state)) state$model_fn_end <- as.numeric(Sys.time())
  model
}

# The session's side: trace the submission and the collection of every fit. Returns an
# environment whose `submitted` (task number -> time) and `ended` (the ended fits:
# number, collected, result timings, seconds) fill as fits run; untrace with
# probe_session_stop().
probe_session_start <- function() {
  recorder <- new.env(parent = emptyenv())
  recorder$submitted <- list()
  recorder$ended <- list()
  submitted <- function(task) {
    number <- if (!is.null(task$trial)) task$trial$number else task$number
    recorder$submitted[[as.character(number)]] <- as.numeric(Sys.time())
  }
  collected <- function(ended) {
    now <- as.numeric(Sys.time())
    for (one in ended) {
      recorder$ended[[length(recorder$ended) + 1L]] <- list(
        number = if (!is.null(one$task$trial)) one$task$trial$number else one$task$number,
        collected = now, seconds = one$seconds, timings = one$result$timings, error = one$result$error$message
      )
    }
  }
  namespace <- asNamespace("gpukeras")
  suppressMessages({
    trace("worker_submit", tracer = bquote(.(submitted)(task)), where = namespace, print = FALSE)
    trace("worker_collect", exit = bquote(.(collected)(returnValue())), where = namespace, print = FALSE)
  })
  recorder
}

probe_session_stop <- function() {
  namespace <- asNamespace("gpukeras")
  suppressMessages({
    untrace("worker_submit", where = namespace)
    untrace("worker_collect", where = namespace)
  })
  invisible()
}

# One row per fit of a run: when it was submitted, each step of its start in the
# worker, its first training step, its end and collection (seconds since the run
# began, and the parts of the overhead in seconds), from the session's `recorder` and
# the worker's files in `probe_dir`. `began`: the run's start (Sys.time() as a number).
probe_fits <- function(recorder, probe_dir, began) {
  files <- list.files(probe_dir, pattern = "^fit-.*[.]rds$", full.names = TRUE)
  worker <- lapply(files, readRDS)
  by_number <- stats::setNames(worker, vapply(worker, function(w) as.character(w$number), ""))
  ended <- stats::setNames(recorder$ended, vapply(recorder$ended, function(e) as.character(e$number), ""))
  numbers <- names(recorder$submitted)
  numbers <- numbers[order(unlist(recorder$submitted[numbers]))]
  rows <- lapply(numbers, function(number) {
    w <- by_number[[number]]
    e <- ended[[number]]
    submitted <- recorder$submitted[[number]]
    timings <- e$timings
    get <- function(x) if (is.null(x)) NA_real_ else as.numeric(x)
    data.frame(
      number = as.integer(number),
      submitted = submitted - began,
      task_read = get(timings$task_read) - began,
      setup_done = get(timings$setup_done) - began,
      model_fn_start = get(w$model_fn_start) - began,
      probe_ready = get(w$probe_ready) - began,
      model_fn_end = get(w$model_fn_end) - began,
      fit_entry = get(w$fit_entry) - began,
      first_step = get(w$first_step) - began,
      fit_exit = get(w$fit_exit) - began,
      collected = get(e$collected) - began,
      rows_seconds = get(w$rows_seconds),
      # XLA's compiling (autotuning included) and JAX's tracing in the fit's worker, from
      # model_fn on (JAX only); tracing's timings nest (a jitted function's trace holds
      # those of the ones it calls), so its sum is an upper bound
      compile_seconds = get(w$compile$backend_compile_duration),
      trace_seconds = get(w$compile$jaxpr_trace_duration),
      # before the first step: lowering and compiling, all on the training thread then
      # (the side programs start after the first dispatch on the CPU); not tracing,
      # whose timings nest (a jitted function's trace holds those of the ones it calls)
      jax_before_first_step = if (length(w$compile_first)) {
        sum(unlist(w$compile_first[intersect(names(w$compile_first), c("backend_compile_duration", "jaxpr_to_mlir_module_duration"))]))
      } else {
        NA_real_
      },
      error = if (is.null(e$error)) NA_character_ else e$error
    )
  })
  fits <- do.call(rbind, rows)
  fits$probe <- fits$probe_ready - fits$model_fn_start
  fits$overhead <- fits$first_step - fits$submitted - fits$probe
  fits$before_model_fn <- fits$model_fn_start - fits$submitted
  fits$pickup <- fits$task_read - fits$submitted
  fits$setup <- fits$setup_done - fits$task_read
  fits$attach <- fits$model_fn_start - fits$setup_done
  fits$model_fn <- fits$model_fn_end - fits$probe_ready
  fits$data_copy <- fits$rows_seconds
  fits$other <- fits$fit_entry - fits$model_fn_end - fits$rows_seconds
  fits$fit_start <- fits$first_step - fits$fit_entry
  fits
}

# The same fits' starts in this session, to set beside the workers': for each row of
# `trials` (gpu_search()'s $trials: `number`, `seed` and the parameters' columns `names`),
# Keras' seed, model_fn(params) and gpu_fit() on the rows the search trained and validated
# on (`train`, `validation`: lists of x and y), from model_fn's call to the first training
# step (one epoch: the rest is not timed). That is what the model costs before its first
# step in a process that has fitted before: building it, and on JAX compiling its programs
# (initializers, the training loop), work a fresh worker does as well. One unmeasured fit
# first: a session's first fit compiles what every fit shares, which the workers load from
# the session's compile cache. Returns a data.frame: number, session_start (seconds).
session_starts <- function(model_fn, trials, names, train, validation, batch_size) {
  start <- function(row) {
    reticulate::import("keras")$utils$set_random_seed(as.integer(trials$seed[row]))
    probe_python()
    began <- as.numeric(Sys.time())
    model <- model_fn(as.list(trials[row, names, drop = FALSE]))
    gpu_fit(model, train, validation_data = validation, seed = trials$seed[row], epochs = 1L, batch_size = batch_size, verbose = 0)
    reticulate::py_eval("bench_first_step") - began
  }
  start(1L)
  data.frame(number = trials$number, session_start = vapply(seq_len(nrow(trials)), start, 0))
}

# What a fresh worker adds to a fit's start: the overhead of each of `fits`' ready_fits()
# (overhead_summary()'s measure) less the same fit's start in this session (`starts`,
# session_starts()), paired by number.
fresh_overhead <- function(fits, starts) {
  paired <- merge(ready_fits(fits), starts, by = "number")
  extra <- paired$overhead - paired$session_start
  list(
    fits = nrow(paired),
    median = median_max(extra)[["median"]], max = median_max(extra)[["max"]],
    overhead = as.list(median_max(paired$overhead)), session_start = as.list(median_max(paired$session_start))
  )
}

# The median and the max of `x`, NA where it has no number.
median_max <- function(x) {
  x <- x[is.finite(x)]
  if (!length(x)) {
    return(c(median = NA_real_, max = NA_real_))
  }
  c(median = stats::median(x), max = max(x))
}

# The fits of `fits` (probe_fits() with a `run` column) after each run's first whose
# process was waiting when their task came: it picks its task up within its poll (20 ms)
# and the read.
ready_fits <- function(fits) {
  later <- fits[duplicated(fits$run), , drop = FALSE]
  later[!is.na(later$pickup) & later$pickup <= 0.1, , drop = FALSE]
}

# The overhead of every fit after the first of each run in `fits` (a probe_fits() table
# with a `run` column; each such fit's process was started while the previous fit
# trained): median and max, and the median and max of each part.
overhead_summary <- function(fits) {
  first <- !duplicated(fits$run)
  later <- fits[!first, , drop = FALSE]
  ready <- ready_fits(fits)
  parts <- c("before_model_fn", "pickup", "setup", "attach", "model_fn", "data_copy", "other", "fit_start")
  stat <- function(x) as.list(median_max(x))
  gaps <- unlist(lapply(split(fits, fits$run), function(run) run$submitted[-1] - utils::head(run$fit_exit, -1)))
  list(
    fits = nrow(later),
    # the goal's measure: fits whose process was already waiting when the task came
    ready_fits = nrow(ready),
    median = median_max(ready$overhead)[["median"]],
    max = median_max(ready$overhead)[["max"]],
    parts = lapply(stats::setNames(parts, parts), function(p) stat(ready[[p]])),
    # every fit after the first, those whose process was still starting too
    all_fits = list(median = median_max(later$overhead)[["median"]], max = median_max(later$overhead)[["max"]]),
    not_ready = list(
      fits = nrow(later) - nrow(ready),
      wait = stat(later$pickup[!is.na(later$pickup) & later$pickup > 0.1]),
      wait_total = sum(later$pickup[!is.na(later$pickup) & later$pickup > 0.1])
    ),
    probe = stat(later$probe),
    # on JAX: the overhead less what JAX lowered and compiled before the first step (the
    # model's initializers, the training loop): work a new architecture costs a fit in
    # the session as well
    less_jax_compiling = stat(ready$overhead - ready$jax_before_first_step),
    jax_before_first_step = stat(ready$jax_before_first_step),
    # each run's first fit waits for its process to start (R, gpukeras, Python, Keras)
    first_fit = stat(fits$overhead[first]),
    # from one fit's end in its worker (gpu_fit() returning) to the next fit's
    # submission: the worker's scoring and result, the session's poll, the study's
    # tell and ask
    between_fits = stat(gaps)
  )
}

# Print an overhead_summary()'s parts, and on JAX the overhead less JAX's own work.
print_overhead_parts <- function(overhead) {
  parts <- overhead$parts
  cat(sprintf("  %-16s median %.3f s, max %.3f s\n", names(parts), vapply(parts, `[[`, 0, "median"), vapply(parts, `[[`, 0, "max")), sep = "")
  if (is.finite(overhead$less_jax_compiling$median)) {
    cat(sprintf(
      "  less what JAX lowered and compiled before the first step (median %.2f s): median %.2f s, max %.2f s\n",
      overhead$jax_before_first_step$median, overhead$less_jax_compiling$median, overhead$less_jax_compiling$max
    ))
  }
}

# Where a run's `seconds` (its wall time) went, from its probe_fits() table: training
# (each fit's first step to gpu_fit() returning), starts (submission to first step,
# less the probe's own time: the first fit's process start, then each overhead and
# wait), between (a fit's end to the next submission: scoring, result, poll, tell and
# ask), the probe's time, and the rest (before the first submission and after the
# last fit: the data carried to .npy files, the study opened, the result built, the
# pool closed).
time_split <- function(fits, seconds) {
  # A fit that failed before its first step (its worker lost) has none of these to count.
  training <- sum(fits$fit_exit - fits$first_step, na.rm = TRUE)
  starts <- sum(fits$overhead, na.rm = TRUE)
  between <- sum(fits$submitted[-1] - utils::head(fits$fit_exit, -1), na.rm = TRUE)
  probe <- sum(fits$probe, na.rm = TRUE)
  list(
    seconds = seconds, training = training, first_start = fits$overhead[1], later_starts = starts - fits$overhead[1],
    between = between, probe = probe, rest = seconds - training - starts - between - probe
  )
}

# CPU seconds the whole machine has spent busy, and those of this session's process
# tree (itself, its children reaped, and its descendants alive: the workers), from
# /proc. Between two snapshots, busy - mine is what other processes took: load that
# is not the benchmark's.
cpu_snapshot <- function() {
  hz <- as.numeric(system2("getconf", "CLK_TCK", stdout = TRUE))
  total <- as.numeric(strsplit(readLines("/proc/stat", n = 1L), " +")[[1]][-1])
  busy <- sum(total[c(1:3, 6:8)]) # user nice system irq softirq steal
  fields <- function(pid) {
    # a process may end between the listing and the read
    line <- tryCatch(suppressWarnings(readLines(sprintf("/proc/%s/stat", pid), warn = FALSE)), error = function(e) character())
    if (!length(line)) {
      return(NULL)
    }
    as.numeric(strsplit(sub("^.*\\) ", "", line), " ")[[1]][c(2, 12:15)]) # ppid utime stime cutime cstime
  }
  pids <- list.files("/proc", pattern = "^[0-9]+$")
  table <- do.call(rbind, lapply(pids, function(pid) {
    f <- fields(pid)
    if (!is.null(f)) c(pid = as.numeric(pid), f)
  }))
  self <- Sys.getpid()
  tree <- self
  repeat {
    more <- setdiff(table[table[, 2] %in% tree, 1], tree)
    if (!length(more)) break
    tree <- c(tree, more)
  }
  own <- table[table[, 1] == self, ]
  # a descendant's reaped children too (a worker's own)
  mine <- sum(own[3:6]) + sum(table[table[, 1] %in% setdiff(tree, self), 3:6])
  c(busy = busy / hz, mine = mine / hz)
}

# Other processes' CPU seconds between `before` and `after` (cpu_snapshot()), and their
# share of the machine's cores over `wall` seconds.
foreign_cpu <- function(before, after, wall) {
  seconds <- max(0, (after[["busy"]] - before[["busy"]]) - (after[["mine"]] - before[["mine"]]))
  c(foreign_cpu_seconds = seconds, foreign_share = seconds / (parallel::detectCores() * wall))
}
