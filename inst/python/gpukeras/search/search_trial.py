"""A gpu_search() trial in the process that trains it: the pruner that judges its epochs,
what reports each epoch's objective to the study and says when the pruner stops it (a
``Reporter``: a population's member has one; a trial of its own, in the Keras callback that
stops its fit), and the trial's heartbeat (Optuna's, recorded while it trains), by
which a search that resumes knows a trial whose process is gone.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from gpukeras.search import study_storage


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


def reporters(
    storage: str, study: str, trial_ids: list[int], objective: str, pruner: str = "median"
) -> list[Reporter]:
    """A ``Reporter`` for each trial of ``trial_ids``, through one opening of the storage
    (the one a waiting worker opened ahead, ``study_storage.warm``, when there is one)."""
    with study_storage.quiet() as optuna:
        opened = study_storage.take_warmed(storage) or study_storage.open_storage(storage)
        loaded = optuna.load_study(
            study_name=study, storage=opened, pruner=pruner_for(optuna, pruner)
        )
    return [Reporter(loaded, opened, trial_id, objective) for trial_id in trial_ids]


class Reporter:
    """What the process that trains trial ``trial_id`` tells the study while it trains: each
    epoch's objective (``epoch_end``, which says when to stop: the pruner judged the trial
    poor, or the objective is not among the logs), and the trial's heartbeat (``heartbeat``,
    started and stopped around the training). ``values`` holds the values reported,
    ``pruned`` whether the pruner stopped the trial, ``missing`` the log names when the
    objective was not among them, ``failed`` why the trial failed while training (None: it
    did not)."""

    def __init__(self, study: Any, storage: Any, trial_id: int, objective: str) -> None:
        import optuna

        self.trial = optuna.trial.Trial(study, trial_id)
        self.heartbeat = Heartbeat(storage, trial_id)
        self.objective = objective
        self.values: list[float] = []
        self.pruned = False
        self.missing: list[str] | None = None
        self.failed: str | None = None

    def epoch_end(self, epoch: int, logs: dict[str, Any]) -> bool:
        """Report epoch ``epoch``'s (0-based) objective from ``logs``; True when training
        must stop (pruned, or no objective in the logs)."""
        if self.objective not in logs:
            self.missing = sorted(logs)
            return True
        value = float(logs[self.objective])
        self.values.append(value)
        with study_storage.quiet():
            self.trial.report(value, epoch)
            if math.isfinite(value) and self.trial.should_prune():
                self.pruned = True
                return True
        return False

    def outcome(self) -> dict[str, Any]:
        """What it saw, as ``search.tell`` reads a trial's ``pruning``: ``values``,
        ``pruned``, ``missing``, ``failed``."""
        return {
            "values": self.values,
            "pruned": self.pruned,
            "missing": self.missing,
            "failed": self.failed,
        }


def pruning_callback(
    storage: str, study: str, trial_id: int, objective: str, pruner: str = "median"
) -> Any:
    """A Keras callback for the process that trains trial ``trial_id``: after each epoch it
    reports the objective (``logs[objective]``) to the study and stops training when
    ``pruner`` says the trial is poor, and from the training's start to its end it records
    the trial's heartbeat (a ``Reporter`` does both; ``pruning_outcome`` reads it).

    Not Optuna's ``KerasPruningCallback`` (optuna-integration): that one raises
    ``TrialPruned`` out of ``fit()``, which would reach R as the trial's error with its
    history lost, and passes over an objective the logs lack with a warning, where a search
    must say so; this one stops training as Keras' own callbacks do."""
    import keras

    reporter = reporters(storage, study, [trial_id], objective, pruner)[0]

    class Pruning(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.reporter = reporter

        def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
            reporter.heartbeat.start()

        def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
            reporter.heartbeat.stop()

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            if reporter.epoch_end(epoch, logs or {}):
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
    """What ``pruning_callback``'s callback saw (``Reporter.outcome``)."""
    return callback.reporter.outcome()
