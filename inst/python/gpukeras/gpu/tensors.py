"""Backend-specific facts about a computed tensor: where it lives, and when it is done.

GPU work is asynchronous on every backend: a timing is only honest after
waiting for the result, and "where did this run" is only answered by the
device of the result, not by the device that was asked for.
"""

from __future__ import annotations

import re

from gpukeras.core.runtime import config


def normalize_device(name: str) -> str:
    """'/job:localhost/replica:0/task:0/device:GPU:0' or 'cuda:0' -> 'GPU:0'."""
    match = re.search(r"(CPU|GPU|TPU|cpu|gpu|cuda|tpu)[:_(id=]*(\d+)", name)
    if match is None:
        return name
    kind = match.group(1).upper()
    return f"{'GPU' if kind == 'CUDA' else kind}:{match.group(2)}"


def jax_device_name(device: object) -> str:
    """A JAX device as 'GPU:0' or 'CPU:1'."""
    platform = device.platform  # type: ignore[attr-defined]
    kind = "GPU" if platform in ("gpu", "cuda", "rocm") else platform.upper()
    return f"{kind}:{device.id}"  # type: ignore[attr-defined]


def tensor_device(tensor: object) -> str:
    """The device a backend tensor or array actually lives on, as 'GPU:0' or 'CPU:0'."""
    if config.backend == "jax":
        (device,) = tensor.devices()  # type: ignore[attr-defined]
        return jax_device_name(device)
    return normalize_device(tensor.device)  # type: ignore[attr-defined]


def synchronize(tensor: object) -> None:
    """Block until ``tensor`` (and the work queued before it) is computed."""
    if config.backend == "jax":
        tensor.block_until_ready()  # type: ignore[attr-defined]
        return
    import tensorflow as tf

    tf.test.experimental.sync_devices()
