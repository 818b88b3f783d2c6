"""Devices and the GPU: what the driver and NVML see, which framework device is which GPU,
device scopes, precision, memory and thread settings before the runtime starts, where a
matrix multiply runs, and the samplers that watch a GPU and the host CPU."""
