"""One worker of a JAX multi-worker test cluster: joins, trains the digits model, says how.

Run by test_jax_multiworker.py as ``python scripts/jax_worker.py '<json spec>'`` on the JAX
backend with the core on PYTHONPATH. The spec's keys:

- ``workers``, ``index``: the cluster and this worker's place; without
  ``workers`` the process trains alone (the one-process reference), under
  ``strategy`` ("one_device", or null for none).
- ``heartbeat``: the cluster's heartbeat timeout in seconds (``jax_cluster.join``).
- ``out``: folder for ``result-<index>.json`` (the bridge's answers, plain data,
  with ``failed_at``: the time the fit returned) and ``weights-<index>.npz``.
- ``epochs``, ``batch_size``, ``seed``, ``backup_dir`` (``{index}`` in it is
  this worker's index), ``outside_seed``: the gpu_fit() call (``fit.fit``
  through ``bridge.call``, as R makes it); the model is built with
  ``keras.utils.set_random_seed(outside_seed + index)``,
  so its initial weights differ between workers unless ``outside_seed`` is null;
  ``as_dataset``: give the arrays as the seeded tf.data pipeline that several
  processes read (``pipeline.from_arrays``), for the one-process reference.
- ``die_at`` [epoch, batch]: SIGKILL this process after that batch, writing
  ``died-<index>`` (the time) first.

- ``leave_after``: once the result is written, wait that many seconds (the
  chief: none), write ``leaving-<index>`` (the time), leave the cluster as R
  does when it ends (the bridge's ``leave_cluster``), write ``left-<index>``
  (the time and the bridge's answer) and end with SIGKILL, so that no Python
  exit handler runs (R ends without finalizing Python).

Its result also holds ``sockets``: the TCP sockets it listens on after the fit
(``sockets.listening``), the coordinator's and Gloo's among them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
from multiworker_worker import digits, digits_model
from sockets import listening


def killer(keras: object, spec: dict, out: Path) -> list[object]:
    """A callback that kills this process at the batch the spec names."""
    index = spec.get("index", 0)

    class Killer(keras.callbacks.Callback):  # type: ignore[attr-defined,name-defined]
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.epoch = epoch

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if spec.get("die_at") == [self.epoch, batch]:
                (out / f"died-{index}").write_text(str(time.time()))
                os.kill(os.getpid(), signal.SIGKILL)

    return [Killer()] if spec.get("die_at") else []


def main() -> None:
    spec = json.loads(sys.argv[1])
    out = Path(spec["out"])
    index = spec.get("index", 0)
    from gpukeras import bridge
    from gpukeras.core.runtime import config

    result: dict[str, object] = {}
    strategy = None
    if spec.get("workers"):
        joined = bridge.answer(
            bridge.function_at("distribute.jax_cluster:join"),
            {"workers": spec["workers"], "index": index, "start_timeout_seconds": 60,
             "heartbeat_timeout_seconds": spec.get("heartbeat", 10)},
        )  # fmt: skip
        result["joined"] = {k: v for k, v in joined.items() if k != "value"}
        strategy = joined.get("value")
        if strategy is None:
            (out / f"result-{index}.json").write_text(json.dumps(result, default=str))
            return
        result["describe"] = bridge.call("describe_strategy", {"strategy": strategy})["value"]
    elif spec.get("strategy"):
        strategy = bridge.call("strategy", {"type": spec["strategy"]})["value"]["strategy"]
    keras = config.keras()
    x, y = digits()
    if spec.get("outside_seed") is not None:
        keras.utils.set_random_seed(spec["outside_seed"] + index)
    model = digits_model(keras)
    data: object = (x, y)
    batch_size = spec.get("batch_size", 64)
    if spec.get("as_dataset"):
        # The pipeline gpu_fit() makes of the arrays where several processes train, read in
        # its own order: not on the device, as gpu_fit() in one process would put it.
        from gpukeras.data import pipeline
        from gpukeras.data.adapters import resident

        resident.MEMORY_SHARE = 0.0

        keras.utils.set_random_seed(spec["seed"])  # as gpu_fit() does before it makes one
        data = pipeline.from_arrays(x, y, batch_size=batch_size, shuffle=True, seed=spec["seed"])
        data, batch_size = data["dataset"], None  # type: ignore[index]
    answer = bridge.call(
        "fit",
        {
            "model": model,
            "data": data,
            "epochs": spec["epochs"],
            "batch_size": batch_size,
            "seed": spec.get("seed"),
            "backup_dir": spec["backup_dir"].format(index=index)
            if spec.get("backup_dir")
            else None,
            "callbacks": killer(keras, spec, out),
            "strategy": strategy,
            "monitor": spec.get("monitor", False),
            "verbose": 0,
        },
    )
    result["failed_at"] = time.time()
    result["fit"] = answer
    result["sockets"] = listening()
    (out / f"result-{index}.json").write_text(json.dumps(result, default=str))
    np.savez(out / f"weights-{index}.npz", *model.get_weights())
    if "leave_after" in spec:
        time.sleep(spec["leave_after"] if index else 0)
        (out / f"leaving-{index}").write_text(str(time.time()))
        left = bridge.call("leave_cluster", {})
        (out / f"left-{index}").write_text(json.dumps({"at": time.time(), "answer": left}))
        os.kill(os.getpid(), signal.SIGKILL)  # no Python exit handler runs, as when R ends


if __name__ == "__main__":
    main()
