# Weights on training rows, as Keras' fit() takes them: sample weights with R
# data (list(x = , y = , sample_weight = ), gpu_dataset(sample_weight = )) and
# gpu_fit(class_weight = ). The core makes class weights into each row's weight
# with Keras' own functions, on every training path (data/weights.py).

# `class_weight` as the core takes it: a named list from class number ("0",
# "1", ...) to weight. R checks its form; the core matches the names to the
# labels' levels or class numbers (data/weights.py class_weight_codes): `levels`
# as the core recorded them (the training encoding's, fit_encoding(): factor
# labels', an image folder's classes; NULL for other labels), read once the
# form is right.
check_class_weight <- function(class_weight, levels = NULL, call = caller_env()) {
  if (is.null(class_weight)) return(NULL)
  values <- if (is.list(class_weight) && all(lengths(class_weight) == 1L)) unlist(class_weight) else class_weight
  names <- names(class_weight)
  if (!is.numeric(values) || !length(values) || is.null(names) || any(names == "") || anyNA(names) ||
    anyDuplicated(names) || any(!is.finite(values)) || any(values < 0)) {
    abort_bad_argument(c(
      sprintf("`class_weight` must be named numbers >= 0, one per class, not %s.", describe(class_weight)),
      paste0(
        "Give one weight per class by name, e.g. class_weight = c(no = 1, yes = 10) for a factor's levels, or ",
        "c(\"0\" = 1, \"1\" = 10) for class numbers."
      )
    ), call = call)
  }
  core_call("class_weight_codes", weights = as.list(values), levels = as.list(levels), error_call = call)
}

# `sample_weight` for rows with `labels` (from check_labels()): one number >= 0
# per row (an NA is an NA row), as a double vector.
check_sample_weight <- function(sample_weight, labels, call = caller_env()) {
  if (is.null(sample_weight)) return(NULL)
  if (is.null(labels)) {
    abort_bad_argument(c(
      "`sample_weight` weighs each row's loss: give the labels too, list(x = , y = , sample_weight = ).",
      "Without labels there is no loss to weigh."
    ), call = call)
  }
  if (!is.numeric(sample_weight) || length(dim(sample_weight)) > 1L || any(sample_weight < 0, na.rm = TRUE) ||
    any(is.infinite(sample_weight))) {
    abort_bad_argument(c(
      sprintf(
        "`sample_weight` must be a numeric vector of finite weights >= 0, one per row, not %s.",
        describe(sample_weight)
      ),
      "e.g. sample_weight = ifelse(y == \"yes\", 10, 1)."
    ), call = call)
  }
  as.double(sample_weight)
}
