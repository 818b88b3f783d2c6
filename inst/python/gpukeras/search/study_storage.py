"""gpu_search()'s storage: in a folder of this user's, Optuna's journal storage in a file
(``search.journal``, ``study_journal``); at a database URL (an SQLite file, or a PostgreSQL
server several machines share), Optuna's RDB storage, opened patiently. Either is opened
quietly and safely, with Optuna's heartbeat on, and ahead by a waiting worker (``warm``).
``gpukeras.search.search`` keeps the study in it."""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpukeras.core.errors import BadArgumentError, GpukerasError
from gpukeras.core.masking import mask_uri
from gpukeras.train import backup_files

# A database URL's SQLite waits this long for another process's write lock instead of failing
# ("database is locked") when workers report epochs while the search asks and tells.
SQLITE_TIMEOUT_SECONDS = 60
# Processes that open a new database at once each create Optuna's tables; those that lose
# the race fail (PostgreSQL: a duplicate key in pg_type) and find the tables made when
# they try again, this many times in all.
STORAGE_ATTEMPTS = 5
# Optuna's heartbeat: the process that trains a trial records one this often, and a running
# trial whose last is older than GRACE_SECONDS is failed and asked again (Optuna's
# fail_stale_trials and RetryHeartbeatStaleTrialCallback, in gpukeras.search.search).
HEARTBEAT_SECONDS = 20
GRACE_SECONDS = 120
# The variable that gives a process the study's URL whole (a worker, a background search),
# where what it is given to read is masked (``unmasked``).
STORAGE_VARIABLE = "GPUKERAS_SEARCH_STORAGE"
# What a study folder holds: the study's journal (or the SQLite file of a study made before
# gpukeras kept it in a journal, which goes on there) and the best trial's model.
JOURNAL = "search.journal"
OLD_STUDY = "search.db"
STUDY_FILES = (JOURNAL, OLD_STUDY, "models")


class SearchStorageError(GpukerasError):
    """The study's storage cannot be opened (a bad URL, a missing driver, a server down)."""

    r_class = "gpukeras_error_search_storage"


class SearchStorageUnsafeError(GpukerasError):
    """The study folder is another user's, others may write to it, or a link is planted in it."""

    r_class = "gpukeras_error_search_storage_unsafe"


def check_folder(folder: object) -> str:
    """``folder`` (gpu_search(storage = )) as an absolute path, made for this user alone
    (0700) when missing, as gpu_backup()'s folder is: another user's folder, or one others
    may write to, is refused, for its owner (or any writer) could swap the study or the
    best model that gpu_load() later loads; so is a ``search.journal``, ``search.db`` or
    ``models`` that is a link, which the search would write through.

    Raises:
        BadArgumentError: not a folder path, a file, or it cannot be created.
        SearchStorageUnsafeError: as above, naming the folder and what to do.
    """
    if not isinstance(folder, str) or not folder:
        raise BadArgumentError(f"`storage` must be a folder or a database URL, not {folder!r}.")
    path = Path(folder).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise BadArgumentError(
            f"The folder `storage` ({path}) is a file: give a folder, or a database URL."
        )
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise BadArgumentError(
            f"The folder `storage` ({path}) could not be created ({backup_files.why(error)}): "
            "give a folder you can write to, or a database URL."
        ) from error
    backup_files.check_private(
        path,
        name="gpu_search()'s storage folder",
        what="a trial's model",
        then="gpu_load(search$best$path) would load their model as the best trial's",
        error=SearchStorageUnsafeError,
    )
    for name in STUDY_FILES:
        if (path / name).is_symlink():
            raise SearchStorageUnsafeError(
                f"{path / name} in gpu_search()'s storage folder is a link (to "
                f"{os.readlink(path / name)}): the search would write through it. Remove the "
                f'link (unlink("{path / name}")), or give a folder of your own.'
            )
    return str(path)


def study_folder(folder: object) -> dict[str, str]:
    """The checked ``folder`` (``check_folder``) and its study's ``storage`` as the verbs
    take it: the journal's path, or for a folder whose study an older gpukeras kept in
    SQLite (a ``search.db`` and no journal), that file's URL, so that it resumes there."""
    path = Path(check_folder(folder))
    if (path / OLD_STUDY).exists() and not (path / JOURNAL).exists():
        return {"folder": str(path), "storage": f"sqlite:///{path / OLD_STUDY}"}
    return {"folder": str(path), "storage": str(path / JOURNAL)}


def is_journal(storage: str) -> bool:
    """Whether ``storage`` is a folder's journal (an absolute path), not a database URL."""
    return os.path.isabs(storage)


@contextlib.contextmanager
def quiet() -> Iterator[Any]:
    """Optuna, with its INFO lines and its warnings that a feature is experimental (the
    heartbeat and its retry are) off for the length of the block, and its level given back.
    Its warning that the heartbeat "is supposed to be used with Study.optimize" goes too:
    the search asks and tells, and the process that trains records the heartbeat."""
    import optuna

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", "Heartbeat of storage is supposed to be used")
            yield optuna
    finally:
        optuna.logging.set_verbosity(level)


def unmasked(url: str) -> str:
    """``url``, or where it is the masked form (``mask_uri``) of the URL in this process's
    ``STORAGE_VARIABLE``, that URL: a worker is given the study's URL masked in its task,
    which callr writes to a file, and a URL that holds a secret in its environment."""
    given = os.environ.get(STORAGE_VARIABLE, "")
    return given if given and mask_uri(given) == url else url


def open_storage(url: str) -> Any:
    """The study's storage at ``url`` (``study_folder``'s ``storage``, or a database URL, or
    its masked form: ``unmasked``), with Optuna's heartbeat (``HEARTBEAT_SECONDS``,
    ``GRACE_SECONDS``) and its retry of a stale trial: a folder's journal
    (``study_journal``), or Optuna's RDB storage, where SQLite waits for locks rather than
    failing, and a process that loses the race to create the tables of a new database tries
    again."""
    url = unmasked(url)
    with quiet() as optuna:
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback()
        if is_journal(url):
            from gpukeras.search import study_journal

            try:
                return study_journal.JournalStudyStorage(
                    url, HEARTBEAT_SECONDS, GRACE_SECONDS, retry
                )
            except (OSError, ValueError) as error:
                raise SearchStorageError(
                    f"The study's journal {url} could not be opened: {error}"
                ) from error
        kwargs: dict[str, Any] = {
            "heartbeat_interval": HEARTBEAT_SECONDS,
            "grace_period": GRACE_SECONDS,
            "heartbeat_stale_trial_callback": retry,
        }
        if url.startswith("sqlite"):
            kwargs["engine_kwargs"] = {"connect_args": {"timeout": SQLITE_TIMEOUT_SECONDS}}
        try:
            return _rdb_storage(optuna, _with_driver(url), kwargs)
        except ImportError as error:
            # Optuna raises its own ImportError from the driver's ModuleNotFoundError.
            missing = error if isinstance(error, ModuleNotFoundError) else error.__cause__
            name = getattr(missing, "name", None) or "its database driver"
            raise SearchStorageError(
                f"The study's storage {mask_uri(url)} needs the Python module '{name}', "
                "which is not installed. For PostgreSQL run "
                'install_gpukeras(extras = "postgresql") (it installs psycopg2-binary).'
            ) from error
        except Exception as error:
            raise SearchStorageError(
                f"The study's storage {mask_uri(url)} could not be opened: "
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


# Storages a waiting worker opened ahead (``warm``), each taken once by the callback.
_WARMED: dict[str, Any] = {}


def warm(storage: str) -> None:
    """Open the study's storage ahead, in a worker waiting for its trial, for the pruning
    callback to take: loading Optuna (and for a database SQLAlchemy, alembic and Optuna's
    RDB modules) and connecting took 0.5 s of each trial's start (bench/search.R).
    A storage that cannot be opened now is left for the callback, which then says why."""
    with contextlib.suppress(SearchStorageError):
        _WARMED[storage] = open_storage(storage)


def unwarm() -> None:
    """Close what ``warm`` opened and no trial took: a worker that ran its task serves
    the next one, of this search or, as a spare, of another on another storage."""
    _WARMED.clear()


def take_warmed(storage: str) -> Any:
    """The storage ``warm`` opened for ``storage`` (once), or None."""
    return _WARMED.pop(storage, None)
