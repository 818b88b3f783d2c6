"""gpu_search()'s storage: Optuna's RDB storage at a URL (an SQLite file, or a PostgreSQL
server several machines share), opened quietly, patiently and safely, and opened ahead by a
waiting worker (``warm``). ``gpukeras.tools.search`` keeps the study in it."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from gpukeras.core.errors import GpukerasError

# SQLite waits this long for another process's write lock instead of failing
# ("database is locked") when workers report epochs while the search asks and tells.
SQLITE_TIMEOUT_SECONDS = 60
# Processes that open a new database at once each create Optuna's tables; those that lose
# the race fail (PostgreSQL: a duplicate key in pg_type) and find the tables made when
# they try again, this many times in all.
STORAGE_ATTEMPTS = 5


class SearchStorageError(GpukerasError):
    """The study's storage cannot be opened (a bad URL, a missing driver, a server down)."""

    r_class = "gpukeras_error_search_storage"


@contextlib.contextmanager
def quiet() -> Iterator[Any]:
    """Optuna, with its INFO lines off for the length of the block and its level given back."""
    import optuna

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield optuna
    finally:
        optuna.logging.set_verbosity(level)


def open_storage(url: str) -> Any:
    """Optuna's RDB storage at ``url``; SQLite waits for locks rather than failing, and
    a process that loses the race to create the tables of a new database tries again."""
    with quiet() as optuna:
        kwargs: dict[str, Any] = {}
        if url.startswith("sqlite"):
            kwargs["engine_kwargs"] = {"connect_args": {"timeout": SQLITE_TIMEOUT_SECONDS}}
        try:
            return _rdb_storage(optuna, _with_driver(url), kwargs)
        except ImportError as error:
            # Optuna raises its own ImportError from the driver's ModuleNotFoundError.
            missing = error if isinstance(error, ModuleNotFoundError) else error.__cause__
            name = getattr(missing, "name", None) or "its database driver"
            raise SearchStorageError(
                f"The study's storage {safe_url(url)} needs the Python module '{name}', "
                "which is not installed. For PostgreSQL run "
                'install_gpukeras(extras = "postgresql") (it installs psycopg2-binary).'
            ) from error
        except Exception as error:
            raise SearchStorageError(
                f"The study's storage {safe_url(url)} could not be opened: "
                f"{str(error).splitlines()[0]}"
            ) from error


def _rdb_storage(optuna: Any, url: str, kwargs: dict[str, Any]) -> Any:
    from sqlalchemy import exc

    for attempt in range(1, STORAGE_ATTEMPTS + 1):
        try:
            return optuna.storages.RDBStorage(url, **kwargs)
        except (exc.IntegrityError, exc.ProgrammingError):
            if attempt == STORAGE_ATTEMPTS:
                raise
            time.sleep(0.2 * attempt)


def _with_driver(url: str) -> str:
    """``url`` with the PostgreSQL driver that is installed, when it names none: SQLAlchemy
    2.1 takes a bare ``postgresql://`` for psycopg (3), 2.0 for psycopg2, and
    install_gpukeras(extras = "postgresql") installs psycopg2."""
    import importlib.util

    scheme, sep, rest = url.partition("://")
    if scheme != "postgresql" or not sep:
        return url
    if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2"):
        return f"postgresql+psycopg2://{rest}"
    return url


def safe_url(url: str) -> str:
    """``url`` without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{host}" if ":" in credentials else url


# Storages a waiting worker opened ahead (``warm``), each taken once by the callback.
_WARMED: dict[str, Any] = {}


def _after_fork_in_child() -> None:
    # A worker forked from the template that opened these must not use or close the
    # template's connections (PostgreSQL would end the template's): its own open on use.
    for opened in _WARMED.values():
        opened.engine.dispose(close=False)


os.register_at_fork(after_in_child=_after_fork_in_child)


def warm(storage: str) -> None:
    """Open the study's storage ahead, in a worker waiting for its trial (or the template
    it is forked from), for the pruning callback to take: loading SQLAlchemy, alembic and
    Optuna's RDB modules and connecting took 0.5 s of each trial's start (bench/search.R).
    A storage that cannot be opened now is left for the callback, which then says why."""
    with contextlib.suppress(SearchStorageError):
        _WARMED[storage] = open_storage(storage)


def take_warmed(storage: str) -> Any:
    """The storage ``warm`` opened for ``storage`` (once), or None."""
    return _WARMED.pop(storage, None)
