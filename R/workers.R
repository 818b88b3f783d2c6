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
    gpukeras_abort(
      c(
        sprintf("`devices` must be \"all\" or GPU indices (whole numbers >= 0, each once), not %s.", describe(devices)),
        "gpu_devices() lists the GPUs; devices = \"all\" uses every one (or the CPU where there is none)."
      ),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
  devices
}

# The environment of a worker on `slot`: the session's Python and Keras backend, its GPU
# alone, and memory that grows as the fit needs it (JAX would take 75 % of the GPU at
# start, TensorFlow all of it, leaving nothing to a second worker).
worker_env <- function(slot) {
  c(
    callr::rcmd_safe_env(),
    GPUKERAS_PYTHON = reticulate::py_config()$python,
    KERAS_BACKEND = core_call("keras_backend"),
    if (!is.null(slot$visible)) {
      c(CUDA_VISIBLE_DEVICES = slot$visible, TF_FORCE_GPU_ALLOW_GROWTH = "true", XLA_PYTHON_CLIENT_PREALLOCATE = "false")
    }
  )
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
  env <- worker_env(pool$slots[[i]])
  prepare <- list(setup = pool$setup, compiled = session_compiled_dir())
  template <- template_start()
  process <- if (!is.null(template)) {
    template_fork(template, dir, env[setdiff(names(env), names(template$env))], pool$warm, prepare)
  } else {
    job_process(
      "worker_wait", list(dir, Sys.getpid(), pool$warm, prepare),
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
session_compiled_dir <- function() {
  file.path(tempdir(), "gpukeras-compiled")
}

# The slots with no fit running.
worker_free <- function(pool) {
  which(vapply(pool$busy, is.null, logical(1)))
}

# The fits that ended since the last call: each a list with `task`, `slot`, `seconds` and
# the worker's `result` (its own, or, for a process that died, an `error` with the cause
# and its stderr's last lines). Their slots are free again.
worker_collect <- function(pool) {
  ended <- list()
  for (i in seq_along(pool$busy)) {
    worker <- pool$busy[[i]]
    if (is.null(worker)) next
    result_file <- file.path(worker$dir, "result.rds")
    alive <- worker$process$is_alive()
    if (alive && !file.exists(result_file)) next
    # On a GPU the next fit starts once this one's process has ended and given its memory
    # back; on the CPU nothing waits for that (a framework takes a second to tear down).
    if (alive && !is.null(pool$slots[[i]]$visible)) worker$process$wait(5000L)
    result <- read_rds_or_null(result_file)
    # A process that ended before it took its task (while it loaded, prepared or waited,
    # or never forked: its template gone) ran none of the fit: it goes again, once.
    retry <- is.null(result) && !file.exists(file.path(worker$dir, "taken")) && !isTRUE(worker$task$retried)
    if (!retry) {
      ended[[length(ended) + 1L]] <- list(
        task = worker$task, slot = i, result = result %||% worker_crash(worker),
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

# What a worker that ended without a result died of.
worker_crash <- function(worker) {
  status <- worker$process$get_exit_status()
  stderr <- tryCatch(utils::tail(readLines(file.path(worker$dir, "stderr.log"), warn = FALSE), 20), error = function(e) character())
  list(error = list(
    class = "gpukeras_error_worker_lost",
    message = paste(c(sub("the training process", "its worker process", exit_cause(status)), stderr), collapse = "\n"),
    crashed = TRUE
  ))
}

# Raise the slots on GPU `device` to `count` workers (per_device = "auto", once a fit's
# memory plan says so).
worker_grow <- function(pool, device, count) {
  on_device <- which(vapply(pool$slots, function(slot) identical(slot$device, device), logical(1)))
  extra <- count - length(on_device)
  if (extra <= 0L || !length(on_device)) {
    return(invisible(0L))
  }
  template <- pool$slots[[on_device[1]]]
  pool$slots <- c(pool$slots, rep(list(template), extra))
  pool$busy <- c(pool$busy, vector("list", extra))
  pool$ready <- c(pool$ready, vector("list", extra))
  invisible(extra)
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
    Sys.sleep(0.05)
    for (ended in worker_collect(pool)) {
      tasks <- c(tasks, on_end(ended))
    }
  }
  invisible()
}

# --- In the worker process -------------------------------------------------------------

# What a worker loads before its task: Python, Keras (with TensorFlow where it is
# installed, which Keras' seed imports on either backend) and the core's modules its task
# calls (worker_task(): gpu_setup(), gpu_fit(), the pruning callback, gpu_save()), with
# no runtime (no devices, no memory), so that the task starts at once.
worker_load <- function() {
  core_call("preload_keras")
  core_call("preload", verbs = list("setup", "start", "fit", "memory_plan", "search_pruning_callback", "save_model"))
}

# Load (worker_load()), then wait for the task; a session that ends first takes the
# waiting process with it.
worker_wait <- function(dir, parent, warm = NULL, prepare = NULL) {
  worker_load()
  if (!is.null(warm)) do.call(core_call, c(list(warm$verb), warm$args))
  worker_await(dir, parent, prepare)
}

# Prepare the runtime (worker_prepare()), wait in `dir` for the task and run it; return at
# once if the session has gone.
worker_await <- function(dir, parent, prepare) {
  task_file <- file.path(dir, "task.rds")
  prepared <- worker_prepare(prepare, compile = !file.exists(task_file))
  while (!file.exists(task_file)) {
    if (!process_alive(parent) || !dir.exists(dir)) {
      return(invisible())
    }
    Sys.sleep(0.02)
  }
  file.create(file.path(dir, "taken")) # from here the fit is this process's (worker_collect())
  worker_task(dir, readRDS(task_file), prepared)
}

# Before the task: the session's gpu_setup() (`prepare$setup`, the pool's), the runtime
# and, with `compile` (no task waiting yet), one small compiled step that takes the
# compiler's start off the fit's (core: workers_warm); then the session's compiled
# programs (`prepare$compiled`). NULL, or the error that the task then reports.
worker_prepare <- function(prepare, compile = TRUE) {
  tryCatch(
    {
      setup <- prepare$setup
      if (!is.null(setup)) do.call(gpu_setup, setup[setdiff(names(setup), "devices")])
      core_call("start")
      # Only time is lost where it fails: the fit compiles as it would have.
      if (compile) try(core_call("workers_warm"), silent = TRUE)
      if (!is.null(prepare$compiled)) core_call("workers_share_compiled", folder = prepare$compiled)
      NULL
    },
    error = identity
  )
}

# One fit (its runtime `prepared` by worker_prepare()): the seed, model_fn's model,
# gpu_fit() on the task's rows, then what the task asks of the trained model. Any error,
# the preparation's too, is the result's `error`.
worker_task <- function(dir, task, prepared = NULL) {
  task_read <- as.numeric(Sys.time()) # with setup_done, the result's `timings` (bench/cv.R, bench/search.R)
  result <- tryCatch(
    {
      if (!is.null(prepared)) stop(prepared)
      reticulate::import("keras")$utils$set_random_seed(task$seed)
      track_restore(task$track$carried, task$track$context)
      setup_done <- as.numeric(Sys.time())
      model <- worker_model(task)
      take <- function(rows) worker_rows(task$data, rows)
      validation <- if (!is.null(task$validation_rows)) take(task$validation_rows) else if (!is.null(task$validation)) load_arrays(task$validation)
      pruning <- if (!is.null(task$trial)) {
        core_call(
          "search_pruning_callback",
          storage = task$trial$storage, study = task$trial$study, trial_id = task$trial$trial_id,
          objective = task$trial$objective, pruner = task$trial$pruner
        )
      }
      plan <- worker_memory_plan(task, model)
      fit <- do.call(gpu_fit, c(
        list(
          model = model, data = take(task$train_rows), validation_data = validation, seed = task$seed,
          verbose = 0, callbacks = c(task$fit$callbacks, if (!is.null(pruning)) list(pruning))
        ),
        task$fit[setdiff(names(task$fit), "callbacks")]
      ))
      result <- list(history = fit$history, seconds = fit$settings$seconds, peak_mib = plan)
      result$timings <- list(task_read = task_read, setup_done = setup_done)
      if (!is.null(task$test_rows)) result <- c(result, worker_score(model, take(task$test_rows), task$batch_size))
      if (!is.null(pruning)) {
        result$pruning <- core_call("search_pruning_outcome", callback = pruning)
        complete <- !result$pruning$pruned && is.null(result$pruning$missing)
        if (complete && !is.null(task$save_path)) {
          fit$encoding <- task$encoding
          gpu_save(fit, task$save_path, overwrite = TRUE)
          result$path <- task$save_path
        }
      }
      result
    },
    error = function(e) list(error = list(class = class(e), message = conditionMessage(e)))
  )
  # the fit's run sent before this process ends (it is not waited for in the fit)
  try(track_flush(ending = TRUE), silent = TRUE)
  write_rds_atomic(result, file.path(dir, "result.rds"), "The fit's result (result.rds)")
  invisible()
}

# model_fn's model (model_fn(params) in a search), checked to be a compiled Keras model.
worker_model <- function(task) {
  model_fn <- worker_function(task$model_fn)
  model <- if (is.null(task$params)) model_fn() else model_fn(task$params)
  if (!inherits(model, "python.builtin.object") || !reticulate::py_has_attr(model, "fit")) {
    gpukeras_abort(
      sprintf("`model_fn` must return a compiled Keras model, not %s.", describe(model)),
      "gpukeras_error_bad_model"
    )
  }
  model
}

# The rows `rows` (R's row numbers) of the data in `files` (carry_data()'s .npy files,
# memory-mapped), each one NumPy copy in C order: gpu_fit() takes NumPy data as it is.
worker_rows <- function(files, rows) {
  numpy <- reticulate::import("numpy", convert = FALSE)
  index <- numpy$asarray(as.list(as.integer(rows) - 1L), dtype = "int64")
  take <- function(path) numpy$ascontiguousarray(numpy$take(numpy$load(path, mmap_mode = "r"), index, axis = 0L))
  x <- if (is.list(files$x)) do.call(reticulate::dict, c(lapply(files$x, take), convert = FALSE)) else take(files$x)
  c(list(x = x, y = if (!is.null(files$y)) take(files$y)), if (!is.null(files$sample_weight)) list(sample_weight = take(files$sample_weight)))
}

# With workers_per_device = "auto" on a GPU: the fit's planned peak memory (MiB), by
# which the session decides whether more workers fit that GPU; NULL otherwise.
worker_memory_plan <- function(task, model) {
  if (!isTRUE(task$plan_memory)) {
    return(NULL)
  }
  tryCatch(gpu_memory_plan(model, task$fit$batch_size %||% 32L)$peak_mib, error = function(e) NULL)
}

# The held-out rows' metrics (as Keras names them, the loss first) and predictions (each
# output an array, float32 or float64 whatever the model's precision): the core's scoring.
worker_score <- function(model, held_out, batch_size) {
  core_call(
    "score",
    model = model, x = held_out$x, y = held_out$y, sample_weight = held_out$sample_weight,
    batch_size = as.integer(batch_size %||% 32L)
  )
}
