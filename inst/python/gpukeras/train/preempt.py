"""Stopping training at a scheduler's signal: a backup of the exact step, then a classed error.

A batch scheduler ends a job with SIGTERM (SLURM at the time limit and on
preemption, then SIGKILL after its grace time; Kubernetes the same), often
after a warning signal it is asked for (``sbatch --signal=USR1@120``). R
dies at SIGTERM at once, and all the work since the last backup is lost.
During gpu_fit(), ``handling`` makes each signal the user names only set a
flag; at the next step boundary (``Stop.check``, from a callback's
``on_train_batch_begin`` or the multi-worker loop) training backs up the
exact position (mid-epoch: ``gpukeras.train.backup`` resumes there) and stops with
PreemptedError, which says where the backup is and that the same call
continues from it. Without a backup_dir it stops the same way, with the
model holding the weights trained so far, and says nothing was kept. A
signal that arrives after the last step stops nothing: training completed
(``Stop.received`` tells the caller, which says so).

Signals and R. Python's ``signal.signal`` installs its own C handler, which
sets a flag that Python reads between bytecodes of the main thread (the one
R calls from); ``signal.getsignal`` cannot return a handler installed from C,
such as R's own for SIGUSR1 (save and quit) and SIGUSR2 (quit). So the C
level ``sigaction`` of each signal is saved before (as opaque bytes, with
ctypes) and set back exactly afterwards. Signals R or Python need otherwise
(SIGINT, which is Ctrl-C; SIGCHLD, SIGPIPE, faults) cannot be named.

Several workers. Each worker gets the signal at its own moment, but all must
stop at the same step (their next exchange would wait forever) and back up
together (on JAX reading the state takes every worker; the chief writes
it). So they agree on the flag with a small exchange of two numbers (the
flag and the worker's recent seconds per step): on JAX an all-gather
(``multihost_utils.process_allgather``), on TensorFlow's multi-worker loop
``cluster.Collectives.gather``. Measured with 2 CPU workers on 127.0.0.1 on
a busy 2-core machine (load 5): one exchange took 7.3 ms on TensorFlow
(median of 60; 90th percentile 11.5 ms) and 3.9 ms on JAX (8.0 ms). With
the tests' digits MLP (64-row global batches, steps of tens of ms) an
exchange at every step made a 3-epoch fit 40 % slower on TensorFlow (8.55 s
against 6.11 s) and 6 % on JAX (9.73 s against 9.21; medians of 3
alternating rounds). So the workers exchange about once every
``CHECK_SECONDS``: each exchange sets the number of steps to the next from
the slowest worker's recent seconds per step, the same number on every
worker. That costs about 1 % (7-12 ms a second), and a stop comes within
about a second and a step of the signal. A process training alone reads its
flag at every step, for free.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from gpukeras.core.errors import PreemptedError

# Seconds between the workers' agreements on a stop, about (see the module's notes).
CHECK_SECONDS = 1.0
# At most this many steps between them, whatever the step time.
CHECK_STEPS_MAX = 1000
# Larger than ``struct sigaction`` on every libc (152 bytes on glibc x86-64, 16 on macOS).
SIGACTION_BYTES = 1024


# The C level: sigaction, as R's own handlers need ------------------------------------
def _sigaction() -> Callable[..., int]:
    function = ctypes.CDLL(None, use_errno=True).sigaction
    function.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


def get_action(number: int) -> bytes:
    """The signal's C-level disposition (handler, mask, flags), as opaque bytes."""
    saved = ctypes.create_string_buffer(SIGACTION_BYTES)
    if _sigaction()(number, None, saved) != 0:
        raise OSError(ctypes.get_errno(), f"sigaction({number}) failed")
    return saved.raw


def set_action(number: int, saved: bytes) -> None:
    """Set a disposition ``get_action`` returned back, exactly."""
    action = ctypes.create_string_buffer(saved, SIGACTION_BYTES)
    if _sigaction()(number, action, None) != 0:
        raise OSError(ctypes.get_errno(), f"sigaction({number}) failed")


# The flag, and the stop ------------------------------------------------------------
class Stop:
    """What the handlers saw, and the decision to stop at a step boundary.

    Attributes:
        names: the signals handled.
        received: the first of them that arrived (its name), or None.
        exchange: for several workers, every worker's row from this one's
            ``[flag, seconds per step]`` (an all-gather; the flag is a signal
            number, 0 for none); None where this process trains alone.
    """

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.received: str | None = None
        self.exchange: Callable[[list[float]], object] | None = None
        self._steps = 0
        self._next = 1  # the step count at which the workers next agree
        self._since = (0, time.perf_counter())  # steps and time at the last agreement

    def handler(self, number: int, frame: object) -> None:
        if self.received is None:
            self.received = signal.Signals(number).name

    def check(self) -> str | None:
        """At a step boundary: the signal to stop at, the same on every worker; None to go on."""
        self._steps += 1
        own = int(getattr(signal, self.received)) if self.received else 0
        if self.exchange is None:
            return self.received
        if self._steps < self._next:
            return None
        steps, since = self._since
        now = time.perf_counter()
        per_step = (now - since) / max(1, self._steps - steps)
        rows = np.asarray(self.exchange([float(own), per_step]), dtype=np.float64)
        flag, slowest = int(rows[:, 0].max()), float(rows[:, 1].max())
        self._since = (self._steps, now)
        wait = math.ceil(CHECK_SECONDS / slowest) if slowest > 0 else 1
        self._next = self._steps + min(CHECK_STEPS_MAX, max(1, wait))
        return signal.Signals(flag).name if flag else None


@contextlib.contextmanager
def handling(names: list[str]) -> Iterator[Stop]:
    """Handle ``names`` (full names, as gpu_fit() checks them in R: ``handled_signals`` in
    R/fit.R) while the block runs: each only sets the flag of the Stop yielded; every
    signal's C-level disposition is set back exactly afterwards. Nothing is handled off the
    main thread (Python allows handlers only there)."""
    stop = Stop(names)
    if not names or threading.current_thread() is not threading.main_thread():
        stop.names = []
        yield stop
        return
    saved: list[tuple[int, Any, bytes | None]] = []  # a handler, or None for one set from C
    posix = os.name == "posix"  # elsewhere no sigaction (nor handlers R installs from C)
    try:
        for name in names:
            number = int(getattr(signal, name))
            action = get_action(number) if posix else None
            before = signal.getsignal(number)
            signal.signal(number, stop.handler)
            saved.append((number, before, action))
        yield stop
    finally:
        for number, before, action in reversed(saved):
            # Python's record of the handler first (None: one set from C, as R's, which
            # Python cannot set; ignoring meanwhile loses a signal rather than dying of it),
            # then the C level as it was.
            signal.signal(number, before if before is not None else signal.SIG_IGN)
            if action is not None:
                set_action(number, action)


def jax_exchange() -> Callable[[list[float]], object] | None:
    """``Stop.exchange`` between JAX processes training together; None for one process."""
    jax = sys.modules.get("jax")
    if jax is None or not jax.distributed.is_initialized() or jax.process_count() < 2:
        return None
    from jax.experimental import multihost_utils

    def exchange(row: list[float]) -> object:
        return multihost_utils.process_allgather(np.array(row, dtype=np.float32))

    return exchange


def stopped(received: str, epoch: int, batches_done: int, backup_dir: str | None) -> PreemptedError:
    """The error that ends a fit stopped at ``received`` (see the module's notes)."""
    where = f"in epoch {epoch + 1}, after {batches_done} of its batches"
    if backup_dir is None:
        return PreemptedError(
            f"Training stopped at {received} {where}. No backup_dir was given, so no backup "
            "holds this step: the model has the weights trained so far. Give gpu_fit() a "
            "backup_dir to continue after such a stop."
        )
    return PreemptedError(
        f"Training stopped at {received} {where}; the backup in {backup_dir} holds this step. "
        "Run the same gpu_fit() call again, with the same backup_dir, to continue from "
        "there: it ends with the weights of an unbroken run."
    )


def callback(keras: object, stop: Stop, saver: object | None, backup_dir: str | None) -> object:
    """A Keras callback that, at each batch's beginning, backs up and stops if ``stop`` says
    so (``saver``: the run's ``gpukeras.train.backup`` callback, or None without backup_dir)."""

    class StopAtSignal(keras.callbacks.Callback):  # type: ignore[name-defined]
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.epoch = epoch

        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            received = stop.check()
            if received is None:
                return
            model = self.model
            if saver is not None:
                saver.save_now()  # type: ignore[attr-defined]
                batch = saver.batches_done  # type: ignore[attr-defined]
            elif hasattr(model, "jax_state_sync"):
                model.jax_state_sync()  # the weights trained so far, into the model
            raise stopped(received, self.epoch, batch, backup_dir)

    return StopAtSignal()
