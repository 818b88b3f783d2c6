# gpu_search()'s trials as populations (JAX): the core decides whether to try them
# (tools/cv_population.py's plan, as gpu_cv() decides: gpu_workers(population = ), the
# backend, the fit's arguments, tracking); the session then asks the study for a batch of
# trials at a time (search/search_population.py), a task for a worker slot each; the worker
# makes each trial's model as a trial's own worker would (its seed, then model_fn(params))
# and hands them to the core, which trains those of one architecture together, each member
# reporting to its trial; the session tells the study how each ended, as it tells a trial
# of its own process, and each completed trial's model is saved as a process saves it.

# Whether gpu_search() trains populations: `population` (TRUE/FALSE) and `reason`, the core's.
search_population_plan <- function(search, tracked, call = caller_env()) {
  core_call(
    "search_population_plan",
    population = search$population %||% "auto", fit = as.list(c(names(search$fixed), names(search$searched))),
    learning_rate = search$fixed$learning_rate, tracking = !is.null(tracked$track), kind = "trials", error_call = call
  )
}

# The next batch of trials as one worker task (NULL when the budget is spent): `common`
# holds what every trial of the search shares (the data, its rows, the validation, the
# fixed gpu_fit() arguments, the study). `width`: the trials a batch asks, which a short
# group pads to (the core's padded_width). `plan_memory = FALSE`: a population's result has
# no one fit's peak memory, so workers_per_device = "auto" adds no worker on its GPU (the
# core splits a group that does not fit instead).
search_population_task <- function(opened, common, call) {
  batch <- core_call("search_population_ask", search = opened, error_call = call)
  asked <- batch$trials
  if (!length(asked)) return(NULL)
  trials <- lapply(asked, function(trial) trial[c("number", "trial_id", "params", "seed")])
  c(common, list(
    run = "search_population_run", population = TRUE, trials = trials, width = batch$width, seed = trials[[1]]$seed,
    more = asked[[length(asked)]]$left > 0L, plan_memory = FALSE
  ))
}

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
      encoding <- if (!is.null(task$encoding)) encoding_to_plain(task$encoding)
      core_call("save_model", model = models[[i]], path = path, encoding = encoding, overwrite = TRUE)
    }
  }
  trained["trials"]
}

# How each trial of a population task ended, told to the study (a task that failed fails
# each of its trials with its error); the core's answers, one per trial.
search_population_tell <- function(opened, ended, device) {
  if (!is.null(ended$result$error) || is.null(ended$result$trials)) {
    return(lapply(ended$task$trials, function(trial) {
      core_call("search_tell", search = opened, number = trial$number, result = ended$result["error"],
                seconds = ended$seconds, device = device)
    }))
  }
  core_call("search_population_tell", search = opened, trials = ended$result$trials, device = device)
}
