"""Where a matrix multiply really runs, and how fast, on each visible device.

Asking for a GPU is not proof of using one: TensorFlow falls back to the CPU
silently when an op cannot be placed. The device of the *result* is the evidence.

How fast is measured on matrices sized for each device: a multiply of two
1024 x 1024 matrices takes a few microseconds on an H100, about what
dispatching it costs, so it would time the dispatch rather than the GPU (and
understate its speed-up over the CPU many times). Each device's side doubles
from the one given until one multiply takes at least ``TARGET_MS`` (or the side
reaches ``MAX_SIZE``), so a CPU stops at a small size and stays quick, and
the speed-up compares GFLOP/s, not times of unequal work.
"""

from __future__ import annotations

import statistics
import time
from typing import TypedDict

from gpukeras.core.handles import Record
from gpukeras.core.runtime import config
from gpukeras.gpu import tensors

# One multiply must take this long for dispatch (microseconds) not to count.
TARGET_MS = 5.0
# The largest side tried: three float32 matrices of 1 GiB each.
MAX_SIZE = 16384


class MatmulRun(TypedDict):
    """One device's matmul: where it was asked to run, where it ran, its side, how fast."""

    requested: str
    actual: str
    size: int
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
        "size": size,
        "median_ms": median * 1000,
        "gflops": 2 * size**3 / median / 1e9,
    }


def sized_matmul(
    device: str, size: int, repeats: int, warmup: int, target_ms: float = TARGET_MS
) -> MatmulRun:
    """``time_matmul`` on ``device`` with the side doubled from ``size`` until the median
    multiply takes at least ``target_ms`` (or the side reaches ``MAX_SIZE``)."""
    while True:
        run = time_matmul(device, size, repeats, warmup)
        if run["median_ms"] >= target_ms or size >= MAX_SIZE:
            return run
        size = min(2 * size, MAX_SIZE)


def measure_placement(
    gpus: list[str],
    size: int = 1024,
    repeats: int = 5,
    warmup: int = 2,
    target_ms: float = TARGET_MS,
) -> Record:
    """Run the matmul on each GPU in ``gpus`` and on the CPU; compare their speeds.

    Args:
        gpus: device names such as 'GPU:0'.
        size: matrix side to start from; each device's doubles from it until
            one multiply takes ``target_ms`` (see the module).
        repeats: timed runs per device (the median is reported).
        warmup: untimed runs first (kernel selection, allocation).
        target_ms: how long one multiply must take; 0 keeps ``size`` on
            every device.

    Returns:
        ``size`` (the side started from); ``runs``: one dict per device, with
        the side it was timed at; ``speedup``: the fastest GPU's GFLOP/s over
        the CPU's (None without a GPU); ``on_gpu``: whether any GPU request
        ran on a GPU.
    """
    runs = [sized_matmul(device, size, repeats, warmup, target_ms) for device in [*gpus, "CPU:0"]]
    cpu_gflops = runs[-1]["gflops"]
    gpu_runs = [run for run in runs[:-1] if str(run["actual"]).startswith("GPU")]
    fastest = max((run["gflops"] for run in gpu_runs), default=None)
    return {
        "size": size,
        "runs": runs,
        "speedup": fastest / cpu_gflops if fastest else None,
        "on_gpu": bool(gpu_runs),
    }
