# gpu_cv()'s folds as populations (JAX): the core decides whether to try one
# (tools/cv_population.py: gpu_workers(population = ), the backend, the fit's arguments,
# tracking), each worker slot gets one task holding its share of the folds, and the worker
# makes one model as the first fold's worker would (its seed, then model_fn()) and hands it
# to the core, which draws the other folds' starting states from their seeds (or, where it
# cannot, asks for each fold's model) and trains them as one program where they fit the
# memory, and otherwise trains nothing and says why: the session then gives those folds a
# process each (cv_population_declined()).

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

# In the worker: the core's population `verb` called with `args` and one model, made by
# `model()` after the first member's seed (the core draws the other members' starting states
# from their seeds); where the core says it cannot (`trained` "models"), again with each
# member's own model, made after its seed, as its own worker would make it.
population_call <- function(verb, args, seeds, model) {
  made <- function(seed) {
    core_call("workers_seed", seed = seed)
    model()
  }
  result <- do.call(core_call, c(list(verb, models = list(made(seeds[[1]]))), args))
  if (!identical(result$trained, "models")) return(result)
  do.call(core_call, c(list(verb, models = lapply(seeds, made)), args))
}

# In the worker (worker_task()'s `run`): the core's population of the folds
# (population_call()): `trained` ("population" or "processes"), `reason`, and per fold
# `history`, `metrics`, `predictions` and `seconds` when it trained.
cv_population_task <- function(task) {
  data <- load_arrays(task$data)
  members <- lapply(task$members, function(member) {
    list(
      seed = member$seed, rows = as.list(as.integer(member$train_rows) - 1L),
      held_out = as.list(as.integer(member$held_out) - 1L)
    )
  })
  args <- c(list(x = data$x, y = data$y, sample_weight = data$sample_weight, members = members), task$fit)
  population_call("cv_population", args, lapply(task$members, `[[`, "seed"), function() worker_model(task))
}

# A population task's folds as each fold's outcome (the slot's `device`, trained
# "population"), or, where the core trained none (`trained` "processes"), NULL.
cv_population_outcomes <- function(result, device) {
  if (!identical(result$trained, "population")) return(NULL)
  lapply(result$folds, function(fold) c(fold, list(device = device, trained = "population")))
}
