"""Whether a tracking store takes runs now, why not in words a user reads, and said once.

A server that accepts connections and never answers would cost every tracked call MLflow's
timeout and retries (``tracking.PATIENCE``: 5 s and one retry, some 11 s). So the first word
with a server (``reach``) is one short request (``REACH_TIMEOUT`` s and no retry, unless the
user set MLflow's ``MLFLOW_HTTP_REQUEST_TIMEOUT`` or ``_MAX_RETRIES``: theirs then), made
with MLflow's own ``http_request``; any HTTP answer counts as an answer. What it decided is
remembered for the process: a fit asks on its sending thread and later fits do not wait for
it again (nor for a request that failed: ``remember``). What the user calls to look at the
store asks again (gpu_track(), gpu_track_sync(), the readers of runs), and so does the next
run once a "does not answer" is ``REACH_AGAIN`` s old. A store that is not a server (a
folder, a database) is not asked.

The warning that a store does not take runs is said once (``say_once``) until it takes them
again (``answered``), whole: "connection refused at 127.0.0.1:5999", "no answer within 2 s
from 127.0.0.1:5999", never an exception's repr cut short.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from gpukeras.core.errors import GpukerasError
from gpukeras.core.masking import SECRET_VARIABLES
from gpukeras.track import tracking
from gpukeras.track.tracking import Target, TrackingError

# Seconds the first word with a server may take where the user set no MLflow timeout; seconds
# a "does not answer" holds before the next run asks again.
REACH_TIMEOUT = 2.0
REACH_AGAIN = 600.0
# Where MLflow's server says it is up (any answer, a 404 from another server too, will do).
HEALTH = "/health"
# What urllib3 says of a connection that failed: the system's reason, where to, how long.
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")
_POOL = re.compile(r"host='([^']+)', port=(\d+)")
_TIMEOUT = re.compile(r"(?:read|connect) timeout=([\d.]+)")
# MLflow's error codes for a request it understood and refused for what it held: sending
# it again later would meet the same refusal (anything else is the server's state).
REFUSALS = {
    "INVALID_PARAMETER_VALUE",
    "MALFORMED_REQUEST",
    "BAD_REQUEST",
    "INVALID_STATE",
    "RESOURCE_ALREADY_EXISTS",
    "RESOURCE_DOES_NOT_EXIST",
}


@dataclass
class _Decision:
    why: str | None  # None: it answers
    at: float  # time.monotonic() when decided
    said: bool = False  # the warning that it does not take runs given


_DECIDED: dict[str, _Decision] = {}
_LOCK = threading.Lock()


def is_server(target: Target) -> bool:
    return urlparse(target.uri).scheme in ("http", "https")


def reach(target: Target, again: bool = False) -> str | None:
    """Whether the target's server takes requests: None, or why not. Decided once per server
    and process and remembered (see the module); asked again with ``again``, or when a "does
    not answer" is ``REACH_AGAIN`` s old. None at once for a store that is not a server."""
    if not is_server(target):
        return None
    with _LOCK:
        known = _DECIDED.get(target.uri)
    recent = known is not None and (known.why is None or time.monotonic() - known.at < REACH_AGAIN)
    if recent and not again:
        return known.why  # type: ignore[union-attr]
    why = _ask(target)
    with _LOCK:
        said = why is not None and known is not None and known.said
        _DECIDED[target.uri] = _Decision(why, time.monotonic(), said)
    return why


def remembered(target: Target) -> str | None:
    """Why the target's server was found not to take requests, where that is recent (see
    ``reach``), without asking it; else None."""
    with _LOCK:
        known = _DECIDED.get(target.uri)
    if known is None or known.why is None or time.monotonic() - known.at >= REACH_AGAIN:
        return None
    return known.why


def _ask(target: Target) -> str | None:
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    timeout = _number(tracking.users_own("MLFLOW_HTTP_REQUEST_TIMEOUT"), REACH_TIMEOUT)
    retries = _number(tracking.users_own("MLFLOW_HTTP_REQUEST_MAX_RETRIES"), 0)
    try:
        with tracking.quiet_mlflow():
            http_request(
                get_default_host_creds(target.uri.rstrip("/")),
                HEALTH,
                "GET",
                max_retries=int(retries),
                timeout=timeout,
                raise_on_status=False,
            )
    except Exception as error:
        return unavailable(error, target)
    return None


def _number(text: str | None, default: float) -> float:
    with contextlib.suppress(TypeError, ValueError):
        return float(text)  # type: ignore[arg-type]
    return default


def remember(target: Target, why: str) -> None:
    """A request to the server failed (``why``): later runs of the process do not try it
    again until it is asked again (see ``reach``)."""
    if is_server(target):
        with _LOCK:
            known = _DECIDED.get(target.uri)
            _DECIDED[target.uri] = _Decision(why, time.monotonic(), bool(known and known.said))


def answered(target: Target) -> None:
    """The store took a request: a later failure is news again."""
    with _LOCK:
        known = _DECIDED.get(target.uri)
        if known is not None and (known.why is not None or known.said):
            _DECIDED[target.uri] = _Decision(None, time.monotonic())


def say_once(target: Target) -> bool:
    """True the first time since the store last took runs (the warning is due), then False."""
    with _LOCK:
        known = _DECIDED.setdefault(target.uri, _Decision(None, time.monotonic()))
        due, known.said = not known.said, True
    return due


def check(track: Mapping[str, object]) -> dict[str, object]:
    """gpu_track()'s check of a target: MLflow installed, the URI one MLflow takes, the
    experiment reachable; what R prints. A store that does not take runs now is not an
    error here (runs are kept until it does): ``reachable`` is False with ``why`` (R says
    it, and the session's later runs do not say it again)."""
    target = tracking.target_of(track)
    tracking.mlflow_client_class()
    why = reach(target, again=True)
    if why is None:
        try:
            tracking.experiment_id(target)
        except GpukerasError:
            raise
        except Exception as error:
            why = unavailable(error, target)
            if why is None:
                raise TrackingError(
                    tracking.masked(f"MLflow refused {target.safe}: {error}", target)
                ) from error
            remember(target, why)
    if why is not None:
        say_once(target)
    return {
        "uri": target.safe,
        "experiment": target.experiment_label,
        "reachable": why is None,
        "why": why,
        "credentials": [name for name in SECRET_VARIABLES if os.environ.get(name)],
        "username": os.environ.get("MLFLOW_TRACKING_USERNAME"),
    }


def unavailable(error: BaseException, target: Target | None = None) -> str | None:
    """Why the store could not take a request, in words, when it is the store's state (not
    answering, too slow, refusing the credentials, a database busy): sending again later
    may succeed. None when MLflow refused what was sent (``REFUSALS``)."""
    code = getattr(error, "error_code", None)
    if code in REFUSALS:
        return None
    status = _status_of(error)
    text = tracking.masked(f"{type(error).__name__}: {error}", target)
    if code in ("UNAUTHENTICATED", "CUSTOMER_UNAUTHORIZED") or status == 401:
        return "the server refused the credentials (401 Unauthorized)"
    if code == "PERMISSION_DENIED" or status == 403:
        return "the server refused access to the experiment (403 Forbidden)"
    pool = _POOL.search(text)
    where = f"{pool.group(1)}:{pool.group(2)}" if pool else "the server"
    if "timed out" in text.lower() or "timeout" in text.lower():
        waited = _TIMEOUT.search(text)
        return (
            f"no answer within {float(waited.group(1)):g} s from {where}"
            if waited
            else (f"no answer in time from {where}")
        )
    cause = _ERRNO.search(text)
    if cause:
        return f"{cause.group(1).strip().lower()} at {where}"
    if "Max retries exceeded" in text:
        return f"no connection to {where}"
    return f"the store did not take it ({_first_words(text)})"


def _first_words(text: str, most: int = 300) -> str:
    """The first line of ``text``, cut at a word (with "...") where it is long."""
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= most else line[:most].rsplit(" ", 1)[0] + " ..."


def _status_of(error: BaseException) -> int | None:
    getter = getattr(error, "get_http_status_code", None)
    if getter is None:
        return None
    with contextlib.suppress(Exception):
        return int(getter())
    return None
