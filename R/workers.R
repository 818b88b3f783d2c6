# Worker processes for gpu_cv() and gpu_search(): every fit in a fresh R process that
# sees its own device alone, so nothing carries from one fit to the next (weights,
# compiled functions, memory), a crash takes one fit, and a fit's device memory goes
# back when its process ends. The session itself starts no runtime: it holds no device
# memory.
#
# A pool has slots (tools/workers.py decides them: a device each, or several on one
# GPU). A slot runs one fit at a time, and keeps the next process ready meanwhile, so a
# fit waits for no start-up: forked from the session's template (worker-template.R: R,
# gpukeras, Python and Keras loaded), so that readying one costs no CPU, it then starts
# its runtime on its device with the session's gpu_setup() and compiles one small step
# (worker_prepare()). Each process has a folder in the pool's: it waits there for
# task.rds, writes result.rds, and ends. The pool's folder holds the data once, as .npy
# files the workers memory-map.

# The slots for `devices`, `workers` and `workers_per_device`, as the core plans them.
worker_plan <- function(devices, workers, workers_per_device, call = caller_env()) {
  core_call(
    "workers_plan",
    devices = if (identical(devices, "all")) devices else as.list(as.integer(devices)),
    workers = workers, per_device = workers_per_device, error_call = call
  )
}

check_devices <- function(devices, call = caller_env()) {
  ok <- identical(devices, "all") ||
    (is.numeric(devices) && length(devices) >= 1L && !anyNA(devices) && all(devices >= 0) &&
      all(devices == round(devices)) && !anyDuplicated(devices))
  if (!ok) {
    abort_bad_argument(c(
      sprintf("`devices` must be \"all\" or GPU indices (whole numbers >= 0, each once), not %s.", describe(devices)),
      "gpu_devices() lists the GPUs; devices = \"all\" uses every one (or the CPU where there is none)."
    ), call = call)
  }
  devices
}

# `warm`: a core verb and its arguments that the waiting processes call ahead, list(verb,
# args) (gpu_search()'s workers report to Optuna: opening its storage took 0.5 s of each
# trial's start, measured by bench/search.R).
new_worker_pool <- function(plan, dir, warm = NULL) {
  pool <- new.env(parent = emptyenv())
  pool$plan <- plan
  pool$slots <- plan$slots
  pool$dir <- dir
  pool$next_id <- 0L
  pool$ready <- vector("list", length(plan$slots))
  pool$busy <- vector("list", length(plan$slots))
  pool$setup <- the$setup_args
  pool$warm <- warm
  pool
}

# A fresh process for slot `i`, waiting in a folder of its own for its task: forked by
# the session's template (worker-template.R), or started from scratch where none can run.
worker_start <- function(pool, i) {
  pool$next_id <- pool$next_id + 1L
  dir <- file.path(pool$dir, sprintf("worker-%03d", pool$next_id))
  dir.create(dir)
  env <- process_env(pool$slots[[i]]$visible)
  prepare <- list(setup = pool$setup, compiled = session_compiled_dir())
  template <- template_start()
  process <- if (!is.null(template)) {
    template_fork(template, dir, env[setdiff(names(env), names(template$env))], pool$warm, prepare)
  } else {
    process_start(
      "worker_wait", list(dir, Sys.getpid(), pool$warm, prepare), dir,
      stdout = file.path(dir, "stdout.log"), stderr = file.path(dir, "stderr.log"), env = env
    )
  }
  list(dir = dir, process = process, slot = i)
}

# Give `task` to slot `i` (free): its ready process takes it, and with `ready_next` (more
# fits to come) the slot readies the next process meanwhile.
worker_submit <- function(pool, i, task, ready_next = TRUE, call = caller_env()) {
  worker <- pool$ready[[i]] %||% worker_start(pool, i)
  pool$ready[i] <- list(NULL)
  task$device <- pool$slots[[i]]$device
  write_rds_atomic(task, file.path(worker$dir, "task.rds"), "The fit's task (task.rds)", call = call)
  process_signal(worker$dir)
  worker$task <- task
  worker$started <- Sys.time()
  pool$busy[[i]] <- worker
  if (ready_next) pool$ready[[i]] <- worker_start(pool, i)
  invisible(worker)
}

# Where this session's workers keep what their fits compile (on JAX), for every later
# worker of the session: a fold or trial of a model compiled before, in this pool or an
# earlier gpu_cv() or gpu_search(), loads its programs instead of compiling them again,
# as a session's second gpu_fit() of a model finds them in memory. It goes with the
# session's temporary folder.
session_compiled_dir <- function() file.path(tempdir(), "gpukeras-compiled")

# The slots with no fit running.
worker_free <- function(pool) which(vapply(pool$busy, is.null, logical(1)))

# The fits that ended since the last call: each a list with `task`, `slot`, `seconds`, the
# worker's `result` (its own, or, for a fit that failed, its `error` as data: error_data())
# and the `condition` it failed with, whole (for a process that died, one with the cause
# and its stderr's last lines). Their slots are free again.
worker_collect <- function(pool) {
  ended <- list()
  for (i in seq_along(pool$busy)) {
    worker <- pool$busy[[i]]
    if (is.null(worker)) next
    process <- worker$process
    alive <- process$is_alive()
    if (alive && !process$reported()) next
    # On a GPU the next fit starts once this one's process has ended and given its memory
    # back; on the CPU nothing waits for that (a framework takes a second to tear down).
    if (alive && !is.null(pool$slots[[i]]$visible)) process$wait(5000L)
    result <- process$result()
    error <- if (is.null(result)) process$error()
    # A process that ended before it took its task (while it loaded, prepared or waited,
    # or never forked: its template gone) ran none of the fit: it goes again, once.
    retry <- is.null(result) && is.null(error) && !file.exists(file.path(worker$dir, "taken")) &&
      !isTRUE(worker$task$retried)
    if (!retry) {
      error <- if (is.null(result)) error %||% worker_crash(worker)
      ended[[length(ended) + 1L]] <- list(
        task = worker$task, slot = i, result = result %||% list(error = error_data(error)), condition = error,
        seconds = as.numeric(difftime(Sys.time(), worker$started, units = "secs"))
      )
    }
    pool$busy[i] <- list(NULL)
    unlink(worker$dir, recursive = TRUE)
    if (retry) worker_retry(pool, i, worker$task)
  }
  ended
}

# Give `task`, whose process ended before it took it, to a fresh process of slot `i`; the
# slot's next process, where it died too (as with its template), is started again.
worker_retry <- function(pool, i, task) {
  task$retried <- TRUE
  ready <- pool$ready[[i]]
  if (!is.null(ready) && !ready$process$is_alive()) {
    unlink(ready$dir, recursive = TRUE)
    pool$ready[i] <- list(NULL)
  }
  worker_submit(pool, i, task, ready_next = !is.null(ready))
}

# What a worker that ended without a result died of: a condition, `crashed`.
worker_crash <- function(worker) {
  status <- worker$process$get_exit_status()
  stderr <- log_tail(file.path(worker$dir, "stderr.log"))
  rlang::error_cnd(
    c("gpukeras_error_worker_lost", "gpukeras_error"),
    message = paste(c(sub("the training process", "its worker process", exit_cause(status)), stderr), collapse = "\n"),
    crashed = TRUE
  )
}

# Raise the slots on GPU `device` to `count` workers (per_device = "auto", once a fit's
# memory plan says so).
worker_grow <- function(pool, device, count) {
  on_device <- which(vapply(pool$slots, function(slot) identical(slot$device, device), logical(1)))
  extra <- count - length(on_device)
  if (extra <= 0L || !length(on_device)) return(invisible(0L))
  template <- pool$slots[[on_device[1]]]
  pool$slots <- c(pool$slots, rep(list(template), extra))
  pool$busy <- c(pool$busy, vector("list", extra))
  pool$ready <- c(pool$ready, vector("list", extra))
  invisible(extra)
}

# With workers_per_device = "auto": more workers on the fit's GPU when its memory plan
# says that more fits fit there.
many_grow <- function(pool, ended, result) {
  slot <- pool$slots[[ended$slot]]
  if (!isTRUE(ended$task$plan_memory) || is.null(result$peak_mib) || isTRUE(pool$grown[[slot$device]]))
    return(invisible())
  fitting <- core_call("workers_fitting", memory_total_mib = slot$memory_total_mib, peak_mib = result$peak_mib)
  pool$grown[[slot$device]] <- TRUE
  worker_grow(pool, slot$device, fitting$workers)
  pool$plan$reason <- c(pool$plan$reason, fitting$reason)
  invisible()
}

# End every process of the pool and remove its folder (the data's .npy files too).
worker_close <- function(pool) {
  for (worker in c(pool$busy, pool$ready)) {
    if (!is.null(worker)) worker$process$kill_tree()
  }
  unlink(pool$dir, recursive = TRUE)
  invisible()
}

# Run `tasks` (a list) on the pool; `on_end(ended)` is called for each fit as it ends and
# may return tasks to add. `next_task()` (optional) gives further tasks while slots are
# free (NULL when there is none now; a task's `more` says whether others may follow).
# Returns when nothing is left to run.
worker_run <- function(pool, tasks = list(), on_end, next_task = function() NULL, on_wait = function() NULL) {
  repeat {
    for (i in worker_free(pool)) {
      task <- if (length(tasks)) {
        first <- tasks[[1]]
        tasks <- tasks[-1]
        first
      } else {
        next_task()
      }
      if (is.null(task)) break
      worker_submit(pool, i, task, ready_next = length(tasks) > 0L || isTRUE(task$more))
    }
    if (length(worker_free(pool)) == length(pool$busy)) break
    on_wait()
    process_wait(lapply(Filter(Negate(is.null), pool$busy), function(worker) worker$process), 1)
    for (ended in worker_collect(pool)) tasks <- c(tasks, on_end(ended))
  }
  invisible()
}

# --- In the worker process -------------------------------------------------------------

# What a worker loads before its task: Python, Keras (with TensorFlow where it is
# installed, which Keras' seed imports on either backend) and the core's modules its tasks
# call (the core's list: bridge.WORKER_VERBS), with no runtime (no devices, no memory), so
# that the task starts at once.
worker_load <- function() {
  core_call("preload_keras")
  core_call("preload")
}

# Load (worker_load()), then wait for the task; a session that ends first takes the
# waiting process with it.
worker_wait <- function(dir, parent, warm = NULL, prepare = NULL) {
  worker_load()
  if (!is.null(warm)) do.call(core_call, c(list(warm$verb), warm$args))
  worker_await(dir, parent, prepare)
}

# Prepare the runtime (worker_prepare()), wait in `dir` for the task (process_await()) and
# run it; return at once if the session has gone.
worker_await <- function(dir, parent, prepare) {
  task_file <- file.path(dir, "task.rds")
  prepared <- worker_prepare(prepare, compile = !file.exists(task_file))
  if (!process_await(dir, "task.rds", parent)) return(invisible())
  file.create(file.path(dir, "taken")) # from here the fit is this process's (worker_collect())
  worker_task(dir, readRDS(task_file), prepared)
}

# Before the task: the session's gpu_setup() (`prepare$setup`, the pool's), the runtime
# and, with `compile` (no task waiting yet), one small compiled step that takes the
# compiler's start off the fit's (core: workers_warm); then the session's compiled
# programs (`prepare$compiled`). NULL, or the error that the task then reports.
worker_prepare <- function(prepare, compile = TRUE) {
  tryCatch({
    setup <- prepare$setup
    if (!is.null(setup)) do.call(gpu_setup, setup[setdiff(names(setup), "devices")])
    core_call("start")
    # Only time is lost where it fails: the fit compiles as it would have.
    if (compile) try(core_call("workers_warm"), silent = TRUE)
    if (!is.null(prepare$compiled)) core_call("workers_share_compiled", folder = prepare$compiled)
    NULL
  }, error = identity)
}

# One task (its runtime `prepared` by worker_prepare()): the seed, then the task's `run`, a
# function of gpukeras called with the task whose list is the result (gpu_cv()'s
# population: cv_population_task()), or else one fit (worker_fit()). The result, or the
# error (the preparation's too), is the process's outcome (process.R).
worker_task <- function(dir, task, prepared = NULL) {
  task_read <- as.numeric(Sys.time()) # with setup_done, the result's `timings` (bench/cv.R, bench/search.R)
  tryCatch(
    {
      if (!is.null(prepared)) stop(prepared)
      core_call("workers_seed", seed = task$seed)
      track_restore(task$track$carried, task$track$context)
      setup_done <- as.numeric(Sys.time())
      run <- if (!is.null(task$run)) get(task$run, envir = asNamespace("gpukeras"), mode = "function") else worker_fit
      result <- run(task)
      result$timings <- list(task_read = task_read, setup_done = setup_done)
      worker_track_flush()
      process_report(dir, result, "The fit's result (result.rds)")
    },
    error = function(e) {
      worker_track_flush()
      process_report_error(dir, e)
    }
  )
  invisible()
}

# One fit, as the task carries it: model_fn's model (of `params`, when given), gpu_fit() on
# the data's `train_rows` (with `validation_rows` of it, or the `validation` files, as
# validation data) with `fit`'s arguments, and the client's own steps, by name: `callback`,
# a core verb and its arguments that make one more callback for the fit, and `then`, a
# function of gpukeras called with the fit, that callback and its `args`, whose list joins
# the result.
worker_fit <- function(task) {
  model <- worker_model(task)
  validation <- if (!is.null(task$validation_rows)) {
    load_arrays(task$data, task$validation_rows)
  } else if (!is.null(task$validation)) {
    load_arrays(task$validation)
  }
  callback <- if (!is.null(task$callback)) do.call(core_call, c(list(task$callback$verb), task$callback$args))
  plan <- worker_memory_plan(task, model)
  fit <- do.call(gpu_fit, c(
    list(
      model = model, data = load_arrays(task$data, task$train_rows), validation_data = validation, seed = task$seed,
      verbose = 0, callbacks = c(task$fit$callbacks, if (!is.null(callback)) list(callback))
    ),
    task$fit[setdiff(names(task$fit), "callbacks")]
  ))
  result <- list(history = fit$history, seconds = fit$settings$seconds, peak_mib = plan)
  if (!is.null(task$then)) {
    then <- get(task$then$run, envir = asNamespace("gpukeras"), mode = "function")
    result <- c(result, do.call(then, c(list(fit, callback), task$then$args)))
  }
  result
}

# The fit's run sent (it is not waited for in the fit: its model is written meanwhile)
# before the outcome is reported: what the session then records on the run (a trial's
# state and status) comes after the fit's own end.
worker_track_flush <- function() try(track_flush(ending = TRUE), silent = TRUE)

# model_fn's model (model_fn(params) in a search), checked to be a compiled Keras model
# with an output for the task's label `levels` (where the labels are classes).
worker_model <- function(task) {
  model_fn <- worker_function(task$model_fn)
  model <- if (is.null(task$params)) model_fn() else model_fn(task$params)
  if (!is_keras_model(model)) {
    gpukeras_abort(sprintf("`model_fn` must return a compiled Keras model, not %s.", describe(model)),
                   "gpukeras_error_bad_model", call = NULL)
  }
  check_output_width(model, task$levels, call = NULL)
  model
}

# With workers_per_device = "auto" on a GPU: the fit's planned peak memory (MiB), by
# which the session decides whether more workers fit that GPU; NULL otherwise.
worker_memory_plan <- function(task, model) {
  if (!isTRUE(task$plan_memory)) return(NULL)
  tryCatch(gpu_memory_plan(model, task$fit$batch_size %||% 32L)$peak_mib, error = function(e) NULL)
}
