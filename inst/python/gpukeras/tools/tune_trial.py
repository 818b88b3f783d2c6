"""A trial of gpu_tune(): one combination of settings (precision, batch size, steps per
execution, XLA) trained on a fresh copy of the model, timed, and judged.

The copy trains with Keras' own ``fit()`` on the data's rows (the
first rows, repeated to whole executions; a dataset gives its first batch,
so a pipeline's own speed is not part of it), on the device where gpu_fit()
would train arrays there (``gpukeras.train.resident``; ``steps_per_execution`` is
then its steps per dispatch), timed by gpu_fit()'s monitor
(``timing.step_timer``): samples per second over the steps after the first
``WARMUP_EXECUTIONS`` executions, which hold tracing and compiling. It stops
at its share of what is left of ``time_budget``, less the mean cost of a
run's copying, compiling and warm-up so far (after at least ``MIN_TIMED``
timed executions; a run the budget cannot pay that cost for is skipped), or
early when, a quarter of its share in, it runs at less than ``SLOWER_SHARE``
of the best rate so far: it is clearly slower, and the rest of the budget is
better spent elsewhere.

Numerics. A trial is sound when every loss it logged and every weight it
ended with is finite, and, under loss scaling (mixed_float16), when overflows
skipped at most ``MAX_SKIPPED_SHARE`` of its steps. Keras' dynamic loss scale
halves on every overflow and grows only every 2,000 good steps, so over a
shorter trial the number of overflows is log2(initial scale / final scale).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gpukeras.core import compat
from gpukeras.core.handles import Callback, Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import adapters
from gpukeras.data.feed import feed
from gpukeras.distribute import jax_cluster
from gpukeras.tools import batch_size
from gpukeras.train import model_copies, timing
from gpukeras.train import resident as resident_loop

WARMUP_EXECUTIONS = 2
MIN_TIMED = 3
SLOWER_SHARE = 0.5
MAX_SKIPPED_SHARE = 0.25
# Rows of data a trial repeats at most per epoch (each trial has its own copy of them).
MAX_TRIAL_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Combination:
    """One set of settings to try."""

    precision: str
    batch_size: int
    steps_per_execution: int
    jit_compile: bool


@dataclass
class Trial:
    """One combination trained and measured (see the module's notes).

    Attributes:
        axis: the axis this trial varied ("baseline" for the first).
        samples_per_second: over the timed executions; None when none was timed.
        samples: rows trained in all.
        loss: mean training loss over the first ``loss_samples`` rows (set at the end).
        finite: every logged loss and final weight finite.
        overflows: loss-scale overflows (steps skipped); None without loss scaling.
        sound: finite, and few enough overflows.
        stopped_early: stopped as clearly slower than the best so far.
        note: what was unsound, or why it stopped.
        data: where the rows were: "device" (``gpukeras.train.resident``) or "host".
        steps_per_epoch: batches of this size in one pass over the data (None where not
            known).
    """

    precision: str
    batch_size: int
    steps_per_execution: int
    jit_compile: bool
    axis: str
    samples_per_second: float | None = None
    samples: int = 0
    loss: float | None = None
    finite: bool = True
    overflows: int | None = None
    sound: bool = True
    stopped_early: bool = False
    seconds: float = 0.0
    note: str | None = None
    data: str = "host"
    steps_per_epoch: int | None = None
    losses: list[tuple[int, float]] = field(default_factory=list, repr=False)

    def combination(self) -> Combination:
        return Combination(
            self.precision, self.batch_size, self.steps_per_execution, self.jit_compile
        )


# A trial ----------------------------------------------------------------------
def _watch(keras: Any, rows_per_execution: int, trial: Trial, limits: Record) -> Callback:
    """A callback that keeps each execution's loss and stops the fit (see the module)."""

    class Watch(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.means: list[tuple[int, Any]] = []  # (batches into the epoch, running mean)
            self.in_epoch = 0
            self.executions = 0
            self.timed_from: float | None = None
            self.timed_until: float | None = None

        def on_epoch_begin(self, epoch: int, logs: Record | None = None) -> None:
            self.in_epoch = 0

        def on_train_batch_end(self, batch: int, logs: Record | None = None) -> None:
            # The running mean is kept unread (reading it would wait for the device).
            self.in_epoch += rows_per_execution
            self.means.append((self.in_epoch, (logs or {}).get("loss")))
            self.executions += 1
            now = time.perf_counter()
            if self.executions == WARMUP_EXECUTIONS:
                self.timed_from = now
            self.timed_until = now
            timed = self.executions - WARMUP_EXECUTIONS
            if timed < MIN_TIMED or self.timed_from is None:
                return
            rate = timed * rows_per_execution / max(now - self.timed_from, 1e-9)
            best = limits["best_rate"]
            # Judged once a quarter of the trial's time is timed: a few short steps are noise.
            judged = now - self.timed_from >= 0.25 * (limits["deadline"] - self.timed_from)
            if best is not None and judged and rate < SLOWER_SHARE * best:
                trial.stopped_early = True
                trial.note = f"stopped early: under {SLOWER_SHARE:.0%} of the best rate so far"
                self.model.stop_training = True
            elif now >= limits["deadline"]:
                self.model.stop_training = True

        def execution_losses(self) -> list[tuple[int, float]]:
            """(rows, mean loss) of each execution, from Keras' running means."""
            out, before = [], (0, 0.0)
            for rows, mean in self.means:
                value = float(mean) if mean is not None else math.nan
                done, previous = before if rows > before[0] else (0, 0.0)
                out.append((rows - done, (rows * value - done * previous) / (rows - done)))
                before = (rows, value)
            return out

    return Watch()


def _overflows(copy: Model, batches: int) -> int | None:
    """Loss-scale overflows in a trial of ``batches`` steps; None without loss scaling."""
    optimizer = copy.optimizer
    scale = getattr(optimizer, "dynamic_scale", None)
    if scale is None:
        return None
    initial = float(optimizer.initial_scale)
    final = float(np.asarray(scale))
    if batches >= int(optimizer.dynamic_growth_steps) or final <= 0:
        return None  # the scale may have grown meanwhile: overflows not countable
    return max(0, round(math.log2(initial / final)))


def run_trial(
    model: Model,
    parts: tuple[object, ...],
    combination: Combination,
    axis: str,
    limits: Record,
) -> Trial:
    """Train a fresh copy of ``model`` with ``combination`` and measure it."""
    keras = config.keras()
    trial = Trial(**asdict(combination), axis=axis)
    started = time.perf_counter()
    copy = model_copies.clone(
        keras, model, "gpu_tune()", weights=True, policy=combination.precision
    )
    copy.steps_per_execution = combination.steps_per_execution
    # Keras turns it off where XLA cannot run
    trial.jit_compile = compat.set_jit_compile(copy, combination.jit_compile)
    per_execution = combination.batch_size * combination.steps_per_execution
    row_bytes = sum(np.asarray(a).nbytes / len(a) for a in keras.tree.flatten(parts))
    executions = max(1, min(8, int(MAX_TRIAL_BYTES // max(1.0, row_bytes * per_execution))))
    rows = batch_size.rows_of(parts, per_execution * executions)
    # the trial's rows, in order, as gpu_fit() feeds them (on the device where they go there)
    context = adapters.FeedContext(
        keras.backend.backend(),
        batch_size=combination.batch_size,
        seed=0,
        shuffle=False,
        jit_compile=trial.jit_compile,
        several_processes=jax_cluster.multi_process(),
    )
    with batch_size.refused_as_bad_data(combination.batch_size):
        adapter = feed(copy, rows, None, context)
    on_device = None
    if isinstance(adapter, adapters.ResidentAdapter):
        trial.data = "device"
        on_device = resident_loop.ResidentLoop(adapter.device_rows)
        on_device.install(copy, combination.steps_per_execution)
    timer: Callback = timing.step_timer(
        # on the device, batches are not seen: the rows come from the batch size
        batch_size=combination.batch_size,
        skip=WARMUP_EXECUTIONS,
    )
    watch = _watch(keras, per_execution, trial, limits)
    callbacks = [timer, watch] + ([on_device.callback(keras)] if on_device is not None else [])
    with batch_size.refused_as_bad_data(combination.batch_size, active=limits["first"]):
        copy.fit(
            **adapter.fit_args,
            epochs=10**9,
            verbose=0,
            callbacks=callbacks,
        )
    limits["first"] = False
    trial.seconds = time.perf_counter() - started
    timed = (watch.timed_until or 0.0) - (watch.timed_from or 0.0)
    limits["overheads"].append(trial.seconds - timed)
    trial.losses = watch.execution_losses()
    trial.samples = sum(rows for rows, _ in trial.losses)
    trial.samples_per_second = timer.report()["samples_per_second"]
    weights_finite = all(
        np.isfinite(np.asarray(w, dtype=np.float64)).all() for w in copy.get_weights()
    )
    losses_finite = all(math.isfinite(loss) for _, loss in trial.losses)
    trial.finite = weights_finite and losses_finite
    trial.overflows = _overflows(copy, trial.samples // combination.batch_size)
    problems = []
    if not losses_finite:
        problems.append("the loss became NaN or infinite")
    if not weights_finite:
        problems.append("weights became NaN or infinite")
    batches = max(1, trial.samples // combination.batch_size)
    if trial.overflows is not None and trial.overflows > MAX_SKIPPED_SHARE * batches:
        problems.append(f"loss scaling overflowed on {trial.overflows} of {batches} steps")
    if problems:
        trial.sound = False
        trial.note = "unsound: " + "; ".join(problems)
    return trial
