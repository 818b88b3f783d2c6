# The gpukeras_fit object, built from the core's plain data.

# `model` (the trained model) and `encoding` (how R data became numbers, see
# encoding.R) are what predict() and evaluate() need to score new data.
new_gpukeras_fit <- function(history, monitor, timeline, settings, model = NULL, encoding = NULL) {
  structure(list(
    history = history_df(history), monitor = fit_monitor(monitor), timeline = fit_timeline(timeline),
    settings = settings, model = model, encoding = encoding
  ), class = "gpukeras_fit")
}

history_df <- function(history) {
  history <- history[!vapply(history, is.null, logical(1))]
  if (!length(history)) return(data.frame(epoch = integer()))
  columns <- lapply(history, as_numbers)
  rows <- max(lengths(columns))
  columns <- lapply(
    columns, function(column) if (length(column) < rows) c(column, rep(NA_real_, rows - length(column))) else column
  )
  epoch <- if (!is.null(columns$epoch)) as.integer(columns$epoch) else seq_len(rows)
  columns$epoch <- NULL
  data.frame(epoch = epoch, columns, check.names = FALSE)
}

fit_monitor <- function(monitor) {
  if (is.null(monitor)) return(NULL)
  monitor$advice <- as.character(unlist(monitor$advice))
  monitor$notes <- as.character(unlist(monitor$notes))
  monitor
}

timeline_columns <- list(
  gpu = c("time_s", "nvml_index", "utilization", "memory_used_mib", "power_w"),
  host = c("time_s", "cpu_percent")
)

# The core's timeline (rows or columns, for GPU and host samples) as two
# data.frames with fixed columns; no samples give 0-row data.frames.
fit_timeline <- function(timeline) {
  parts <- lapply(names(timeline_columns), function(part) {
    as_samples_df(timeline[[part]], timeline_columns[[part]])
  })
  names(parts) <- names(timeline_columns)
  parts
}

#' @export
as.data.frame.gpukeras_fit <- function(x, row.names = NULL, optional = FALSE, ...) {
  x$history
}

# The gpukeras_fit of the core's `result`: its warnings raised (the core says the model's
# output precision once per model, a signal that came after the last step), and its
# settings with what R knows of the data described.
fit_result <- function(result, model, data, train, validation, validation_input, verbose) {
  raise_core_warnings(result$warnings)
  settings <- result$settings
  settings$verbose <- verbose
  settings$data_kind <- settings$data
  settings$data <- describe_fit_data(data, train, settings$batch_size, list(dataset = settings$data_info))
  if (!is.null(validation)) {
    settings$validation_data <- describe_fit_data(
      validation, validation_input, NULL, list(dataset = settings$validation_data_info), role = "validation"
    )
  }
  settings$data_info <- settings$validation_data_info <- NULL
  new_gpukeras_fit(result$history, result$monitor, result$timeline, settings, model, fit_encoding(data))
}
