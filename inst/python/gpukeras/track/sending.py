"""Runs sent with MLflow's own client, and what a store did not take kept in an MLflow store.

Training never waits for the tracking store. Each tracked run is known by a key of gpukeras'
own (``records.new_key``, the run's tag ``gpukeras.key``), so that any process can log to a run
another made (a search's parent marks a trial that its worker trained, a resumed fit
continues the run of the killed one) and a run can be made after the fact: every operation
(``post``) carries what makes its run where none has that key yet (``records.Creation``).

Operations run in order on one worker thread per process (``Sender.pool``, a standard
executor): it finds or makes the run and hands its metrics, params and tags to MLflow's
asynchronous logging (``log_batch(..., synchronous=False)``), whose queue merges a run's
batches within MLflow's limits (over ``tracking.PATIENCE``'s buffering seconds); a run's
artifacts and end follow them. What costs time to make (a model's files, a data hash) is a
``records.later_op``, made on that thread.

When the store cannot take a request (``reach.unavailable``), or a server was found not to
answer (``reach.reach``, asked once per process and remembered), that operation and every
later one for that store go to the store of kept runs (``kept_store``: MLflow's own SQLite
store in the ``spool`` folder, made for this user alone, only then), the same run by its
key, tagged with the store it is for; a warning is due once (``reach.say_once``;
``take_warnings``, R raises it as ``gpukeras_warning_tracking``). ``sync`` copies each kept
run to its store with MLflow's client when it answers (gpu_track_sync(), or by itself before
the first operation the store takes in the process), then deletes it: a metric value the
run has at that step already is left out (a sync cut short logs nothing twice), and only
artifacts inside the kept store are read or removed.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from gpukeras.core import compat
from gpukeras.track import reach, tracking
from gpukeras.track.records import Creation
from gpukeras.track.tracking import Target

KEY_TAG = "gpukeras.key"
PARENT_KEY_TAG = "gpukeras.parent_key"
# A kept run's tags: the store it is for (masked), its experiment there, and why it was kept.
KEPT_FOR_TAG = "gpukeras.kept_for"
KEPT_EXPERIMENT_TAG = "gpukeras.kept_experiment"
KEPT_EXPERIMENT_ID_TAG = "gpukeras.kept_experiment_id"
KEPT_WHY_TAG = "gpukeras.kept_why"
# MLflow's asynchronous queue logs each batch it could not send: the kept run says it.
logging.getLogger("mlflow.utils.async_logging.async_logging_queue").addFilter(lambda _: False)


@dataclass
class _Item:
    target: Target
    key: str
    creation: Creation
    op: dict[str, Any]


class Sender:
    """The process's worker thread for tracking operations (see the module)."""

    def __init__(self) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(1, "gpukeras-tracking")
        self.changed = threading.Condition()
        self.pending: list[concurrent.futures.Future[None]] = []
        self.runs: dict[tuple[str, str], str] = {}  # (uri, key) -> MLflow run id
        self.down: dict[str, str] = {}  # uri -> why it cannot take requests now
        self.synced: set[str] = set()
        self.warnings: list[str] = []
        self.uris: set[str] = set()  # the stores posted to
        # batches handed to MLflow's queue, not yet seen through (the worker thread's)
        self.batches: list[tuple[_Item, Any]] = []

    # The training side ---------------------------------------------------------
    def post(self, target: Target, key: str, creation: Creation, op: dict[str, Any]) -> None:
        """Queue ``op`` for the run ``key`` (kept where the store does not take it)."""
        future = self.pool.submit(self._send, _Item(target, key, creation, op))
        with self.changed:
            self.uris.add(target.uri)
            self.pending = [f for f in self.pending if not f.done()] + [future]

    def retry(self, target: Target) -> None:
        """Try the store again from the next operation on (a new run)."""
        with self.changed:
            self.down.pop(target.uri, None)

    def _wait(self, wait: float) -> bool:
        """Wait (at most ``wait`` s) for what is queued now and the batches handed over."""
        with self.changed:
            futures = [*self.pending, self.pool.submit(self._settle)]
        return not concurrent.futures.wait(futures, timeout=wait).not_done

    def drain(self, target: Target, wait: float | None = None) -> bool:
        """Wait (at most ``wait`` s, default the target's) until every queued operation is
        sent or kept; the store counts as down then, so that the rest is kept at once."""
        if self._wait(target.wait if wait is None else wait):
            return True
        why = f"it did not take the run's records within {target.wait:g} s"
        with self.changed:
            known = target.uri in self.down  # being kept: said already
            self.down[target.uri] = self.down.get(target.uri, why)
            if not known and reach.say_once(target):
                self.warnings.append(_kept_message(target, why))
        return False

    def wait_for_run(self, target: Target, key: str, wait: float) -> str | None:
        """Wait (at most ``wait`` s) until the run ``key`` is made, or the store counts as
        down (or was found not to answer: ``reach.remembered``); its id, or None. The
        sending goes on."""
        deadline = time.monotonic() + wait
        if reach.remembered(target) is not None:
            return self.runs.get((target.uri, key))
        with self.changed:
            while (target.uri, key) not in self.runs and target.uri not in self.down:
                left = deadline - time.monotonic()
                if left <= 0 or all(f.done() for f in self.pending):
                    break
                self.changed.wait(min(left, 0.05))
            return self.runs.get((target.uri, key))

    def flush(self, wait: float, keep_rest: bool = False) -> bool:
        """Wait (at most ``wait`` s) until everything queued is sent or kept; with
        ``keep_rest`` (the process is ending), every store counts as down then, so what is
        left is kept at once (for a few seconds more). True when done."""
        if self._wait(wait):
            return True
        if keep_rest:
            with self.changed:
                why = "the process ended before they were sent"
                self.down.update({uri: why for uri in self.uris})
            self._wait(5.0)
        return False

    def take_warnings(self) -> list[str]:
        with self.changed:
            said, self.warnings = self.warnings, []
        return said

    def run_id(self, target: Target, key: str) -> str | None:
        """The MLflow run id of ``key``, where this process sent to it."""
        return self.runs.get((target.uri, key))

    # The worker thread -----------------------------------------------------------
    def _send(self, item: _Item) -> None:
        try:
            self._send_or_keep(item)
        finally:
            with self.changed:
                self.changed.notify_all()

    def _send_or_keep(self, item: _Item) -> None:
        target = item.target
        if item.op["op"] == "later":
            with contextlib.suppress(Exception):  # a model that cannot be rebuilt: no artifact
                item.op = item.op["make"]()
            if item.op is None or item.op["op"] == "later":
                return
        why = self.down.get(target.uri)
        if why is None and (why := reach.reach(target)) is not None:  # asked once per process
            self._went_down(target, why)
        if why is None:
            try:
                with _quiet_thread():
                    if target.uri not in self.synced:
                        self.synced.add(target.uri)
                        with contextlib.suppress(Exception):  # the kept store's trouble
                            sync(target, self)
                    run_id = self.resolve(target, item.key, item.creation)
                    self._apply(target, run_id, item)
                reach.answered(target)
                return
            except Exception as error:
                why = self._failed(item, error)
                if why is None:
                    return
        keep(item, why, self)

    def _apply(self, target: Target, run_id: str, item: _Item) -> None:
        """Send ``item``'s operation to the run: a log operation to MLflow's queue, any
        other after the batches handed over before it (``_settle``)."""
        op, mlflow = item.op, tracking.client(target)
        if op["op"] == "log":
            self.batches.append((item, mlflow.log_batch(run_id, *_entities(op), synchronous=False)))
            return
        self._settle()
        apply_op(target, run_id, op)

    def _settle(self) -> None:
        """Wait for the batches handed to MLflow's queue; those it could not send are kept."""
        batches, self.batches = self.batches, []
        for item, operations in batches:
            if operations is None:
                continue
            try:
                operations.wait()
            except Exception as error:
                why = self._failed(item, error)
                if why is not None:
                    keep(item, why, self)

    def _failed(self, item: _Item, error: Exception) -> str | None:
        """Why the store did not take ``item`` (it counts as down, the warning due once), or
        None where MLflow refused the record itself (said; sending it again would not do)."""
        why = reach.unavailable(error, item.target)
        if why is None:
            said = f"MLflow refused a record of a run: {error}"
            self.warnings.append(tracking.masked(said, item.target))
        elif item.target.uri not in self.down:
            reach.remember(item.target, why)
            self._went_down(item.target, why)
        return why

    def _went_down(self, target: Target, why: str) -> None:
        """The store does not take runs (``why``): the warning due where not said yet."""
        with self.changed:
            self.down[target.uri] = why
            if reach.say_once(target):
                self.warnings.append(_kept_message(target, why))

    def resolve(self, target: Target, key: str, creation: Creation | None) -> str:
        """The run id of ``key``: known here, else found by its tag, else made."""
        known = self.runs.get((target.uri, key))
        if known is not None:
            return known
        found = None if creation is not None and creation.fresh else find_run(target, key)
        if found is None:
            if creation is None:
                raise LookupError(key)
            found = create_run(target, key, creation, self)
        with self.changed:
            self.runs[(target.uri, key)] = found
        return found


SENDER = Sender()


def _flush_at_exit() -> None:
    """What is still queued when Python ends is sent (for a few seconds), or kept: run by
    ``threading``'s exit hook, before the standard executors stop taking work (MLflow's
    asynchronous logging runs on them; ``atexit`` comes too late). R ends without
    finalizing Python: its own finalizer flushes (R/python.R, the ``track_flush`` verb)."""
    with contextlib.suppress(Exception):
        SENDER.flush(5.0, keep_rest=True)


compat.before_threads_stop(_flush_at_exit)


def _kept_message(target: Target, why: str) -> str:
    return (
        f"Tracking: {target.safe} does not take runs now: {why}. Training went on; the "
        f"session's runs are kept in {target.spool} until it does (no further warning), and "
        "gpu_track_sync() sends them."
    )


@contextlib.contextmanager
def _quiet_thread() -> Any:
    """MLflow's and urllib3's log lines about retries held back on the worker thread (they
    name the server, and land among R's output): the warning says what matters."""

    class OnlyOtherThreads(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return not (record.threadName or "").startswith("gpukeras-tracking")

    names = ("urllib3.connectionpool", "mlflow.utils.request_utils", "mlflow.store", "alembic")
    only = OnlyOtherThreads()
    for name in names:
        logging.getLogger(name).addFilter(only)
    try:
        with tracking.quiet_mlflow():
            yield
    finally:
        for name in names:
            logging.getLogger(name).removeFilter(only)


# MLflow requests ----------------------------------------------------------------
def _entities(op: Mapping[str, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """A log operation's metrics, params and tags as MLflow's entities."""
    from mlflow.entities import Metric, Param, RunTag

    return (
        [Metric(k, v, t, s) for k, v, t, s in op.get("metrics", [])],
        [Param(k, v) for k, v in op.get("params", {}).items()],
        [RunTag(k, v) for k, v in op.get("tags", {}).items()],
    )


def find_run(target: Target, key: str) -> str | None:
    found = tracking.client(target).search_runs(
        [tracking.experiment_id(target)],
        filter_string=f"tags.`{KEY_TAG}` = '{key}'",
        max_results=1,
    )
    return found[0].info.run_id if found else None


def create_run(target: Target, key: str, creation: Creation, sender: Sender) -> str:
    tags = {KEY_TAG: key, **creation.tags}
    if creation.name:
        tags["mlflow.runName"] = creation.name
    if creation.parent:
        tags[PARENT_KEY_TAG] = creation.parent
        with contextlib.suppress(LookupError):
            tags["mlflow.parentRunId"] = sender.resolve(target, creation.parent, None)
    run = tracking.client(target).create_run(
        tracking.experiment_id(target), start_time=creation.start_time, tags=tags
    )
    return str(run.info.run_id)


def apply_op(target: Target, run_id: str, op: Mapping[str, Any]) -> None:
    """Send one operation to the run now (a log operation in one call: MLflow's client splits
    it within MLflow's limits)."""
    mlflow = tracking.client(target)
    kind = op["op"]
    if kind == "log":
        mlflow.log_batch(run_id, *_entities(op))
    elif kind == "fill":
        mlflow.log_batch(run_id, *_entities({"metrics": _missing(mlflow, run_id, op["metrics"])}))
    elif kind == "artifacts":
        mlflow.log_artifacts(run_id, op["dir"], op.get("path"))
        shutil.rmtree(op["dir"], ignore_errors=True)
    elif kind == "adopt":
        _adopt(target, run_id)
    elif kind == "status":
        if op["status"] == "RUNNING":
            mlflow.update_run(run_id, status="RUNNING")
        else:
            mlflow.set_terminated(run_id, op["status"], op.get("end_time"))


def _adopt(target: Target, run_id: str) -> None:
    """Make ``run_id`` the MLflow parent of the runs that name its key as their parent's but
    began before it was made (each worker looks its parent up once)."""
    mlflow = tracking.client(target)
    key = mlflow.get_run(run_id).data.tags.get(KEY_TAG)
    if key is None:
        return
    children = mlflow.search_runs(
        [tracking.experiment_id(target)], filter_string=f"tags.`{PARENT_KEY_TAG}` = '{key}'"
    )
    for child in children:
        if "mlflow.parentRunId" not in child.data.tags:
            mlflow.set_tag(child.info.run_id, "mlflow.parentRunId", run_id)


def _missing(mlflow: Any, run_id: str, rows: list[tuple[str, float, int, int]]) -> list[Any]:
    """The metric rows (name, value, timestamp, step) whose step the run has no value at."""
    have: dict[str, set[int]] = {}
    missing = []
    for name, value, timestamp, step in rows:
        if name not in have:
            have[name] = {int(m.step) for m in mlflow.get_metric_history(run_id, name)}
        if int(step) not in have[name]:
            missing.append((name, value, timestamp, step))
            have[name].add(int(step))
    return missing


# What a store did not take: MLflow's own store in the spool folder -------------------
_KEPT_STORES: dict[str, Target] = {}
_KEPT_LOCK = threading.Lock()


def kept_store(spool: str | None, make: bool = False) -> Target | None:
    """The store of kept runs in ``spool`` (made with ``make``), or None where there is none."""
    if spool is None or not (make or os.path.isfile(os.path.join(spool, tracking.DATABASE))):
        return None
    with _KEPT_LOCK:  # made once (MLflow makes its tables: seconds)
        if spool not in _KEPT_STORES:
            uri = tracking.open_folder(spool)["uri"]
            _KEPT_STORES[spool] = Target(uri=uri, experiment=tracking.DEFAULT_EXPERIMENT)
        return _KEPT_STORES[spool]


def keep(item: _Item, why: str, sender: Sender) -> None:
    """``item``'s operation logged to the same run (by its key) in the kept store, made with
    the tags that say which store and experiment it is for. Nothing where it fails: the
    records are lost, training goes on."""
    target = item.target
    with contextlib.suppress(Exception), tracking.quiet_mlflow():
        local = kept_store(target.spool, make=True)
        if local is None:
            return
        kept_for = {
            KEPT_FOR_TAG: target.safe,
            KEPT_EXPERIMENT_TAG: target.experiment or "",
            KEPT_EXPERIMENT_ID_TAG: target.experiment_id or "",
            KEPT_WHY_TAG: why,
        }
        creation = Creation(
            name=item.creation.name,
            parent=item.creation.parent,
            start_time=item.creation.start_time,
            tags={**item.creation.tags, **kept_for},
        )
        run_id = sender.resolve(local, item.key, creation)
        op = item.op
        if op["op"] == "fill":  # all of them: sync leaves out what the store has
            op = {"op": "log", "metrics": op["metrics"]}
        if op["op"] != "adopt":  # sync adopts the children of every run it makes
            apply_op(local, run_id, op)


def kept_runs(local: Target) -> list[Any]:
    """The kept store's runs, oldest first (a parent before its children)."""
    mlflow = tracking.client(local)
    ids = [e.experiment_id for e in mlflow.search_experiments()]
    runs = mlflow.search_runs(ids, order_by=["attributes.start_time ASC"]) if ids else []
    return [run for run in runs if KEPT_FOR_TAG in run.data.tags]


def sync(
    target: Target, sender: Sender | None = None, why: str | None = None, discard: bool = False
) -> dict[str, object]:
    """Copy the runs kept for the target's store to it, oldest first, each deleted from the
    kept store once copied (or, with ``discard``, deleted unsent). Stops sending at the
    first request the store cannot take (sends nothing where ``why`` says already why it
    cannot). A kept run whose artifacts lie outside the kept store (its ``artifacts``
    folder) is neither read, sent nor removed.

    Returns:
        ``sent`` (runs copied, or discarded), ``left`` (kept for this store still),
        ``other`` (kept for other stores, by their masked URI), ``why`` (None, or why it
        stopped) and ``kept`` (the runs left for this store: ``name``, ``key``, ``why``).
    """
    sender = sender or SENDER
    sent, refused = 0, []
    other: dict[str, int] = {}
    kept: list[dict[str, str]] = []
    local = kept_store(target.spool)
    if local is None:
        return {"sent": 0, "left": 0, "other": {}, "why": why, "kept": kept}
    mlflow = tracking.client(local)
    for run in kept_runs(local):
        tags = run.data.tags
        if tags[KEPT_FOR_TAG] != target.safe:
            other[tags[KEPT_FOR_TAG]] = other.get(tags[KEPT_FOR_TAG], 0) + 1
            continue
        left = {
            "name": tags.get("mlflow.runName", ""),
            "key": tags.get(KEY_TAG, ""),
            "why": tags[KEPT_WHY_TAG],
        }
        artifacts = _artifacts_inside(local, run.info.artifact_uri)
        if artifacts is None:
            refused.append(run.info.run_id)
            kept.append(left)
            continue
        if why is None and not discard:
            try:
                _copy(run, local, target, sender, artifacts)
            except Exception as error:
                why = reach.unavailable(error, target) or tracking.masked(str(error), target)
                kept.append(left)
                continue
        elif not discard:
            kept.append(left)
            continue
        mlflow.delete_run(run.info.run_id)
        shutil.rmtree(artifacts, ignore_errors=True)
        sender.runs.pop((local.uri, tags.get(KEY_TAG, "")), None)
        sent += 1
    if refused and why is None:
        why = (
            f"{len(refused)} kept run(s) name artifacts outside the kept store, and were "
            f"neither sent nor removed: {', '.join(refused)} in {target.spool}"
        )
    return {"sent": sent, "left": len(kept), "other": other, "why": why, "kept": kept}


def _artifacts_inside(local: Target, uri: str) -> Path | None:
    """The local folder of a kept run's artifacts where it lies inside the kept store's
    ``artifacts`` folder and holds no link (no absolute path elsewhere, ``..`` or link
    out), else None."""
    root = (Path(str(tracking.sqlite_path(local.uri))).parent / tracking.ARTIFACTS).resolve()
    parsed = urlparse(uri)
    folder = Path(unquote(parsed.path))
    if parsed.scheme not in ("", "file") or ".." in folder.parts or not folder.is_absolute():
        return None
    folder = folder.resolve()
    links = folder.is_dir() and any(path.is_symlink() for path in folder.rglob("*"))
    return folder if root in folder.parents and not links else None


def _copy(run: Any, local: Target, target: Target, sender: Sender, artifacts: Path) -> None:
    """One kept run copied to the target's store with MLflow's client: made there where its
    key is not yet (its children adopted), what it lacks of the metrics logged, the
    params, tags, artifacts and end."""
    tags = dict(run.data.tags)
    there = dataclasses.replace(
        target,
        experiment=tags.get(KEPT_EXPERIMENT_TAG) or None,
        experiment_id=tags.get(KEPT_EXPERIMENT_ID_TAG) or None,
    )
    own = {k: v for k, v in tags.items() if not k.startswith(("mlflow.", "gpukeras.kept_"))}
    creation = Creation(
        name=tags.get("mlflow.runName"),
        parent=tags.get(PARENT_KEY_TAG),
        start_time=run.info.start_time,
        tags={k: v for k, v in own.items() if k not in (KEY_TAG, PARENT_KEY_TAG)},
    )
    run_id = sender.resolve(there, tags[KEY_TAG], creation)
    mlflow = tracking.client(local)
    rows = [
        (m.key, m.value, m.timestamp, m.step)
        for name in run.data.metrics
        for m in mlflow.get_metric_history(run.info.run_id, name)
    ]
    apply_op(there, run_id, {"op": "fill", "metrics": rows})
    apply_op(there, run_id, {"op": "log", "params": run.data.params, "tags": own})
    if artifacts.is_dir() and any(artifacts.iterdir()):
        tracking.client(there).log_artifacts(run_id, str(artifacts))
    _adopt(there, run_id)
    if run.info.status != "RUNNING":
        apply_op(
            there,
            run_id,
            {"op": "status", "status": run.info.status, "end_time": run.info.end_time},
        )
