"""gpu_fit(remat = TRUE) on this backend, against the same fit without it (run by
test_remat.py as ``after`` code, see ``scripts/core_child.py``): the weights, the mode the
layers had while training and after, the settings."""

import keras
import numpy as np

from __main__ import readback
from gpukeras.core import compat
from gpukeras.train import fit

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 8)).astype("float32")
y = (x[:, 0] > 0).astype("int32")


def model() -> keras.Model:
    compat.set_random_seed(keras, 1)  # as gpu_fit() seeds: TensorFlow not imported for it
    made = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
    )
    made.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return made


class Seen(keras.callbacks.Callback):
    def __init__(self, watched: keras.Model) -> None:
        super().__init__()
        self.watched, self.modes = watched, set()

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self.modes.add(compat.remat_mode(self.watched))


common = {"batch_size": 32, "epochs": 2, "seed": 3, "verbose": 0, "monitor": False}
plain, recomputed = model(), model()
fit.fit(plain, (x, y), **common)
seen = Seen(recomputed)
result = fit.fit(recomputed, (x, y), remat=True, callbacks=[seen], **common)
readback["apart"] = max(
    float(np.abs(a - b).max()) for a, b in zip(plain.get_weights(), recomputed.get_weights())
)
readback["during"] = sorted(str(mode) for mode in seen.modes)
readback["after"] = compat.remat_mode(recomputed)
readback["settings"] = {k: result["settings"][k] for k in ("remat", "data")}
# The same model trains on without it, its step traced again.
again = fit.fit(recomputed, (x, y), **common)
readback["again"] = again["settings"]["remat"]
