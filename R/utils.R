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

# cli's symbols, which follow the output's UTF-8 support (and options(cli.unicode)):
# "\u2022" or "*"; "\u2192" or "->" (cli's ASCII ">" reads as a prompt).
bullet <- function() cli::symbol$bullet
arrow <- function() if (cli::is_utf8_output()) cli::symbol$arrow_right else "->"

# A Python list of numbers crosses as a numeric vector, or as a list when it
# holds None; both become a numeric vector with NA for None.
as_numbers <- function(x) {
  if (is.list(x)) return(vapply(x, function(value) if (is.null(value)) NA_real_ else as.numeric(value), numeric(1)))
  as.numeric(x)
}

as_samples_df <- function(samples, columns) {
  if (is.data.frame(samples)) samples <- as.list(samples)
  is_rows <- is.list(samples) && length(samples) && is.null(names(samples))
  df <- if (is_rows) {
    rows_to_df(samples, union(columns, names(samples[[1]])))
  } else {
    values <- lapply(samples, as_numbers)
    extra <- setdiff(names(values), columns)
    all <- lapply(c(columns, extra), function(column) values[[column]] %||% numeric())
    names(all) <- c(columns, extra)
    rows <- max(0L, lengths(all))
    as.data.frame(lapply(
      all, function(column) if (length(column) < rows) c(column, rep(NA_real_, rows - length(column))) else column
    ))
  }
  if ("nvml_index" %in% names(df)) df$nvml_index <- as.integer(df$nvml_index)
  df
}

# `path` made absolute to be written to: its folder resolved (links in the folder's path
# followed), its last part kept as given, so that a link planted at the destination is
# replaced by what is written (as the core's rename does), never followed to its target.
destination_path <- function(path) {
  path <- path.expand(path)
  file.path(normalizePath(dirname(path), mustWork = FALSE), basename(path))
}

# Whether something is at `path`: a file, a folder, or a link (a dangling one included).
path_taken <- function(path) file.exists(path) | is_link(path)

# (Sys.readlink() gives "" for a file that is no link, NA where there is nothing)
is_link <- function(path) {
  target <- Sys.readlink(path)
  !is.na(target) & nzchar(target)
}
