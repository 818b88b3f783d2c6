"""Per-step timing of Keras training, and the share of it spent waiting for input.

``step_timer()`` makes a Keras callback. Give it to ``fit()``; afterwards
``timer.report()`` returns plain data: the number of timed steps, the mean and
spread of the step time, samples per second, and ``input_wait_share``, the
share of the training time spent getting the next batch.

Where the wait is, in Keras 3 (read from keras/src/backend/*/trainer.py and
measured): on the TensorFlow and JAX backends the next batch is taken from the
iterator *inside* ``model.train_function``, between ``on_train_batch_begin``
and ``on_train_batch_end``. The gap between one batch's end and the next
batch's begin therefore holds only Keras' loop and the other callbacks, not the
input: a pipeline sleeping 20 ms per batch makes the steps 20 ms longer and
leaves the gap as it was. So the timer wraps ``model.train_function`` for the
length of ``fit()`` and times the ``next(iterator)`` itself (the same call
Keras makes, done just before it, handing Keras the batch it got), then
restores the original function in ``on_train_end``.

What the numbers mean, and their limits:

- A step is the time from one ``on_train_batch_begin`` to the next (to the
  end of the epoch for the last step of an epoch): input wait, the train step,
  the other callbacks and Keras' loop. With ``steps_per_execution > 1`` a step
  is one execution of several batches.
- ``input_wait_share`` = time in ``next(iterator)`` / total step time. On the
  TensorFlow backend that call returns once a batch is ready (tf.data prepares
  batches on its own threads, so with prefetching the wait is ~0 unless the
  pipeline is slower than the model). Taken from Python, even a ready batch
  costs ~0.2 ms (eager op dispatch; Keras' own step takes it inside its graph
  for ~0.03 ms): 20 % of a 1 ms step. So on TensorFlow the timer measures
  once per ``fit()`` what ``next()`` takes on an iterator whose batch is
  always ready (its first batch, repeated, after training:
  ``fetch_floor_seconds``) and counts as waiting only the time beyond it.
  On JAX the call also runs the host-side batch preparation of Keras' data
  adapters (slicing NumPy arrays, ``device_put``), work the step needs,
  counted whole.
- Where the device computes asynchronously (JAX; TensorFlow on a GPU), the
  host may fetch the next batch while the device still runs the previous
  step: the share is then an upper bound of the device's idle time due to
  input. Per-step times are then host (dispatch) times and their spread is not
  the device's; the total, which ends at the epoch's end (where Keras waits
  for the results), and so ``samples_per_second``, stay exact.
- ``between_steps_share`` is the brief gap the other way round: from
  ``train_function`` returning to the next step's begin (callbacks, turning
  logs into numbers, Keras' loop).
- The first ``skip`` steps of the fit are left out (tracing and compiling).
  So is the first step with each batch size not seen before, when batches
  are seen (``measure_input=True``): a last, smaller batch makes JAX compile
  the step again, and TensorFlow trace it again when the timer hands Keras
  the batch (~0.15 s on a small model: a whole short fit's worth of steps).
- The timer's own cost is two ``perf_counter`` calls and one Python call per
  step (tens of microseconds). With TensorFlow, handing Keras a fetched batch
  runs the step through its per-batch ``tf.function`` rather than the one that
  also reads the iterator; with ``steps_per_execution > 1`` that is a Python
  loop over batches instead of a graph loop.
- Only the TensorFlow and JAX backends are instrumented; on others (and with
  ``measure_input=False``) step times and throughput are reported and
  ``input_wait_share`` is ``None``. The callback never overrides
  ``on_train_batch_end``, so Keras keeps dispatching other callbacks
  asynchronously where it would.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpukeras import compat
from gpukeras.runtime import config

INSTRUMENTED_BACKENDS = ("tensorflow", "jax")
# Calls timed to find what taking an always-ready batch costs (see ready_fetch_seconds).
READY_FETCHES = 25


@dataclass
class Step:
    """One train step (one execution) as the timer saw it.

    Attributes:
        epoch: the epoch it ran in.
        begin: ``perf_counter()`` at ``on_train_batch_begin``.
        fetch_seconds: seconds in ``next(iterator)``; None when not measured.
        returned: ``perf_counter()`` when ``train_function`` returned; None when
            not measured.
        samples: rows in the batch(es) it trained on; None when not known.
    """

    epoch: int
    begin: float
    fetch_seconds: float | None = None
    returned: float | None = None
    samples: int | None = None


@dataclass
class StepRecord:
    """Everything a timer recorded in one or more ``fit()`` calls."""

    steps: list[Step] = field(default_factory=list)
    epoch_begins: dict[int, float] = field(default_factory=dict)
    epoch_ends: dict[int, float] = field(default_factory=dict)
    steps_per_execution: int = 1
    backend: str | None = None
    method: str = "not run"
    fetch_floor_seconds: float | None = None


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _samples(steps: Sequence[Step], batch_size: int | None, per_step: int) -> int | None:
    """Rows the steps trained on: counted where seen, else steps x batch size."""
    if all(step.samples is not None for step in steps):
        return sum(step.samples for step in steps)  # type: ignore[misc]
    if batch_size is not None:
        return len(steps) * batch_size * per_step
    return None


def _epochs_wall(record: StepRecord, batch_size: int | None) -> tuple[float | None, float | None]:
    """Seconds the finished epochs took on the wall clock, and samples/s over them.

    Every step counts here, compiling and stalls included (TensorFlow 2.21
    sometimes stalls seconds at the end of training): the rate a user sees
    from the clock, beside the steady step-time rate.
    """
    finished = [epoch for epoch in record.epoch_begins if epoch in record.epoch_ends]
    seconds = sum(record.epoch_ends[epoch] - record.epoch_begins[epoch] for epoch in finished)
    if not finished or seconds <= 0:
        return None, None
    steps = [step for step in record.steps if step.epoch in finished]
    samples = _samples(steps, batch_size, record.steps_per_execution)
    return seconds, samples / seconds if samples is not None else None


def summarize(
    record: StepRecord, skip: int = 2, batch_size: int | None = None
) -> dict[str, object]:
    """Turn recorded timestamps into plain numbers (see the module's notes).

    Args:
        record: what the timer recorded.
        skip: steps left out at the start (tracing and compiling).
        batch_size: rows per batch, used for ``samples_per_second`` when the
            batches were not seen (``measure_input=False``).

    Returns:
        ``steps`` (timed), ``skipped``, ``new_batch_size_steps`` (left out,
        see the module's notes), ``seconds`` (their total),
        ``step_time_mean_ms``, ``step_time_sd_ms``, ``input_wait_share``,
        ``input_wait_mean_ms`` (both beyond ``fetch_floor_ms``, the time
        taking a ready batch took), ``between_steps_share``, ``samples``,
        ``samples_per_second``, ``epochs_wall_seconds`` and
        ``wall_samples_per_second`` (over the finished epochs' wall time,
        every step included), ``steps_per_execution``, ``backend`` and
        ``method``; numbers that cannot be known are None.
    """
    wall_seconds, wall_rate = _epochs_wall(record, batch_size)
    timed = record.steps[skip:]
    result: dict[str, object] = {
        "steps": len(timed),
        "skipped": min(skip, len(record.steps)),
        "new_batch_size_steps": 0,
        "seconds": None,
        "step_time_mean_ms": None,
        "step_time_sd_ms": None,
        "input_wait_share": None,
        "input_wait_mean_ms": None,
        "fetch_floor_ms": None,
        "between_steps_share": None,
        "samples": None,
        "samples_per_second": None,
        "epochs_wall_seconds": wall_seconds,
        "wall_samples_per_second": wall_rate,
        "steps_per_execution": record.steps_per_execution,
        "backend": record.backend,
        "method": record.method,
    }
    durations: list[float] = []
    for position, step in enumerate(timed):
        following = timed[position + 1] if position + 1 < len(timed) else None
        if following is not None and following.epoch == step.epoch:
            durations.append(following.begin - step.begin)
        elif step.epoch in record.epoch_ends:
            durations.append(record.epoch_ends[step.epoch] - step.begin)
        else:  # fit() stopped inside the epoch: no end to measure this step to
            timed = timed[:position]
            break
    # The first step handed a batch of a size not seen before (a last, smaller
    # batch) compiled the step again for that shape: compile time, left out.
    # (The very first step is ``skip``'s to leave out or not.)
    seen = {step.samples for step in record.steps[: max(skip, 1)]}
    kept: list[tuple[Step, float]] = []
    for step, duration in zip(timed, durations):
        if step.samples is not None and step.samples not in seen:
            seen.add(step.samples)
            continue
        kept.append((step, duration))
    result["new_batch_size_steps"] = len(durations) - len(kept)
    timed = [step for step, _ in kept]
    durations = [duration for _, duration in kept]
    result["steps"] = len(durations)
    if not durations:
        return result
    total = sum(durations)
    mean, sd = _mean_sd(durations)
    result.update(seconds=total, step_time_mean_ms=mean * 1e3, step_time_sd_ms=sd * 1e3)
    fetches = [step.fetch_seconds for step in timed]
    if total > 0 and all(fetch is not None for fetch in fetches):
        floor = (record.fetch_floor_seconds or 0.0) * record.steps_per_execution
        waited = sum((max(0.0, fetch - floor) for fetch in fetches if fetch is not None), 0.0)
        if record.fetch_floor_seconds is not None:
            result["fetch_floor_ms"] = record.fetch_floor_seconds * 1e3
        result["input_wait_share"] = min(1.0, waited / total)
        result["input_wait_mean_ms"] = waited / len(fetches) * 1e3
        between = [
            begin_to_begin - (step.returned - step.begin)  # type: ignore[operator]
            for step, begin_to_begin in zip(timed, durations)
        ]
        result["between_steps_share"] = min(1.0, max(0.0, sum(between) / total))
    samples = _samples(timed, batch_size, record.steps_per_execution)
    if samples is not None:
        result["samples"] = samples
        result["samples_per_second"] = samples / total if total > 0 else None
    return result


def batch_rows(batch: object, flatten: Callable[[object], list]) -> int | None:
    """Rows in a batch: the first dimension of its first array."""
    for part in flatten(batch):
        shape = getattr(part, "shape", None)
        if shape is not None and len(shape) > 0 and shape[0] is not None:
            return int(shape[0])
    return None


def ready_fetch_seconds(batch: object, fetches: int = READY_FETCHES) -> float | None:
    """Seconds ``next()`` takes from Python on a tf.data iterator whose batch is always ready.

    The median of ``fetches`` calls on ``Dataset.from_tensors(batch).repeat()``
    (after one untimed call, which starts the iterator): the fixed cost of
    taking a batch from Python, which is not waiting for the pipeline. None
    when ``batch`` cannot make a dataset (e.g. a distributed batch).
    """
    import tensorflow as tf

    try:
        iterator = iter(tf.data.Dataset.from_tensors(batch).repeat())
    except (TypeError, ValueError):
        return None
    next(iterator)
    times = []
    for _ in range(fetches):
        started = time.perf_counter()
        next(iterator)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _timed_train_function(
    original: Callable,
    record: StepRecord,
    flatten: Callable[[object], list],
    keep_first_batch: Callable[[object], None] | None = None,
) -> Callable:
    """``train_function`` that takes the batch(es) from the iterator itself, timed.

    The iterator is the last positional argument (TensorFlow: ``(iterator)``;
    JAX: ``(state, iterator)``). Keras then gets an iterator over the batches
    already taken, and raises StopIteration as before when none is left.
    ``keep_first_batch`` is given the first batch taken.
    """

    def timed(*args: object) -> object:
        nonlocal keep_first_batch
        *leading, iterator = args
        step = record.steps[-1] if record.steps else None
        batches: list[object] = []
        started = time.perf_counter()
        try:
            for _ in range(record.steps_per_execution):
                batches.append(next(iterator))  # type: ignore[call-overload]
        except StopIteration:
            if not batches:
                # A source of unknown length ran out: Keras began a step that
                # never runs. Drop it; the time spent finding out is input wait
                # of the step before.
                if step is not None and record.steps and record.steps[-1] is step:
                    record.steps.pop()
                    before = record.steps[-1] if record.steps else None
                    if before is not None and before.epoch == step.epoch:
                        before.fetch_seconds = (before.fetch_seconds or 0.0) + (
                            time.perf_counter() - started
                        )
                raise
        finished = time.perf_counter()
        if keep_first_batch is not None:
            keep_first_batch(batches[0])
            keep_first_batch = None
        out = original(*leading, iter(batches))
        if step is not None:
            step.fetch_seconds = finished - started
            step.returned = time.perf_counter()
            rows = [batch_rows(batch, flatten) for batch in batches]
            step.samples = None if None in rows else sum(rows)  # type: ignore[arg-type]
        return out

    return timed


def step_timer(batch_size: int | None = None, skip: int = 2, measure_input: bool = True) -> object:
    """A Keras callback timing every train step and the wait for input.

    Args:
        batch_size: rows per batch, for ``samples_per_second`` when batches are
            not seen (``measure_input=False``); otherwise rows are counted.
        skip: steps left out at the start of the first ``fit()`` it is given to
            (tracing and compiling).
        measure_input: time ``next(iterator)`` by wrapping ``train_function``
            for the length of ``fit()`` (TensorFlow and JAX backends).

    Returns:
        A ``keras.callbacks.Callback`` with ``report()`` (the ``summarize``
        dict), ``record`` (the raw timestamps) and ``reset()``. One timer may
        be given to several ``fit()`` calls; its report covers them all.
    """
    keras = config.keras()

    callback_base: Any = keras.callbacks.Callback

    class StepTimer(callback_base):
        """Timestamps train steps; see ``gpukeras.timing``."""

        def __init__(self) -> None:
            super().__init__()
            self.batch_size = batch_size
            self.skip = skip
            self.measure_input = measure_input
            self.record = StepRecord()
            self._epoch = -1
            self._epochs_seen = 0
            self._first_batch: object = None

        def reset(self) -> None:
            """Forget every recorded step."""
            self.record = StepRecord()
            self._epochs_seen = 0

        def on_train_begin(self, logs: dict | None = None) -> None:
            model = self.model
            compat.unwrap_train_function(model, "step_timer")  # left by a fit() that failed
            backend = keras.backend.backend()
            self.record.backend = backend
            self.record.steps_per_execution = int(getattr(model, "steps_per_execution", 1) or 1)
            function = getattr(model, "train_function", None)
            if not self.measure_input:
                self.record.method = "step times only (measure_input=False)"
            elif backend not in INSTRUMENTED_BACKENDS or not callable(function):
                self.record.method = f"step times only (input wait not measured on {backend})"
            else:
                keep = self._keep_batch if backend == "tensorflow" else None
                compat.wrap_train_function(
                    model,
                    "step_timer",
                    lambda inner: _timed_train_function(
                        inner, self.record, keras.tree.flatten, keep
                    ),
                )
                self.record.method = (
                    f"next(iterator) timed inside train_function ({backend} backend)"
                )

        def _keep_batch(self, batch: object) -> None:
            self._first_batch = batch

        def on_train_end(self, logs: dict | None = None) -> None:
            compat.unwrap_train_function(self.model, "step_timer")
            # Measured after training, so no timed step includes it.
            if self._first_batch is not None:
                self.record.fetch_floor_seconds = ready_fetch_seconds(self._first_batch)
                self._first_batch = None

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            # Epochs are numbered across fit() calls, so steps of two calls never
            # measure from one call's last step to the next call's first.
            self._epoch = self._epochs_seen
            self._epochs_seen += 1
            self.record.epoch_begins[self._epoch] = time.perf_counter()

        def _close_epoch(self) -> None:
            self.record.epoch_ends.setdefault(self._epoch, time.perf_counter())

        def on_test_begin(self, logs: dict | None = None) -> None:
            # Validation inside fit() runs before on_epoch_end: the epoch's
            # training ends here, after Keras has waited for its results.
            if self._epoch >= 0:
                self._close_epoch()

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self._close_epoch()

        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            self.record.steps.append(Step(epoch=self._epoch, begin=time.perf_counter()))

        def report(self) -> dict[str, object]:
            """Plain numbers for the steps recorded so far (see ``summarize``)."""
            return summarize(self.record, self.skip, self.batch_size)

    return StepTimer()
