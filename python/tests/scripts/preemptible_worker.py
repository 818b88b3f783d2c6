"""One worker of a 2-worker cluster that a test stops with a signal, run by test_preempt.py
as ``python preemptible_worker.py '<json spec>'`` with the core on PYTHONPATH.

The spec's keys: ``backend`` ("tensorflow": ``cluster.make_strategy`` and
``multiworker.fit``; "jax": ``jax_cluster.join`` and ``fit.fit``), ``workers``
and ``index``, ``out`` (folder), ``backup_dir`` (or null), ``epochs``,
``pause`` (seconds after each batch, so the test can signal it mid-epoch),
``signals`` (gpu_fit()'s). The digits model and data of the other cluster
tests (``multiworker_worker``), seed 5, global batches of 64.

It writes ``progress-<index>.txt`` ("epoch batch", 0-based, after each batch),
``result-<index>.json`` (the bridge's answer without the value; the
settings and history of a fit that completed; ``seconds``: how long the fit
call took) and ``weights-<index>.npz``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from multiworker_worker import digits, digits_model

from gpukeras import bridge
from gpukeras.core.runtime import config

spec = json.loads(sys.argv[1])
out = Path(spec["out"])
index = spec["index"]
tensorflow = spec["backend"] == "tensorflow"
join = "distribute.cluster:make_strategy" if tensorflow else "distribute.jax_cluster:join"
joined = bridge.answer(
    bridge.function_at(join),
    {"workers": spec["workers"], "index": index, "start_timeout_seconds": 60},
)
assert joined["ok"], joined
strategy = joined["value"]
keras = config.keras()
x, y = digits()
keras.utils.set_random_seed(5)
if tensorflow:
    with strategy.scope():
        model = digits_model(keras)
else:
    model = digits_model(keras)
progress = out / f"progress-{index}.txt"


class Progress(keras.callbacks.Callback):  # type: ignore[name-defined,misc]
    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        progress.write_text(f"{self.epoch} {batch}")
        time.sleep(spec.get("pause", 0.0))


started = time.perf_counter()
answer = bridge.answer(
    bridge.function_at("train.multiworker:fit" if tensorflow else "train.fit:fit"),
    {
        "strategy": strategy,
        "model": model,
        "data": (x, y),
        "epochs": spec["epochs"],
        "batch_size": 64,
        "seed": 5,
        "backup_dir": spec.get("backup_dir"),
        "callbacks": [Progress()],
        "verbose": 0,
        "monitor": False,
        "signals": spec.get("signals", ["SIGTERM"]),
    },
)
report: dict[str, object] = {k: v for k, v in answer.items() if k != "value"}
report["seconds"] = time.perf_counter() - started
if answer["ok"]:
    report["settings"] = {k: answer["value"]["settings"][k] for k in ("resumed_from", "seconds")}
    report["history"] = answer["value"]["history"]
(out / f"result-{index}.json").write_text(json.dumps(report))
np.savez(out / f"weights-{index}.npz", *[np.asarray(w) for w in model.get_weights()])
