# Formatting helpers shared by the print methods.

# print() of a class whose format() says it all: its lines.
print_formatted <- function(x, ...) {
  writeLines(format(x, ...))
  invisible(x)
}

# Sizes in bytes, in the largest binary unit below each: "504 B", "1.0 KiB", "2.9 MiB".
format_bytes <- function(bytes) {
  units <- c(GiB = 2^30, MiB = 2^20, KiB = 2^10)
  vapply(bytes, function(size) {
    unit <- units[size >= units][1]
    if (is.na(unit)) sprintf("%.0f B", size) else sprintf("%.1f %s", size / unit, names(unit))
  }, character(1))
}

format_mib <- function(mib) {
  ifelse(is.na(mib), "?", ifelse(mib >= 1024, sprintf("%.1f GiB", mib / 1024), sprintf("%.0f MiB", mib)))
}

# Values in quotes, the first `n`: "\"no\", \"yes\"".
quoted <- function(values, n = 10) paste0("\"", utils::head(values, n), "\"", collapse = ", ")

format_percent <- function(share, digits = 0) sprintf(paste0("%.", digits, "f%%"), 100 * share)

format_seconds <- function(seconds) {
  if (seconds < 60) sprintf("%.1f s", seconds) else if (seconds < 3600) sprintf("%.1f min", seconds / 60) else
    sprintf("%.1f h", seconds / 3600)
}

# FLOP/s in the unit that keeps the number readable.
format_flops <- function(tflops) {
  units <- c("TFLOP/s" = 1, "GFLOP/s" = 1e-3, "MFLOP/s" = 1e-6, "kFLOP/s" = 1e-9)
  unit <- units[tflops >= units | units == min(units)][1]
  sprintf("%.3g %s", tflops / unit, names(unit))
}

# A data.frame's lines as print() shows them without row names, one line a row however wide
# (print() would wrap the columns past the console's width into blocks of their own).
table_lines <- function(df) {
  old <- options(width = 10000L)
  on.exit(options(old))
  utils::capture.output(print(df, row.names = FALSE))
}
