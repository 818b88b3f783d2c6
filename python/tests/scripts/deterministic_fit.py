"""After gpu_setup(deterministic = TRUE, seed = 1): gpu_fit() of one model's starting
weights, again and again (run by test_deterministic.py as ``after`` code, see
``scripts/core_child.py``).

Each fit trains a model built again the same way (the same starting weights and Dropout
generator), so only the run itself (the ops, the data order, Dropout's draws) can make
the weights differ. What it
stores: a hash of the trained weights' bytes per fit, each fit's ``settings``
(``deterministic``, ``seed``), what the backend itself says of determinism, and XLA_FLAGS.
"""

import hashlib
import os

import keras
import numpy as np

from __main__ import bridge, readback
from gpukeras.core import compat
from gpukeras.core.runtime import config

rng = np.random.default_rng(0)
x = rng.standard_normal((512, 16)).astype("float32")
y = (x[:, :3].sum(axis=1) > 0).astype("int32")


def built() -> keras.Model:
    """The same model each time: its weights and Dropout's seed generator are drawn when it
    is built, from the generators a seed set beforehand starts (as a user seeds a script)."""
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [
            keras.Input((16,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dropout(0.3),  # its draws in training come from the seed too
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(2),
        ]
    )


def trained(**fields: object) -> dict[str, object]:
    model = built()
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    answer = bridge.call(
        "fit",
        {"model": model, "data": (x, y), "epochs": 3, "batch_size": 32, "verbose": 0,
         "monitor": False, **fields},
    )  # fmt: skip
    assert answer["ok"], answer
    digest = hashlib.sha256(
        b"".join(np.ascontiguousarray(w).tobytes() for w in model.get_weights())
    )
    settings = answer["value"]["settings"]
    return {
        "weights": digest.hexdigest(),
        "deterministic": settings["deterministic"],
        "seed": settings["seed"],
    }


readback["fits"] = {
    "seed 1": trained(seed=1),
    "seed 1 again": trained(seed=1),
    "no seed": trained(),  # takes gpu_setup()'s
    "seed 2": trained(seed=2),
}
readback["xla_flags"] = os.environ.get("XLA_FLAGS")
if config.backend == "tensorflow":
    import tensorflow as tf

    readback["tf_op_determinism"] = compat.tf_op_determinism_enabled()
    # What TensorFlow does only with its op determinism on: refuse a random op without a
    # seed (its public behaviour, beside the private reading above).
    tf.random.set_seed(None)
    try:
        tf.random.uniform([1])
        readback["unseeded_random_op"] = "ran"
    except RuntimeError as error:
        readback["unseeded_random_op"] = str(error)
