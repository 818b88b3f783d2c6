"""Tools that work on a copy of the model or around training: gpu_check(), gpu_scaling(),
gpu_batch_size(), gpu_memory_plan(), gpu_tune(), gpu_lr_find(), gpu_quantize(), gpu_audit()
and gpu_profile(); gpu_fit()'s verb (its "auto" rules that need the memory plan, and its
tracked run); the worker processes of gpu_cv() and gpu_search(), and gpu_cv()'s folds as
one population."""
