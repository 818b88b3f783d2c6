"""Batch 512 against 128 x accumulate 4 on this process's backend, with SGD and Adam, through
gpukeras' fit; ``readback`` has the largest relative weight difference of each pair, and what
the optimizer holds afterwards, and a run stopped mid-update and resumed from its backup (run
by test_accumulate.py as ``after`` code)."""

import tempfile

import keras
import numpy as np

from __main__ import readback
from gpukeras.core import compat
from gpukeras.core.errors import GpukerasError
from gpukeras.train import fit

rng = np.random.default_rng(0)
x = rng.standard_normal((2048, 8)).astype("float32")
y = (x @ rng.standard_normal((8, 1)).astype("float32") + 0.1).astype("float32")
optimizers = {
    "sgd": lambda: keras.optimizers.SGD(0.05),
    "adam": lambda: keras.optimizers.Adam(0.01),
}


def new_model(optimizer, normalized=False):
    compat.set_random_seed(keras, 1)  # as gpu_fit() seeds: TensorFlow not imported for it
    layers = [keras.Input((8,)), keras.layers.Dense(32, activation="relu")]
    if normalized:
        layers.append(keras.layers.BatchNormalization())
    model = keras.Sequential([*layers, keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
    return model


def relative_difference(a, b):
    return max(
        float(np.abs(u - v).max() / np.abs(u).max())
        for u, v in zip(a.get_weights(), b.get_weights())
    )


def optimizer_state(model):
    optimizer = model.optimizer
    return {
        "iterations": int(keras.ops.convert_to_numpy(optimizer.iterations)),
        "variables": len(optimizer.variables),
        "gradient_accumulation_steps": optimizer.gradient_accumulation_steps,
    }


common = dict(epochs=3, seed=3, verbose=0, monitor=False)
for name, make in optimizers.items():
    plain, accumulated = new_model(make()), new_model(make())
    fit.fit(plain, (x, y), batch_size=512, **common)
    run = fit.fit(accumulated, (x, y), batch_size=512, accumulate=4, **common)
    readback[name] = relative_difference(plain, accumulated)
    readback[f"{name}_settings"] = {
        k: run["settings"][k]
        for k in ("batch_size", "micro_batch_size", "accumulate", "steps_per_epoch", "data")
    }
    readback[f"{name}_optimizers"] = [optimizer_state(plain), optimizer_state(accumulated)]
    # again, on the built optimizers: the accumulators are made for this fit
    fit.fit(plain, (x, y), batch_size=512, **common)
    fit.fit(accumulated, (x, y), batch_size=512, accumulate=4, **common)
    readback[f"{name}_again"] = relative_difference(plain, accumulated)
    readback[f"{name}_optimizers_again"] = [optimizer_state(plain), optimizer_state(accumulated)]

# BatchNormalization: statistics per micro-batch, so not batch 512's weights
plain, accumulated = new_model(make(), True), new_model(make(), True)
fit.fit(plain, (x, y), batch_size=512, **common)
fit.fit(accumulated, (x, y), batch_size=512, accumulate=4, **common)
readback["batch_normalization"] = relative_difference(plain, accumulated)

# 2000 rows: 16 micro-batches an epoch, the last of 80 rows; 1800 rows: 15, not whole updates
for rows in (2000, 1800):
    run = fit.fit(new_model(make()), (x[:rows], y[:rows]), batch_size=512, accumulate=4, **common)
    readback[f"warnings_{rows}"] = [w["class"] for w in run["warnings"]]


# Stopped in the middle of an update (6 micro-batches into epoch 2, backups every 3), then
# resumed from its backup: the weights of the unbroken run.
class Stop(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.epoch == 1 and batch == 6:
            raise RuntimeError("stopped here")


backups = tempfile.mkdtemp()
resumable = dict(common, batch_size=512, accumulate=4, backup_dir=backups, backup_freq=3)
resumable["steps_per_execution"] = 1  # so the callback sees batch 6 begin on JAX too
whole = new_model(make())
fit.fit(whole, (x, y), **dict(common, batch_size=512, accumulate=4))
try:
    fit.fit(new_model(make()), (x, y), callbacks=[Stop()], **resumable)
except GpukerasError as error:
    readback["stopped"] = error.r_class
resumed = new_model(make())
readback["resumed_from"] = fit.fit(resumed, (x, y), **resumable)["settings"]["resumed_from"]
readback["resumed"] = relative_difference(whole, resumed)
