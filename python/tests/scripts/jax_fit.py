"""On JAX: gpu_fit() with a schedule and a user's async-safe callback
(run by test_fit.py as ``after`` code, see ``scripts/core_child.py``)."""

import threading

import keras
import numpy as np

from __main__ import bridge, readback

rng = np.random.default_rng(0)
x = rng.standard_normal((128, 8)).astype("float32")
y = (x @ rng.standard_normal((8, 1))).astype("float32")
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile(optimizer="adam", loss="mse", metrics=["mae"])


threads: set[int] = set()  # where the batch ends ran


class BatchEndThreads(keras.callbacks.Callback):
    async_safe = True  # a user's callback that allows Keras' asynchronous batch ends

    def on_train_batch_end(self, batch, logs=None):
        threads.add(threading.get_ident())


answer = bridge.call(
    "fit",
    {
        "model": model,
        "data": (x, y),
        "epochs": 3,
        "seed": 1,
        "batch_size": 16,
        "verbose": 0,
        "callbacks": [BatchEndThreads()],
        "learning_rate": {
            "schedule": "warmup_cosine",
            "peak": 0.01,
            "warmup_steps": 4,
            "decay_steps": 40,
        },
    },
)
readback["answer"] = answer
readback["jit"] = bool(model.jit_compile)
readback["batch_ends_on_main_thread"] = threading.main_thread().ident in threads
