"""Tools that work on a copy of the model or around training: gpu_check(), gpu_batch_size(),
gpu_tune(), gpu_lr_find(), gpu_quantize(), gpu_audit() and gpu_profile()."""
