# gpu_search()'s trials as populations (JAX): the core decides whether to try them
# (tools/cv_population.py's plan, as gpu_cv() decides: gpu_workers(population = ), the
# backend, the fit's arguments, tracking); the session then asks the study for a batch of
# trials at a time (search/search_population.py) and splits it by architecture, a task for
# a worker slot each (search_groups_next(): a group of one, or where processes measured
# faster, a trial's own process); the worker makes each trial's model as a trial's own
# worker would (its seed, then model_fn(params)) and hands them to the core, which trains
# those of one architecture together, each member reporting to its trial; the session
# tells the study how each ended, as it tells a trial of its own process, and each
# completed trial's model is saved as a process saves it.

# Whether gpu_search() trains populations: `population` (TRUE/FALSE) and `reason`, the core's.
search_population_plan <- function(search, tracked, call = caller_env()) {
  core_call(
    "search_population_plan",
    population = search$population %||% "auto", fit = as.list(c(names(search$fixed), names(search$searched))),
    learning_rate = search$fixed$learning_rate, tracking = !is.null(tracked$track), kind = "trials", error_call = call
  )
}

# The session's populations: the trials a batch asked, split by `shapes` (the values of
# model_fn's parameters and a searched batch size: equal values build one architecture, whose
# trials can train as one population), each group a task of its own, so that groups of
# other shapes train at once in other workers (processes: threads of one measured slower).
# `queue`: the tasks asked and not yet given to a worker; `measured`: the seconds and trials
# of the tasks that ended, as populations and as processes; `as`: how many trials and
# groups trained each way; `why`: why groups of several trained as processes, if any did.
search_groups <- function(shapes) {
  groups <- new.env(parent = emptyenv())
  groups$shapes <- shapes
  groups$queue <- list()
  none <- c(population = 0, process = 0)
  groups$measured <- list(seconds = none, trials = none, tasks = none)
  groups$as <- list(trials = none, groups = none)
  groups$why <- NULL
  groups
}

# The trials of a batch (each as the study's ask gives it) in groups of equal `shapes`
# values, in the order they were asked.
search_shape_groups <- function(trials, shapes) {
  keys <- vapply(trials, function(trial) paste(deparse(trial$params[shapes]), collapse = ""), "")
  unname(split(trials, factor(keys, levels = unique(keys))))
}

# How a group of `n` trials trains: "process" (each trial a fit in a worker process, as
# with population = FALSE) or "population". A group of one is a process: a population of
# one would compile the population's programs for one fit's work. A group of several is a
# population, unless the tasks that ended say processes are cheaper: `n` fits at the
# seconds a trial took in a process, fewer than the seconds a population's task took.
search_group_as <- function(measured, n) {
  if (n == 1L) return("process")
  if (!all(measured$tasks > 0)) return("population")
  process <- measured$seconds[["process"]] / measured$trials[["process"]]
  population <- measured$seconds[["population"]] / measured$tasks[["population"]]
  if (n * process < population) "process" else "population"
}

# The next task (NULL when the budget is spent): the next group of the queue, asking the
# study for a batch (`search_population_ask`: its `width`, the trials asked, which a short
# group pads to, the core's padded_width) when the queue is empty. `common` holds what every
# trial of the search shares (the data, its rows, the validation, the fixed gpu_fit()
# arguments, the study); `trial_task(asked)` makes a trial's task for a process of its own.
# `plan_memory = FALSE`: a population's result has no one fit's peak memory, so
# workers_per_device = "auto" adds no worker on its GPU (the core splits a group that does
# not fit instead).
search_groups_next <- function(groups, opened, common, trial_task, call) {
  if (!length(groups$queue)) {
    batch <- core_call("search_population_ask", search = opened, error_call = call)
    for (group in search_shape_groups(batch$trials, groups$shapes)) {
      as <- search_group_as(groups$measured, length(group))
      if (as == "process" && length(group) > 1L) groups$why <- search_groups_measured(groups$measured, length(group))
      groups$as$trials[[as]] <- groups$as$trials[[as]] + length(group)
      groups$as$groups[[as]] <- groups$as$groups[[as]] + 1
      trials <- lapply(group, function(trial) trial[c("number", "trial_id", "params", "seed")])
      groups$queue <- c(groups$queue, if (as == "process") lapply(group, trial_task) else list(c(common, list(
        run = "search_population_run", population = TRUE, trials = trials, width = batch$width,
        seed = trials[[1]]$seed, plan_memory = FALSE
      ))))
    }
  }
  if (!length(groups$queue)) return(NULL)
  task <- groups$queue[[1]]
  groups$queue <- groups$queue[-1]
  task
}

# Count an ended task's seconds (`ended$seconds`, its worker's time on it) as a
# population's or a process's.
search_groups_measure <- function(groups, ended) {
  kind <- if (isTRUE(ended$task$population)) "population" else "process"
  measured <- groups$measured
  measured$seconds[[kind]] <- measured$seconds[[kind]] + (ended$seconds %||% 0)
  measured$trials[[kind]] <- measured$trials[[kind]] + length(search_task_numbers(ended$task))
  measured$tasks[[kind]] <- measured$tasks[[kind]] + 1
  groups$measured <- measured
}

# Why a group of `n` trained as processes: the measures that decided it.
search_groups_measured <- function(measured, n) {
  sprintf(
    "a group of %d trained as processes, which measured faster: %.1f s a trial in a process, %.1f s a population",
    n, measured$seconds[["process"]] / measured$trials[["process"]],
    measured$seconds[["population"]] / measured$tasks[["population"]]
  )
}

# The search's `trained_why`: the plan's `reason`, then how many trials trained each way.
search_groups_why <- function(groups, reason) {
  as <- groups$as
  done <- c(
    if (as$trials[["population"]] > 0)
      sprintf("%d trials in %d populations", as$trials[["population"]], as$groups[["population"]]),
    if (as$trials[["process"]] > 0)
      sprintf("%d in processes of their own (a group of one trains as a process)", as$trials[["process"]]),
    groups$why
  )
  if (!length(done)) return(reason)
  sprintf("%s, split by architecture into tasks for the workers: %s", reason, paste(done, collapse = "; "))
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
