# Loads gpukeras for a benchmark: the source tree when run from its root (so the
# numbers are those of the code being changed), else the installed package.
in_source_tree <- file.exists("DESCRIPTION") &&
  any(readLines("DESCRIPTION", warn = FALSE) == "Package: gpukeras")
if (in_source_tree) {
  pkgload::load_all(".", quiet = TRUE)
} else {
  library(gpukeras)
}
