#' Cross-validate a Keras model, each fold in a worker process on its own device
#'
#' Trains one model per fold, each from fresh weights in a worker process,
#' evaluates it on the fold's held-out rows and gathers the out-of-fold
#' predictions. Nothing carries from one fold to the next (weights, optimizer
#' state, Keras' state: a worker resets it after each fit, and a fold is the
#' same fit as in a fresh process); the workers stay with the session for its
#' next call: this R session starts no Keras runtime and holds no device memory.
#'
#' @section Folds:
#' * A number `k`: `k` folds of about equal size. When the labels are classes
#'   (a factor, character, logical or integer vector) every fold has each class
#'   in about the same share as the whole data (stratified).
#' * With `group`: rows of one group (a patient, a site) are held out together,
#'   never split between training and held-out rows; groups are dealt to the
#'   folds largest first, so the folds' sizes stay close.
#' * An rsample resampling object (`rsample::vfold_cv(df, v = 5)`, made on a
#'   data.frame with the same rows as `data`): its analysis rows train and
#'   its assessment rows are held out.
#'
#' The folds are drawn with `seed`, without touching R's random numbers.
#'
#' @section Same as separate fits:
#' Fold `i` is `keras$utils$set_random_seed(seeds[i])`, `model <- model_fn()`,
#' then `gpu_fit(model, <the fold's training rows>, seed = seeds[i], ...)`, in a
#' process of its own (or as a member of a population, see Populations): the
#' same as that fit run by hand on the same rows (`cv$folds[[i]]` are the
#' held-out rows), with the same weights and metrics within float rounding
#' (exactly on a CPU in a process).
#'
#' @section Populations:
#' On the JAX backend, the folds train as one population by default: one
#' worker process makes one model (the first fold's seed, then `model_fn()`)
#' and draws each fold's starting weights from the fold's seed, the values its
#' own model would start from (where a weight is not its layer's initializer's,
#' an LSTM's bias for one, it makes every fold's model), and where they
#' fit the device's memory, Keras' own training step runs for
#' all of them at once, mapped over their stacked weights (`jax.vmap`), on the
#' data put on the device once: one compilation and one dispatch for all the
#' folds, where a process per fold compiles and starts its own. Each fold
#' still starts from its own fresh weights, trains on its own rows in the
#' order `gpu_fit(seed = )` would draw, is validated on its held-out rows after
#' each epoch (the history's `val_` columns, which a process per fold does not
#' have) and scored on them: the same metrics as separate fits (within float
#' rounding). Folds of unequal size are
#' exact: a fold with fewer batches waits, it is not padded. On several GPUs
#' the folds are shared out, a population on each.
#'
#' A process per fold, as on TensorFlow, where the models differ, do not fit
#' the memory, the fits are tracked ([gpu_track()]), or `...` holds gpu_fit()
#' arguments a population does not take (it takes `epochs`, `batch_size` and a
#' number as `learning_rate`); `workers = gpu_workers(population = FALSE)`
#' always trains a process per fold. `cv$trained` says which way the folds
#' trained and `cv$trained_why` why; print() shows both.
#'
#' @section Workers:
#' `workers = gpu_workers()` runs one worker process per GPU, each seeing its
#' GPU alone (`CUDA_VISIBLE_DEVICES`), with memory that grows as its fit needs
#' it; on a machine without a GPU, one worker on the CPU (`workers = 2`, two of
#' them). [gpu_workers()] chooses the devices and how many workers share one
#' GPU (by default as many as the memory plan fits). A worker loads R, Python,
#' Keras and its backend, starts its runtime and compiles one small step as it
#' starts, then runs one fold after another. When the call ends, its workers
#' stay with the session as spares, and a worker slot whose worker ended (its
#' fit failed, or it died) gets a spare started ahead in the background, one
#' per slot at most: the next `gpu_cv()` or [gpu_search()] on the same devices
#' and [gpu_setup()] finds a ready worker per slot, with no start-up to wait
#' for (spares end with the session; on a GPU each holds its runtime's
#' memory meanwhile). A model function carries the variables it uses (global ones, and
#' those of the function it was made in, such as a loop's) and those of the
#' functions it calls (global ones, and helpers made beside it), and the
#' packages attached in this session are attached in the workers. They travel
#' in one environment: a name that two of these functions find bound to
#' different values is an error that asks to rename one. Python objects cannot travel to another
#' process: a `keras <- gpu_keras()` or a module from `reticulate::import()`
#' that the function uses is made again in each worker; any other Python
#' object made in this session (a layer, an optimizer) is an error that says
#' to make it inside `model_fn`, where each fit gets its own, with fresh weights.
#' A worker process that ends before it has taken its fold (while it waits)
#' ran none of it: the fold goes to another process, once; a fold whose process
#' ends after is an error of class `gpukeras_error_worker_lost`.
#'
#' @param model_fn A function of no arguments that returns a compiled Keras
#'   model (built with [gpu_keras()] or keras3). It is called in each worker.
#' @param data R data as [gpu_fit()] takes it: `list(x = , y = )`, with
#'   `sample_weight` optionally. Factors and data.frames are encoded as
#'   `gpu_fit()` encodes them, with the levels of the whole data.
#' @param folds The number of folds (2 or more, at most the rows), or an rsample
#'   resampling object (an `rset`, e.g. from `rsample::vfold_cv()`).
#' @param group `NULL`, a vector with a group for each row, or the name of a
#'   column of `data$x` (a data.frame), which then is not a predictor: rows of
#'   one group are held out together.
#' @param seed A whole number for the folds and each fold's fit (see Same as
#'   separate fits); `NULL` chooses one, recorded in the result.
#' @param workers Where the fits run: [gpu_workers()], or a number of worker
#'   processes (see Workers).
#' @param ... [gpu_fit()]'s arguments for every fold: `epochs`, `batch_size`,
#'   `class_weight`, `learning_rate`, ... (not `validation_data`: each fold's
#'   held-out rows are its validation).
#' @return An object of class `gpukeras_cv`, a list with
#'   * `metrics`: a data.frame with a row per fold, `fold` and a column per
#'     compiled metric named as Keras names it (`loss`, `accuracy`, ...),
#'     evaluated on the fold's held-out rows;
#'   * `predictions`: the out-of-fold predictions, one row per row of `data` in
#'     its order, columns as `predict(fit)` gives them (class probabilities
#'     named by level); a list of them for several outputs. With a resampling
#'     that holds a row out more than once, its mean; rows never held out are `NA`;
#'   * `folds`: each fold's held-out rows; `seeds`: each fold's seed; `seed`;
#'   * `history`: each fold's training history (in a population, with its
#'     held-out rows' metrics after each epoch too: `val_loss`, ...);
#'     `devices`: where each fold ran;
#'     `seconds`: each fold's time in its worker;
#'   * `split`: how the folds were made; `workers`: the plan of the workers;
#'   * `trained`: `"population"` (the folds as one population, see
#'     Populations; each fold's `seconds` is then the population's), `"processes"`
#'     (a process per fold) or `"population and processes"`; `trained_why`: why.
#'
#'   It has `print()` (mean and standard deviation of each metric) and
#'   `plot()` methods.
#' @seealso [gpu_search()] to search hyperparameters, [gpu_fit()].
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   model_fn <- function() {
#'     keras <- gpu_keras()
#'     model <- keras$Sequential(list(
#'       keras$Input(shape = 4),
#'       keras$layers$Dense(3, activation = "softmax")
#'     ))
#'     model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy",
#'                   metrics = list("accuracy"))
#'     model
#'   }
#'   # Each fold starts a worker process (R, Python and Keras): seconds on a CPU.
#'   if (interactive()) {
#'     cv <- gpu_cv(model_fn, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
#'                  folds = 3, epochs = 5, seed = 1)
#'     print(cv)
#'     head(cv$predictions)
#'     plot(cv)
#'   }
#' }
gpu_cv <- function(model_fn, data, folds = 5, group = NULL, seed = NULL, workers = gpu_workers(), ...) {
  call <- current_env()
  model_fn <- check_model_fn(model_fn, 0L, call = call)
  fit_args <- check_fit_args(list(...), "gpu_cv", call = call)
  if ("validation_data" %in% names(fit_args)) {
    abort_bad_argument(
      "`validation_data` cannot be given to gpu_cv(): each fold is evaluated on its own held-out rows.",
      call = call
    )
  }
  seed <- chosen_seed(check_seed(seed, call = call))
  workers <- check_workers(workers, call = call)
  data <- read_training_data(data, missing(data), call = call)
  grouped <- cv_group(group, data, call)
  data <- grouped$data
  split <- cv_split(folds, grouped$group, data, seed, call)

  dir <- withr::local_tempdir("gpukeras-cv-")
  carried <- many_data(data, dir, "gpu_cv", call = call)
  fit_args$class_weight <- check_class_weight(fit_args$class_weight, carried$levels, call = call)
  seeds <- vapply(seq_along(split$held_out), function(i) derived_seed(seed, i), integer(1))
  plan <- worker_plan(workers$devices, workers$workers, workers$per_device, call = call)
  pool <- new_worker_pool(plan, dir)
  on.exit(worker_close(pool), add = TRUE, after = FALSE)
  tracked <- track_many(
    "cv", length(split$held_out), list(folds = length(split$held_out), split = split$kind, seed = seed, fit = fit_args),
    call
  )
  on.exit(track_many_end(tracked, "FAILED"), add = TRUE)
  fold_task <- function(i) {
    list(
      number = i, model_fn = model_fn, seed = seeds[i], data = carried$files, levels = carried$levels,
      train_rows = split$train[[i]], fit = fit_args,
      then = list(
        run = "cv_fold_scores",
        args = list(data = carried$files, rows = split$held_out[[i]], batch_size = fit_args$batch_size)
      ),
      plan_memory = isTRUE(plan$plan_memory),
      track = track_child(tracked, i, sprintf("fold %d", i), "fold", list(gpukeras.fold = i))
    )
  }
  folds <- seq_along(split$held_out)
  population <- cv_population_plan(workers, fit_args, tracked, call = call)
  tasks <- if (isTRUE(population$population)) {
    cv_population_tasks(folds, length(plan$slots), fold_task)
  } else {
    lapply(folds, fold_task)
  }
  outcomes <- vector("list", length(folds))
  worker_run(pool, tasks, on_end = function(ended) {
    result <- ended$result
    numbers <- ended$task$number
    if (!is.null(ended$condition)) {
      process_abort(sprintf(
        "Fold%s %s of %d failed in %s worker.", if (length(numbers) > 1L) "s" else "",
        paste(numbers, collapse = ", "), length(folds), if (length(numbers) > 1L) "their" else "its"
      ), "gpukeras_error_cv_fold", parent = ended$condition, call = call)
    }
    device <- pool$slots[[ended$slot]]$device
    if (isTRUE(ended$task$population)) {
      trained <- cv_population_outcomes(result, device)
      population$reason <<- result$reason
      if (is.null(trained)) return(lapply(numbers, fold_task))
      outcomes[numbers] <<- trained
      return(list())
    }
    result$device <- device
    result$trained <- "processes"
    outcomes[[numbers]] <<- result
    held_out <- rlang::set_names(result$metrics, function(name) paste0("held_out_", name))
    track_record(tracked$track, ended$task$track$context$key, metrics = held_out, call = call)
    many_grow(pool, ended, result)
    list()
  })
  new_gpukeras_cv(outcomes, split, seeds, seed, carried, plan, population$reason, tracked, call)
}

# In a fold's worker, after its fit (worker_task()'s `then`): the held-out `rows` of the
# data's `files` scored by the trained model, with the core's scoring: the metrics (as
# Keras names them, the loss first) and the predictions (each output an array, float32 or
# float64 whatever the model's precision).
cv_fold_scores <- function(fit, callback, data, rows, batch_size) {
  held_out <- load_arrays(data, rows)
  core_call(
    "score",
    model = fit$model, x = held_out$x, y = held_out$y, sample_weight = held_out$sample_weight,
    batch_size = as.integer(batch_size %||% 32L)
  )
}

# `group` as row groups (NULL for none): a vector with one per row, or a column of a
# data.frame `x`, which leaves the predictors (returned in `data`).
cv_group <- function(group, data, call) {
  if (is.null(group)) return(list(data = data, group = NULL))
  rows <- training_rows(data)
  if (is.character(group) && length(group) == 1L && rows != 1L) {
    if (!is.data.frame(data$x) || !group %in% names(data$x)) {
      abort_bad_argument(c(
        sprintf(
          "`group` names the column \"%s\", but `data$x` %s.",
          group, if (is.data.frame(data$x)) "has no such column" else "is not a data.frame"
        ),
        "Give `group` as a vector with each row's group, or the name of a column of the data.frame `data$x`."
      ), call = call)
    }
    values <- data$x[[group]]
    data$x[[group]] <- NULL
    return(list(data = data, group = values, column = group))
  }
  if (!is.atomic(group) || length(group) != rows || anyNA(group)) {
    abort_bad_argument(
      sprintf("`group` must have one group per row of `data` (%d), without NA, not %s.", rows, describe(group)),
      call = call
    )
  }
  list(data = data, group = group)
}

# The folds' outcomes as a gpukeras_cv, made by the core (its metrics, how the folds trained,
# the out-of-fold predictions, its print), the parent run ended with the metrics' summary.
new_gpukeras_cv <- function(outcomes, split, seeds, seed, carried, plan, why, tracked, call) {
  field <- function(name) lapply(outcomes, `[[`, name)
  made <- core_call(
    "cv_result",
    metrics = field("metrics"), trained = field("trained"), devices = field("device"),
    predictions = field("predictions"), held_out = split$held_out, rows = carried$rows, split = split$kind, seed = seed,
    why = why
  )
  track_many_end(tracked, "FINISHED", metrics = made$summary, call = call)
  predictions <- lapply(made$predictions, as_output, list(levels = carried$levels))
  structure(list(
    metrics = as.data.frame(made$metrics, check.names = FALSE),
    predictions = if (made$several) predictions else predictions[[1]], folds = split$held_out, seeds = seeds,
    seed = seed, history = lapply(field("history"), as.data.frame), devices = unlist(field("device")),
    seconds = vapply(outcomes, function(outcome) as.numeric(outcome$seconds %||% NA), numeric(1)), split = split$kind,
    workers = plan, trained = made$trained, trained_why = why, lines = unlist(made$lines)
  ), class = "gpukeras_cv")
}

#' @export
format.gpukeras_cv <- function(x, ...) x$lines

#' @export
print.gpukeras_cv <- print_formatted

#' @export
plot.gpukeras_cv <- function(x, ...) {
  metrics <- x$metrics[setdiff(names(x$metrics), "fold")]
  old <- graphics::par(mfrow = c(1, length(metrics)), mar = c(4, 4, 2, 1))
  on.exit(graphics::par(old))
  for (name in names(metrics)) {
    values <- metrics[[name]]
    graphics::plot(x$metrics$fold, values, pch = 19, xlab = "fold", ylab = name, main = name, xaxt = "n", ...)
    graphics::axis(1, at = x$metrics$fold)
    graphics::abline(h = mean(values), lty = 2)
  }
  invisible(x)
}
