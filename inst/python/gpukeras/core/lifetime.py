"""A process that ends with the R session that started it, however the session ends.

gpukeras' work outside the session (a background fit, a search job, a worker of gpu_cv()
or gpu_search()) runs in callr processes the session starts. A busy one would outlive a
session that was killed: nothing reads its end of the pipe until its call returns.
``end_with_parent`` asks the kernel for it: on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``
(the process is killed as its parent ends); elsewhere a daemon thread that looks at the
parent every half second. processx's own supervisor (``supervise = TRUE``) does the same
from the session's side, but holds FIFOs open as R connections for the rest of the session,
which ``R CMD check`` counts as connections an example left open.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_WATCHED: set[int] = set()


def _end_now() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    _end_now()


def end_with_parent(parent: int) -> str:
    """End this process (SIGKILL) when its parent, process ``parent``, ends; at once when it
    has ended already. Returns how: ``"prctl"`` (Linux) or ``"thread"``. Asking again for
    the same parent changes nothing."""
    if parent in _WATCHED:
        return "prctl" if sys.platform.startswith("linux") else "thread"
    _WATCHED.add(parent)
    way = "thread"
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
            way = "prctl"
    if os.getppid() != parent:  # it ended before the kernel was asked
        _end_now()
    if way == "thread":
        threading.Thread(target=_watch, args=(parent,), daemon=True, name="gpukeras-parent").start()
    return way
