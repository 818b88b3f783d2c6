"""An allocation failure during a real fit on this process's backend, raised by a Keras
callback with the engine's own error class and text (TensorFlow's ResourceExhaustedError,
XLA's XlaRuntimeError); ``readback`` has the bridge's answer for gpu_fit() and whether the
model predicts and trains afterwards (run by test_out_of_memory.py as ``after`` code)."""

import keras
import numpy as np

from __main__ import bridge, readback

rng = np.random.default_rng(0)
x = rng.standard_normal((512, 8)).astype("float32")
y = (x @ rng.standard_normal((8, 1)).astype("float32")).astype("float32")


def allocation_failure():
    if keras.backend.backend() == "jax":
        import jax

        return jax.errors.JaxRuntimeError(
            "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4294967296 bytes."
        )
    import tensorflow as tf

    return tf.errors.ResourceExhaustedError(
        None,
        None,
        "OOM when allocating tensor with shape[64,65536] RESOURCE_EXHAUSTED: Out of memory",
    )


class Exhausted(keras.callbacks.Callback):
    """The device running out of memory at the third batch of the first epoch."""

    def on_train_batch_begin(self, batch, logs=None):
        if batch == 2:
            raise allocation_failure()


keras.utils.set_random_seed(1)
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse")
request = {"batch_size": 64, "verbose": 0, "steps_per_execution": 1, "monitor": False}
answer = bridge.call(
    "fit", {"model": model, "data": (x, y), "request": {**request, "callbacks": [Exhausted()]}}
)
readback["answer"] = {k: answer.get(k) for k in ("ok", "r_class", "message", "details")}
readback["plan_batch_size"] = (answer.get("plan") or {}).get("batch_size")
readback["changes"] = [row["change"] for row in (answer.get("plan") or {}).get("changes", [])]
readback["predicts"] = bool(np.isfinite(model.predict(x, verbose=0)).all())
again = bridge.call("fit", {"model": model, "data": (x, y), "request": request})
readback["trains_again"] = again["ok"]
