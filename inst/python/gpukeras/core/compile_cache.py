"""JAX's persistent compilation cache, kept per user: what XLA compiles once is loaded
by the session, its workers and later sessions instead of compiled again.

R names the folder as the core starts (``choose``: a private folder in the user's
cache, unless the user turned it off or named another); it takes effect as JAX starts
(``apply``, from ``config.keras()``), or at once where JAX has started. A cache the user
set for JAX themselves (``JAX_COMPILATION_CACHE_DIR`` or ``jax_compilation_cache_dir``)
is theirs: gpukeras then sets none. Entries past the size bound go least recently used
first (JAX's own ``LRUCache``, which needs the ``filelock`` package; without it the
cache is unbounded, and ``describe`` says so).

Every program is cached, however short its compile (JAX keeps only those over a second
by default, and a small model's all take less): a fresh process otherwise compiles
every program again, where a session fitting the same model again finds them in memory.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import sys
from dataclasses import dataclass, field
from typing import Any

# JAX's events for a compile that consulted the persistent cache, and for one it found
# there (jax._src.compiler records them; public through jax.monitoring).
_REQUESTS = "/jax/compilation_cache/compile_requests_use_cache"
_HITS = "/jax/compilation_cache/cache_hits"
# What JAX writes in a cache folder: entries, their access times, the eviction lock and
# XLA's own caches on a GPU (its kernels, its per-fusion autotuning), named xla_*.
_ENTRY_SUFFIXES = ("-cache", "-atime")
_LOCK_FILE = ".lockfile"
_XLA_PREFIX = "xla_"


@dataclass
class CacheState:
    """The cache chosen for this process and what it did.

    Attributes:
        folder: gpukeras' folder (None: turned off, or found to be another user's).
        max_bytes: the size bound, least recently used entries removed past it.
        why: why gpukeras keeps no cache, where it keeps none.
        users_own: the user's own JAX cache folder, as ``apply`` found it.
        applied: whether ``apply`` ran (JAX started).
        counts: JAX's cache requests and hits in this process since ``apply``.
    """

    folder: str | None = None
    max_bytes: int = -1
    why: str = "the core has not started"
    users_own: str | None = None
    applied: bool = False
    counts: dict[str, int] = field(default_factory=lambda: {"requests": 0, "hits": 0})


state = CacheState()


def _users_own() -> str | None:
    """The cache folder the user set for JAX (its config where JAX has started, else its
    variable), or None; after ``apply``, what it found then."""
    if state.applied:
        return state.users_own
    jax = sys.modules.get("jax")
    if jax is not None and jax.config.jax_compilation_cache_dir:
        return str(jax.config.jax_compilation_cache_dir)
    return os.environ.get("JAX_COMPILATION_CACHE_DIR") or None


def _private_folder(folder: str) -> bool:
    """Make ``folder`` (and its parents) where missing, readable by its owner alone;
    False where it is there but another user's."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    info = os.stat(folder)
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return False
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(folder, 0o700)
    return True


def _bounded() -> bool:
    return state.max_bytes >= 0 and importlib.util.find_spec("filelock") is not None


def choose(folder: str | None, max_bytes: float) -> dict[str, Any]:
    """Use ``folder`` (None: none) as this process' JAX compilation cache, bounded to
    ``max_bytes`` (-1: unbounded); applied now where JAX has started, else as it starts
    (the folder is made then: a process on TensorFlow makes none). What ``describe`` says."""
    state.folder, state.max_bytes, state.why = folder, int(max_bytes), ""
    if folder is None:
        state.why = "turned off (option gpukeras.compile_cache or GPUKERAS_COMPILE_CACHE)"
    if "jax" in sys.modules:
        apply()
    return describe()


def _count(event: str, **_: Any) -> None:
    if event == _REQUESTS:
        state.counts["requests"] += 1
    elif event == _HITS:
        state.counts["hits"] += 1


def apply() -> None:
    """Point JAX at the chosen folder and count its cache requests and hits from now on;
    once, as JAX starts. Nothing is set where the user set a cache of their own, or
    where none was chosen."""
    if state.applied:
        return
    import jax

    state.users_own = _users_own()
    state.applied = True
    jax.monitoring.register_event_listener(_count)
    if state.users_own or state.folder is None:
        return
    if not _private_folder(state.folder):
        state.folder, state.why = None, f"{state.folder} belongs to another user"
        return
    jax.config.update("jax_compilation_cache_max_size", state.max_bytes if _bounded() else -1)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_compilation_cache_dir", state.folder)


def _files(folder: str) -> tuple[int, int]:
    """The number of compiled programs in ``folder`` and the bytes of all JAX keeps there."""
    programs = size = 0
    for root, _, files in os.walk(folder):
        for name in files:
            size += os.path.getsize(os.path.join(root, name))
            programs += root == folder and name.endswith(_ENTRY_SUFFIXES[0])
    return programs, size


def describe() -> dict[str, Any]:
    """The cache as a user asks after it: ``folder`` (the one JAX uses or will use; None
    when none), ``whose`` ("gpukeras", "user" or "off"), ``why`` (where not gpukeras'),
    ``programs`` and ``bytes`` kept there, ``max_bytes`` (-1: unbounded; the user's own
    cache is bounded as they set it) and, in this process since JAX started,
    ``jax_started``, ``requests``, ``hits`` and ``misses``."""
    own = _users_own()
    folder = own or state.folder
    programs, size = _files(folder) if folder and os.path.isdir(folder) else (0, 0)
    requests, hits = state.counts["requests"], state.counts["hits"]
    return {
        "folder": folder,
        "whose": "user" if own else ("gpukeras" if state.folder else "off"),
        "why": "the user's own (JAX_COMPILATION_CACHE_DIR)" if own else state.why,
        "programs": programs,
        "bytes": size,
        "max_bytes": state.max_bytes if not own and _bounded() else -1,
        "jax_started": state.applied,
        "requests": requests,
        "hits": hits,
        "misses": requests - hits,
    }


def clear(folder: str) -> dict[str, Any]:
    """Remove what JAX keeps in gpukeras' cache ``folder`` (its entries, their access
    times, its lock and XLA's caches) and nothing else there: ``files`` and ``bytes``
    removed. Programs this process loaded stay in its memory."""
    files = size = 0
    if os.path.isdir(folder):
        for entry in os.scandir(folder):
            name = entry.name
            jaxs = name.startswith(_XLA_PREFIX) or name.endswith(_ENTRY_SUFFIXES)
            if not (jaxs or name == _LOCK_FILE):
                continue
            if entry.is_dir(follow_symlinks=False):
                for root, _, names in os.walk(entry.path):
                    files += len(names)
                    size += sum(os.path.getsize(os.path.join(root, n)) for n in names)
                shutil.rmtree(entry.path)
            elif entry.is_file(follow_symlinks=False):
                size += entry.stat().st_size
                os.remove(entry.path)
                files += 1
    return {"files": files, "bytes": size, "folder": folder}
