"""A study in a folder of this user's: Optuna's journal storage in a file (``search.journal``),
Optuna's storage for several processes on one machine (each write appended under a lock
file, each read replaying what others appended), with the heartbeat Optuna's RDB storage has
and its journal lacks, so that ``fail_stale_trials`` and the trial's ``Heartbeat`` work on
both alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import optuna
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

from gpukeras.core.compat import optuna_heartbeat_base, optuna_trial_id

# The system attribute that holds a running trial's last heartbeat (seconds since the epoch).
HEARTBEAT_ATTR = "gpukeras_heartbeat"


class JournalStudyStorage(optuna.storages.JournalStorage, optuna_heartbeat_base()):  # type: ignore[misc]
    """Optuna's ``JournalStorage`` on ``JournalFileBackend(path)`` (with the lock file that
    optuna-dashboard takes too), and Optuna's heartbeat protocol (``BaseHeartbeat``, as
    ``RDBStorage`` implements it): a beat is the trial's ``HEARTBEAT_ATTR``, the time the
    process that trains it recorded; a running trial whose last beat (since it started
    running: a trial asked again comes with its first's) is older than ``grace_period``
    seconds is stale. The processes share one clock: a journal is one machine's."""

    def __init__(
        self,
        path: str,
        heartbeat_interval: int,
        grace_period: int,
        stale_callback: Callable[[optuna.Study, optuna.trial.FrozenTrial], None],
    ) -> None:
        super().__init__(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path)))
        self.heartbeat_interval = heartbeat_interval
        self.grace_period = grace_period
        self.stale_callback = stale_callback

    def record_heartbeat(self, trial_id: int) -> None:
        self.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, time.time())

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        now = time.time()
        stale = []
        running = (optuna.trial.TrialState.RUNNING,)
        for trial in self.get_all_trials(study_id, deepcopy=False, states=running):
            beat: Any = trial.system_attrs.get(HEARTBEAT_ATTR)
            start = trial.datetime_start.timestamp() if trial.datetime_start else now
            if beat is not None and beat >= start and now - beat > self.grace_period:
                stale.append(optuna_trial_id(trial))
        return stale

    def get_heartbeat_interval(self) -> int:
        return self.heartbeat_interval

    def get_heartbeat_stale_trial_callback(
        self,
    ) -> Callable[[optuna.Study, optuna.trial.FrozenTrial], None]:
        return self.stale_callback
