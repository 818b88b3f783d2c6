"""Sending runs to MLflow on a thread of their own, and keeping what could not be sent.

Training never waits for the tracking store. Each tracked run is known by a key of gpukeras'
own (``new_key``, the run's tag ``gpukeras.key``), so that any process can log to a run
another made (a search's parent marks a trial that its worker trained, a resumed fit
continues the run of the killed one) and a run can be made after the fact: every operation
(``post``) carries what makes its run where none has that key yet (``Creation``). Operations
are queued and sent in order by one daemon thread per process (``Sender``), consecutive log
operations of a run merged into MLflow's ``log_batch`` (up to MLflow's limits per request),
so an epoch's metrics are one request, not one per value, and a made run's epochs are held
back a few seconds (``LINGER``) to go together (a run not made yet is made at once: a fit
never waits for it at its end). What costs time to make (a model's files, a data hash) is a
``later_op``, made by the sending thread when its turn comes, not by the training thread.

When the store cannot take a request (``reach.unavailable``: no answer, too slow, refused
credentials, a database that stays locked), or a server was found not to answer before the
first one (``reach.reach``, asked once per process and remembered), the thread sends nothing
more to it for this run: that operation and every later one for that store are kept in the
spool folder (``Target.spool``, made for this user alone, only then), one JSON file per
batch of a run's operations with copies of its artifacts, and a warning is due once
(``reach.say_once``; ``take_warnings``, R raises it as ``gpukeras_warning_tracking``). A
tracked verb does not wait for its operations to be sent, only (a few seconds at most) for
its run to be made, for its id (``wait_for_run``); with ``Target.wait`` it waits that long
for all of them (``drain``), and what is still queued then is kept the same way. What reads
runs, and a process that ends, waits for them first (``flush``). ``sync`` sends what was
kept, in the order it was kept, when the store answers again: gpu_track_sync(), or by
itself before the first operation the store takes in the process. Sending what was kept
twice (a sync cut short) logs nothing twice: a metric value the run has at that step and
time already is left out, and params, tags and artifacts are the same again.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpukeras.core import files
from gpukeras.track import reach, tracking
from gpukeras.track.tracking import Target

KEY_TAG = "gpukeras.key"
PARENT_KEY_TAG = "gpukeras.parent_key"
# MLflow's limits on one log_batch request, and on a param's and a tag's value.
MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100
MAX_PARAM_LENGTH, MAX_TAG_LENGTH = 6000, 8000
SPOOL_FORMAT = 1
MERGED = ("log", "later")  # the operations one batch of a run takes together
# Seconds a made run's metrics wait for more of its own (fewer requests), unless waited for.
LINGER = 5.0
_NAME_OK = re.compile(r"[^\w\-. :/]")


def new_key() -> str:
    return uuid.uuid4().hex


def now_ms() -> int:
    return int(time.time() * 1000)


def clean_name(name: str) -> str:
    """A metric, param or tag name as MLflow takes it (letters, digits, ``_-. :/``)."""
    return _NAME_OK.sub("_", str(name))[:250] or "_"


@dataclass
class Creation:
    """What makes a run where no run has its key: its name, parent (by key), start time and
    first tags. ``fresh``: the key was made just now, in this process, so no run can have
    it yet (no need to look)."""

    name: str | None = None
    parent: str | None = None
    start_time: int = field(default_factory=now_ms)
    tags: dict[str, str] = field(default_factory=dict)
    fresh: bool = False


def log_op(
    metrics: list[tuple[str, float, int, int]] | None = None,
    params: Mapping[str, object] | None = None,
    tags: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """A log operation: metrics as (name, value, timestamp ms, step), params and tags."""
    return {
        "op": "log",
        "metrics": [[clean_name(k), float(v), int(t), int(s)] for k, v, t, s in metrics or []],
        "params": {
            clean_name(k): str(v)[:MAX_PARAM_LENGTH]
            for k, v in (params or {}).items()
            if v is not None
        },
        "tags": {
            clean_name(k): str(v)[:MAX_TAG_LENGTH] for k, v in (tags or {}).items() if v is not None
        },
    }


def artifacts_op(folder: str, path: str | None = None) -> dict[str, Any]:
    """Upload the files of ``folder`` (gpukeras' own temporary folder, removed once sent or
    kept) under ``path`` of the run's artifacts."""
    return {"op": "artifacts", "dir": folder, "path": path}


def status_op(status: str, end: bool = True) -> dict[str, Any]:
    """Set the run's status: FINISHED, FAILED, KILLED (with its end time), or RUNNING again."""
    return {"op": "status", "status": status, "end_time": now_ms() if end else None}


def later_op(make: Callable[[], dict[str, Any] | None]) -> dict[str, Any]:
    """An operation made on the sending thread when its turn comes (or when it is kept):
    ``make`` returns it (log or artifacts), or None; where it fails, nothing is sent."""
    return {"op": "later", "make": make}


def fill_op(rows: list[tuple[str, float, int, int]]) -> dict[str, Any]:
    """Log the metric values (name, value, timestamp, step) whose step the run lacks: a
    resumed fit's epochs that the killed process may not have sent."""
    return {
        "op": "fill",
        "metrics": [[clean_name(k), float(v), int(t), int(s)] for k, v, t, s in rows],
    }


@dataclass
class _Item:
    target: Target
    key: str
    creation: Creation
    op: dict[str, Any]


class Sender:
    """The process's queue of operations and the thread that sends them (see the module)."""

    def __init__(self) -> None:
        self.queue: deque[_Item] = deque()
        self.changed = threading.Condition()
        self.busy = False
        self.thread: threading.Thread | None = None
        self.runs: dict[tuple[str, str], str] = {}  # (uri, key) -> MLflow run id
        self.down: dict[str, str] = {}  # uri -> why it cannot take requests now
        self.synced: set[str] = set()
        self.warnings: list[str] = []
        # how many wait for the queue (drain, flush, wait_for_run): no lingering then
        self.waiting = 0

    # The training side ---------------------------------------------------------
    def post(self, target: Target, key: str, creation: Creation, op: dict[str, Any]) -> None:
        """Queue ``op`` for the run ``key`` (the thread keeps it where the store is down)."""
        item = _Item(target, key, creation, op)
        with self.changed:
            self.queue.append(item)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(
                    target=self._run, name="gpukeras-tracking", daemon=True
                )
                self.thread.start()
            self.changed.notify_all()

    def retry(self, target: Target) -> None:
        """Try the store again from the next operation on (a new run)."""
        with self.changed:
            self.down.pop(target.uri, None)

    def drain(self, target: Target, wait: float | None = None) -> bool:
        """Wait (at most ``wait`` s, default the target's) until every queued operation is
        sent; what is still queued then is kept, and the store counts as down. True when
        all was sent (or kept because the store was down)."""
        deadline = time.monotonic() + (target.wait if wait is None else wait)
        with self.changed, self._waited_for():
            while self.queue or self.busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    why = f"it did not take the run's records within {target.wait:g} s"
                    if reach.say_once(target):
                        self.warnings.append(_kept_message(target, why))
                    self.down[target.uri] = why
                    self._keep_queued(target.uri, why)
                    return False
                self.changed.wait(left)
        return True

    def wait_for_run(self, target: Target, key: str, wait: float) -> str | None:
        """Wait (at most ``wait`` s) until the run ``key`` is made, or the store counts as
        down; its id, or None. Nothing is kept: the sending goes on."""
        deadline = time.monotonic() + wait
        with self.changed, self._waited_for():
            while (target.uri, key) not in self.runs and target.uri not in self.down:
                if not (self.queue or self.busy):
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)
            return self.runs.get((target.uri, key))

    def flush(self, wait: float, keep_rest: bool = False) -> bool:
        """Wait (at most ``wait`` s) until everything queued, for any store, is sent; with
        ``keep_rest``, what is left then is kept (the process is ending). True when done."""
        deadline = time.monotonic() + wait
        with self.changed, self._waited_for():
            while self.queue or self.busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    if keep_rest:
                        items = list(self.queue)
                        self.queue.clear()
                        keep(items, "the process ended before they were sent")
                    return False
                self.changed.wait(left)
        return True

    def take_warnings(self) -> list[str]:
        with self.changed:
            said, self.warnings = self.warnings, []
        return said

    def run_id(self, target: Target, key: str) -> str | None:
        """The MLflow run id of ``key``, where this process sent to it."""
        return self.runs.get((target.uri, key))

    # The thread ----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self.changed:
                while not self.queue:
                    self.changed.wait()
                deadline = time.monotonic() + LINGER
                while not self.waiting and self._only_logs_of_one_made_run():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.changed.wait(left)
                batch = self._next_batch()
                self.busy = True
            try:
                self._send(batch)
            finally:
                with self.changed:
                    self.busy = False
                    self.changed.notify_all()

    def _only_logs_of_one_made_run(self) -> bool:
        first = self.queue[0]
        made = (first.target.uri, first.key) in self.runs
        return made and all(item.op["op"] == "log" and item.key == first.key for item in self.queue)

    @contextlib.contextmanager
    def _waited_for(self) -> Any:
        """Mark a waiter (the lock held): the thread sends at once meanwhile."""
        self.waiting += 1
        self.changed.notify_all()
        try:
            yield
        finally:
            self.waiting -= 1

    def _next_batch(self) -> list[_Item]:
        """The first queued item, with the log (and later) operations of the same run right
        after it (its log operations merged into one request)."""
        first = self.queue.popleft()
        batch = [first]
        if first.op["op"] not in MERGED:
            return batch
        while self.queue and self.queue[0].key == first.key and self.queue[0].op["op"] in MERGED:
            batch.append(self.queue.popleft())
        return batch

    def _keep_queued(self, uri: str, why: str) -> None:
        kept = [item for item in self.queue if item.target.uri == uri]
        for item in kept:
            self.queue.remove(item)
        keep(kept, why)

    def _send(self, batch: list[_Item]) -> None:
        batch = made(batch)
        if not batch:
            return
        target = batch[0].target
        if target.uri in self.down:
            keep(batch, self.down[target.uri])
            return
        why = reach.reach(target)  # asked once per server and process, remembered
        if why is not None:
            with self.changed:
                self._went_down(target, batch, why)
            return
        try:
            with _quiet_thread():
                if target.uri not in self.synced:
                    self.synced.add(target.uri)
                    sync(target, self)
                run_id = self.resolve(target, batch[0].key, batch[0].creation)
                replay(target, run_id, [item.op for item in batch])
        except Exception as error:
            why = reach.unavailable(error, target)
            with self.changed:
                if why is None:
                    self.warnings.append(
                        tracking.masked(f"MLflow refused a record of a run: {error}", target)
                    )
                    return
                reach.remember(target, why)
                self._went_down(target, batch, why)
            return
        reach.answered(target)

    def _went_down(self, target: Target, batch: list[_Item], why: str) -> None:
        """The store does not take runs (``why``): ``batch`` and what is queued for it kept,
        the warning due where not said yet (the lock held)."""
        self.down[target.uri] = why
        keep(batch, why)
        self._keep_queued(target.uri, why)
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
        self.runs[(target.uri, key)] = found
        return found


SENDER = Sender()


def _reset_after_fork() -> None:
    global SENDER
    SENDER = Sender()


os.register_at_fork(after_in_child=_reset_after_fork)


def _kept_message(target: Target, why: str) -> str:
    return (
        f"Tracking: {target.safe} does not take runs now: {why}. Training went on; the "
        f"session's runs are kept in {target.spool} until it does (no further warning), and "
        "gpu_track_sync() sends them."
    )


@contextlib.contextmanager
def _quiet_thread() -> Any:
    """MLflow's and urllib3's log lines about retries held back on the sending thread (they
    name the server, and land among R's output): the warning says what matters."""
    import logging

    class OnlyOtherThreads(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return record.threadName != "gpukeras-tracking"

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


def replay(target: Target, run_id: str, ops: list[dict[str, Any]]) -> None:
    """Send ``ops`` to the run: log operations merged into batches within MLflow's limits."""
    from mlflow.entities import Metric, Param, RunTag

    mlflow = tracking.client(target)
    metrics: list[list[Any]] = []
    params: dict[str, str] = {}
    tags: dict[str, str] = {}

    def flush() -> None:
        while metrics or params or tags:
            some_params = dict(list(params.items())[:MAX_PARAMS])
            some_tags = dict(list(tags.items())[:MAX_TAGS])
            mlflow.log_batch(
                run_id,
                metrics=[Metric(k, v, t, s) for k, v, t, s in metrics[:MAX_METRICS]],
                params=[Param(k, v) for k, v in some_params.items()],
                tags=[RunTag(k, v) for k, v in some_tags.items()],
            )
            del metrics[:MAX_METRICS]
            for name in some_params:
                del params[name]
            for name in some_tags:
                del tags[name]

    for op in ops:
        kind = op["op"]
        if kind == "log":
            metrics.extend(op["metrics"])
            params.update(op["params"])
            tags.update(op["tags"])
            continue
        flush()
        if kind == "fill":
            metrics.extend(_missing(mlflow, run_id, op["metrics"]))
            flush()
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
    flush()


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


def _missing(mlflow: Any, run_id: str, rows: list[list[Any]]) -> list[list[Any]]:
    """The metric rows (name, value, timestamp, step) whose step the run has no value at."""
    have: dict[str, set[int]] = {}
    missing = []
    for name, value, timestamp, step in rows:
        if name not in have:
            have[name] = {int(m.step) for m in mlflow.get_metric_history(run_id, name)}
        if int(step) not in have[name]:
            missing.append([name, value, timestamp, step])
            have[name].add(int(step))
    return missing


def made(items: list[_Item]) -> list[_Item]:
    """``items`` with each later operation made (``later_op``); those that made nothing, or
    failed (a model that cannot be rebuilt: tracking goes on), left out."""
    done = []
    for item in items:
        with contextlib.suppress(Exception):
            item.op = item.op["make"]() if item.op["op"] == "later" else item.op
            done.extend([item] if item.op is not None else [])
    return done


# What could not be sent -----------------------------------------------------------
def keep(items: list[_Item], why: str) -> None:
    """Write ``items`` (later operations made first) into their targets' spool folders, a
    file per run and batch, with copies of their artifacts (the temporary folders removed)."""
    by_run: dict[tuple[str, str], list[_Item]] = {}
    for item in made(items):
        by_run.setdefault((item.target.uri, item.key), []).append(item)
    for runs in by_run.values():
        first = runs[0]
        if first.target.spool is None:
            continue
        with contextlib.suppress(OSError):
            _write_chunk(first.target, first.key, first.creation, [i.op for i in runs], why)


def _write_chunk(
    target: Target, key: str, creation: Creation, ops: list[dict[str, Any]], why: str
) -> None:
    folder = Path(str(target.spool))
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    stem = f"{time.time_ns():020d}-{key}-{os.getpid()}"
    # Metrics go back as fills: the batch in flight when the store went down may have
    # reached it, and a value the run has at that step already is left out on the way back.
    kept_ops: list[dict[str, Any]] = []
    for number, op in enumerate(ops):
        if op["op"] == "artifacts":
            copy = folder / f"{stem}.files" / str(number)
            shutil.copytree(op["dir"], copy)
            shutil.rmtree(op["dir"], ignore_errors=True)
            kept_ops.append({**op, "dir": str(copy.relative_to(folder))})
        elif op["op"] == "log":
            if op["params"] or op["tags"]:
                kept_ops.append({**op, "metrics": []})
            if op["metrics"]:
                kept_ops.append({"op": "fill", "metrics": op["metrics"]})
        else:
            kept_ops.append(op)
    document = {
        "format": SPOOL_FORMAT,
        "uri": target.safe,
        "experiment": target.experiment,
        "experiment_id": target.experiment_id,
        "key": key,
        "creation": {**asdict(creation), "fresh": False},
        "ops": kept_ops,
        "why": why,
    }
    kept = folder / f"{stem}.json"
    files.write_atomic(kept, json.dumps(document), prefix=".kept-", suffix=".json")


def kept_chunks(spool: str | None) -> list[Path]:
    if spool is None or not os.path.isdir(spool):
        return []
    return sorted(Path(spool).glob("*.json"))


def sync(target: Target, sender: Sender | None = None, why: str | None = None) -> dict[str, object]:
    """Send what was kept for the target's store, oldest first, each file removed once its
    run has it. Stops at the first request the store cannot take (sends nothing where
    ``why`` says already why it cannot). A kept file whose
    artifacts' folder lies outside the folder kept with it (``<file>.files`` in the spool:
    an absolute path, ``..`` or a link out) is not sent and nothing of it is removed.

    Returns:
        ``sent`` (runs' batches sent), ``left`` (kept for this store still), ``other``
        (kept for other stores, by their masked URI) and ``why`` (None, or why it stopped).
    """
    sender = sender or SENDER
    sent, left = 0, 0
    other: dict[str, int] = {}
    refused: list[str] = []
    for path in kept_chunks(target.spool):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if document.get("uri") != target.safe:
            other[str(document.get("uri"))] = other.get(str(document.get("uri")), 0) + 1
            continue
        if why is not None:
            left += 1
            continue
        kept_target = Target(
            uri=target.uri,
            experiment=document.get("experiment"),
            experiment_id=document.get("experiment_id"),
            spool=target.spool,
            wait=target.wait,
        )
        try:
            ops = [
                _kept_files(op, path) if op["op"] == "artifacts" else op for op in document["ops"]
            ]
        except ValueError:
            refused.append(path.name)
            left += 1
            continue
        try:
            run_id = sender.resolve(kept_target, document["key"], Creation(**document["creation"]))
            replay(kept_target, run_id, ops)
        except Exception as error:
            why = reach.unavailable(error, target) or tracking.masked(str(error), target)
            left += 1
            continue
        path.unlink(missing_ok=True)
        shutil.rmtree(path.with_suffix(".files"), ignore_errors=True)
        sent += 1
    if refused and why is None:
        why = (
            f"{len(refused)} kept file(s) name artifacts outside the folder kept with them, "
            f"and were neither sent nor removed: {', '.join(refused)} in {target.spool}"
        )
    return {"sent": sent, "left": left, "other": other, "why": why}


def _kept_files(op: dict[str, Any], path: Path) -> dict[str, Any]:
    """An artifacts operation of the kept file ``path`` with its folder made absolute: a
    folder inside ``<path>.files`` (as ``_write_chunk`` keeps them), else ValueError."""
    kept = path.with_suffix(".files").resolve()
    folder = (path.parent / str(op["dir"])).resolve()
    if kept not in folder.parents:
        raise ValueError(f"{op['dir']} is not inside {kept}")
    return {**op, "dir": str(folder)}


@atexit.register
def _keep_at_exit() -> None:
    """What is still queued when Python ends is sent (for a few seconds), or kept: not lost
    (its thread is a daemon). R ends without finalizing Python: its own finalizer flushes
    (R/python.R, the ``track_flush`` verb)."""
    with contextlib.suppress(Exception):
        SENDER.flush(5.0, keep_rest=True)
