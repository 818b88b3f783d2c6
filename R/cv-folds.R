# Fold-making for gpu_cv() and gpu_search(): which rows train and which are held out,
# stratified by class, by group, at random, or as an rsample resampling says. The folds
# are drawn with a seed, without touching R's random numbers.

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
  k <- as.integer(folds)
  fold <- withr::with_seed(seed, if (!is.null(group)) group_folds(group, k, call) else label_folds(data, k))
  held_out <- lapply(seq_len(k), function(i) which(fold == i))
  list(
    held_out = held_out, train = lapply(held_out, function(rows_out) setdiff(seq_len(rows), rows_out)),
    kind = if (!is.null(group)) "grouped" else if (is_class_labels(data$y)) "stratified by the labels" else "random"
  )
}

# Each row's fold of `k` (drawn with R's random numbers): stratified by class for labels
# that are classes, at random otherwise.
label_folds <- function(data, k) {
  if (is_class_labels(data$y)) stratified_folds(class_of_rows(data$y), k) else
    sample(rep_len(seq_len(k), training_rows(data)))
}

# Labels that are classes: stratified folds keep their shares.
is_class_labels <- function(y) {
  if (is.matrix(y) && ncol(y) == 1L) y <- y[, 1]
  !is.null(y) && is.null(dim(y)) && (is.factor(y) || is.character(y) || is.logical(y) || is.integer(y))
}

class_of_rows <- function(y) {
  if (is.matrix(y)) y <- y[, 1]
  as.character(y)
}

# Each class's rows shuffled and dealt to the folds in turn, the deal going on from
# class to class, so every fold gets each class's share (within one row).
stratified_folds <- function(classes, k) {
  fold <- integer(length(classes))
  dealt <- 0L
  for (class in unique(classes)) {
    rows <- which(classes == class)
    rows <- rows[sample.int(length(rows))]
    fold[rows] <- ((dealt + seq_along(rows) - 1L) %% k) + 1L
    dealt <- dealt + length(rows)
  }
  fold
}

# Groups in a random order, then by size, largest first, each to the fold with the
# fewest rows so far.
group_folds <- function(group, k, call) {
  groups <- unique(group)
  if (length(groups) < k) {
    abort_bad_argument(sprintf(
      "`group` has %d groups, fewer than the %d folds: give folds = %d or fewer.", length(groups), k, length(groups)
    ), call = call)
  }
  groups <- groups[sample.int(length(groups))]
  sizes <- as.vector(table(factor(group, levels = groups)))
  order <- order(sizes, decreasing = TRUE)
  load <- integer(k)
  fold_of <- integer(length(groups))
  for (g in order) {
    f <- which.min(load)
    fold_of[g] <- f
    load[f] <- load[f] + sizes[g]
  }
  fold_of[match(group, groups)]
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
