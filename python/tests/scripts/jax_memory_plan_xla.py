"""On JAX: gpu_memory_plan() measures the compiled step (run by test_memory_plan.py as
``after`` code, see ``scripts/core_child.py``)."""

import jax
import keras

from __main__ import bridge, readback


def live_bytes() -> int:
    return sum(array.nbytes for array in jax.live_arrays())


model = keras.Sequential(
    [keras.Input((64,)), keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10)]
)
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
before = live_bytes()
plans = {}
for batch in (16, 32):
    answer = bridge.call("memory_plan", {"model": model, "batch_size": batch})
    assert answer["ok"], answer
    plans[batch] = answer["value"]
readback["plans"] = plans
readback["live_bytes"] = [before, live_bytes()]
readback["built"] = model.optimizer.built  # the model itself is not changed
