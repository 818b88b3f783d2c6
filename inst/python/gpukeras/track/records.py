"""A tracked run's records as gpukeras posts them: the run's key, what makes the run where
none has that key yet (``Creation``), and its operations (``log_op``, ``artifacts_op``,
``status_op``, ``later_op``, ``fill_op``), which ``sending`` sends or keeps."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# MLflow's limits on a param's and a tag's value.
MAX_PARAM_LENGTH, MAX_TAG_LENGTH = 6000, 8000
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
        "metrics": [(clean_name(k), float(v), int(t), int(s)) for k, v, t, s in metrics or []],
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
    """An operation made on the worker thread when its turn comes: ``make`` returns it (log
    or artifacts), or None; where it fails, nothing is sent."""
    return {"op": "later", "make": make}


def fill_op(rows: list[tuple[str, float, int, int]]) -> dict[str, Any]:
    """Log the metric values (name, value, timestamp, step) whose step the run lacks: a
    resumed fit's epochs that the killed process may not have sent."""
    return {
        "op": "fill",
        "metrics": [(clean_name(k), float(v), int(t), int(s)) for k, v, t, s in rows],
    }
