# How factor columns are encoded (gpu_dataset()'s `factors`): one-hot or integer codes,
# a rule for all or by column (the core's to apply: data/encoding.py factor_rule), and the
# check of its form.

# `factors` checked: "one_hot" or "codes", or a vector of them named (by factor or
# character columns, which the core checks).
check_factors <- function(factors, call = caller_env()) {
  rules <- c("one_hot", "codes")
  if (!is.character(factors) || !length(factors) || anyNA(factors) || !all(factors %in% rules) ||
      (is.null(names(factors)) && length(factors) != 1L) ||
        (!is.null(names(factors)) && any(!nzchar(names(factors))))) {
    abort_bad_argument(c(
      sprintf(
        "`factors` must be \"one_hot\" or \"codes\", or such values named by columns, not %s.", describe(factors)
      ),
      "e.g. factors = \"codes\" (integer codes for an Embedding layer), or factors = c(region = \"codes\")."
    ), call = call)
  }
  invisible(factors)
}

# The factor and character columns of the data.frames in `parts`, by name.
coded_columns <- function(parts) {
  coded <- function(df) names(Filter(function(column) is.factor(column) || is.character(column), df))
  unlist(lapply(Filter(is.data.frame, parts), coded))
}
