# gpu_cv()'s folds as populations (JAX): the core decides whether to try one
# (tools/cv_population.py: gpu_workers(population = ), the backend, the fit's arguments,
# tracking), each worker slot gets one task holding its share of the folds, and the worker
# makes each fold's model as a fold's own worker would (its seed, then model_fn()) and
# hands them to the core, which trains them as one program where they are one architecture
# and fit the memory, and otherwise trains nothing and says why: the session then gives
# those folds a process each (cv_population_declined()).

# Whether gpu_cv() tries a population: `population` (TRUE/FALSE) and `reason`, the core's.
cv_population_plan <- function(workers, fit_args, tracked, call = caller_env()) {
  core_call(
    "cv_population_plan",
    population = workers$population %||% "auto", fit = as.list(names(fit_args)), learning_rate = fit_args$learning_rate,
    tracking = !is.null(tracked$track), error_call = call
  )
}

# The folds `numbers` shared over `slots` worker slots, a population task each, made from
# the folds' own tasks (`fold_task(i)`, as a process per fold would run them).
cv_population_tasks <- function(numbers, slots, fold_task) {
  groups <- unname(split(numbers, rep_len(seq_len(min(slots, length(numbers))), length(numbers))))
  lapply(groups, function(group) {
    folds <- lapply(group, fold_task)
    first <- folds[[1]]
    list(
      number = group, population = TRUE, run = "cv_population_task",
      model_fn = first$model_fn, seed = first$seed, data = first$data, levels = first$levels, fit = first$fit,
      plan_memory = FALSE,
      members = lapply(folds, function(fold) {
        list(seed = fold$seed, train_rows = fold$train_rows, held_out = fold$then$args$rows)
      })
    )
  })
}

# In the worker (worker_task()'s `run`): each fold's model made after its seed, then the
# core's population: `trained` ("population" or "processes"), `reason`, and per fold
# `history`, `metrics`, `predictions` and `seconds` when it trained.
cv_population_task <- function(task) {
  models <- lapply(task$members, function(member) {
    core_call("workers_seed", seed = member$seed)
    worker_model(task)
  })
  data <- load_arrays(task$data)
  members <- lapply(task$members, function(member) {
    list(
      seed = member$seed, rows = as.list(as.integer(member$train_rows) - 1L),
      held_out = as.list(as.integer(member$held_out) - 1L)
    )
  })
  do.call(core_call, c(
    list(
      "cv_population",
      models = models, x = data$x, y = data$y, sample_weight = data$sample_weight, members = members
    ),
    task$fit
  ))
}

# A population task's folds as each fold's outcome (the slot's `device`, trained
# "population"), or, where the core trained none (`trained` "processes"), NULL.
cv_population_outcomes <- function(result, device) {
  if (!identical(result$trained, "population")) return(NULL)
  lapply(result$folds, function(fold) c(fold, list(device = device, trained = "population")))
}
