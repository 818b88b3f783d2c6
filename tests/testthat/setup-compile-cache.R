# The tests' compiled programs (JAX) go to this run's temporary folder, not the user's
# cache (gpu_compile_cache()): set before any test starts Python; workers and fresh R
# sessions of the tests inherit it.
withr::local_envvar(
  GPUKERAS_COMPILE_CACHE = file.path(tempdir(), "gpukeras-compiled"),
  .local_envir = testthat::teardown_env()
)
