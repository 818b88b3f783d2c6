# gpu_search()'s trials as populations (JAX): the core decides whether to try them
# (tools/cv_population.py's plan, as gpu_cv() decides: gpu_workers(population = ), the
# backend, the fit's arguments, tracking); the session then asks the core for its tasks
# (search/search_population.py asks the study for a batch of trials at a time and splits it
# by architecture, a task for a worker slot each: a group of one, or where processes
# measured faster, a trial's own process); the worker makes one model as the first trial's
# worker would (its seed, then model_fn(params)) and hands it to the core, which draws the
# other trials' starting states from their seeds and trains those of one architecture
# together, each member reporting to its trial; the session
# tells the study how each ended, as it tells a trial of its own process, and each
# completed trial's model is saved as a process saves it.

# The trial numbers a task trains (a population's, or one trial's).
search_task_numbers <- function(task) {
  if (isTRUE(task$population)) vapply(task$trials, function(trial) as.integer(trial$number), integer(1)) else
    task$trial$number
}

# In the worker (worker_task()'s `run`): the core's populations of the task's trials
# (population_call(): the trials of a task set the same shapes, so one model_fn(params)
# serves them), and the models that may be the study's best (the core says which) saved by
# the core at `models`/trial-N.keras.
search_population_run <- function(task) {
  params <- task$trials[[1]]$params[task$space]
  data <- load_arrays(task$data)
  validation <- if (!is.null(task$validation)) load_arrays(task$validation)
  members <- lapply(task$trials, function(trial) {
    list(number = trial$number, trial_id = trial$trial_id, seed = trial$seed, fit = trial$params[task$searched])
  })
  zero_based <- function(rows) if (!is.null(rows)) as.list(as.integer(rows) - 1L)
  args <- c(list(
    x = data$x, y = data$y, sample_weight = data$sample_weight, members = members,
    rows = zero_based(task$train_rows), validation_rows = zero_based(task$validation_rows),
    validation = if (!is.null(validation)) list(validation$x, validation$y, validation$sample_weight),
    storage = task$storage, study = task$study, objective = task$objective, pruner = task$pruner,
    width = task$width, device = task$device, saved_to = task$models, encoding = task$encoding
  ), task$fit)
  model <- function() worker_model(list(model_fn = task$model_fn, params = params, levels = task$levels))
  population_call("search_population", args, lapply(task$trials, `[[`, "seed"), model)["trials"]
}
