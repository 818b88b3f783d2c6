#' Find and compare tracked runs
#'
#' `gpu_runs()` lists the runs [gpu_track()] recorded, one row a run, as
#' `tfruns::ls_runs()` did: from the store in a folder or from a server, as
#' MLflow's own client reads it. `gpu_compare_runs()` sets two runs side by
#' side: the params that differ, the final metrics of each, and (with
#' `plot()`) their learning curves together. A run's model loads with
#' `gpu_load("runs:/<run id>")` (or `gpu_load(runs[1, ])`).
#'
#' @param experiment The experiments to list, by name; `NULL` for the one
#'   tracking uses now ([gpu_track()]'s, `MLFLOW_EXPERIMENT_NAME`, else
#'   "Default").
#' @param filter `NULL`, or MLflow's search filter, e.g.
#'   `"metrics.val_loss < 0.5 and params.batch_size = '64'"`,
#'   `"tags.gpukeras.kind = 'trial'"` or `"attributes.status = 'FINISHED'"`.
#' @param max_results The most runs to list (newest first).
#' @param a,b Two runs: run ids (`"3f2a..."` or `"runs:/3f2a..."`), or rows of
#'   `gpu_runs()`.
#' @param x A `gpukeras_runs` or `gpukeras_run_comparison` object.
#' @param metrics For `plot()`: the metrics to draw (by default `loss` and,
#'   where logged, `val_loss`).
#' @param ... Not used: an argument these functions do not have is an error
#'   that says what to use instead.
#' @return `gpu_runs()`: a `gpukeras_runs` data.frame, newest first, with
#'   `run_id`, `name`, `kind` (`fit`, `fold`, `trial`, `cv`, `search`),
#'   `status`, `parent_run_id`, `experiment`, `start_time` and `end_time`
#'   (POSIXct), `seconds`, the verdicts (`input_verdict`, `gpu_verdict`,
#'   `trial_state` where recorded), then each param as `params.<name>` (a
#'   number where every value is one) and each metric's last value as
#'   `metrics.<name>`. `gpu_compare_runs()`: a `gpukeras_run_comparison`, a
#'   list with `runs` (the two rows), `params` (a data.frame of the params that
#'   differ: `param`, `a`, `b`), `metrics` (`metric`, `a`, `b`, `change`) and
#'   `history` (a data.frame: `run` "a" or "b", `metric`, `epoch`, `value`).
#' @seealso [gpu_track()].
#' @export
#' @examples
#' \dontshow{old <- Sys.getenv(c("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "GPUKERAS_TRACK"), unset = NA)}
#' # \donttest: MLflow makes a new store's tables (seconds, once)
#' \donttest{
#' if (!is.null(gpukeras_python()) && gpu_tracking_available()) {
#'   # a store in a folder, made here (MLflow makes its tables, once); gpu_track()'s example
#'   # opens it again
#'   gpu_track(file.path(tempdir(), "runs"), experiment = "iris")
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'   iris_data <- list(x = iris[, 1:4], y = iris$Species)
#'   # two runs: a fit, then two more epochs of the same model at a lower learning rate
#'   # (batches of 50 split iris' 150 rows evenly: one step function traced, not two)
#'   first <- gpu_fit(model, iris_data, epochs = 2, batch_size = 50, verbose = 0, seed = 1)
#'   more <- gpu_fit(model, iris_data, epochs = 2, batch_size = 50, learning_rate = 1e-4,
#'                   verbose = 0, seed = 1)
#'   runs <- gpu_runs()
#'   print(runs[, c("name", "params.learning_rate", "metrics.loss")])
#'   comparison <- gpu_compare_runs(runs[1, ], runs[2, ])
#'   print(comparison)
#'   plot(comparison)
#'   gpu_track(FALSE)
#' }
#' }
#' \dontshow{for (name in names(old)) {
#'   if (is.na(old[[name]])) Sys.unsetenv(name) else do.call(Sys.setenv, as.list(old[name]))
#' }}
gpu_runs <- function(experiment = NULL, filter = NULL, max_results = 1000, ...) {
  check_unknown_args("gpu_runs")
  if (!is.null(experiment) && (!is.character(experiment) || !length(experiment) || anyNA(experiment))) {
    stop_input_type(experiment, "experiment names or NULL")
  }
  if (!is.null(filter)) check_string(filter)
  max_results <- check_count(max_results)
  track <- track_needed()
  track_flush()
  read <- core_call(
    "track_runs", track = track, experiment = as_python(experiment), filter = filter, max_results = max_results
  )
  new_gpukeras_runs(read)
}

#' @rdname gpu_runs
#' @export
gpu_compare_runs <- function(a, b, ...) {
  check_unknown_args("gpu_compare_runs", "gpu_runs")
  ids <- c(run_id_of(a, "a"), run_id_of(b, "b"))
  track_flush()
  read <- core_call("track_compare", track = track_needed(), run_ids = as_python(ids))
  structure(list(
    runs = new_gpukeras_runs(list(rows = read$runs, columns = read$columns)),
    params = rows_to_df(read$params, c("param", "a", "b")),
    metrics = rows_to_df(read$metrics, c("metric", "a", "b", "change")),
    history = rows_to_df(read$history, c("run", "metric", "epoch", "value"))
  ), class = "gpukeras_run_comparison")
}

# Tracking's settings for a read (or a sync), or an error saying to turn it on.
track_needed <- function(call = caller_env(), off = NULL) {
  track_request() %||% abort_bad_argument(off %||% c(
    "Tracking is off: there is no store to read runs from.",
    "Turn it on with gpu_track(\"runs\") (a folder) or gpu_track(\"http://host:5000\") (a server)."
  ), call = call)
}

# A run id from an id, "runs:/<id>[/...]", or a one-row gpu_runs() data.frame.
run_id_of <- function(x, arg, call = caller_env()) {
  if (is.data.frame(x) && "run_id" %in% names(x) && nrow(x) == 1L) return(x$run_id)
  if (is.character(x) && length(x) == 1L && !is.na(x) && grepl("^(runs:/)?[0-9a-f]{8,64}(/.*)?$", x)) {
    return(sub("/.*$", "", sub("^runs:/", "", x)))
  }
  abort_bad_argument(
    sprintf("`%s` must be a run id, \"runs:/<run id>\" or one row of gpu_runs(), not %s.", arg, describe(x)),
    call = call
  )
}

# The core's rows of runs and their columns as a data.frame (tracking_read.py).
new_gpukeras_runs <- function(read) {
  df <- rows_to_df(read$rows, unlist(read$columns))
  for (name in grep("^params[.]", names(df), value = TRUE)) {
    df[[name]] <- utils::type.convert(df[[name]], as.is = TRUE)
  }
  for (name in c("start_time", "end_time")) df[[name]] <- as.POSIXct(as.numeric(df[[name]]), origin = "1970-01-01")
  structure(df, class = c("gpukeras_runs", "data.frame"))
}

#' @rdname gpu_runs
#' @export
format.gpukeras_runs <- function(x, ...) {
  if (!nrow(x)) return("<gpukeras runs> none")
  if (!all(c("run_id", "name", "kind", "status", "start_time") %in% names(x))) {
    # some columns picked out: as the data.frame they are
    return(utils::capture.output(print(
      as.data.frame(unclass(x), check.names = FALSE, stringsAsFactors = FALSE), row.names = FALSE
    )))
  }
  metrics <- grep(
    "^metrics[.](loss|val_loss|accuracy|val_accuracy|objective|samples_per_second)$", names(x), value = TRUE
  )
  shown <- data.frame(
    run = substr(x$run_id, 1, 8), name = x$name, kind = x$kind, status = x$status,
    started = format(x$start_time, "%Y-%m-%d %H:%M"),
    lapply(x[metrics], function(v) signif(v, 4)),
    check.names = FALSE
  )
  names(shown) <- sub("^metrics[.]", "", names(shown))
  params <- sum(startsWith(names(x), "params."))
  c(
    sprintf("<gpukeras runs> %d run%s", nrow(x), if (nrow(x) == 1L) "" else "s"),
    utils::capture.output(print(shown, row.names = FALSE)),
    sprintf(
      "  (%d params and %d metrics as columns: params.<name>, metrics.<name>)", params,
      sum(startsWith(names(x), "metrics."))
    )
  )
}

#' @rdname gpu_runs
#' @export
print.gpukeras_runs <- print_formatted

#' @rdname gpu_runs
#' @export
format.gpukeras_run_comparison <- function(x, ...) {
  label <- function(i) sprintf("%s (%s)", x$runs$name[i], substr(x$runs$run_id[i], 1, 8))
  c(
    sprintf("<gpukeras run comparison> a: %s, b: %s", label(1), label(2)),
    if (nrow(x$params)) c("Params that differ:", utils::capture.output(print(x$params, row.names = FALSE))) else
      "Params: the same",
    "Final metrics:",
    utils::capture.output(print(data.frame(
      metric = x$metrics$metric, a = signif(x$metrics$a, 4), b = signif(x$metrics$b, 4),
      change = signif(x$metrics$change, 3)
    ), row.names = FALSE))
  )
}

#' @rdname gpu_runs
#' @export
print.gpukeras_run_comparison <- print_formatted

#' @rdname gpu_runs
#' @export
plot.gpukeras_run_comparison <- function(x, metrics = NULL, ...) {
  history <- x$history
  available <- unique(history$metric)
  metrics <- metrics %||% intersect(c("loss", "val_loss"), available)
  if (!length(metrics) || !all(metrics %in% available)) {
    abort_bad_argument(
      sprintf(
        "`metrics` must name metrics both runs logged per epoch (%s).", paste0("\"", available, "\"", collapse = ", ")
      )
    )
  }
  old <- graphics::par(mfrow = c(length(metrics), 1), mar = c(4, 4.5, 2.5, 1))
  on.exit(graphics::par(old), add = TRUE)
  for (metric in metrics) {
    run <- function(r) history[history$metric == metric & history$run == r, ] # by epoch, as the core gives it
    plot_curves(run("a"), run("b"), paste0(c("a: ", "b: "), x$runs$name), metric)
  }
  invisible(x)
}
