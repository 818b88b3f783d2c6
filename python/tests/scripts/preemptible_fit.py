"""A gpu_fit() that a test stops with a signal, run by test_preempt.py as
``python preemptible_fit.py '<json spec>'`` (the core on PYTHONPATH).

The spec's keys: ``out`` (folder for what it writes), ``name`` (this run's
name), ``backup_dir`` (or null), ``signals`` (gpu_fit()'s), ``pause`` (seconds
after each batch, so the test can signal it mid-epoch), ``c_handler`` (a
signal name: a handler installed from C first, as R installs its own, with
``faulthandler.register``, which writes to ``<name>-c-handler.txt``).

It writes ``<name>-progress.txt`` ("epoch batch", 0-based, after each batch),
``<name>.json`` (the bridge's answer without the value, and the settings of a
fit that completed) and ``<name>.npz`` (the final weights). With ``send_after``
it then raises the ``c_handler`` signal: the C handler, if it is back in place,
answers it in ``<name>-c-handler.txt``.
"""

from __future__ import annotations

import faulthandler
import json
import signal
import sys
import time
from pathlib import Path

import numpy as np

from gpukeras import bridge
from gpukeras.core.runtime import config

spec = json.loads(sys.argv[1])
out = Path(spec["out"])
name = spec["name"]
keras = config.keras()

c_handler = spec.get("c_handler")
if c_handler:
    number = int(getattr(signal, c_handler))
    faulthandler.register(number, file=(out / f"{name}-c-handler.txt").open("w"), chain=False)

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
model.compile(optimizer="adam", loss="mse", metrics=["mae"])
progress = out / f"{name}-progress.txt"


class Progress(keras.callbacks.Callback):  # type: ignore[name-defined,misc]
    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        progress.write_text(f"{self.epoch} {batch}")
        time.sleep(spec.get("pause", 0.0))


answer = bridge.call(
    "fit",
    {
        "model": model,
        "data": (x, y),
        "epochs": 4,
        "batch_size": 16,
        "seed": 3,
        "backup_dir": spec.get("backup_dir"),
        "callbacks": [Progress()],
        "verbose": 0,
        "monitor": False,
        "signals": spec.get("signals", ["SIGTERM"]),
        # a batch at a time, on JAX too (whose device-resident loop would choose several
        # per dispatch, and Keras' batch callbacks come once per dispatch)
        "steps_per_execution": 1,
    },
)
report: dict[str, object] = {k: v for k, v in answer.items() if k != "value"}
if answer["ok"]:
    settings = answer["value"]["settings"]
    report["settings"] = {k: settings[k] for k in ("resumed_from", "signal_after_training")}
    report["history"] = answer["value"]["history"]
(out / f"{name}.json").write_text(json.dumps(report))
np.savez(out / f"{name}.npz", *model.get_weights())
if c_handler and spec.get("send_after"):
    signal.raise_signal(number)  # the C handler, back in place, answers it
