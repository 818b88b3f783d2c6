"""A real small fit with the monitor's step timer and the live line, read back: what each
epoch's line showed as ``input_wait_%``, that epoch's window of the timer's ledger, and the
report's share. Imported by test_input_wait (in this process's backend), and run as
``after`` code on JAX (``scripts/core_child.py``): ``import live_and_report``."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpukeras.core.runtime import config
from gpukeras.train import live, monitor, step_ledger

EPOCHS = 3


def fit_with_live_figures() -> dict[str, Any]:
    """``shown`` (each epoch line's figure), ``windows`` (each epoch's seconds waited and
    seconds in all, from the ledger), ``share`` (the report's) and ``backend``."""
    keras = config.keras()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 8)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    watcher = monitor.TrainingMonitor([], batch_size=32, skip=2, measure_input=True)
    shown: list[float] = []

    class Shown(keras.callbacks.Callback):  # after the live figures: sees what they put
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            shown.append(float((logs or {})["input_wait_%"]))

    callbacks = [*watcher.callbacks, live.callback(keras, watcher), Shown()]
    with watcher:
        model.fit(x, y, batch_size=32, epochs=EPOCHS, verbose=0, callbacks=callbacks)
    timer: Any = watcher.timer
    windows = [step_ledger.totals(timer.ledger.of_epoch(epoch)) for epoch in range(EPOCHS)]
    return {
        "shown": shown,
        "windows": windows,
        "share": timer.report()["input_wait_share"],
        "backend": keras.backend.backend(),
    }


if __name__ != "__main__" and "readback" in vars(__import__("__main__")):
    from __main__ import readback  # type: ignore[attr-defined]

    readback.update(fit_with_live_figures())
