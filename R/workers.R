# Worker processes for gpu_cv() and gpu_search(): fits run in R processes of their own
# that see their own device alone, so a crash takes one fit, and the session itself
# starts no runtime: it holds no device memory.
#
# A pool has slots (tools/workers.py decides them: a device each, or several on one
# GPU). A slot runs one fit at a time, on its worker. A worker is a callr::r_session
# started with its slot's environment, which loads itself as it starts (worker_ready() in
# callr's load hook: gpukeras, Python, Keras and the core's modules, its runtime started on
# its device with the session's gpu_setup(), one small step compiled); each call is then a
# task (worker_task()), whose value or error callr's read() gives back, the error as the
# `parent` of callr's. A worker runs many tasks: after each it resets what the fit left
# (worker_reset(): Keras' clear_session(), R's and Python's garbage, what the pool's `warm`
# opened ahead), and each task sets its seed as it starts, so a fit in a worker that ran
# others is the same as in a fresh one. A worker whose task failed, or that died (lost, or
# retried once in a fresh one when it had not taken its task yet), is ended, and the slot
# starts another. When the pool closes, its workers become the session's spares
# (`the$spares`), and a slot whose worker ended gets a spare started ahead: the next pool
# whose slots they fit (worker_key(): the same environment, device and gpu_setup()) takes
# them instead of starting new processes; they end with the session. gpu_setup(workers_ahead
# = ) starts spares before the session's first pool (setup_workers_ahead()). The session drives
# every worker from its poll connection (processx::poll() on all at once, worker_step()).
# The pool's folder holds the data once, as .npy files the workers memory-map; each
# worker's temporary folder is its own, in the session's.

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
# trial's start, measured by bench/search.R). `env`: variables the pool's workers get in
# their environment, beside process_env()'s: a secret (callr writes the arguments of a
# call, and a load hook, to files).
new_worker_pool <- function(plan, dir, warm = NULL, env = NULL) {
  free <- vector("list", length(plan$slots))
  list2env(list(
    plan = plan, slots = plan$slots, dir = dir, ready = free, busy = free, setup = the$setup_args, warm = warm,
    env = env
  ), parent = emptyenv())
}

# A worker for slot `i`: one of the session's spares that fits the slot (worker_spare()),
# or a fresh process, starting: a worker is an environment: its callr `session`, `state`,
# `dir`, its `key` and, once given one, its `task`. A fresh one loads itself as it starts
# (worker_ready() in callr's load hook, with the pool's `warm`), then says it is ready
# (callr's 201), whether or not anyone reads it yet: a spare started ahead needs no one.
worker_start <- function(pool, i) {
  # what makes a ready worker fit a slot: its environment (the session's Python, Keras
  # backend and the slot's device) and the session's gpu_setup(), not the pool's `warm`
  # (a worker drops what it opened ahead after each task, worker_reset())
  key <- list(env = c(process_env(pool$slots[[i]]$visible), pool$env), setup = pool$setup)
  spare <- worker_spare(key)
  if (!is.null(spare)) {
    spare$slot <- i
    return(spare)
  }
  # Its temporary folder is its own, in the session's (it may outlive the pool, a spare):
  # worker_end() removes it, and it goes with the session's otherwise.
  dir <- tempfile("gpukeras-worker-")
  dir.create(dir)
  prepare <- list(setup = pool$setup, warm = pool$warm)
  ready <- substitute(entry(path, "worker_ready", list(prepare)), list(
    entry = process_entry, path = getNamespaceInfo("gpukeras", "path"), prepare = prepare
  ))
  # (it ends with the session, even a killed one: process_entry())
  list2env(list(
    dir = dir, slot = i, key = key, state = "starting",
    session = callr::r_session$new(callr::r_session_options(env = c(key$env, TMPDIR = dir), load_hook = ready), FALSE)
  ), parent = emptyenv())
}

# A worker of the session's spares (those that pools left or started ahead, worker_close())
# whose key is `key`, taken out of them; NULL if none. One that died meanwhile is ended and
# skipped.
worker_spare <- function(key) {
  for (worker in Filter(function(w) identical(w$key, key), the$spares)) {
    the$spares <- Filter(function(w) !identical(w, worker), the$spares)
    if (worker$session$is_alive()) return(worker)
    worker_end(worker)
  }
  NULL
}

# Read what `worker`'s session says, if it has said anything, and move it on: loaded (its
# load hook ran), it is ready, and takes its task if one waits; its task's call returned, it
# is `done`; its process ended, it has `ended`. The message that ended it is kept as the
# worker's `outcome`.
worker_step <- function(worker) {
  if (worker_over(worker)) return(invisible(worker))
  # (a connection that processx closed, its process killed, reads as its end)
  message <- tryCatch(worker$session$read(), error = function(e) if (!worker$session$is_alive()) list(code = 501))
  if (is.null(message) || message$code == 301) return(invisible(worker))
  if (message$code == 201) {
    worker$state <- "ready"
    if (!is.null(worker$task)) worker_give(worker)
  } else {
    worker$outcome <- message
    worker$state <- if (message$code >= 500) "ended" else "done"
  }
  invisible(worker)
}

# Whether `worker` (or NULL) is over: `done` or `ended`.
worker_over <- function(worker) isTRUE(worker$state %in% c("done", "ended"))

# The ready `worker` takes its task: from here the fit is its process's (worker_collect()).
# One that died while it waited has not taken it: it is `ended` (worker_collect()).
worker_give <- function(worker) {
  worker$taken <- worker$session$is_alive() && tryCatch({
    worker$session$call(process_call, list(entry = "worker_task", args = list(worker$task)))
    TRUE
  }, error = function(e) FALSE)
  if (!worker$taken) worker_step(worker)
  worker$state <- if (worker$taken) "busy" else "ended"
  invisible(worker)
}

# Give `task` to slot `i` (free): its ready worker takes it (at once, or once it has
# loaded); a slot with none starts one (worker_start(): a spare, or a fresh process).
worker_submit <- function(pool, i, task) {
  worker <- pool$ready[[i]] %||% worker_start(pool, i)
  pool$ready[i] <- list(NULL)
  task$device <- pool$slots[[i]]$device
  # the memory plan only until it has grown the pool on this device (many_grow(): once per GPU)
  task$plan_memory <- isTRUE(task$plan_memory) && !isTRUE(pool$grown[[task$device]])
  worker$task <- task
  worker$started <- Sys.time()
  if (worker$state == "ready") worker_give(worker)
  pool$busy[[i]] <- worker
  invisible(worker)
}

# Wait at most `timeout` seconds for any worker of the pool to say something (processx's
# poll() on every session's poll connection), and move each that did on (worker_step()).
worker_wait <- function(pool, timeout) {
  workers <- Filter(function(w) !is.null(w) && !worker_over(w), c(pool$busy, pool$ready))
  if (any(vapply(pool$busy, worker_over, logical(1))) || !length(workers)) return(invisible())
  ready <- processx::poll(lapply(workers, function(w) w$session$get_poll_connection()), as.integer(timeout * 1000))
  for (k in which(unlist(ready) == "ready")) worker_step(workers[[k]])
  invisible()
}

# The fits that ended since the last call: each a list with `task`, `slot`, `seconds`, the
# worker's `result` (its own, or, for a fit that failed, its `error` as data: error_data())
# and the `condition` it failed with, whole (the worker's own, as callr gives it back; for
# a process that died, one with the cause and its stderr's last lines). Their slots are
# free again: a worker whose task returned is the slot's ready worker again (it reset what
# the fit left, worker_reset()); one that failed or died is ended, and the slot's next
# task starts another.
worker_collect <- function(pool) {
  ended <- list()
  for (i in which(vapply(pool$busy, worker_over, logical(1)))) {
    worker <- pool$busy[[i]]
    pool$busy[i] <- list(NULL)
    task <- worker$task
    # A process that ended before it took its task (while it started or waited) ran none
    # of the fit: it goes again, once, to a fresh process (the slot has no ready worker).
    if (worker$state == "ended" && !isTRUE(worker$taken) && !isTRUE(task$retried)) {
      worker_end(worker)
      task$retried <- TRUE
      worker_submit(pool, i, task)
      next
    }
    # the worker's own condition (callr's error's `parent`), callr's where it has none
    failed <- worker$outcome$error
    error <- if (worker$state == "ended") worker_crash(worker) else failed$parent %||% failed
    ended[[length(ended) + 1L]] <- list(
      task = task, slot = i, result = if (is.null(error)) worker$outcome$result else list(error = error_data(error)),
      condition = error, seconds = as.numeric(difftime(Sys.time(), worker$started, units = "secs"))
    )
    # a worker whose task returned a value, alive and idle, is ready for the slot's next task
    if (is.null(error) && worker$session$is_alive() && identical(worker$session$get_state(), "idle")) {
      worker$task <- worker$taken <- worker$outcome <- NULL
      worker$state <- "ready"
      pool$ready[[i]] <- worker
    } else {
      worker_end(worker)
    }
  }
  ended
}

# End `worker`'s process (its result is in: nothing is lost; on a GPU its memory goes back
# now, before the slot's next fit) and remove its folder.
worker_end <- function(worker) {
  worker$session$kill_tree()
  worker$session$wait(5000L)
  unlink(worker$dir, recursive = TRUE)
  invisible()
}

# What a worker that ended without a result died of: a condition, `crashed`, with the
# last lines its call wrote to stderr.
worker_crash <- function(worker) {
  cause <- core_call("job_exit_cause", status = worker$session$get_exit_status(), process = "its worker process")
  rlang::error_cnd(
    c("gpukeras_error_worker_lost", "gpukeras_error"),
    message = paste(c(cause, stderr_tail(worker$outcome)), collapse = "\n"),
    crashed = TRUE
  )
}

# With workers_per_device = "auto": more workers on the fit's GPU when its memory plan
# says that more fits fit there (the core's workers_grow; once per GPU).
many_grow <- function(pool, ended, result) {
  device <- pool$slots[[ended$slot]]$device
  if (!isTRUE(ended$task$plan_memory) || is.null(result$peak_mib) || isTRUE(pool$grown[[device]]))
    return(invisible())
  pool$grown[[device]] <- TRUE
  grown <- core_call("workers_grow", slots = pool$slots, slot = ended$slot - 1L, peak_mib = result$peak_mib)
  pool$slots <- grown$slots
  length(pool$busy) <- length(pool$ready) <- length(grown$slots)
  pool$plan$reason <- c(pool$plan$reason, grown$reason)
  invisible()
}

# Close the pool: its workers with no task running (ready, or still loading) go to the
# session's spares, for the next pool whose slots they fit (worker_start()); the others
# (busy: a call that failed or was interrupted), and all those of a pool with variables
# of its own (`env`: no other pool could take them), are ended. Each slot whose worker did
# not stay gets a spare started ahead in its place (loading itself in the background, its
# runtime started and one step compiled: worker_ready()), so that the next gpu_cv() or
# gpu_search() finds a worker per slot ready, at most one per slot; not in a process the
# session started (a background search's), which ends with its search. The pool's folder
# (the data's .npy files) is removed. Spares end with the session: callr kills its
# sessions' processes when R exits, and each ends with its session (process_entry()).
worker_close <- function(pool) {
  for (worker in Filter(Negate(is.null), c(pool$ready, pool$busy))) {
    if (is.null(pool$env) && worker$state %in% c("ready", "starting") && worker$session$is_alive()) {
      worker$task <- NULL
      the$spares <- c(the$spares, worker)
    } else {
      worker_end(worker)
    }
  }
  if (!nzchar(Sys.getenv("GPUKERAS_SESSION_PID"))) worker_spares_start(pool)
  pool$ready <- vector("list", length(pool$ready))
  pool$busy <- vector("list", length(pool$busy))
  unlink(pool$dir, recursive = TRUE)
  invisible()
}

# A spare started ahead for each of the pool's slots that no spare of the session fits yet
# (worker_start() takes the one that fits, given back here), loading itself in the
# background: at most one per slot.
worker_spares_start <- function(pool) {
  pool$warm <- pool$env <- NULL # a spare serves any pool whose slots it fits
  spares <- lapply(seq_along(pool$slots), function(i) worker_start(pool, i)) # (taking those that fit first)
  the$spares <- c(the$spares, spares)
  invisible()
}

# gpu_setup(workers_ahead = ): a spare started ahead for each slot the core plans (its
# `slots`, as the first pool's will be; "auto": one per GPU, none without one), with the
# print's `line`; NULL for 0. First the spares made for another gpu_setup() are ended: no
# pool can take them.
setup_workers_ahead <- function(count) {
  worker_spares_end(keep = function(worker) identical(worker$key$setup, the$setup_args))
  if (identical(count, 0L)) return(NULL)
  ahead <- core_call("workers_ahead", workers = count)
  if (length(ahead$slots)) worker_spares_start(new_worker_pool(ahead, dir = NULL))
  ahead
}

# End the session's spare workers but those `keep(worker)` keeps (tests end them all; the
# session's end does it otherwise).
worker_spares_end <- function(keep = function(worker) FALSE) {
  kept <- Filter(keep, the$spares)
  lapply(Filter(Negate(keep), the$spares), worker_end)
  the$spares <- kept
  invisible()
}

# Run `tasks` (a list) on the pool; `on_end(ended)` is called for each fit as it ends and
# may return tasks to add. `next_task()` (optional) gives further tasks while slots are
# free (NULL when there is none now; a task's `more` says whether others may follow).
# Returns when nothing is left to run.
worker_run <- function(pool, tasks = list(), on_end, next_task = function() NULL, on_wait = function() NULL) {
  repeat {
    for (i in which(vapply(pool$busy, is.null, logical(1)))) { # the slots with no fit running
      task <- if (length(tasks)) tasks[[1]] else next_task()
      if (is.null(task)) break
      tasks <- tasks[-1]
      worker_submit(pool, i, task)
    }
    if (all(vapply(pool$busy, is.null, logical(1)))) break
    on_wait()
    worker_wait(pool, 1)
    for (ended in worker_collect(pool)) tasks <- c(tasks, on_end(ended))
  }
  invisible()
}

# --- In the worker process -------------------------------------------------------------

# The worker's start (callr's load hook, worker_start()): load Python, Keras (with
# TensorFlow where it is installed, which Keras' seed imports on either backend) and the
# core's modules its tasks call (the core's list: bridge.WORKER_VERBS); open what
# `prepare$warm` names ahead (a core verb and its arguments); apply the session's
# gpu_setup() (`prepare$setup`, the pool's), start the runtime and compile one small step
# that takes the compiler's start off the first fit's (core: workers_warm; the compiled
# programs are the user's cache's: gpu_compile_cache()). Whatever fails here is the task's
# error (the worker keeps it for worker_task()).
worker_ready <- function(prepare) {
  the$worker_prepared <- tryCatch({
    core_call("preload_keras")
    core_call("preload")
    the$worker_unwarm <- prepare$warm$undo
    if (!is.null(prepare$warm)) do.call(core_call, c(prepare$warm$verb, prepare$warm$args))
    setup <- prepare$setup
    if (!is.null(setup)) do.call(gpu_setup, setup[setdiff(names(setup), "devices")])
    core_call("start")
    # Only time is lost where it fails: the fit compiles as it would have.
    try(core_call("workers_warm"), silent = TRUE)
    NULL
  }, error = identity)
  invisible()
}

# The worker's second call, its task (its runtime prepared by worker_ready()): the seed,
# then the task's `run`, a function of gpukeras called with the task whose list is the
# result (gpu_cv()'s population: cv_population_task()), or else one fit (worker_fit()).
# The result is the call's value; an error (the preparation's too) is the call's error,
# which callr gives the session whole (worker_collect()).
worker_task <- function(task) {
  task_read <- as.numeric(Sys.time()) # with setup_done, the result's `timings` (bench/cv.R, bench/search.R)
  on.exit({
    # The fit's run sent before the outcome is reported: what the session then records on
    # the run (a trial's state and status) comes after the fit's own end.
    try(track_flush(ending = TRUE), silent = TRUE)
    worker_reset()
  })
  if (!is.null(the$worker_prepared)) stop(the$worker_prepared)
  core_call("workers_seed", seed = task$seed)
  track_restore(task$track$carried, task$track$context)
  setup_done <- as.numeric(Sys.time())
  result <- get(task$run %||% "worker_fit", mode = "function")(task)
  result$timings <- list(task_read = task_read, setup_done = setup_done)
  result
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
  callback <- if (!is.null(task$callback)) do.call(core_call, c(task$callback$verb, task$callback$args))
  # With workers_per_device = "auto": the fit's planned peak memory (MiB), by which the
  # session decides whether more workers fit its GPU.
  plan <- if (isTRUE(task$plan_memory)) {
    tryCatch(
      core_call("memory_plan", model = model, batch_size = as.integer(task$fit$batch_size %||% 32L))$total_mib,
      error = function(e) NULL
    )
  }
  fit <- do.call(gpu_fit, c(
    list(
      model = model, data = load_arrays(task$data, task$train_rows), validation_data = validation, seed = task$seed,
      verbose = 0, callbacks = if (!is.null(callback)) list(callback)
    ),
    task$fit # (gpu_fit()'s arguments but those the worker sets, check_fit_args(): no `callbacks`)
  ))
  result <- list(history = fit$history, seconds = fit$settings$seconds, peak_mib = plan)
  if (!is.null(task$then)) {
    result <- c(result, do.call(task$then$run, c(list(fit, callback), task$then$args)))
  }
  result
}

# After a task, what its fit left reset, for the worker's next task (of this pool, or of
# a later one, as a spare): Keras' global state (clear_session(): models, names, the
# backend's graph) and both languages' garbage (core: workers_reset), and what the pool's
# `warm` opened ahead and the task did not take (its `undo` verb: a spare may serve
# another search). A task's seed and tracking context are set anew by the next task.
# R's garbage first: the Python objects R held (the task's model) are then Python's
# garbage, which the core's one collection frees, their device memory with them.
worker_reset <- function() {
  gc(verbose = FALSE)
  if (!is.null(the$worker_unwarm)) try(core_call(the$worker_unwarm), silent = TRUE)
  try(core_call("workers_reset"), silent = TRUE)
  invisible()
}

# model_fn's model (model_fn(params) in a search), checked to be a compiled Keras model
# with an output for the task's label `levels` (where the labels are classes).
worker_model <- function(task) {
  model_fn <- worker_function(task$model_fn)
  model <- if (is.null(task$params)) model_fn() else model_fn(task$params)
  if (!is_keras_model(model)) {
    gpukeras_abort(sprintf("`model_fn` must return a compiled Keras model, not %s.", describe(model)),
                   "gpukeras_error_bad_model", call = NULL)
  }
  check_widths(model, levels = task$levels, call = NULL)
  model
}
