"""One worker of a multi-worker test cluster: joins, trains the digits model, writes what happened.

Run by test_multiworker.py as ``python scripts/multiworker_worker.py '<json spec>'`` with
the core on PYTHONPATH. The spec's keys:

- ``workers``, ``index``: the cluster and this worker's place (``make_strategy``);
  ``start_timeout``: its ``start_timeout_seconds``.
- ``out``: folder for ``result-<index>.json`` (the bridge's answer, plain data,
  with ``failed_at``: the time the call returned) and ``weights-<index>.npz``.
- ``epochs``, ``batch_size``, ``seed``, ``backup_dir``, ``validation``, ``class_weight``: the
  ``multiworker.fit`` call (through ``bridge.call``, as R makes it).
- ``die_at`` [epoch, batch]: send this process ``signal`` (SIGKILL by
  default; SIGSTOP freezes it, as a machine that drops off the network)
  after that batch, writing ``died-<index>`` (the time) first; ``fail_at``
  [epoch, batch]: raise an error in a callback there instead.
- ``heartbeat``: ``heartbeat_timeout_seconds``.
- ``outside``: build the model outside the strategy's scope, seeded with
  ``seed + index`` (so its initial weights differ between workers).
- ``checks``: instead of training, a one-worker cluster trains one epoch and
  then makes calls that must fail, in ``result-<index>.json`` by name
  (``checks``); the last one fails after the workers' first exchange.
- ``trusted_network``: make_strategy's, for workers outside a private network.

Its result also holds ``sockets``: the TCP sockets it listens on once it joined
(``sockets.listening``), TensorFlow's server among them.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

DIGITS = Path(__file__).resolve().parents[3] / "inst" / "extdata" / "digits.csv.gz"
ROWS = 1792  # 28 batches of 64: every global batch splits evenly over 2 workers


def digits() -> tuple[np.ndarray, np.ndarray]:
    """The shipped UCI digits: 64 pixels scaled to [0, 1] and the label, first ROWS rows."""
    with gzip.open(DIGITS, "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.float32)
    return table[:ROWS, :64] / 16, table[:ROWS, 64].astype(np.int32)


def digits_model(keras: object) -> object:
    """A small compiled classifier; built under the caller's scope and seed."""
    model = keras.Sequential(  # type: ignore[attr-defined]
        [
            keras.Input((64,)),  # type: ignore[attr-defined]
            keras.layers.Dense(32, activation="relu"),  # type: ignore[attr-defined]
            keras.layers.Dense(10),  # type: ignore[attr-defined]
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),  # type: ignore[attr-defined]
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),  # type: ignore[attr-defined]
        metrics=["accuracy"],
    )
    return model


def sabotage(keras: object, spec: dict, out: Path) -> list[object]:
    """A callback that kills this process, or fails, at the batch the spec names."""
    index = spec["index"]

    class Sabotage(keras.callbacks.Callback):  # type: ignore[attr-defined,name-defined]
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.epoch = epoch

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if spec.get("die_at") == [self.epoch, batch]:
                (out / f"died-{index}").write_text(str(time.time()))
                os.kill(os.getpid(), getattr(signal, spec.get("signal", "SIGKILL")))
            if spec.get("fail_at") == [self.epoch, batch]:
                raise ValueError(f"worker {index} breaks on purpose")

    return [Sabotage()] if spec.get("die_at") or spec.get("fail_at") else []


def checks(strategy: object, model: object, x: np.ndarray, y: np.ndarray, out: Path) -> dict:
    """Calls that must fail with a classed error, each the bridge's answer (see the spec)."""
    from gpukeras import bridge
    from gpukeras.core.runtime import config
    from gpukeras.train import backup

    keras = config.keras()
    train = {"strategy": strategy, "model": model, "data": (x, y), "verbose": 0, "batch_size": 256}
    midway = out / "midway"
    midway.mkdir()
    (midway / backup.WEIGHTS_PATTERN.format(1)).write_bytes(b"")
    (midway / backup.STATE_FILE).write_text(
        json.dumps({"epoch": 0, "batches_done": 3, "weights": backup.WEIGHTS_PATTERN.format(1),
                    "generation": 1})
    )  # fmt: skip
    calls = {
        "trains": ("train.multiworker:fit", train),
        "same cluster": ("distribute.cluster:make_strategy", {"workers": strategy_workers(strategy),
                                                       "index": 0}),
        "other cluster": ("distribute.cluster:make_strategy", {"workers": ["127.0.0.1:1"],
                                                               "index": 0}),
        "not multi-worker": ("train.multiworker:fit", {**train, "strategy": object()}),
        "backup callback": (
            "train.multiworker:fit",
            {**train, "callbacks": [keras.callbacks.BackupAndRestore(str(out / "keras"))]},
        ),
        "mid-epoch backup": ("train.multiworker:fit", {**train, "backup_dir": str(midway)}),
        # a dataset of unknown length: the workers agree batch by batch when it ends
        "unknown length": ("train.multiworker:fit", {**train, "data": unknown_length(x, y),
                                               "batch_size": None}),
        "text data": ("train.multiworker:fit", {**train, "data": "digits.csv", "batch_size": None}),
    }  # fmt: skip
    answers = {
        name: bridge.answer(bridge.function_at(target), kwargs)
        for name, (target, kwargs) in calls.items()
    }
    answers["same cluster"]["value"] = answers["same cluster"].get("value") is strategy
    for name in ("trains", "unknown length"):
        answers[name]["value"] = answers[name].get("value", {}).get("history")
    return answers


def unknown_length(x: np.ndarray, y: np.ndarray) -> object:
    import tensorflow as tf

    rows = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda features, label: True)
    return rows.batch(256)


def strategy_workers(strategy: object) -> list[str]:
    from gpukeras.distribute import cluster

    return cluster.describe(strategy)["workers"]  # type: ignore[return-value]


def main() -> None:
    spec = json.loads(sys.argv[1])
    out = Path(spec["out"])
    index = spec["index"]
    from sockets import listening  # beside this script, which tests also import as a module

    from gpukeras import bridge
    from gpukeras.core.runtime import config
    from gpukeras.distribute import cluster

    joined = bridge.answer(
        bridge.function_at("distribute.cluster:make_strategy"),
        {
            "workers": spec["workers"],
            "index": index,
            "start_timeout_seconds": spec.get("start_timeout", 120),
            "heartbeat_timeout_seconds": spec.get("heartbeat", 10),
            "trusted_network": spec.get("trusted_network", False),
        },
    )
    result: dict[str, object] = {"joined": {k: v for k, v in joined.items() if k != "value"}}
    result["sockets"] = listening()
    if joined["ok"]:
        strategy = joined["value"]
        result["describe"] = cluster.describe(strategy)
        keras = config.keras()
        x, y = digits()
        if spec.get("outside"):
            # Built the usual way, and differently on each worker: fit copies it into the
            # scope and starts every worker from the chief's weights.
            keras.utils.set_random_seed((spec.get("seed") or 0) + index)
            model = digits_model(keras)
        else:
            keras.utils.set_random_seed(spec.get("seed") or 0)
            with strategy.scope():
                model = digits_model(keras)
        if spec.get("checks"):
            result["checks"] = checks(strategy, model, x, y, out)
            (out / f"result-{index}.json").write_text(json.dumps(result, default=str))
            return
        answer = bridge.answer(
            bridge.function_at("train.multiworker:fit"),
            {
                "strategy": strategy,
                "model": model,
                "data": (x, y),
                "epochs": spec["epochs"],
                "batch_size": spec.get("batch_size", 64),
                "validation_data": (x[:256], y[:256]) if spec.get("validation") else None,
                "seed": spec.get("seed"),
                "backup_dir": spec.get("backup_dir"),
                "callbacks": sabotage(keras, spec, out),
                # JSON's keys are text; the request's class numbers are whole numbers
                "class_weight": {int(k): v for k, v in (spec.get("class_weight") or {}).items()}
                or None,
                "verbose": 0,
            },
        )
        result["fit"] = answer
        np.savez(out / f"weights-{index}.npz", *[w.numpy() for w in model.weights])
    result["failed_at"] = time.time()
    (out / f"result-{index}.json").write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
