# predict(fit, newdata, file = ): predictions written to a CSV file batch by batch
# (the core's "predict_file", serve/predict_file.py), never held whole in memory.

# `file` and `overwrite` checked before Python starts: one path, not a folder, in a
# folder that exists, not an existing file unless `overwrite`. Returns the absolute path
# (a link at `file` is replaced by the predictions, not followed).
check_predictions_file <- function(file, overwrite, call = caller_env()) {
  check_flag(overwrite, call = call)
  if (is.null(file)) {
    if (overwrite) {
      abort_bad_argument(
        "`overwrite` is for `file`: give the CSV file to write the predictions to, or leave `overwrite` out.",
        call = call
      )
    }
    return(NULL)
  }
  if (!is.character(file) || length(file) != 1L || is.na(file) || !nzchar(file)) {
    abort_bad_argument(
      sprintf("`file` must be one file path (a string), such as \"predictions.csv\", not %s.", describe(file)),
      call = call
    )
  }
  path <- path.expand(file)
  if (dir.exists(path) && !is_link(path)) {
    abort_bad_argument(sprintf(
      "`file`: \"%s\" is a folder. Give a file name in it, such as file.path(\"%s\", \"predictions.csv\").", file,
      file
    ), call = call)
  }
  if (!dir.exists(dirname(path))) {
    abort_bad_argument(sprintf(
      "`file`: the folder \"%s\" does not exist. Create it first with dir.create(), or write elsewhere.",
      dirname(file)
    ), call = call)
  }
  if (path_taken(path) && !overwrite) {
    abort_bad_argument(sprintf(paste0(
      "`file`: \"%s\" already exists. Give overwrite = TRUE to replace it (it is replaced only once every row is ",
      "written), or another name."
    ), file), call = call)
  }
  destination_path(path)
}

# The core writes the predictions of `scoring` (scoring_data()) to `path`; R describes
# what it wrote. Rows left out with na = "drop" are NA rows, so the file's rows match
# newdata's; row names (a data.frame's own, image file paths) are its first column.
predict_to_file <- function(scoring, path, overwrite, type, call = caller_env()) {
  images <- !is.null(scoring$row_names) && is.null(scoring$rows) # files named for scoring
  scoring$data$x <- without_memory_cache(scoring$data$x)
  args <- c(scoring$args, list(
    file = path, overwrite = overwrite, levels = scoring$levels, classes = identical(type, "class"),
    row_names = scoring$row_names,
    row_name_column = if (images) "path" else "row"
  ))
  written <- handover_call("predict_file", scoring$data, args, call = call)
  structure(list(
    path = written$path, rows = as.integer(written$rows), columns = as.integer(written$columns),
    seconds = c(
      reading = written$reading_seconds, model = written$model_seconds, writing = written$writing_seconds,
      waiting_for_writer = written$waiting_for_writer_seconds
    )
  ), class = "gpukeras_predictions_file")
}

# A gpu_dataset() of files that caches in memory (cache = TRUE, its default) made again
# from its recipe without the cache: predict() reads each row once, and the cache would
# come to hold every row. Other data is returned as it is.
without_memory_cache <- function(data) {
  recipe <- attr(data, "gpukeras_recipe")
  if (!inherits(data, "gpukeras_dataset") || is.null(recipe) || !is.null(recipe$arrays) || !isTRUE(recipe$cache)) {
    return(data)
  }
  recipe$cache <- FALSE
  made <- suppressWarnings(do.call(gpu_dataset, recipe)) # its warnings were given when it was made
  if (inherits(made, "gpukeras_dataset")) made else made[[attr(data, "gpukeras")$role]]
}

#' @export
format.gpukeras_predictions_file <- function(x, ...) {
  as.character(core_call(
    "predictions_file_lines", path = x$path, rows = x$rows, columns = x$columns, times = as.list(x$seconds)
  ))
}

#' @export
print.gpukeras_predictions_file <- print_formatted
