"""Where tracked runs go: an MLflow server, or a store in a folder of the user's, as MLflow reads.

gpukeras tracks in MLflow and writes no tracking store of its own. Where runs go is
what R sends with every tracked call (``Target``): the URI and experiment the user
gave gpu_track(), or MLflow's own variables (``MLFLOW_TRACKING_URI``,
``MLFLOW_EXPERIMENT_NAME`` or ``_ID``, and the credentials
``MLFLOW_TRACKING_USERNAME``/``_PASSWORD``/``_TOKEN``), as every MLflow client reads
them. R reads its own environment, which Python's ``os.environ`` (a copy taken when
Python started) does not follow, and the values are put into ``os.environ`` here,
where MLflow's client reads them at each request.

A folder (``open_folder``) is MLflow's SQLite store ``<folder>/mlflow.db`` with the
artifacts beside it in ``<folder>/artifacts``: nothing to start, and MLflow's own UI
and client open it (``mlflow ui --backend-store-uri sqlite:///<folder>/mlflow.db``).
MLflow 3.17 refuses its older file store (``./mlruns``) unless told otherwise, and
its SQLite store puts the artifacts of an experiment it creates in ``./mlruns`` of
the working folder, so gpukeras creates experiments of a SQLite store itself, with
their artifacts beside the database: no file lands where the user did not ask.

A server that does not answer must never hold training up: MLflow's client waits
120 s per request and retries 7 times by default, so where the user set none of
them gpukeras asks for ``PATIENCE`` (and the sending happens off the training thread,
``gpukeras.track.sending``); whether a server answers at all is asked once, in a
second or two, and remembered (``gpukeras.track.reach``). Credentials never appear in what
gpukeras shows or keeps: URIs and messages are masked by the one rule
(``gpukeras.core.masking``), of the secret variables' values too (``masked``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from gpukeras.core.errors import BadArgumentError, GpukerasError
from gpukeras.core.masking import SECRET_VARIABLES, mask_text, mask_uri

# The variables that say where runs go and who sends them, named one by one (never read
# by a prefix: see DESIGN.md), as R sends them from its environment.
MLFLOW_VARIABLES = (
    "MLFLOW_TRACKING_URI",
    "MLFLOW_EXPERIMENT_NAME",
    "MLFLOW_EXPERIMENT_ID",
    "MLFLOW_TRACKING_USERNAME",
    "MLFLOW_TRACKING_PASSWORD",
    "MLFLOW_TRACKING_TOKEN",
    "MLFLOW_TRACKING_INSECURE_TLS",
    "MLFLOW_TRACKING_SERVER_CERT_PATH",
    "MLFLOW_TRACKING_CLIENT_CERT_PATH",
    "MLFLOW_HTTP_REQUEST_TIMEOUT",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
)
# How long one request may take where the user set nothing: 5 s, one retry after about
# a second (MLflow: 120 s, 7 retries with a backoff doubling from 2 s).
PATIENCE = {
    # and no "View run ... at" line on stdout (and the request for it) at each run's end
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    # MLflow's asynchronous logging gathers a second's batches of a run into one request
    "MLFLOW_ASYNC_LOGGING_BUFFERING_SECONDS": "1",
}
# Seconds a fit waits at its end for its run to be made (its id, for the result), and
# what reads runs (or ends the process) waits for the records still being sent.
RUN_ID_WAIT = 5.0
FLUSH_WAIT = 30.0
DATABASE = "mlflow.db"
ARTIFACTS = "artifacts"
DEFAULT_EXPERIMENT = "Default"


class TrackingError(GpukerasError):
    """The tracking store cannot be read or opened as asked (a server that does not answer,
    refused credentials, a URI MLflow does not take)."""

    r_class = "gpukeras_error_tracking"


class TrackingMissingError(GpukerasError):
    """MLflow's client is not installed in gpukeras' Python."""

    r_class = "gpukeras_error_tracking_missing"


@dataclass(frozen=True)
class Target:
    """Where runs go, as R sent it (``target_of``)."""

    uri: str
    experiment: str | None = None
    experiment_id: str | None = None
    # the folder of the MLflow store where what could not be sent is kept (made only then)
    spool: str | None = None
    # seconds a tracked verb waits at its end for what it logged to be sent (0: it does not;
    # the sending goes on, and what reads runs waits for it: ``FLUSH_WAIT``)
    wait: float = 0.0

    @property
    def safe(self) -> str:
        """The URI without its password, for whatever is shown or kept."""
        return mask_uri(self.uri)

    @property
    def artifact_root(self) -> str | None:
        """Where a SQLite store's new experiments keep artifacts: beside the database."""
        database = sqlite_path(self.uri)
        return None if database is None else str(Path(database).parent / ARTIFACTS)

    @property
    def experiment_label(self) -> str:
        if self.experiment_id is not None:
            return f"id {self.experiment_id}"
        return self.experiment or DEFAULT_EXPERIMENT


def sqlite_path(uri: str) -> str | None:
    """The database file of a ``sqlite:///`` URI, else None."""
    if not uri.startswith("sqlite:"):
        return None
    path = unquote(urlparse(uri).path)
    return path or None


def target_of(track: Mapping[str, object]) -> Target:
    """The ``Target`` R sent (``uri``, ``experiment``, ``experiment_id``, ``spool``,
    ``wait`` and ``env``: MLflow's variables as R's environment has them), with those
    variables put where MLflow's client reads them (``use_variables``)."""
    uri = track.get("uri")
    if not isinstance(uri, str) or not uri:
        raise BadArgumentError('Tracking needs a URI: gpu_track("runs") or a server\'s URL.')
    env = track.get("env") or {}
    use_variables(env if isinstance(env, Mapping) else {})
    experiment, experiment_id = track.get("experiment"), track.get("experiment_id")
    return Target(
        uri=uri,
        experiment=str(experiment) if experiment else None,
        experiment_id=str(experiment_id) if experiment_id else None,
        spool=str(track["spool"]) if track.get("spool") else None,
        wait=float(track.get("wait") or 0.0),  # type: ignore[arg-type]
    )


def use_variables(env: Mapping[str, object]) -> None:
    """MLflow's variables as R has them: each given one set, a credential R does not have
    removed (the user turned it off), and gpukeras' ``PATIENCE`` where nothing says
    otherwise."""
    for name in MLFLOW_VARIABLES:
        value = env.get(name)
        if isinstance(value, str) and value:
            os.environ[name] = value
        elif name in SECRET_VARIABLES or name == "MLFLOW_TRACKING_USERNAME":
            os.environ.pop(name, None)
    for name, value in PATIENCE.items():
        os.environ.setdefault(name, value)


def users_own(name: str) -> str | None:
    """MLflow's variable ``name`` where the user set it, else None. A value equal to
    ``PATIENCE``'s is gpukeras' own: set here, it is in the process's environment, which R
    reads and sends back, and which the processes it starts inherit."""
    value = os.environ.get(name)
    return None if not value or value == PATIENCE.get(name) else value


def masked(text: str, target: Target | None = None) -> str:
    """``text`` masked (``mask_text``), the target's URI as ``Target.safe`` shows it."""
    if target is not None and target.uri != target.safe:
        text = text.replace(target.uri, target.safe)
    return mask_text(text)


# MLflow -----------------------------------------------------------------------
def mlflow_client_class() -> Any:
    """MLflow's client class; TrackingMissingError where MLflow is not installed."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as error:
        raise TrackingMissingError(
            "MLflow's client is not installed in gpukeras' Python: run "
            'install_gpukeras(extras = "tracking") (mlflow-skinny), then start R again.'
        ) from error
    return MlflowClient


_CLIENTS: dict[str, Any] = {}
_EXPERIMENTS: dict[tuple[str, str | None, str | None], str] = {}
_LOCK = threading.Lock()


def client(target: Target) -> Any:
    """MLflow's client for the target (one per URI and process)."""
    with _LOCK:
        made = _CLIENTS.get(target.uri)
        if made is None:
            with quiet_mlflow():
                made = _CLIENTS[target.uri] = mlflow_client_class()(tracking_uri=target.uri)
        return made


@contextlib.contextmanager
def quiet_mlflow() -> Iterator[None]:
    """MLflow's and Alembic's informational lines (the SQLite store's "Creating initial
    MLflow database tables...") held back: they would land among R's output."""
    loggers = [logging.getLogger(name) for name in ("mlflow", "alembic")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def experiment_id(target: Target) -> str:
    """The target's experiment id: given, or found by name, or created (in a SQLite store
    with its artifacts beside the database)."""
    if target.experiment_id is not None:
        return target.experiment_id
    name = target.experiment or DEFAULT_EXPERIMENT
    key = (target.uri, name, None)
    found = _EXPERIMENTS.get(key)
    if found is not None:
        return found
    mlflow = client(target)
    experiment = mlflow.get_experiment_by_name(name)
    if experiment is None:
        try:
            made = _create_experiment(target, name)
        except Exception as error:  # made meanwhile by another process
            experiment = mlflow.get_experiment_by_name(name)
            if experiment is None:
                raise error from None
            made = experiment.experiment_id
    else:
        made = experiment.experiment_id
    _EXPERIMENTS[key] = str(made)
    return str(made)


def _create_experiment(target: Target, name: str) -> str:
    root = target.artifact_root
    if root is None:
        return str(client(target).create_experiment(name))
    folder = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:60]}-{uuid.uuid4().hex[:8]}"
    return str(client(target).create_experiment(name, artifact_location=f"{root}/{folder}"))


def _sqlite_store(uri: str, artifact_root: str) -> Any:
    """MLflow's SQLite store with new experiments' artifacts under ``artifact_root``."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    with quiet_mlflow():
        return SqlAlchemyStore(uri, artifact_root)


def open_folder(folder: str) -> dict[str, str]:
    """A store in ``folder`` (made for this user when missing): MLflow's SQLite database and
    its artifacts beside it, created now (its tables take seconds to make, once), so that
    the processes that log to it later find it whole.

    Returns:
        ``uri`` (``sqlite:///<folder>/mlflow.db``) and ``folder``, absolute.
    """
    mlflow_client_class()
    path = Path(os.path.expanduser(folder)).absolute()
    if path.exists() and not path.is_dir():
        raise BadArgumentError(
            f"{str(path)!r} is a file: gpu_track() needs a folder for its store."
        )
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    uri = f"sqlite:///{path / DATABASE}"
    try:
        _sqlite_store(uri, str(path / ARTIFACTS))
    except Exception as error:
        raise TrackingError(f"MLflow cannot open a store in {str(path)!r}: {error}") from error
    return {"uri": uri, "folder": str(path)}
