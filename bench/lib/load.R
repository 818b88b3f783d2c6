# A benchmark's compiled programs (JAX) are kept in a cache of the benchmarks' own, not the
# user's (gpu_compile_cache()): some clear it to measure compiling; a second run finds it.
if (!nzchar(Sys.getenv("GPUKERAS_COMPILE_CACHE"))) {
  Sys.setenv(GPUKERAS_COMPILE_CACHE = file.path(tools::R_user_dir("gpukeras", "cache"), "bench-compiled"))
}
# Loads gpukeras for a benchmark: the code of the source tree when run from its root (so the
# numbers are those of the code being changed), else the installed package. In the tree,
# the installed package where no source changed since it was installed (the rule of make
# demo; make test and make bench-smoke install it first), else pkgload::load_all() of the
# tree (`from_sources`), which every R process the benchmark starts (its workers, jobs and
# services, which load gpukeras as it did) pays again: 2.5 CPU-s more than library().
in_source_tree <- file.exists("DESCRIPTION") &&
  any(readLines("DESCRIPTION", warn = FALSE) == "Package: gpukeras")
installed_is_current <- function() {
  installed <- system.file("DESCRIPTION", package = "gpukeras")
  sources <- c("DESCRIPTION", "NAMESPACE", list.files(c("R", "inst"), recursive = TRUE, full.names = TRUE))
  sources <- grep("__pycache__", sources, value = TRUE, invert = TRUE) # written by Python, not by a change
  nzchar(installed) && all(file.mtime(sources) <= file.mtime(installed))
}
from_sources <- in_source_tree && !installed_is_current()
if (from_sources) {
  pkgload::load_all(".", quiet = TRUE)
} else {
  library(gpukeras)
}
