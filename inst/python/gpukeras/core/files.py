"""Files written whole: a reader finds the old file or the new one, never a part of either.

``write_atomic`` is the one way the core writes such a file: under a temporary name of its
own in the target's folder, then renamed over the target (one ``os.replace``, atomic on a
POSIX file system). The backup's commit (``train/backup_files.py``) keeps its own, stronger
contract: it syncs the folder before and after the rename.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Union

# What a file is made of: its text (UTF-8), its bytes, or a writer given the temporary
# file's path (for writers that take a path, as Keras' model.save() does).
Content = Union[str, bytes, Callable[[str], None]]


def write_atomic(
    path: str | os.PathLike[str],
    content: Content,
    *,
    mode: int | None = 0o600,
    sync: bool = False,
    replace: bool = True,
    prefix: str | None = None,
    suffix: str = "",
) -> None:
    """Make ``content`` the file ``path``, whole or not at all.

    Contract: on return, ``path`` is the new file, with permissions ``mode`` (None: what
    the umask gives a new file, as ``open()`` does), its data on the disk first when
    ``sync``. On any error (an exception in the writer, a full disk, an interrupt) the
    temporary file is removed, the error is raised, and ``path`` is as it was: the old file
    or none. The temporary file is in ``path``'s folder (a rename never crosses file
    systems), named ``prefix`` (default ``.<name>.tmp-<pid>-``), 8 random hex digits, then
    ``suffix``; it is created exclusively (an existing name is an error, never reused), and
    with a ``mode`` it is readable by this user alone until it is given that mode.

    Args:
        path: the file to write; its folder must exist.
        content: the text (written as UTF-8), the bytes, or a writer called with the
            temporary file's path that writes it (and may close it).
        mode: the file's permissions.
        sync: fsync the file's data before the rename (the folder itself is not synced).
        replace: replace a file already at ``path``; with False an existing file is kept and
            FileExistsError raised (the rename then is a hard link, which fails where the
            name exists, even one made meanwhile).
        prefix, suffix: the temporary name's start and end (a writer may need the target's
            extension; a cleanup may look for the prefix).

    Raises:
        FileExistsError: ``replace`` is False and ``path`` exists.
        OSError: the file could not be written or renamed.
    """
    target = Path(path)
    start = f".{target.name}.tmp-{os.getpid()}-" if prefix is None else prefix
    temp = str(target.parent / f"{start}{secrets.token_hex(4)}{suffix}")
    # without a mode, created as any new file is (the umask's permissions, never read here:
    # setting the umask to read it would race with other threads creating files)
    handle = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else 0o600)
    try:
        if callable(content):
            os.close(handle)
            content(temp)
        else:
            with os.fdopen(handle, "wb") as out:
                out.write(content.encode("utf-8") if isinstance(content, str) else content)
        if sync:
            descriptor = os.open(temp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        if mode is not None:
            os.chmod(temp, mode)
        _publish(temp, target, replace)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp)


def _publish(temp: str, target: Path, replace: bool) -> None:
    """Give the finished file its name; without ``replace`` only where no file has it."""
    if replace:
        os.replace(temp, target)
        return
    try:
        os.link(temp, target)  # fails if the name exists: nothing is replaced
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        if target.exists():
            raise FileExistsError(str(target)) from None
        os.replace(temp, target)
