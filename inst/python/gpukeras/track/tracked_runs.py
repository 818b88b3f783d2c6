"""What a tracked run holds: a gpu_fit()'s settings, epochs, report and model; parents and children.

A fit (``start_fit``, from gpu_fit()'s verb, ``tools.training``) is one MLflow run:

- params: gpu_fit()'s arguments and the settings in force (epochs, batch size,
  accumulation, steps per execution, XLA, precision, optimizer and learning rate or
  schedule, clipping, seed, class weights), the backend, device and versions
  (gpukeras, Keras, the framework), the data (its kind, rows, a content hash of
  arrays, hashed on the sending thread) and the model (layers, parameter count; a
  KerasHub preset's name and LoRA rank, ``pretrained.preset_params``);
- metrics: each epoch's logs under Keras' names with the epoch (from 1) as the step,
  sent as the epoch ends (``EpochLogger``); the report's measures at the last epoch
  (``REPORT_METRICS``); tags: the input verdict, the last gpu_check() verdict;
- artifacts: ``model/`` as gpu_save() writes it (``model.keras`` and the encoding
  beside it) and ``model_summary.txt``, written on the sending thread from a copy taken
  as the fit ends (``model_copy``: the fit's own weights, however the model trains on);
  R adds the fit's plot;
- a fit with a backup folder keeps its run's key there (``KEY_FILE``), so the same
  call resumed after a kill, a preemption or a background child's crash continues
  the same run (the epochs the killed process may not have sent are filled in from
  the backup's history); the file goes when training completes.

A cv's or a search's parent run (``open_run``) and what R records on a run later,
by key (``record``: a fold's held-out scores, a trial's state and objective, a
parent's summary and end), go the same way (``sending``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpukeras.core.errors import PreemptedError
from gpukeras.core.handles import Model
from gpukeras.core.runtime import config
from gpukeras.track import model_copy, reach, records, tracking
from gpukeras.track import sending as sender
from gpukeras.train import backup_files, pretrained

KEY_FILE = "gpukeras-tracking.json"
KIND_TAG = "gpukeras.kind"
# The report's measures logged as metrics (monitor.training_report's names).
REPORT_METRICS = (
    "samples_per_second",
    "wall_samples_per_second",
    "step_time_mean_ms",
    "input_wait_share",
    "gpu_utilization_mean",
    "gpu_utilization_p95",
    "gpu_memory_used_max_mib",
    "host_cpu_percent_mean",
    "achieved_tflops",
    "mfu",
)
# gpu_fit()'s request fields logged as params as they are.
REQUEST_PARAMS = (
    "epochs",
    "batch_size",
    "accumulate",
    "steps_per_execution",
    "jit_compile",
    "remat",
    "clipnorm",
    "clipvalue",
    "seed",
    "monitor",
)
# Arrays larger than this are hashed by a sample of their rows (said in data_hash_kind).
HASH_WHOLE_BYTES = 256 * 2**20


def _plain(value: object) -> str:
    """A param's value as text, the same from R and from Python (32 and 32.0 are "32"):
    MLflow refuses a param logged again with another text."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


def _key_file(backup_dir: object) -> Path | None:
    return None if not backup_dir else Path(str(backup_dir)) / KEY_FILE


def _kept_key(backup_dir: object) -> str | None:
    """The run key a backup folder keeps (the killed run's), or None."""
    path = _key_file(backup_dir)
    if path is None:
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | backup_files.NOFOLLOW)
        with os.fdopen(descriptor) as file:
            key = json.load(file).get("key")
    except (OSError, ValueError, AttributeError):
        return None
    return key if isinstance(key, str) and key.isalnum() else None


class FitRun:
    """One tracked gpu_fit(): what ``tools.training`` calls around the training."""

    def __init__(
        self, model: Model, data: object, given: Mapping[str, object], track: Mapping[str, object]
    ):
        started = time.perf_counter()
        # seconds tracking took on the training thread (bench/tracking.py), a wait asked for apart
        self.seconds = 0.0
        self.target = tracking.target_of(track)
        self.track = track
        backup_dir = given.get("backup_dir")
        kept = _kept_key(backup_dir)
        self.key = str(track.get("key") or kept or records.new_key())
        self.resumed = kept is not None
        self.creation = records.Creation(
            # MLflow's own random names come from Python's generator, which a seed resets
            name=str(track.get("name") or f"fit {time.strftime('%Y-%m-%d %H:%M:%S')}"),
            parent=str(track["parent"]) if track.get("parent") else None,
            tags={KIND_TAG: str(track.get("kind") or "fit"), **_tags(track.get("tags"))},
            fresh=not track.get("key") and kept is None,
        )
        self.backup_dir = backup_dir
        if backup_dir and kept is None:
            folder = backup_files.check_dir(backup_dir)
            backup_files.commit_json(folder, KEY_FILE, {"key": self.key})
        sender.SENDER.retry(self.target)
        if self.resumed:
            self.post(records.status_op("RUNNING", end=False))
        self.post(records.log_op(params=fit_params(model, given, track), tags=_verdict_tags(track)))
        # hashed on the sending thread while the fit reads the same arrays (it never writes them)
        self.post(records.later_op(lambda: records.log_op(params=data_params(data))))
        self.seconds += time.perf_counter() - started

    def post(self, op: dict[str, Any]) -> None:
        sender.SENDER.post(self.target, self.key, self.creation, op)

    def callback(self) -> object:
        """The Keras callback that sends each epoch's logs as it ends."""
        keras = config.keras()
        run = self

        class EpochLogger(keras.callbacks.Callback):  # type: ignore[name-defined]
            """Each epoch's logs to the tracked run, the epoch (from 1) as the step."""

            def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
                started = time.perf_counter()
                with contextlib.suppress(Exception):  # tracking never stops training
                    run.post(records.log_op(metrics=_epoch_metrics(epoch + 1, logs)))
                run.seconds += time.perf_counter() - started

        return EpochLogger()

    def finished(self, model: Model, result: dict[str, Any]) -> None:
        """The run's settings, report, model and end; then wait (at most the target's
        ``wait``) for it to be sent. Adds ``settings$tracking`` and any warning to
        ``result``."""
        started = time.perf_counter()
        settings = result.get("settings") or {}
        history = result.get("history") or {}
        epochs = len(history.get("epoch") or [])
        if self.resumed:  # the epochs the killed process may not have sent
            self.post(records.fill_op(_history_rows(history)))
        report = result.get("monitor") or {}
        now = records.now_ms()
        self.post(
            records.log_op(
                metrics=[
                    (name, float(report[name]), now, epochs)
                    for name in REPORT_METRICS
                    if isinstance(report.get(name), (int, float))
                ]
                + [("fit_seconds", float(settings.get("seconds") or 0), now, epochs)],
                params=settings_params(settings),
                tags={"gpukeras.input_verdict": report.get("input_verdict")},
            )
        )
        with contextlib.suppress(Exception):  # the model as it is now, written later
            copy = model_copy.ModelCopy(model)
            encoding = self.track.get("encoding")
            self.post(records.later_op(lambda: records.artifacts_op(copy.folder(encoding))))
        best = settings.get("best")
        if isinstance(best, Mapping) and best.get("best"):
            with contextlib.suppress(OSError):
                self.post(records.artifacts_op(_best_folder(best["best"])))
        self.post(records.status_op("FINISHED"))
        self._end(result, started)
        path = _key_file(self.backup_dir)
        if path is not None:
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                path.parent.rmdir()

    def failed(self, error: BaseException) -> None:
        """The run ends FAILED (KILLED for a scheduler's signal: resumed, it goes on), with
        the error's first line as a tag."""
        status = "KILLED" if isinstance(error, PreemptedError) else "FAILED"
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        self.post(records.log_op(tags={"gpukeras.error": tracking.masked(message, self.target)}))
        self.post(records.status_op(status))
        if self.target.wait > 0:
            sender.SENDER.drain(self.target)

    def _end(self, result: dict[str, Any], started: float) -> None:
        """Wait as the target says: for everything (``wait`` s: asked for, so not counted in
        ``seconds``), or for the run's id alone (made as the fit began: the sending goes on
        while R carries on)."""
        waited = 0.0
        if self.target.wait > 0:
            self.seconds += time.perf_counter() - started
            waiting = time.perf_counter()
            sender.SENDER.drain(self.target)
            waited = time.perf_counter() - waiting
        else:
            sender.SENDER.wait_for_run(self.target, self.key, tracking.RUN_ID_WAIT)
            self.seconds += time.perf_counter() - started
        result.setdefault("settings", {})["tracking"] = {
            "key": self.key,
            "run_id": sender.SENDER.run_id(self.target, self.key),
            "uri": self.target.safe,
            "experiment": self.target.experiment_label,
            "seconds_on_training_thread": self.seconds,
            "seconds_waited": waited,  # for the records to be sent, as ``wait`` asked
        }
        result["warnings"] = list(result.get("warnings") or []) + [
            {"class": "tracking", "message": said} for said in sender.SENDER.take_warnings()
        ]


def start_fit(
    model: Model, data: object, given: Mapping[str, object], track: object
) -> FitRun | None:
    """The tracked run of a fit, or None when ``track`` (what R sent) is None."""
    if not isinstance(track, Mapping) or not track.get("uri"):
        return None
    return FitRun(model, data, given, track)


def _tags(tags: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, Mapping) else {}


def _verdict_tags(track: Mapping[str, object]) -> dict[str, object]:
    return {"gpukeras.gpu_verdict": track.get("gpu_verdict")}


def _epoch_metrics(
    epoch: int, logs: Mapping[str, object] | None
) -> list[tuple[str, float, int, int]]:
    now = records.now_ms()
    rows = []
    for name, value in (logs or {}).items():
        with contextlib.suppress(TypeError, ValueError):
            rows.append((str(name), float(value), now, epoch))  # type: ignore[arg-type]
    return rows


def _history_rows(history: Mapping[str, Any]) -> list[tuple[str, float, int, int]]:
    epochs = list(history.get("epoch") or [])
    now = records.now_ms()
    rows = []
    for name, values in history.items():
        if name == "epoch":
            continue
        for epoch, value in zip(epochs, values or []):
            if isinstance(value, (int, float)):
                rows.append((str(name), float(value), now, int(epoch)))
    return rows


# Params ------------------------------------------------------------------------
def fit_params(model: Model, given: Mapping[str, object], track: Mapping[str, object]) -> dict:
    """The params known before training: the request, the model, the stack."""
    keras = config.keras()
    params: dict[str, object] = {
        name: _plain(given[name]) for name in REQUEST_PARAMS if given.get(name) is not None
    }
    for name in ("learning_rate", "class_weight", "tuned"):
        value = given.get(name)
        if isinstance(value, (int, float, dict, list, str)):
            params[name] = _plain(value)
        elif value is not None:
            params[name] = type(value).__name__
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:
        params["optimizer"] = type(optimizer).__name__
        if "learning_rate" not in params:
            with contextlib.suppress(Exception):
                params["learning_rate"] = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
    loss = getattr(model, "loss", None)
    params["loss"] = loss if isinstance(loss, str) else type(loss).__name__
    params["layers"] = len(getattr(model, "layers", []) or [])
    if getattr(model, "built", False):
        with contextlib.suppress(Exception):
            params["parameters"] = int(model.count_params())
    params["backend"] = keras.backend.backend()
    params["keras_version"] = keras.__version__
    framework = _framework_version(params["backend"])  # type: ignore[arg-type]
    if framework:
        params[f"{params['backend']}_version"] = framework
    for name, value in _tags(track.get("versions")).items():
        params[f"{name}_version"] = value
    for name, value in pretrained.preset_params(model).items():
        params[name] = _plain(value)
    for name, value in (track.get("params") or {}).items():  # type: ignore[attr-defined]
        params[str(name)] = _plain(value)
    return params


def _framework_version(backend: str) -> str | None:
    import sys

    module = sys.modules.get(backend)
    return getattr(module, "__version__", None)


def settings_params(settings: Mapping[str, Any]) -> dict[str, object]:
    """The params known once training ended: what was in force, and the data."""
    params: dict[str, object] = {}
    for name in ("device", "dtype_policy", "steps_per_epoch", "micro_batch_size", "data"):
        if settings.get(name) is not None:
            params["data_kind" if name == "data" else name] = _plain(settings[name])
    for name in ("steps_per_execution", "jit_compile", "batch_size"):
        if settings.get(name) is not None:
            params[f"{name}_in_force"] = _plain(settings[name])
    info = settings.get("data_info")
    if isinstance(info, Mapping):
        for name in ("rows", "batches", "kind", "source"):
            if info.get(name) is not None:
                params[f"data_{name}"] = _plain(info[name])
    return params


def data_params(data: object) -> dict[str, object]:
    """The training data's shapes and a content hash (SHA-256 of the arrays' bytes, or of
    a sample of rows for arrays over ``HASH_WHOLE_BYTES``); nothing for a dataset."""
    arrays = _arrays(data)
    if not arrays:
        return {}
    digest = hashlib.sha256()
    whole = sum(int(a.nbytes) for a in arrays) <= HASH_WHOLE_BYTES
    for array in arrays:
        digest.update(str((array.shape, str(array.dtype))).encode())
        part = array if whole else array[:: max(1, len(array) // 4096)]
        digest.update(memoryview(_contiguous(part)).cast("B"))
    return {
        "data_shapes": _plain([list(a.shape) for a in arrays]),
        "data_hash": digest.hexdigest()[:16],
        "data_hash_kind": "whole" if whole else "sampled rows",
    }


def _contiguous(array: Any) -> Any:
    import numpy as np

    return np.ascontiguousarray(array)


def _arrays(data: object) -> list[Any]:
    """The NumPy arrays in ``data`` (a tuple or dict of them), in order; [] for others."""
    found: list[Any] = []
    values: list[Any]
    if isinstance(data, Mapping):
        values = list(data.values())
    elif isinstance(data, (list, tuple)):
        values = list(data)
    else:
        values = [data]
    for value in values:
        if isinstance(value, Mapping):
            found.extend(_arrays(value))
        elif hasattr(value, "nbytes") and hasattr(value, "shape") and hasattr(value, "dtype"):
            found.append(value)
    return found


# Artifacts -------------------------------------------------------------------------
def _best_folder(best: list[dict[str, Any]]) -> str:
    """A temporary folder with copies of the k best models under ``best/`` (gpu_backup(
    keep_best = )), for the run's artifacts."""
    folder = tempfile.mkdtemp(prefix="gpukeras-run-")
    os.mkdir(os.path.join(folder, "best"))
    for entry in best:
        shutil.copy2(
            str(entry["path"]), os.path.join(folder, "best", os.path.basename(str(entry["path"])))
        )
    return folder


# Runs R opens and records ------------------------------------------------------------
def open_run(
    track: Mapping[str, object],
    kind: str,
    name: str | None = None,
    params: Mapping[str, object] | None = None,
    tags: Mapping[str, object] | None = None,
    children: int = 0,
) -> dict[str, object]:
    """A run R opens (a cv's or a search's parent): its key, for ``record``, and the keys
    of ``children`` runs to come under it (its folds' fits); its params and tags sent as
    the others are."""
    target = tracking.target_of(track)
    key = records.new_key()
    creation = records.Creation(
        name=name, parent=_parent(track), tags={KIND_TAG: kind, **_tags(tags)}, fresh=True
    )
    sender.SENDER.retry(target)
    sender.SENDER.post(
        target,
        key,
        creation,
        records.log_op(
            params={k: _plain(v) for k, v in (params or {}).items()},
            tags={k: _plain(v) for k, v in (tags or {}).items()},
        ),
    )
    # its children's processes find it made (a worker's fit names it as its parent)
    sender.SENDER.wait_for_run(target, key, tracking.RUN_ID_WAIT)
    return {
        "key": key,
        "children": [records.new_key() for _ in range(int(children))],
        "warnings": [
            {"class": "tracking", "message": said} for said in sender.SENDER.take_warnings()
        ],
    }


def new_key() -> str:
    """A run key for a child R did not count ahead (a search's trial)."""
    return records.new_key()


def _parent(track: Mapping[str, object]) -> str | None:
    return str(track["parent"]) if track.get("parent") else None


def record(
    track: Mapping[str, object],
    key: str,
    metrics: Mapping[str, object] | None = None,
    params: Mapping[str, object] | None = None,
    tags: Mapping[str, object] | None = None,
    status: str | None = None,
    name: str | None = None,
    kind: str = "fit",
    step: int = 0,
    wait: bool = False,
) -> dict[str, object]:
    """Log to the run ``key`` (made, named ``name`` under the track's parent, where no run
    has the key: a trial whose worker died before it began), and end it with ``status``.
    With ``wait``, wait for it to be sent (at most ``tracking.FLUSH_WAIT`` s); else as the
    target says (its ``wait`` s, 0: not).

    Returns:
        ``run_id`` (where known) and ``warnings`` (each ``class``, ``message``) for R.
    """
    target = tracking.target_of(track)
    creation = records.Creation(name=name, parent=_parent(track), tags={KIND_TAG: kind})
    now = records.now_ms()
    rows = []
    for metric, value in (metrics or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append((str(metric), float(value), now, int(step)))
    sender.SENDER.post(
        target,
        key,
        creation,
        records.log_op(
            metrics=rows,
            params={k: _plain(v) for k, v in (params or {}).items()},
            tags={k: tracking.masked(str(v), target) for k, v in (tags or {}).items()},
        ),
    )
    if kind == "parent":  # children that began before it was made get it as their parent
        sender.SENDER.post(target, key, creation, {"op": "adopt"})
    if status is not None:
        sender.SENDER.post(target, key, creation, records.status_op(status))
    if wait or target.wait > 0:
        sender.SENDER.drain(target, max(target.wait, tracking.FLUSH_WAIT) if wait else None)
    return {
        "run_id": sender.SENDER.run_id(target, key),
        "warnings": [
            {"class": "tracking", "message": said} for said in sender.SENDER.take_warnings()
        ],
    }


def record_artifact(track: Mapping[str, object], key: str, path: str) -> None:
    """Send the file at ``path`` (moved into a folder of gpukeras' own) to the run."""
    target = tracking.target_of(track)
    folder = tempfile.mkdtemp(prefix="gpukeras-run-")
    shutil.move(path, os.path.join(folder, os.path.basename(path)))
    creation = records.Creation(parent=_parent(track))
    sender.SENDER.post(target, key, creation, records.artifacts_op(folder))


def flush(wait: float = tracking.FLUSH_WAIT, ending: bool = False) -> dict[str, object]:
    """Wait (at most ``wait`` s) for what this process still sends (before runs are read, a
    worker's end, R's end: ``ending`` keeps what is left then); the warnings due."""
    done = sender.SENDER.flush(float(wait), keep_rest=ending)
    return {
        "done": done,
        "warnings": [
            {"class": "tracking", "message": said} for said in sender.SENDER.take_warnings()
        ],
    }


def check(track: Mapping[str, object]) -> dict[str, object]:
    """gpu_track()'s check (``reach.check``), with the runs kept for the store: ``kept``
    (how many) in ``spool`` (the kept store's folder), its print (``lines``) and
    ``warnings`` (a ``tracking`` one where the store does not take runs now). Where the
    store does not take runs now, the kept store is made here (MLflow makes its tables:
    seconds, once), so that the runs that follow are kept at once, not after a fit's thread
    has made it."""
    checked = reach.check(track)
    target = tracking.target_of(track)
    if not checked["reachable"]:
        sender.kept_store(target.spool, make=True)
    checked["kept"] = sender.sync(target, why="not sent: counted")["left"]
    checked["spool"] = target.spool
    checked["lines"] = check_lines(checked)
    checked["warnings"] = []
    if not checked["reachable"]:
        said = f"Tracking: {checked['uri']} does not take runs now: {checked['why']}."
        hint = "Runs are kept until it does: gpu_track_sync() sends them."
        checked["warnings"] = [{"class": "tracking", "message": [said, hint]}]
    return checked


def check_lines(checked: Mapping[str, Any]) -> list[str]:
    """print(gpu_track())'s lines for ``check``'s result: where runs go, whether it answers,
    the credentials in use by name, the runs kept."""
    lines = [f"<gpukeras tracking> {checked['uri']}, experiment {checked['experiment']}"]
    lines.append(
        "  answering" if checked["reachable"] else f"  not answering now: {checked['why']}"
    )
    if checked["credentials"]:
        names = ", ".join(checked["credentials"])
        lines.append(f"  as {checked['username'] or 'token'} ({names} set)")
    if checked["kept"]:
        lines.append(
            f"  {checked['kept']} run(s) kept in {checked['spool']}: gpu_track_sync() sends them"
        )
    return lines


def sync(track: Mapping[str, object], discard: bool = False) -> dict[str, object]:
    """gpu_track_sync(): the runs kept for the track's store copied to it now
    (``sending.sync``), once a server answers again (asked now: ``reach``); or, with
    ``discard``, deleted unsent."""
    target = tracking.target_of(track)
    sender.SENDER.retry(target)
    started = time.monotonic()
    why = None if discard else reach.reach(target, again=True)
    done = sender.sync(target, why=why, discard=bool(discard))
    done["action"] = "discarded" if discard else "sent"
    done["seconds"] = time.monotonic() - started
    done["spool"] = target.spool
    stopped = f" ({done['why']})" if done["why"] is not None else ""
    other: Mapping[str, int] = done["other"]  # type: ignore[assignment]
    done["lines"] = [
        f"<gpukeras track sync> {done['sent']} {done['action']}, {done['left']} left{stopped}",
        *(f"  kept for another store: {uri} ({n})" for uri, n in other.items()),
    ]
    return done
