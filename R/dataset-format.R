# How a gpu_dataset() prints: its role, source, rows and batches, the steps of its
# pipeline, its classes or vocabulary, its columns and pixel range.

#' @export
format.gpukeras_dataset <- function(x, ...) {
  info <- attr(x, "gpukeras")
  rows <- if (is.null(info$rows)) "rows not known until read" else paste(format(info$rows, big.mark = ","), "rows")
  if (length(info$class_names) && !is.null(info$rows)) {
    of <- if (!identical(info$rows, info$files)) sprintf(" of %s", format(info$files, big.mark = ","))
    rows <- sprintf(
      "%s%s images in %d classes", format(info$rows, big.mark = ","), of %||% "", length(info$class_names)
    )
  }
  batches <- if (is.null(info$batches)) {
    paste(info$cardinality, "batches")
  } else {
    paste(format(info$batches, big.mark = ","), if (info$batches == 1) "batch" else "batches")
  }
  c(
    sprintf("<gpukeras_dataset> %s pipeline from %s: %s, %s", info$role, info$source, rows, batches),
    sprintf("  element: %s", info$element_spec),
    sprintf("  steps:   %s", paste(unlist(info$steps), collapse = " -> ")),
    if (length(info$cache_declined)) sprintf("  cache:   %s", info$cache_declined),
    if (length(info$class_names)) {
      shown <- utils::head(info$class_names, 10)
      more <- length(info$class_names) - length(shown)
      sprintf("  classes: %s%s", paste(shown, collapse = ", "), if (more > 0) sprintf(", and %d more", more) else "")
    } else if (length(info$vocabulary)) {
      sprintf(
        "  vocabulary: %s",
        paste(sprintf("%s (%d levels)", names(info$vocabulary), lengths(info$vocabulary)), collapse = ", ")
      )
    },
    encoding_columns_lines(info$encoding, "  input:   "),
    if (length(info$pixel_range)) {
      range <- vapply(unlist(info$pixel_range), format, character(1), digits = 4)
      sprintf(
        "  pixels:  float32 in [%s, %s]%s", range[1], range[2],
        if (is.null(info$rescale)) " (rescale = 1/255 reads them in [0, 1])" else
          sprintf(" (rescale = %s)", format(info$rescale, digits = 4))
      )
    },
    if (isTRUE(info$dropped_rows > 0)) sprintf("  dropped %d row(s) with NA", as.integer(info$dropped_rows))
  )
}

#' @export
print.gpukeras_dataset <- function(x, ...) print_formatted(x, ...)
