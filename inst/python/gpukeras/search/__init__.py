"""gpu_search() on Optuna: the study asked and told from R, its storage, its samplers, a
trial in the worker that trains it, and trials trained together as populations (JAX)."""
