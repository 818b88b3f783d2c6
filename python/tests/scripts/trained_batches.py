"""The batches Keras' ``fit()`` trains on, read inside its train step: what a data adapter's
``fit_args`` give training, epoch by epoch, in the order they come.

The rows of ``numbered_rows`` carry their number in their one feature, so a batch is
seen as the numbers of its rows. Imported by the test_adapter_* tests; run as
``python trained_batches.py '<json spec>'`` (the core on PYTHONPATH, the backend the
test chooses), it prints one JSON line: for each of the spec's ``runs``
(``epochs``, ``initial_epoch``), the batches of an ``ArrayAdapter`` of ``rows``
numbered rows (``batch_size``, ``seed``), NumPy reseeded at each epoch's start.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from gpukeras.core.runtime import config


def numbered_rows(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: row i's one feature is i."""
    return np.arange(rows, dtype="float32")[:, None], np.zeros(rows, dtype="float32")


def numbers(batch: Any) -> list[int]:
    """The numbers of a batch's rows (of ``x``, where the batch is ``(x, y)``)."""
    x = batch[0] if isinstance(batch, tuple) else batch
    return np.asarray(x)[:, 0].astype(int).tolist()


def trained_batches(
    fit_args: dict[str, object],
    epochs: int,
    initial_epoch: int = 0,
    callbacks: Sequence[object] = (),
) -> dict[int, list[list[int]]]:
    """The batches ``model.fit(**fit_args)`` trains on in each epoch, by their rows' numbers."""
    keras = config.keras()
    seen: dict[int, list[list[int]]] = {}
    epoch = [initial_epoch]

    class Recorder(keras.Model):  # type: ignore[name-defined,misc]
        def call(self, x: Any) -> Any:
            return x

        def train_step(self, *args: Any) -> Any:
            # JAX's trainer passes the training state first and takes it back.
            seen.setdefault(epoch[0], []).append(numbers(args[-1]))
            logs = {"rows": keras.ops.shape(args[-1][0])[0]}
            return (logs, args[0]) if len(args) == 2 else logs

    class Epochs(keras.callbacks.Callback):  # type: ignore[name-defined,misc]
        def on_epoch_begin(self, number: int, logs: dict | None = None) -> None:
            epoch[0] = number

    model = Recorder()
    model.compile(run_eagerly=True)
    model.fit(
        **fit_args,
        epochs=epochs,
        initial_epoch=initial_epoch,
        verbose=0,
        callbacks=[*callbacks, Epochs()],
    )
    return seen


def reseeding() -> object:
    """What the training loop does for an adapter's ``reseed_numpy``: NumPy reseeded at
    each epoch's start from the epoch (gpu_fit() seeds from (seed, epoch); any per-epoch
    seed will do)."""
    keras = config.keras()

    class Reseed(keras.callbacks.Callback):  # type: ignore[name-defined,misc]
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            np.random.seed(1000 + epoch)

    return Reseed()


if __name__ == "__main__":
    from gpukeras.data.adapters import ArrayAdapter, Rows

    spec = json.loads(sys.argv[1])
    x, y = numbered_rows(spec["rows"])
    runs = [
        trained_batches(
            ArrayAdapter(Rows(x, y, len(x), spec["batch_size"], spec["seed"])).fit_args,
            run["epochs"],
            run.get("initial_epoch", 0),
            [reseeding()],
        )
        for run in spec["runs"]
    ]
    print(json.dumps(runs))
