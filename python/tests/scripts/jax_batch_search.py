"""On JAX: the batch-size search under a memory budget of about 40 samples
(run by test_batch_size.py as ``after`` code, see ``scripts/core_child.py``)."""

import keras
import numpy as np

from __main__ import bridge, readback

rng = np.random.default_rng(0)
x = rng.standard_normal((64, 8)).astype("float32")
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse")
probe = bridge.call(
    "batch_size",
    {"model": model, "data": (x, x[:, :1]), "min_batch": 8, "max_batch": 8, "steps": 1},
)
estimate = probe["value"]["estimate"]
budget = estimate["fixed_mib"] + 40.5 * estimate["per_sample_mib"]
readback["answer"] = bridge.call(
    "batch_size",
    {
        "model": model,
        "data": (x, x[:, :1]),
        "min_batch": 8,
        "max_batch": 128,
        "steps": 2,
        "memory_budget_mib": budget,
    },
)
readback["iterations"] = int(model.optimizer.iterations)
