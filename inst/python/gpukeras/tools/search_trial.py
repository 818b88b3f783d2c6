"""A gpu_search() trial in the process that trains it: the pruner that judges its epochs,
the Keras callback that reports each epoch's objective to the study and stops training when
the pruner says so, and the trial's heartbeat (Optuna's, recorded while it trains), by
which a search that resumes knows a trial whose process is gone.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from gpukeras.tools import study_storage


def pruner_for(optuna: Any, name: str) -> Any:
    """Optuna's pruner by name, each with Optuna's defaults: median waits for 5 trials and
    judges a trial from its first epoch. Judging from its second, as gpukeras once did, kept
    the same 10 of bench/search.R's 20 trials 8 epochs longer in all (120 of 200 epochs
    against 112) for the same best."""
    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner()
    if name == "asha":
        return optuna.pruners.SuccessiveHalvingPruner()
    return optuna.pruners.MedianPruner()


def pruning_callback(
    storage: str, study: str, trial_id: int, objective: str, pruner: str = "median"
) -> Any:
    """A Keras callback for the process that trains trial ``trial_id``: after each epoch it
    reports the objective (``logs[objective]``) to the study and stops training when
    ``pruner`` says the trial is poor, and from the training's start to its end it records
    the trial's heartbeat (``Heartbeat``). Afterwards ``values`` holds the values reported,
    ``pruned`` whether it stopped the trial, ``missing`` the log names when the objective
    was not among them.

    Not Optuna's ``KerasPruningCallback`` (optuna-integration): that one raises
    ``TrialPruned`` out of ``fit()``, which would reach R as the trial's error with its
    history lost, and passes over an objective the logs lack with a warning, where a search
    must say so; this one stops training as Keras' own callbacks do."""
    import keras

    with study_storage.quiet() as optuna:
        opened = study_storage.take_warmed(storage) or study_storage.open_storage(storage)
        loaded = optuna.load_study(
            study_name=study, storage=opened, pruner=pruner_for(optuna, pruner)
        )
    trial = optuna.trial.Trial(loaded, trial_id)
    heartbeat = Heartbeat(opened, trial_id)

    class Pruning(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.values: list[float] = []
            self.pruned = False
            self.missing: list[str] | None = None

        def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
            heartbeat.start()

        def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
            heartbeat.stop()

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            logs = logs or {}
            if objective not in logs:
                self.missing = sorted(logs)
                self.model.stop_training = True
                return
            value = float(logs[objective])
            self.values.append(value)
            with study_storage.quiet():
                trial.report(value, epoch)
                if math.isfinite(value) and trial.should_prune():
                    self.pruned = True
                    self.model.stop_training = True

    return Pruning()


class Heartbeat:
    """Optuna's heartbeat of trial ``trial_id``, recorded in ``storage`` every
    ``storage.get_heartbeat_interval()`` seconds from ``start()`` to ``stop()`` (Optuna's
    ``record_heartbeat``, as its ``optimize()`` records it around a trial).

    Not Optuna's ``HeartbeatThread``: its thread is not a daemon, and a fit that raises
    never reaches ``on_train_end`` to stop it, so the worker could not exit; this one ends
    with its process, as a trial's heartbeat should. A beat the storage refuses ends it
    quietly: a missing beat is what the grace period judges."""

    def __init__(self, storage: Any, trial_id: int) -> None:
        self.storage = storage
        self.trial_id = trial_id
        self.stopped = threading.Event()

    def start(self) -> None:
        self.stopped.clear()
        threading.Thread(target=self._beat, name="gpukeras-heartbeat", daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()

    def _beat(self) -> None:
        interval = self.storage.get_heartbeat_interval()
        while not self.stopped.is_set():
            try:
                self.storage.record_heartbeat(self.trial_id)
            except Exception:
                return
            self.stopped.wait(interval)


def pruning_outcome(callback: Any) -> dict[str, Any]:
    """What ``pruning_callback``'s callback saw: ``values``, ``pruned``, ``missing``."""
    return {"values": callback.values, "pruned": callback.pruned, "missing": callback.missing}
