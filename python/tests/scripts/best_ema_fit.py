"""gpu_fit()'s verb with gpu_backup(keep_best = 2) and ema = 0.9, run by test_keep_best.py as
``python best_ema_fit.py OUT BACKUP_DIR PAUSE [TRACK_JSON]`` (the core on PYTHONPATH):
the final weights go to OUT (.npz); the history, the k best and the tracked run are
printed as JSON. PAUSE seconds after each batch give the test time to kill it."""

import json
import sys
import time

import numpy as np

from gpukeras.core import compat
from gpukeras.core.runtime import config
from gpukeras.tools import training

keras = config.keras()
out, backup_dir, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
track = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
rng = np.random.default_rng(5)
x = rng.standard_normal((192, 6)).astype("float32")
y = (x @ rng.standard_normal((6, 1)) + 0.3 * rng.standard_normal((192, 1))).astype("float32")
compat.set_random_seed(keras, 7)  # as gpu_fit() seeds: TensorFlow not imported for it
model = keras.Sequential(
    [keras.Input((6,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.5), loss="mse")


class Pause(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(pause)


result = training.fit(
    model,
    (x[:160], y[:160]),
    (x[160:], y[160:]),
    request={
        "epochs": 6,
        "batch_size": 16,
        "seed": 3,
        "backup_dir": backup_dir,
        "backup_freq": 4,
        "keep_best": 2,
        "keep_best_monitor": "val_loss",
        "ema": 0.9,
        "callbacks": [Pause()],
        "verbose": 0,
        "monitor": False,
    },
    track=track,
)
np.savez(out, *model.get_weights())
settings = result["settings"]
print(
    json.dumps(
        {
            "history": result["history"],
            "best": settings["best"],
            "resumed_from": settings["resumed_from"],
            "tracking": settings.get("tracking"),
        }
    )
)
