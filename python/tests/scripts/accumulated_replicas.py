"""Batch 512 against 128 x accumulate 4 under a JAX DataParallel strategy over 2 CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=2``); ``readback["difference"]`` is the
largest relative weight difference, after a first fit and a second on built optimizers (run
by test_accumulate.py as ``after`` code)."""

import keras
import numpy as np

from __main__ import readback
from gpukeras.core import compat
from gpukeras.distribute import strategies
from gpukeras.train import fit

rng = np.random.default_rng(0)
x = rng.standard_normal((2048, 8)).astype("float32")
y = (x @ rng.standard_normal((8, 1)).astype("float32")).astype("float32")
strategy = strategies.make("mirrored")["strategy"]


def new_model():
    compat.set_random_seed(keras, 1)  # as gpu_fit() seeds: TensorFlow not imported for it
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    return model


plain, accumulated = new_model(), new_model()
common = dict(batch_size=512, epochs=2, seed=3, verbose=0, monitor=False, strategy=strategy)
readback["difference"] = []
for _ in range(2):
    fit.fit(plain, (x, y), **common)
    run = fit.fit(accumulated, (x, y), accumulate=4, **common)
    pairs = zip(plain.get_weights(), accumulated.get_weights())
    largest = max(float(np.abs(u - v).max() / np.abs(u).max()) for u, v in pairs)
    readback["difference"].append(largest)
readback["replicas"] = run["settings"]["strategy"]["replicas"]
