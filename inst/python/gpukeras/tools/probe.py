"""A few seconds of real Keras training while NVML watches the GPU.

The matmul shows a kernel *can* run on the GPU; the probe shows that Keras
training, the thing users care about, keeps it busy.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import numpy as np

from gpukeras.core.handles import Callback, Record
from gpukeras.core.runtime import config
from gpukeras.gpu import tensors
from gpukeras.gpu.samplers import UtilizationSampler

# A GPU needs wide layers and big batches to show meaningful utilization;
# the CPU shape keeps the probe short on a 2-core machine.
PROBE_SHAPES = {
    "GPU": {"features": 1024, "width": 2048, "batch_size": 2048},
    "CPU": {"features": 256, "width": 256, "batch_size": 256},
}


def _time_limit_callback(keras: ModuleType, seconds: float) -> Callback:
    callback_base: Any = keras.callbacks.Callback  # Keras has no types

    class TimeLimit(callback_base):
        """Stops training ``seconds`` after the first batch (which includes compilation)."""

        def __init__(self) -> None:
            super().__init__()
            self.steps = 0
            self.first_step_end: float | None = None
            self.last_step_end: float | None = None

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            now = time.perf_counter()
            self.steps += 1
            self.last_step_end = now
            if self.first_step_end is None:
                self.first_step_end = now
            elif now - self.first_step_end >= seconds:
                self.model.stop_training = True

    return TimeLimit()


def run_training_probe(
    device: str, seconds: float = 3.0, nvml_indices: list[int] | None = None, hz: float = 10.0
) -> Record:
    """Train a small MLP on ``device`` for about ``seconds`` while sampling NVML.

    Args:
        device: 'GPU:0' or 'CPU:0'.
        seconds: steady-state training time after the first (compiling) step.
        nvml_indices: NVML indices of the GPUs to sample; none on a CPU.
        hz: NVML sampling rate.

    Returns:
        Plain data: steps, samples/s in steady state, the device the model's
        weights live on, and per-GPU utilization and memory during training.
    """
    keras = config.keras()
    shape = PROBE_SHAPES["GPU" if device.startswith("GPU") else "CPU"]
    rng = np.random.default_rng(0)
    rows = shape["batch_size"] * 8
    x = rng.standard_normal((rows, shape["features"]), dtype=np.float32)
    y = rng.integers(0, 10, size=rows).astype(np.int32)
    limit = _time_limit_callback(keras, seconds)
    with keras.device(device):
        model = keras.Sequential(
            [
                keras.Input((shape["features"],)),
                keras.layers.Dense(shape["width"], activation="relu"),
                keras.layers.Dense(shape["width"], activation="relu"),
                keras.layers.Dense(10),
            ]
        )
        model.compile(
            optimizer="adam",
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        with UtilizationSampler(nvml_indices or [], hz=hz) as sampler:
            model.fit(
                x,
                y,
                batch_size=shape["batch_size"],
                epochs=10_000,
                shuffle=False,
                verbose=0,
                callbacks=[limit],
            )
    steady_steps = limit.steps - 1
    steady_seconds = (limit.last_step_end or 0) - (limit.first_step_end or 0)
    return {
        "device": device,
        "weights_device": tensors.tensor_device(model.weights[0].value),
        "steps": limit.steps,
        "batch_size": shape["batch_size"],
        "seconds": steady_seconds,
        "samples_per_second": steady_steps * shape["batch_size"] / steady_seconds
        if steady_seconds > 0
        else None,
        "gpus": sampler.summary(since=limit.first_step_end),
        "nvml_reason": sampler.reason,
    }
