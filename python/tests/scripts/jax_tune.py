"""On JAX: gpu_tune() on arrays, whose rows train on the device as gpu_fit() trains them
(run by test_tune.py as ``after`` code, see ``scripts/core_child.py``)."""

import keras
import numpy as np

from __main__ import bridge, readback

rng = np.random.default_rng(0)
x = rng.normal(size=(512, 8)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
keras.utils.set_random_seed(1)
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
)
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
answer = bridge.call(
    "tune",
    {
        "model": model,
        "data": (x, y),
        "time_budget": 40,  # on a busy machine 20 s paid for the compile of one jit run only
        "precisions": ["float32"],
        "batch_sizes": [32],
        "steps_per_execution": [1, 8],
        "jit_compile": [False, True],
        "seed": 1,
    },
)
readback["answer"] = answer
readback["model_steps_per_execution"] = model.steps_per_execution
