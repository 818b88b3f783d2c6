# Formatting helpers shared by the format methods.

# Sizes in bytes, in the largest binary unit below each: "504 B", "1.0 KiB", "2.9 MiB".
format_bytes <- function(bytes) {
  units <- c(GiB = 2^30, MiB = 2^20, KiB = 2^10)
  vapply(bytes, function(size) {
    unit <- units[size >= units][1]
    if (is.na(unit)) sprintf("%.0f B", size) else sprintf("%.1f %s", size / unit, names(unit))
  }, character(1))
}

# Values in quotes, the first `n`: "\"no\", \"yes\"".
quoted <- function(values, n = 10) paste0("\"", utils::head(values, n), "\"", collapse = ", ")
