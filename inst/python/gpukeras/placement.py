"""Where a matrix multiply really runs, and how fast, on each visible device.

Asking for a GPU is not proof of using one: TensorFlow falls back to the CPU
silently when an op cannot be placed. The device of the *result* is the evidence.
"""

from __future__ import annotations

import statistics
import time
from typing import TypedDict

from gpukeras import tensors
from gpukeras.runtime import config


class MatmulRun(TypedDict):
    """One device's matmul: where it was asked to run, where it ran, how fast."""

    requested: str
    actual: str
    median_ms: float
    gflops: float


def time_matmul(device: str, size: int, repeats: int, warmup: int) -> MatmulRun:
    """Multiply two ``size`` x ``size`` float32 matrices on ``device``.

    Returns the requested and actual device, the median wall time of ``repeats``
    synchronised runs after ``warmup`` runs, and the achieved GFLOP/s.
    """
    keras = config.keras()
    with keras.device(device):
        a = keras.random.normal((size, size), seed=1)
        b = keras.random.normal((size, size), seed=2)
        for _ in range(warmup):
            tensors.synchronize(keras.ops.matmul(a, b))
        seconds = []
        for _ in range(repeats):
            started = time.perf_counter()
            result = keras.ops.matmul(a, b)
            tensors.synchronize(result)
            seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    return {
        "requested": device,
        "actual": tensors.tensor_device(result),
        "median_ms": median * 1000,
        "gflops": 2 * size**3 / median / 1e9,
    }


def measure_placement(
    gpus: list[str], size: int = 1024, repeats: int = 5, warmup: int = 2
) -> dict[str, object]:
    """Run the matmul on each GPU in ``gpus`` and on the CPU; compare their times.

    Args:
        gpus: device names such as 'GPU:0'.
        size: matrix side; the same on every device so the ratio is fair.
        repeats: timed runs per device (the median is reported).
        warmup: untimed runs first (kernel selection, allocation).

    Returns:
        ``runs``: one dict per device; ``speedup``: CPU time / fastest GPU time
        (None without a GPU); ``on_gpu``: whether any GPU request ran on a GPU.
    """
    runs = [time_matmul(device, size, repeats, warmup) for device in [*gpus, "CPU:0"]]
    cpu_ms = runs[-1]["median_ms"]
    gpu_runs = [run for run in runs[:-1] if str(run["actual"]).startswith("GPU")]
    fastest = min((run["median_ms"] for run in gpu_runs), default=None)
    return {
        "size": size,
        "runs": runs,
        "speedup": cpu_ms / fastest if fastest else None,
        "on_gpu": bool(gpu_runs),
    }
