# gpu_search()'s trials as populations (JAX): the core decides whether to try them
# (tools/cv_population.py's plan, as gpu_cv() decides: gpu_workers(population = ), the
# backend, the fit's arguments, tracking); the session then asks the core for its tasks
# (search/search_population.py asks the study for a batch of trials at a time and splits it
# by architecture, a task for a worker slot each: a group of one, or where processes
# measured faster, a trial's own process); the worker makes each trial's model as a trial's own
# worker would (its seed, then model_fn(params)) and hands them to the core, which trains
# those of one architecture together, each member reporting to its trial; the session
# tells the study how each ended, as it tells a trial of its own process, and each
# completed trial's model is saved as a process saves it.

# The trial numbers a task trains (a population's, or one trial's).
search_task_numbers <- function(task) {
  if (isTRUE(task$population)) vapply(task$trials, function(trial) as.integer(trial$number), integer(1)) else
    task$trial$number
}

# In the worker (worker_task()'s `run`): each trial's model made after its seed, the core's
# populations trained, and the models that may be the study's best (the core says which)
# saved at `models`/trial-N.keras.
search_population_run <- function(task) {
  models <- lapply(task$trials, function(trial) {
    core_call("workers_seed", seed = trial$seed)
    worker_model(list(model_fn = task$model_fn, params = trial$params[task$space], levels = task$levels))
  })
  data <- load_arrays(task$data)
  validation <- if (!is.null(task$validation)) load_arrays(task$validation)
  members <- lapply(task$trials, function(trial) {
    list(number = trial$number, trial_id = trial$trial_id, seed = trial$seed, fit = trial$params[task$searched])
  })
  zero_based <- function(rows) if (!is.null(rows)) as.list(as.integer(rows) - 1L)
  trained <- do.call(core_call, c(
    list(
      "search_population",
      models = models, x = data$x, y = data$y, sample_weight = data$sample_weight, members = members,
      rows = zero_based(task$train_rows), validation_rows = zero_based(task$validation_rows),
      validation = if (!is.null(validation)) list(validation$x, validation$y, validation$sample_weight),
      storage = task$storage, study = task$study, objective = task$objective, pruner = task$pruner,
      width = task$width, device = task$device
    ),
    task$fit
  ))
  for (i in seq_along(models)) {
    if (isTRUE(trained$trials[[i]]$save)) { # the core says which may be the study's best
      path <- file.path(task$models, sprintf("trial-%d.keras", task$trials[[i]]$number))
      core_call("save_model", model = models[[i]], path = path, encoding = task$encoding, overwrite = TRUE)
    }
  }
  trained["trials"]
}
