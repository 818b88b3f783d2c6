"""gpu_memory_plan()'s closed-form cases, planned on whichever backend runs them: in the
tests' process (TensorFlow) and in a fresh one on JAX (test_memory_plan.py)."""

from __future__ import annotations

import numpy as np

from gpukeras import bridge
from gpukeras.core.runtime import config

BATCH = 32


def mlp(dtype: str | None = None, optimizer: object = "adam") -> object:
    """A compiled MLP 100-256-10; ``dtype`` a policy for every layer (e.g. mixed_float16)."""
    keras = config.keras()
    model = keras.Sequential(
        [
            keras.Input((100,)),
            # named: Keras numbers unnamed layers by how many this process made
            keras.layers.Dense(256, activation="relu", dtype=dtype, name="dense"),
            keras.layers.Dense(10, dtype=dtype, name="dense_1"),
        ]
    )
    model.compile(optimizer=optimizer, loss="mse")
    return model


def plan(model: object, batch_size: int = BATCH) -> dict:
    answer = bridge.call("memory_plan", {"model": model, "batch_size": batch_size})
    assert answer["ok"], answer
    return answer["value"]


def facts() -> dict:
    """Plans of the MLP at two batch sizes, in mixed precision, and after a train step."""
    model = mlp()
    found = {
        "backend": config.keras().backend.backend(),
        "parameters": model.count_params(),
        "plan": plan(model),
        "plan_double": plan(model, 2 * BATCH),
        "mixed": plan(mlp("mixed_float16")),
    }
    model.train_on_batch(np.zeros((BATCH, 100), "float32"), np.zeros((BATCH, 10), "float32"))
    found["trained"] = plan(model)
    return found
