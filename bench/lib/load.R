# A benchmark's compiled programs (JAX) are kept in a cache of the benchmarks' own, not the
# user's (gpu_compile_cache()): some clear it to measure compiling; a second run finds it.
if (!nzchar(Sys.getenv("GPUKERAS_COMPILE_CACHE"))) {
  Sys.setenv(GPUKERAS_COMPILE_CACHE = file.path(tools::R_user_dir("gpukeras", "cache"), "bench-compiled"))
}
# Loads gpukeras for a benchmark: the source tree when run from its root (so the
# numbers are those of the code being changed), else the installed package.
in_source_tree <- file.exists("DESCRIPTION") &&
  any(readLines("DESCRIPTION", warn = FALSE) == "Package: gpukeras")
if (in_source_tree) {
  pkgload::load_all(".", quiet = TRUE)
} else {
  library(gpukeras)
}
