# Fold-making for gpu_cv() and gpu_search(): which rows train and which are held out,
# stratified by class, by group, at random (the core draws them with a seed, R's random
# numbers untouched), or as an rsample resampling says.

# The folds: `train` and `held_out` rows of each, and `kind`, how they were made.
cv_split <- function(folds, group, data, seed, call) {
  rows <- training_rows(data)
  if (inherits(folds, "rset")) return(rsample_split(folds, rows, call))
  if (!is_whole_number(folds, 2, rows)) {
    abort_bad_argument(c(
      sprintf(
        "`folds` must be a whole number from 2 to the rows (%d), or an rsample resampling, not %s.", rows,
        describe(folds)
      ),
      "e.g. folds = 5, or folds = rsample::vfold_cv(df, v = 5)."
    ), call = call)
  }
  groups <- length(unique(group))
  if (!is.null(group) && groups < folds) {
    abort_bad_argument(sprintf(
      "`group` has %d groups, fewer than the %d folds: give folds = %d or fewer.", groups, as.integer(folds), groups
    ), call = call)
  }
  fold_split(data, folds, seed, group, call)
}

# The `k` folds of the data's rows (`train` and `held_out` rows of each, and `kind`), drawn by
# the core with `seed`: rows of one `group` together, else stratified by class for labels
# the core finds are classes (tools/folds.py class_labels: R's labels handed over as an
# array, a factor as its values), else at random.
fold_split <- function(data, k, seed, group = NULL, call = caller_env()) {
  labels <- if (!is.null(data$y) && !is_numpy_part(data$y)) array(data$y, dim(data$y) %||% length(data$y))
  core_call(
    "folds",
    rows = training_rows(data), k = as.integer(k), seed = seed, labels = labels,
    groups = if (!is.null(group)) as.character(group), error_call = call
  )
}

# An rsample rset: each split's analysis rows train, its assessment rows are held out.
rsample_split <- function(folds, rows, call) {
  splits <- folds$splits
  if (!length(splits) || !nrow(splits[[1]]$data) == rows) {
    abort_bad_argument(sprintf(
      "`folds` was made on data with %d rows, but `data` has %d: make it on the same rows.",
      if (length(splits)) nrow(splits[[1]]$data) else 0L, rows
    ), call = call)
  }
  held_out <- lapply(splits, function(split) {
    if (!all(is.na(split$out_id))) split$out_id else setdiff(seq_len(rows), split$in_id)
  })
  list(
    held_out = held_out, train = lapply(splits, function(split) split$in_id),
    kind = sprintf("rsample (%s)", class(folds)[1])
  )
}
