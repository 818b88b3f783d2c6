"""Profile a small model twice on JAX, on tf.data where TensorFlow is not blocked
(run by test_profile.py as ``after`` code, see ``scripts/core_child.py``)."""

import sys

import keras
import numpy as np

from __main__ import bridge, readback

rng = np.random.default_rng(0)
x = rng.standard_normal((64, 8)).astype("float32")
y = (x @ rng.standard_normal((8, 1))).astype("float32")
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
# two batches a step, so that a step's rows are known (32: the arrays' rows train on the device)
model.compile(optimizer="adam", loss="mse", metrics=["mae"], steps_per_execution=2)
args = {"model": model, "data": (x, y), "steps": [2, 4], "batch_size": 16}
if sys.modules.get("tensorflow", False) is not None:  # TensorFlow not blocked: train on tf.data
    from gpukeras.data import pipeline

    # A map keeps it a tf.data pipeline (rows batched as they are would train on the device).
    data = pipeline.from_arrays(x, y, batch_size=16, map=lambda x, y: (x, y))["dataset"]
    args = {**args, "data": data, "batch_size": None}
readback["answers"] = [bridge.call("profile", args) for _ in range(2)]
