"""The backup folder and the files in it, made safe and durable (see ``gpukeras.train.backup``'s
notes): the folder checked as this user's alone and writable, files opened without following
links, synced and hashed, the JSON committed atomically, space reserved before HDF5 writes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from gpukeras.core.errors import (
    BackupDirUnsafeError,
    BackupInUseError,
    BadArgumentError,
    GpukerasError,
)
from gpukeras.core.handles import Model

try:
    import fcntl
except ImportError:  # Windows: no flock; the folder is not locked there
    fcntl = None  # type: ignore[assignment]

try:
    import resource
except ImportError:  # Windows has no file-size limit to check
    resource = None  # type: ignore[assignment]

# Open files without following a link planted at their name (0 where the OS has no such flag).
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# The file a fit locks for its life, and that names the process holding it.
LOCK_FILE = "gpukeras-backup.lock"
# The temporary files this module makes in a backup folder (a probe, a commit, a reserve).
TEMPORARY_PREFIXES = (".gpukeras-probe-", ".gpukeras-backup-", ".gpukeras-reserve-")


# The lock ---------------------------------------------------------------------------
@contextlib.contextmanager
def folder_lock(backup_dir: str) -> Iterator[None]:
    """Hold ``backup_dir`` for one fit: an exclusive lock (``flock``) on its ``LOCK_FILE``,
    which names this process, removed again when the fit ends (and the folder with it when
    the fit completed and left nothing else there, as the backup callback does).

    Two fits with one backup folder destroy each other: the second resumes from the
    first one's backup, then removes files the first still writes. The kernel drops the
    lock of a process that dies, so a killed fit never leaves the folder locked; a lock
    file left behind by one is taken over.

    Raises:
        BackupInUseError: another process holds the folder; it is named.
    """
    if fcntl is None:
        yield
        return
    path = os.path.join(backup_dir, LOCK_FILE)
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(descriptor)
            os.close(descriptor)
            raise BackupInUseError(
                f"backup_dir {backup_dir} is in use by another fit ({holder}): two fits with "
                "one backup folder resume from and delete each other's backups. Give this "
                "fit another backup_dir, or wait for that one to end (gpu_job_wait() for a "
                "background job)."
            ) from None
        # The holder before may have removed the file between this open and this lock:
        # locked then is a file no one else will find, so open the one at the path again.
        with contextlib.suppress(OSError):
            if os.path.samestat(os.fstat(descriptor), os.lstat(path)):
                break
        os.close(descriptor)
    completed = False
    try:
        os.ftruncate(descriptor, 0)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.write(descriptor, json.dumps(record).encode())
        yield
        completed = True
    finally:
        with contextlib.suppress(OSError):  # removed while held: the next fit makes its own
            os.unlink(path)
        os.close(descriptor)
        if completed:  # as the backup callback's rule: the folder goes when nothing is left
            with contextlib.suppress(OSError):
                os.rmdir(backup_dir)


def _lock_holder(descriptor: int) -> str:
    """The process a lock file names, in words."""
    try:
        found = json.loads(os.pread(descriptor, 4096, 0) or b"{}")
        pid, host, since = found["pid"], found.get("host"), float(found["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its name yet"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
    return f"process {pid}{f' on {host}' if host else ''}, since {started}"


# The folder ---------------------------------------------------------------------
def check_dir(backup_dir: object) -> str:
    """``backup_dir`` as an absolute path, created (for this user alone when made here), safe
    and writable.

    Raises:
        BadArgumentError: not a folder path, a file, cannot be created, or not writable.
        BackupDirUnsafeError: another user's folder, or one other users may write to.
    """
    if not isinstance(backup_dir, (str, os.PathLike)) or not str(backup_dir):
        raise BadArgumentError(f"backup_dir must be a folder path, not {backup_dir!r}.")
    path = Path(backup_dir).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise BadArgumentError(f"backup_dir {path} is a file; give a folder.")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise BadArgumentError(f"backup_dir {path} cannot be created: {why(error)}.") from error
    check_private(path)
    _check_writable(path)
    return str(path)


def check_private(
    path: Path,
    name: str = "backup_dir",
    what: str = "a backup",
    then: str = "gpukeras would resume from them",
    error: type[GpukerasError] = BackupDirUnsafeError,
) -> None:
    """Refuse (``error``) a folder that is not this user's, or that others may write to: the
    rules of a backup folder, also for other folders gpukeras writes and later reads back
    (gpu_search()'s study). ``name`` names the folder in the message, ``what`` the files
    written there, ``then`` what gpukeras would do with files another user planted."""
    if not hasattr(os, "geteuid"):  # no POSIX owners and modes to check
        return
    status = path.stat()
    me = os.geteuid()
    if status.st_uid != me:
        raise error(
            f"{name} {path} belongs to {_user(status.st_uid)}, not to you "
            f"({_user(me)}): its owner could replace or plant files in it, and {then}. "
            "Give a folder of your own (under your home directory, or one you make with mkdir)."
        )
    if status.st_mode & stat.S_IWOTH:
        raise error(
            f"{name} {path} can be written by every user (mode "
            f"{stat.S_IMODE(status.st_mode):o}, as /tmp is): another user could plant a link "
            f"where {what} is written, or {what} of their own. Make it yours alone "
            f"(chmod go-w {path}), or give a folder of your own."
        )
    if status.st_mode & stat.S_IWGRP and not _own_group(status.st_gid):
        raise error(
            f"{name} {path} can be written by the group {_group(status.st_gid)} (mode "
            f"{stat.S_IMODE(status.st_mode):o}): its other members could plant a link where "
            f"{what} is written, or {what} of their own. Make it yours alone (chmod g-w "
            f"{path}), or give a folder of your own."
        )


def _own_group(gid: int) -> bool:
    """Whether ``gid`` is this user's private group (its name, no other member), as Debian
    and others make for every user."""
    import grp
    import pwd

    try:
        group, user = grp.getgrgid(gid), pwd.getpwuid(os.geteuid())
    except KeyError:
        return False
    return group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def _user(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _group(gid: int) -> str:
    try:
        import grp

        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except (ImportError, KeyError):
        return f"gid {gid}"


def _check_writable(path: Path) -> None:
    """Create, write and remove a probe file, so an unwritable folder fails before training."""
    try:
        descriptor, probe = tempfile.mkstemp(dir=path, prefix=TEMPORARY_PREFIXES[0])
        try:
            os.write(descriptor, b"0")
        finally:
            os.close(descriptor)
            os.unlink(probe)
    except OSError as error:
        raise BadArgumentError(
            f"backup_dir {path} cannot be written to ({why(error)}): give a folder you can "
            f"write to{', on a disk with free space' if full(error) else ''}."
        ) from error


def why(error: OSError) -> str:
    """An OSError in words: its text and the errno's name."""
    if error.errno is None:
        return str(error)
    return f"{error.strerror or os.strerror(error.errno)}, {errno.errorcode.get(error.errno, '')}"


def full(error: OSError) -> bool:
    return error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


# Writing ------------------------------------------------------------------------
def sync_and_hash(path: str, sync: bool = True) -> tuple[int, str]:
    """The size and SHA-256 of a file, opened without following a link; synced to disk first."""
    digest = hashlib.sha256()
    size = 0
    descriptor = os.open(path, os.O_RDONLY | NOFOLLOW)
    try:
        if sync:
            os.fsync(descriptor)
        while chunk := os.read(descriptor, 1 << 20):
            digest.update(chunk)
            size += len(chunk)
    finally:
        os.close(descriptor)
    return size, digest.hexdigest()


def sync_dir(folder: str) -> None:
    """Make the folder's entries (files made, renamed) durable; a no-op where folders cannot be
    opened or synced (Windows, some network file systems)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(descriptor)


def remove_leftovers(folder: str, prefix: str, suffixes: tuple[str, ...]) -> None:
    """Remove what a fit killed in the middle of a write left in ``folder``: this module's
    temporary files and a backup's files (weights, adapters: named ``prefix`` and one of
    ``suffixes``) that no backup names. Called by a fit that completed while holding the
    folder's lock, so no other fit writes there; without it the folder (and a killed run's
    half-written files) would stay after a resumed fit completed.
    """
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            name = entry.name
            ours = name.startswith(TEMPORARY_PREFIXES) or (
                name.startswith(prefix) and name.endswith(suffixes)
            )
            if ours and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)


def commit_json(folder: str, name: str, record: dict[str, object]) -> None:
    """Atomically make ``record`` the folder's file ``name`` (the committed backup): a
    temporary file of its own, synced, renamed over it, with the folder synced before and
    after. Not ``core.files.write_atomic``, which syncs no folder: the folder's sync between
    the file's and the rename is what makes the weights file the record names durable
    before the commit that names it."""
    descriptor, temporary = tempfile.mkstemp(
        dir=folder, prefix=TEMPORARY_PREFIXES[1], suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "w") as out:
            json.dump(record, out)
            out.flush()
            os.fsync(out.fileno())
        sync_dir(folder)  # the weights file's entry and this one's, before the commit
        os.replace(temporary, os.path.join(folder, name))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    sync_dir(folder)


def weights_estimate(model: Model, written: int | None) -> int:
    """Bytes to reserve for a backup's weights file: a little more than the last one written,
    or, before the first, the variables' bytes and HDF5's metadata for each."""
    if written:
        return int(written * 1.1) + 65536
    optimizer = getattr(model, "optimizer", None)
    variables = [*model.weights, *(optimizer.variables if optimizer is not None else [])]
    data = sum(math.prod(v.shape) * _itemsize(str(v.dtype)) for v in variables)
    return int(data) + 4096 * len(variables) + 65536


def _itemsize(dtype: str) -> int:
    with contextlib.suppress(TypeError):
        return int(np.dtype(dtype).itemsize)
    bits = re.search(r"\d+", dtype)  # bfloat16, float8_e4m3fn: NumPy does not know them
    return max(1, int(bits.group()) // 8) if bits else 4


def reserve(folder: str, size: int) -> None:
    """Make sure ``size`` bytes can be written in ``folder`` before HDF5 writes there, or raise
    the OSError (ENOSPC, EDQUOT, EFBIG) a write would meet.

    HDF5 (h5py 3, as Keras 3.15 uses it) can crash the process with a segmentation fault
    when a write fails in the middle of a file (seen here on a full tmpfs), and a write past
    the file-size limit (``ulimit -f``) sends SIGXFSZ, which ends an R process. So the space
    is taken first in a file of its own (``posix_fallocate``; a check of the free space
    where there is none), which is then given back for the weights.
    """
    if resource is not None:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY and size > limit:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))
    if not hasattr(os, "posix_fallocate"):
        free = shutil.disk_usage(folder).free
        if size > free:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return
    descriptor, path = tempfile.mkstemp(dir=folder, prefix=TEMPORARY_PREFIXES[2])
    try:
        os.posix_fallocate(descriptor, 0, size)
    finally:
        os.close(descriptor)
        os.unlink(path)


# HDF5 (Keras' weights files) reports a failed write as a RuntimeError naming the errno.
_HDF5_ERRNO = r"errno = (\d+)"


def write_errno(error: BaseException) -> int | None:
    """The errno of a failed write: an OSError's, or the one HDF5 names; None for other errors."""
    if isinstance(error, OSError) and error.errno is not None:
        return error.errno
    found = re.search(_HDF5_ERRNO, str(error)) if isinstance(error, RuntimeError) else None
    return int(found.group(1)) if found else None
