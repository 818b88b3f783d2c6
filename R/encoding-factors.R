# How factor columns are encoded (gpu_dataset()'s and gpu_fit()'s `factors`): one-hot
# or integer codes, a rule for all or by column, and the checks of `factors`.

# How factor column `column` is encoded by gpu_dataset()'s `factors`: one rule for
# every factor ("one_hot" or "codes"), or a named vector of rules for some (the
# others one-hot).
factor_rule <- function(factors, column) {
  if (is.null(names(factors))) return(factors[[1]])
  rule <- unname(factors[column])
  if (is.na(rule)) "one_hot" else rule
}

# The rule of a recorded factor column (see the notes at the top).
factor_encoding <- function(column) column$encoding %||% "codes"

# `factors` checked: "one_hot" or "codes", or a vector of them named by factor or
# character columns of the data.frames in `parts`.
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
  unlist(lapply(Filter(is.data.frame, parts), function(df) names(df)[vapply(df, is_coded, logical(1))]))
}

is_coded <- function(column) is.factor(column) || is.character(column)

check_factors_for <- function(factors, parts, call = caller_env()) {
  check_factors(factors, call)
  if (is.null(names(factors))) return(invisible())
  categorical <- coded_columns(parts)
  unknown <- setdiff(names(factors), categorical)
  if (length(unknown)) {
    abort_bad_argument(c(
      sprintf(
        "`factors` names column(s) that are not factor or character columns of `x`: %s.",
        paste(unknown, collapse = ", ")
      ),
      if (length(categorical))
        sprintf(
          "Its factor and character columns: %s.", paste(unique(categorical), collapse = ", ")
        ) else "`x` has no factor or character column."
    ), call = call)
  }
}
