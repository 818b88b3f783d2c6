# Bind a list of flat Python dicts (converted to named lists) into a data.frame;
# Python's None becomes NA. No rows gives a 0-row data.frame that keeps `columns`.
rows_to_df <- function(rows, columns = NULL) {
  columns <- columns %||% if (length(rows)) names(rows[[1]]) else character()
  values <- lapply(columns, function(column) {
    unlist(lapply(rows, function(row) row[[column]] %||% NA)) %||% logical()
  })
  names(values) <- columns
  as.data.frame(values, stringsAsFactors = FALSE)
}

bullet <- function() if (isTRUE(l10n_info()$`UTF-8`)) "\u2022" else "*"
arrow <- function() if (isTRUE(l10n_info()$`UTF-8`)) "\u2192" else "->"

or_na <- function(x, text = "none") if (is.null(x) || is.na(x)) text else x
