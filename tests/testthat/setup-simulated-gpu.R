# make test's simulated-GPU run (GPUKERAS_SIMULATE_GPU, ?gpu_setup): the session starts as a
# GPU user's does, with gpu_setup() and its "auto" choices (mixed_bfloat16 there).
if (!identical(Sys.getenv("GPUKERAS_SIMULATE_GPU"), "") && !is.null(gpukeras_python())) {
  gpu_setup()
}
