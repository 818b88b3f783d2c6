#' Search a model's hyperparameters on Optuna, each trial in a worker process
#'
#' Runs `trials` fits of `model_fn(params)`, each `params` drawn from `space`
#' by Optuna's sampler, each fit in a worker process on its own device
#' (as in [gpu_cv()]), and keeps the best. Poor trials are stopped early by
#' Optuna's pruner from their epoch-by-epoch objective. The study is stored,
#' so a search that was stopped resumes with the same call, and several
#' machines can share one.
#'
#' @section The objective:
#' `objective` names a value of the fit's history, as Keras logs it:
#' `"val_loss"` (the default), `"val_accuracy"`, `"loss"`, ... A trial's value
#' is the objective at its last epoch; it is reported after every epoch, and
#' the pruner compares those reports with the other trials' at the same epoch.
#' `direction = "auto"` maximizes accuracy, AUC, precision, recall, F1, R2 and
#' IoU and minimizes anything else (losses, errors). A `val_` objective needs
#' validation data: `validation_data = list(x = , y = )` in `...`, or else 20 %
#' of the rows are held out (stratified by class for class labels, drawn with
#' `seed`) and every trial validates on them (`$validation` says so, and
#' `$validation_rows` are the rows).
#' A trial whose objective is not finite (a NaN loss) fails: it is never best.
#'
#' @section Sampling and pruning:
#' Optuna does both; gpukeras adds neither. `sampler`: `"tpe"` (Optuna's
#' Tree-structured Parzen Estimator, the default), `"random"` or `"grid"`
#' (every combination of [search_choice()] values and whole numbers of
#' [search_int()] ranges). `pruner`: `"median"` (stop a trial whose
#' objective at an epoch is worse than the median of earlier trials at that
#' epoch, once 5 trials have run, from its first epoch on), `"hyperband"`,
#' `"asha"` (successive halving) or `"none"`.
#'
#' @section Storage and resuming:
#' The study lives in Optuna's journal file (`search.journal`, which
#' optuna-dashboard opens) in the folder `storage` (created for you alone when
#' missing; a folder in [tempdir()] when `NULL`), with the best trial's model
#' (`models/`); a folder whose study an older gpukeras kept in `search.db`
#' (SQLite) resumes there. As for [gpu_backup()]'s folder, another user's
#' folder, one others may write to, or one whose `search.journal`, `search.db`
#' or `models` is a link is refused (`gpukeras_error_search_storage_unsafe`):
#' whoever could write there could swap the model `gpu_load(search$best$path)`
#' loads. Or the study lives in the database an SQLAlchemy URL names:
#' `"sqlite:////path/file.db"`, or `"postgresql://user:password@host:port/db"`
#' (with `install_gpukeras(extras = "postgresql")`; the password is never
#' shown, and reaches the workers through their environment, never a file), which several machines
#' can share: each runs the same `gpu_search()` call and they split the
#' `trials` between them, no trial run twice. The same call on the same
#' storage resumes: trials that ended are not run again, and trials a stopped
#' search left running (its R session was killed, its machine restarted) are
#' run again with their parameters (`$interrupted` lists those this call ran
#' again). Another `space`, `model_fn`, objective, data or `...` on the same
#' storage and `study` is a `gpukeras_error_search_mismatch` error naming each
#' difference with what the study holds and what the call gives.
#'
#' @section Failures:
#' A trial that fails (out of memory, a NaN loss, its worker process killed)
#' is recorded as `"failed"` with its reason, and the search goes on. An error
#' in the first trial to end, before any trial completed, that is not one of
#' those (a bug in `model_fn`, an objective the logs lack) stops the search
#' with that error: every trial would meet it. A worker process that ends
#' before it has taken its trial (while it waits) ran none of it: the trial goes
#' to another process, once, as a fold of [gpu_cv()] does.
#'
#' @section Populations:
#' On the JAX backend, the trials train in batches by default: the study is
#' asked for 8 trials at a time (TPE with its constant-liar option, so that a
#' batch's trials differ; with the random or grid sampler and no pruner, which
#' learn nothing from completed trials, every trial at once), and split by
#' architecture: the trials whose values of `model_fn`'s parameters (and of a
#' searched `batch_size`) are equal train together as a population, one
#' compiled program for all, in one worker, which makes one model for them and
#' draws each trial's starting weights from its seed (as gpu_cv() draws its
#' folds', see [gpu_cv()]), and the other groups (trials whose
#' drawn values change shapes, such as units) at the same time in the other
#' workers. A group of one trial trains as a trial of its own process does, and
#' so does a group of several where the trials that ended say a process per
#' trial is faster (its trials at a process's seconds each, fewer than a
#' population's seconds). Each member reports its epochs to its trial, and the pruner
#' still decides: a pruned member stops without stopping the others, and a
#' member whose loss turns NaN fails alone. A trial's objective is the one a
#' fit of its parameters alone with its seed reaches (within 1e-5 on a CPU).
#' Populations take the gpu_fit() arguments `epochs`, `batch_size` and a
#' number as `learning_rate` (searched or fixed); with any other, with tracking,
#' on TensorFlow, or with `workers = gpu_workers(population = FALSE)`, each
#' trial trains on its own in a worker process. The result's `trained` says which.
#'
#' @section Repeating a trial:
#' Trial `n` runs `keras$utils$set_random_seed(seed)`, `model <-
#' model_fn(params)` and `gpu_fit(model, <training rows>, validation_data =
#' <validation rows>, seed = seed, ...)` with its `params` and `seed` from
#' `$trials` (the rows held out are `$validation_rows`): run by hand the same
#' way it gives the same objective (exactly on a CPU, and on a GPU with
#' `gpu_setup(deterministic = TRUE)`).
#'
#' @inheritSection gpu_cv Workers
#' @param model_fn A function of one argument, `params` (a named list with a
#'   value for each element of `space`), that returns a compiled Keras model.
#' @param data R data as [gpu_fit()] takes it, `list(x = , y = )`.
#' @param space A named list of [search_int()], [search_float()] and
#'   [search_choice()] values. Arguments of `...` given as such values are
#'   searched too (`batch_size = search_choice(32, 64, 128)`) and passed to
#'   `gpu_fit()`, not to `model_fn`. Where `model_fn` uses `params` only as
#'   `params$name` or `params[["name"]]`, a name of `space` it never reads is
#'   refused before any trial (`gpukeras_error_bad_argument`), with the name
#'   it most likely misspells.
#' @param trials How many trials the study runs in all, counting those that
#'   ended before a resume and those other machines run.
#' @param objective The logged value to optimize (see The objective).
#' @param direction `"auto"`, `"minimize"` or `"maximize"`.
#' @param sampler,pruner Optuna's sampler and pruner (see Sampling and pruning).
#' @param storage `NULL`, a folder, or a database URL (see Storage and resuming).
#' @param study The study's name in the storage.
#' @param seed A whole number: the sampler's seed, the held-out rows, and each
#'   trial's seed (derived from it and the trial's number); `NULL` chooses one.
#' @param workers Where the trials run: [gpu_workers()], or a number of worker
#'   processes (see Workers).
#' @param background `FALSE`, or [gpu_background()] (`TRUE` is its defaults):
#'   run the search in a background R process and return a job at once:
#'   [gpu_job_status()] shows the trials done and the best so far,
#'   [gpu_job_wait()] returns the search, and [gpu_job_cancel()] stops it and
#'   keeps the study (the same call resumes it). A search's process is not
#'   restarted (`max_restarts` is gpu_fit()'s): the same call resumes its study.
#' @param ... [gpu_fit()]'s arguments for every trial (`epochs`, `batch_size`,
#'   `validation_data`, `class_weight`, ...), fixed or searched.
#' @return An object of class `gpukeras_search` (in the background, a
#'   `gpukeras_search_job`), a list with
#'   * `trials`: a data.frame with a row per trial: `number`, a column per
#'     parameter, `value` (the objective), `state` (`"complete"`, `"pruned"` or
#'     `"failed"`; `"running"` for another machine's), `reason` (why it failed),
#'     `seconds`, `device`, `seed` and `epochs` (epochs trained);
#'   * `best`: `params`, `value`, `number` and `path`, the best trial's trained
#'     model saved as [gpu_save()] saves it (`gpu_load(search$best$path)`
#'     scores new data, encoding it as the training data was); `NULL` before
#'     any trial completed;
#'   * `objective`, `direction`, `storage` (a URL's user information and
#'     secret query values shown as `***`), `study`, `seed`, `validation` (how
#'     the trials were validated), `validation_rows` (the rows held out, when
#'     the search held them out; the others trained), `interrupted` and `workers`;
#'   * `trained`: `"populations"` (see Populations), `"processes"` (a fit per
#'     trial in the worker processes; also where every group of a population search
#'     was of one trial) or `"populations and processes"`; `trained_why`: why, and with populations
#'     how many trials trained in populations and how many in processes, and why.
#'
#'   It has `print()` and `plot()` (the objective over the trials and the
#'   best so far) methods.
#' @seealso [gpu_cv()], [search_int()]
#' @export
#' @examples
#' # \donttest: it starts the search's R process and its worker (a few seconds of
#' # CPU each), whose start competes with whatever else runs
#' \donttest{
#' if (!is.null(gpukeras_python()) && reticulate::py_module_available("optuna")) {
#'   model_fn <- function(params) {
#'     keras <- gpu_keras()
#'     model <- keras$Sequential(list(
#'       keras$Input(shape = 4),
#'       keras$layers$Dense(params$units, activation = "relu"),
#'       keras$layers$Dense(3, activation = "softmax")
#'     ))
#'     model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'     model
#'   }
#'   # In the background: the session goes on while trials run in workers.
#'   job <- gpu_search(
#'     model_fn, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
#'     space = list(units = search_int(4, 32, log = TRUE)),
#'     trials = 4, epochs = 5, seed = 1, workers = gpu_workers(workers = 1),
#'     background = gpu_background()
#'   )
#'   gpu_job_status(job)
#'   # search <- gpu_job_wait(job) would return the search when its trials are done;
#'   # plot(search) shows the objective over the trials.
#'   gpu_job_cancel(job) # the study is kept: the same call resumes it
#' }
#' }
gpu_search <- function(model_fn, data, space, trials = 20, objective = "val_loss", direction = "auto",
                       sampler = "tpe", pruner = "median", storage = NULL, study = "gpukeras",
                       seed = NULL, workers = gpu_workers(), background = FALSE, ...) {
  call <- current_env()
  model_digest <- if (is.function(model_fn))
    paste(c(names(formals(model_fn)), deparse(body(model_fn))), collapse = "\n")
  model_fn <- check_model_fn(model_fn, 1L)
  if (missing(space)) {
    abort_bad_argument("`space` is missing: give the values to search, e.g. list(units = search_int(16, 256)).")
  }
  fit <- search_fit_args(check_space(space), check_fit_args(list(...), "gpu_search"), call)
  check_space_read(space, model_fn)
  check_count(trials)
  check_string(objective)
  direction <- check_choice(direction, c("auto", "minimize", "maximize"))
  sampler <- check_choice(sampler, c("tpe", "random", "grid"))
  pruner <- check_choice(pruner, c("median", "hyperband", "asha", "none"))
  check_string(study)
  seed <- chosen_seed(check_seed(seed))
  workers <- check_workers(workers)
  background <- check_fit_option(background, "background", gpu_background, flag = TRUE)
  given <- if (!missing(data)) data
  data <- read_training_data(data, missing(data))
  # recorded once, here (its warnings the user's, in the background too), for the trials and the
  # validation_data; a class_weight matched to its levels before the study's folder is made
  data$recorded <- fit_encoding(data)
  fit$fixed$class_weight <- check_class_weight(fit$fixed$class_weight, data$recorded$y$levels)
  storage <- search_storage(storage, study, call)
  search <- c(fit, list(
    model_fn = model_fn, trials = trials, objective = objective, direction = direction, sampler = sampler,
    pruner = pruner, study = study, seed = seed, population = workers$population
  ))
  if (!is.null(background)) {
    args <- c(
      search[c("model_fn", "space", "trials", "objective", "direction", "sampler", "pruner", "study", "seed")],
      list(data = given, storage = storage$folder %||% storage$url, workers = workers),
      search$fixed, search$searched, list(validation_data = search$validation_data)
    )
    return(search_in_background(args, storage))
  }

  dir <- withr::local_tempdir("gpukeras-search-")
  request <- search_request(search, model_digest, data, dir, call)
  plan <- worker_plan(workers$devices, workers$workers, workers$per_device)
  search_run(search, request, storage, plan, dir, call)
}

# gpu_fit()'s arguments given to gpu_search() (checked by check_fit_args()) split from
# `space`: `fixed` ones, `searched` ones (search_*() values) and the `validation_data`.
search_fit_args <- function(space, fit_args, call) {
  searched <- vapply(fit_args, inherits, logical(1), "gpukeras_search_param")
  both <- intersect(names(space), names(fit_args)[searched])
  if (length(both))
    abort_bad_argument(sprintf("`%s` is searched twice, in `space` and in `...`: give it once.", both[1]), call = call)
  if (!length(space) && !any(searched))
    abort_bad_argument("`space` is empty: give at least one value to search.", call = call)
  fixed <- fit_args[!searched]
  list(
    space = space, fixed = fixed[names(fixed) != "validation_data"], searched = fit_args[searched],
    validation_data = fit_args$validation_data
  )
}

# What the search's trials share: the data carried to `dir` once, how they validate
# (search_validation()), and the request the study records (the same call resumes it,
# another is refused).
search_request <- function(search, model_digest, data, dir, call) {
  carried <- many_data(data, dir, "gpu_search", call = call)
  space <- space_to_plain(c(search$space, search$searched))
  list(
    carried = carried, space = space,
    validation = search_validation(search$validation_data, search$objective, data, search$seed, dir, call),
    study = list(
      space = space, model_fn = model_digest, objective = search$objective,
      data = list(
        rows = carried$rows, levels = carried$levels,
        encoding = encoding_lines(carried$encoding, "fit")
      ),
      fit = lapply(search$fixed, function(value) paste(deparse(value), collapse = ""))
    )
  )
}

# Run the search on `plan`'s workers: ask the study for a trial while a worker is free,
# tell it each trial's raw result; the core decides what the result means and whether the
# search stops. Returns the gpukeras_search.
search_run <- function(search, request, storage, plan, dir, call) {
  # The workers are given the study's URL masked (callr writes the arguments of their calls
  # to files); one that holds a secret reaches them in their environment, where the core
  # finds it (study_storage.unmasked).
  masked <- core_call("mask_uri", uri = storage$url)
  tracked <- track_many("search", 0L, list(
    study = search$study, storage = storage$folder %||% masked,
    trials = search$trials,
    objective = search$objective, direction = search$direction, sampler = search$sampler, pruner = search$pruner,
    seed = search$seed, space = request$space
  ), call)
  on.exit(track_many_end(tracked, "FAILED"), add = TRUE)
  population <- core_call(
    "search_population_plan",
    population = search$population %||% "auto", fit = as.list(c(names(search$fixed), names(search$searched))),
    learning_rate = search$fixed$learning_rate, tracking = !is.null(tracked$track), kind = "trials", error_call = call
  )
  # populations: a batch of trials at a time, split by the values that set their shapes
  groups <- if (isTRUE(population$population)) core_call(
    "search_groups",
    shapes = as.list(c(names(search$space), intersect("batch_size", names(search$searched)))),
    reason = population$reason
  )
  opened <- core_call(
    "search_open",
    storage = storage$url, study = search$study, space = request$space, request = request$study,
    trials = as.integer(search$trials), objective = search$objective, direction = search$direction,
    sampler = search$sampler, pruner = search$pruner, seed = search$seed, batch = isTRUE(population$population),
    error_call = call
  )
  pool <- new_worker_pool(
    plan, dir, warm = list(verb = "search_warm", args = list(storage = masked), undo = "search_unwarm"),
    env = if (!identical(masked, storage$url)) c(GPUKERAS_SEARCH_STORAGE = storage$url)
  )
  on.exit({
    core_call("search_interrupt", search = opened) # the trials asked and not told
    worker_close(pool)
  }, add = TRUE, after = FALSE)
  dir.create(storage$models, recursive = TRUE, showWarnings = FALSE)
  carried <- request$carried
  validation <- request$validation
  common <- list(
    model_fn = search$model_fn, space = names(search$space), searched = names(search$searched),
    data = carried$files, train_rows = validation$train_rows %||% seq_len(carried$rows),
    validation_rows = validation$rows, validation = validation$files, fit = search$fixed, storage = masked,
    study = search$study, objective = search$objective, pruner = search$pruner,
    models = storage$models, encoding = carried$encoding, levels = carried$levels
  )
  # A trial asked of the study as a task of its own: one fit in a worker process.
  trial_task <- function(asked) {
    params <- asked$params
    c(common[c("model_fn", "data", "levels", "train_rows", "validation_rows", "validation")], list(
      params = params[names(search$space)], seed = asked$seed, fit = c(search$fixed, params[names(search$searched)]),
      trial = list(number = asked$number),
      callback = list(
        verb = "search_pruning_callback",
        args = c(common[c("storage", "study", "objective", "pruner")], list(trial_id = asked$trial_id))
      ),
      then = list(run = "search_trial_end", args = list(
        path = file.path(storage$models, sprintf("trial-%d.keras", asked$number)), encoding = carried$encoding
      )),
      more = asked$left > 0L, plan_memory = isTRUE(plan$plan_memory),
      track = track_child(
        tracked, NULL, sprintf("trial %d", asked$number), "trial", list(gpukeras.trial = asked$number),
        params = params, key = track_new_key(tracked, call)
      )
    ))
  }
  # The next task (NULL when the budget is spent): a trial in a process of its own, or with
  # populations a group of trials (the core splits each batch it asks and says how each trains).
  # `plan_memory = FALSE`: a population's result has no one fit's peak memory, so
  # workers_per_device = "auto" adds no worker on its GPU (the core splits a group that does
  # not fit instead).
  next_task <- function() {
    asked <- core_call("search_next", groups = groups, search = opened, error_call = call)
    if (!is.null(asked$trials)) return(c(common, list(
      run = "search_population_run", population = TRUE, trials = asked$trials, width = asked$width,
      seed = asked$trials[[1]]$seed, plan_memory = FALSE
    )))
    if (!is.null(asked)) trial_task(asked)
  }
  on_end <- function(ended) {
    told <- core_call(
      "search_tell_task",
      search = opened, numbers = as.list(search_task_numbers(ended$task)), population = isTRUE(ended$task$population),
      result = ended$result[intersect(c("error", "pruning", "trials"), names(ended$result))],
      seconds = ended$seconds, device = pool$slots[[ended$slot]]$device, groups = groups,
      track = tracked$track, context = ended$task$track$context, error_call = call
    )
    raise_core_warnings(told$warnings)
    if (!is.null(told$stop)) {
      process_abort(
        c(sprintf("Trial %d failed, and no trial has completed.", told$number),
          "The search stopped: every trial would meet this. The study keeps the trial as failed."),
        "gpukeras_error_search_trial",
        parent = ended$condition %||% rlang::error_cnd(
          c(told$stop$class, "gpukeras_error"), message = told$stop$message
        ),
        call = call
      )
    }
    many_grow(pool, ended, ended$result)
    list()
  }
  worker_run(pool, on_end = on_end, next_task = next_task)
  if (!is.null(groups)) {
    done <- core_call("search_groups_state", groups = groups)
    population[c("reason", "trained")] <- done[c("why", "trained")]
  }
  result <- new_gpukeras_search(
    core_call("search_trials", search = opened, models = storage$models), names(request$space), storage, search$study,
    search$seed, search$objective, validation, pool$plan, population
  )
  track_many_end(
    tracked, "FINISHED",
    metrics = list(best_value = result$best$value, trials_complete = sum(result$trials$state == "complete")),
    tags = list(gpukeras.best_trial = result$best$number), call = call
  )
  result
}

# How trials validate: the validation data given (carried as .npy files), or, for a val_
# objective without it, 20 % of the rows held out (stratified for class labels).
search_validation <- function(validation_data, objective, data, seed, dir, call) {
  if (!is.null(validation_data)) {
    validation <- with_training_encoding(fit_data(validation_data, "validation_data", call = call), data)
    return(list(
      files = carry_data(validation, dir, "validation", call = call), description = "the validation_data given"
    ))
  }
  if (!startsWith(objective, "val_")) return(list(description = "none"))
  split <- fold_split(data, 5L, seed, call = call)
  held <- split$held_out[[1]]
  stratified <- if (split$kind != "random") ", stratified" else ""
  list(rows = held, train_rows = split$train[[1]], description = sprintf(
    "%d of %d rows held out (20 %%%s, seed %d)", length(held), training_rows(data), stratified, seed
  ))
}

# In a trial's worker, after its fit (worker_task()'s `then`): what its pruning `callback`
# saw (`pruning`) and, for a trial that completed, its model saved at `path` (the best
# trial's is kept).
search_trial_end <- function(fit, callback, path, encoding) {
  pruning <- core_call("search_pruning_outcome", callback = callback)
  if (pruning$pruned || !is.null(pruning$missing)) return(list(pruning = pruning))
  fit$encoding <- encoding
  gpu_save(fit, path, overwrite = TRUE)
  list(pruning = pruning, path = path)
}
