"""The peak memory of one GPU over a stretch of work (gpu_batch_size()'s trials).

TensorFlow keeps a resettable peak per device (``tf.config.experimental``'s
``reset_memory_stats`` and ``get_memory_info``). JAX keeps only each device's
peak since the process started (``memory_stats()["peak_bytes_in_use"]``), so
a stretch's peak is known only when the stretch raised it. On the CPU the
process's memory is not the work's, so nothing is read there.

The device is the one the work runs on, named as ``devices.list_devices``
names it ('GPU:1' is the backend's second GPU), not always the first GPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from gpukeras.core.handles import Device
from gpukeras.core.runtime import config
from gpukeras.gpu.nvml import MIB

Reader = Callable[[], float | None]


def _nothing() -> Reader:
    return lambda: None


def jax_device(name: str) -> Device:
    """The JAX device a name such as 'GPU:1' or 'CPU:2' stands for: its place among
    JAX's devices of that kind, as ``devices.list_devices`` numbers GPUs."""
    kind, _, position = name.partition(":")
    return config.backend_module().devices(kind.lower())[int(position)]


def meter(backend: str, device: str | None) -> Callable[[], Reader]:
    """``start()`` returns ``read()``: ``device``'s peak memory in MiB between the two calls.

    Args:
        backend: the Keras backend.
        device: the GPU the work runs on ('GPU:0', 'GPU:1', ...); None or a
            CPU for work on the CPU.

    ``read()`` gives None where the peak is not known: on the CPU, where the
    backend cannot tell (an error reading it is not the work's), and on JAX
    when the stretch did not raise the process's peak.
    """
    if device is None or not device.startswith("GPU"):
        return _nothing
    if backend == "tensorflow":
        experimental = config.backend_module().config.experimental

        def peak() -> float | None:
            with contextlib.suppress(ValueError, RuntimeError):
                return experimental.get_memory_info(device)["peak"] / MIB
            return None

        def start_tensorflow() -> Reader:
            with contextlib.suppress(ValueError, RuntimeError):
                experimental.reset_memory_stats(device)
                return peak
            return lambda: None

        return start_tensorflow
    gpu = jax_device(device)

    def peak_bytes() -> int | None:
        with contextlib.suppress(Exception):  # no memory statistics on this platform
            return (gpu.memory_stats() or {}).get("peak_bytes_in_use")
        return None

    def start_jax() -> Reader:
        before = peak_bytes()

        def read() -> float | None:
            after = peak_bytes()
            if after is None or before is None or after <= before:
                return None
            return after / MIB

        return read

    return start_jax
