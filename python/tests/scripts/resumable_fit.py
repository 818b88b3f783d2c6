"""A gpu_fit() with backups, run by test_fit.py as
``python resumable_fit.py OUT BACKUP_DIR PAUSE`` (the core on PYTHONPATH): it
saves the final weights to OUT (.npz) and prints the history, where it resumed
from and the device as JSON. PAUSE seconds after each batch give the test time
to kill it mid-epoch."""

import json
import sys
import time

import numpy as np

from gpukeras.core.runtime import config
from gpukeras.train import fit

keras = config.keras()
out, backup_dir, pause = sys.argv[1], sys.argv[2] or None, float(sys.argv[3])
rng = np.random.default_rng(0)
x = rng.standard_normal((256, 8)).astype("float32")
y = (x @ rng.standard_normal((8, 1))).astype("float32")
keras.utils.set_random_seed(11)
model = keras.Sequential(
    [
        keras.Input((8,)),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(1),
    ]
)
model.compile(optimizer="adam", loss="mse")


class Pause(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(pause)


result = fit.fit(
    model,
    (x, y),
    epochs=4,
    batch_size=16,
    seed=3,
    backup_dir=backup_dir,
    backup_freq=3,
    callbacks=[Pause()],
    verbose=0,
    monitor=False,
    learning_rate={
        "schedule": "exponential",
        "initial": 0.01,
        "decay_steps": 10,
        "decay_rate": 0.9,
    },
)
np.savez(out, *model.get_weights())
settings = result["settings"]
print(
    json.dumps(
        {
            "history": result["history"],
            "resumed_from": settings["resumed_from"],
            "device": settings["device"],
        }
    )
)
