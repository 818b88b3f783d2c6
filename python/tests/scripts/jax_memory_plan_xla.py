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


class Plain(keras.optimizers.SGD):  # not registered: clone_model() cannot rebuild it
    pass


unclonable = keras.Sequential([keras.Input((64,)), keras.layers.Dense(10)])
unclonable.compile(optimizer=Plain(), loss="mse")
answer = bridge.call("memory_plan", {"model": unclonable, "batch_size": 16})
assert answer["ok"], answer
readback["unclonable"] = answer["value"]


class RefusesLarge(keras.layers.Layer):  # its step does not trace past 16 rows
    def call(self, x: object) -> object:
        rows = x.shape[0]  # type: ignore[attr-defined]
        if isinstance(rows, int) and rows > 16:
            raise RuntimeError("no workspace for this batch")
        return x


refusing = keras.Sequential([keras.Input((64,)), RefusesLarge(), keras.layers.Dense(10)])
refusing.compile(optimizer="adam", loss="mse")
answer = bridge.call("memory_plan", {"model": refusing, "batch_size": 16})
assert answer["ok"], answer
readback["uncompilable"] = answer["value"]
