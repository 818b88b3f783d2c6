"""Per-step timing of Keras training, and the share of it spent waiting for input.

``step_timer()`` makes a Keras callback. Give it to ``fit()``; afterwards
``timer.report()`` returns plain data: the number of timed steps, the mean and
spread of the step time, the time per training step (one batch), samples per
second, and ``input_wait_share``, the share of the training time spent getting
the next batch.

What is measured on which path (``measure_input="auto"``, gpu_fit()'s way):

- Throughput and time per training step, always: from the timestamps Keras'
  callbacks give at every dispatch (``on_train_batch_begin``, with the index
  of the dispatch's first batch) and at every epoch's end. The batches of a
  dispatch are the difference of two such indices (the last one's, the rest
  of the epoch, at most ``steps_per_execution``); the rows are counted where
  batches are seen, else taken from Keras' own count of the rows it trained
  on (see ``trained_rows``), else batches x ``batch_size``.
- Input wait, timed (TensorFlow with ``steps_per_execution`` 1, JAX with
  any): ``next(iterator)`` timed inside a wrapper of ``train_function``, as
  below.
- Input wait on TensorFlow with ``steps_per_execution`` > 1: Keras takes the
  batches inside one graph (a ``tf.while_loop`` over the iterator), where no
  callback or wrapper can time them without turning the graph loop into a
  Python one. So the wait is not timed; instead, after training, the
  tf.data pipeline is timed alone (``pipeline_seconds``: a fresh iterator,
  for at most ``PROBE_SECONDS``) and ``input_share_alone`` is the share of a
  training step's time it needs per batch. That is what the wait would be if
  the pipeline did not run beside the step at all: an upper bound of it
  where the pipeline runs as fast during training as alone (on a host with
  cores to spare, as a GPU machine's; on a CPU-only machine training takes
  the same cores, and it can be slower). ``gpu_profile()`` measures the wait
  inside the graph. Data that is not a tf.data dataset (a generator) is not
  read again: its wait is then not known.
- Input on the device (a train function marked with ``mark_input_on_device`` by
  a loop that gathers its batches from arrays already in device memory, as
  ``train.resident``'s): nothing to wait for by construction; the share is 0 and
  the method says so. (Timing the iterator of such a function would count the
  token rows Keras is given, one a step: gpu_profile()'s samples per second on
  JAX were a batch size too low.)

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
  is one execution of several batches; ``batch_time_mean_ms`` is the time per
  training step (one batch) all the same.
- ``input_wait_share`` = time in ``next(iterator)`` / total step time. On the
  TensorFlow backend that call returns once a batch is ready (tf.data prepares
  batches on its own threads, so with prefetching the wait is ~0 unless the
  pipeline is slower than the model). Taken from Python, even a ready batch
  costs ~0.2 ms (eager op dispatch; Keras' own step takes it inside its graph
  for ~0.03 ms): 20 % of a 1 ms step. So on TensorFlow the timer measures
  once what ``next()`` takes on an iterator whose batch is always ready (the
  first batch, repeated, in the first step, which compiles and is not timed:
  ``fetch_floor_seconds``) and counts as waiting only the time beyond it, in
  the live line and the report alike (``gpukeras.train.step_ledger``: both
  read one ledger of timed steps, so the report's share is the total of the
  live windows).
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
- Keras' count of rows (``trained_rows``) is read once per epoch, when the
  epoch's training ends (Keras has just read its metrics there, so the
  device is not waited for again). A train step of the user's own that does
  not update Keras' loss tracker leaves it at 0: then rows are batches x
  ``batch_size`` where the batch size is known, else not known.
- The probe of a pipeline reads it once more after training: a seeded
  shuffle then draws one more order, as any further iteration of the same
  dataset does (the order a resumed run needs comes from a fresh dataset in
  a fresh process; see ``gpukeras.data.adapters``). It runs only when an
  epoch ran to its end (``ran_an_epoch``), so a cache the training left
  unfinished is not started again.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gpukeras.core import compat
from gpukeras.core.handles import Callback
from gpukeras.core.runtime import config
from gpukeras.train import step_summary
from gpukeras.train.step_ledger import Ledger, Step, StepRecord

INSTRUMENTED_BACKENDS = ("tensorflow", "jax")
# Calls timed to find what taking an always-ready batch costs (see ready_fetch_seconds).
READY_FETCHES = 25
# The pipeline probe (pipeline_seconds): at most this long and this many batches after the
# first; 64 batches are two of array_source's gathers (32 batches each), so a gather counts.
PROBE_SECONDS = 0.5
PROBE_BATCHES = 64
ON_DEVICE_METHOD = "input on the device (no wait by construction)"


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


def trained_rows(keras: ModuleType, model: object) -> int | None:
    """Rows the model has trained on since Keras last reset its metrics; None where not counted.

    Keras 3's train step (every backend's) updates its loss tracker, the
    ``Mean`` metric named "loss" first in ``model.metrics``, with each batch's
    rows as the weight: its ``count`` variable is the rows of the epoch so far
    (across replicas under a strategy), reset when the epoch begins. Read
    through public attributes only (``model.metrics``, ``Metric.variables``).
    A train step of the user's own that does not update it leaves 0: None.
    """
    for metric in getattr(model, "metrics", None) or []:
        if getattr(metric, "name", None) != "loss":
            continue
        for variable in metric.variables:
            if str(variable.name).rsplit("/", 1)[-1] == "count":
                # numpy(): under a tf.distribute strategy the variable syncs on read (the
                # replicas' sum); its value alone does not convert
                rows = float(variable.numpy())
                return round(rows) if rows > 0 else None
    return None


def pipeline_seconds(
    dataset: object,
    batches_per_epoch: int | None,
    seconds: float = PROBE_SECONDS,
    batches: int = PROBE_BATCHES,
) -> dict[str, Any]:
    """What a tf.data pipeline alone takes per batch, read from Python on a fresh iterator.

    The first batch (the pipeline's start: threads, a shuffle, a first gather)
    and then up to ``batches`` more, for at most about ``seconds``, are timed;
    what ``next()`` takes from Python on a batch that is always ready
    (``ready_fetch_seconds``) is taken off each. ``batch_seconds`` is the
    time per batch over an epoch: the start spread over the epoch's batches
    where their number is known (each epoch starts the pipeline again inside
    Keras' loop), else the rate after the start. The host-to-device copy
    Keras makes inside its step is not in it.

    Returns:
        ``batch_seconds``, ``batches`` (timed, the first included),
        ``start_seconds``, ``floor_seconds``; or only ``reason`` where the
        pipeline could not be read (it failed, or gave nothing).
    """
    try:
        iterator = iter(dataset)  # type: ignore[call-overload]
        started = time.perf_counter()
        first = next(iterator)
        start = time.perf_counter() - started
        count, begun = 0, time.perf_counter()
        while count < batches and time.perf_counter() - begun < seconds:
            try:
                next(iterator)
            except StopIteration:
                break
            count += 1
        rest = time.perf_counter() - begun
    except StopIteration:
        return {"reason": "the pipeline gave no batch"}
    except Exception as error:  # the probe must never fail a fit that has finished
        return {"reason": f"the pipeline failed when read again: {type(error).__name__}"}
    floor = ready_fetch_seconds(first) or 0.0
    start = max(0.0, start - floor)
    steady = max(0.0, rest / count - floor) if count else start
    if batches_per_epoch:
        per_batch = (start + steady * max(0, batches_per_epoch - 1)) / batches_per_epoch
    else:
        per_batch = steady
    return {
        "batch_seconds": per_batch,
        "batches": count + 1,
        "start_seconds": start,
        "floor_seconds": floor,
    }


def _in_graph_method(steps_per_execution: int, then: str) -> str:
    """The method of a TensorFlow run whose batches Keras takes inside its graph loop."""
    return (
        f"input wait not timed: with steps_per_execution {steps_per_execution}, TensorFlow "
        f"takes batches inside Keras' graph loop; {then}"
    )


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
                # of the step before, and so not time between its steps either.
                if step is not None and record.steps and record.steps[-1] is step:
                    record.steps.pop()
                    before = record.steps[-1] if record.steps else None
                    if before is not None and before.epoch == step.epoch:
                        found = time.perf_counter()
                        before.fetch_seconds = (before.fetch_seconds or 0.0) + (found - started)
                        before.returned = found
                raise
        finished = time.perf_counter()
        if keep_first_batch is not None:  # after the fetch: its cost is no wait
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


# The attribute mark_input_on_device() sets on a train function.
_ON_DEVICE_MARK = "gpukeras_input_on_device"


def mark_input_on_device(function: Callable) -> Callable:
    """Mark ``function``, a model's train function, as one whose batches are on the device
    (see the notes): a step timer given to a fit that trains with it times no input, and
    its report says the input waits for nothing by construction. The loop must call the
    timer's callbacks as Keras' fit() does (each dispatch's ``on_train_batch_begin`` with
    its first batch's index, ``params["steps"]`` the batches per epoch), and the timer
    needs the real ``batch_size`` (the batches are not seen)."""
    setattr(function, _ON_DEVICE_MARK, True)
    return function


def step_timer(
    batch_size: int | None = None,
    skip: int = 2,
    measure_input: bool | str = True,
    dataset: object = None,
) -> Callback:
    """A Keras callback timing every train step and the wait for input.

    Args:
        batch_size: rows per batch, for ``samples_per_second`` when batches are
            not seen and Keras counts no rows (see ``step_summary.step_rows``).
        skip: steps left out at the start of the first ``fit()`` it is given to
            (tracing and compiling).
        measure_input: True: time ``next(iterator)`` by wrapping
            ``train_function`` for the length of ``fit()`` (TensorFlow and JAX
            backends); False: do not; "auto": where that leaves Keras' loop as
            it is (not on TensorFlow with ``steps_per_execution`` > 1), and
            elsewhere time ``dataset`` alone after training.
        dataset: the tf.data dataset training reads, for "auto" (None: no
            other data can be read again).

    Returns:
        A ``keras.callbacks.Callback`` with ``report()`` (the ``step_summary.summarize``
        dict), ``record`` (the raw timestamps) and ``reset()``. One timer may
        be given to several ``fit()`` calls; its report covers them all.
    """
    keras = config.keras()

    callback_base: Any = keras.callbacks.Callback

    class StepTimer(callback_base):
        """Timestamps train steps; see ``gpukeras.train.timing``."""

        gpukeras_per_dispatch = True  # times dispatches (fit's _every_batch)

        def __init__(self) -> None:
            super().__init__()
            self.batch_size = batch_size
            self.skip = skip
            self.measure_input = measure_input
            self.record = StepRecord()
            self.ledger = Ledger(skip)
            self._epoch = -1
            self._epochs_seen = 0
            self._probe = False

        def reset(self) -> None:
            """Forget every recorded step."""
            self.record = StepRecord()
            self.ledger = Ledger(self.skip)
            self._epochs_seen = 0

        def on_train_begin(self, logs: dict | None = None) -> None:
            model = self.model
            compat.unwrap_train_function(model, "step_timer")  # left by a fit() that failed
            backend = keras.backend.backend()
            record = self.record
            record.backend = backend
            record.steps_per_execution = int(getattr(model, "steps_per_execution", 1) or 1)
            record.steps_per_epoch = (self.params or {}).get("steps")
            function = getattr(model, "train_function", None)
            in_graph = backend == "tensorflow" and record.steps_per_execution > 1
            self._probe = False
            if getattr(function, _ON_DEVICE_MARK, False):
                record.input_on_device = True
            if record.input_on_device:
                record.method = ON_DEVICE_METHOD
            elif not self.measure_input:
                record.method = "input wait not measured (measure_input=False)"
            elif backend not in INSTRUMENTED_BACKENDS or not callable(function):
                record.method = f"input wait not measured on {backend}"
            elif self.measure_input == "auto" and in_graph:
                self._probe = dataset is not None
                record.method = _in_graph_method(
                    record.steps_per_execution,
                    "the tf.data pipeline is timed alone after training"
                    if self._probe
                    else "this data cannot be read again to time it alone",
                )
            else:
                # The floor is measured once, on the first batch, so the live line and the
                # report subtract the same one from every step.
                keep = (
                    self._measure_floor
                    if backend == "tensorflow" and record.fetch_floor_seconds is None
                    else None
                )
                compat.wrap_train_function(
                    model,
                    "step_timer",
                    lambda inner: _timed_train_function(inner, record, keras.tree.flatten, keep),
                )
                record.method = f"next(iterator) timed inside train_function ({backend} backend)"

        def _measure_floor(self, batch: object) -> None:
            self.record.fetch_floor_seconds = ready_fetch_seconds(batch)

        def on_train_end(self, logs: dict | None = None) -> None:
            compat.unwrap_train_function(self.model, "step_timer")
            if not self._probe:
                return
            if not step_summary.ran_an_epoch(self.record):
                self.record.method = _in_graph_method(
                    self.record.steps_per_execution,
                    "no epoch ran to its end, so the pipeline was not read again",
                )
                return
            probe = pipeline_seconds(dataset, self.record.steps_per_epoch)
            self.record.pipeline = probe
            if "reason" in probe:
                self.record.method = _in_graph_method(
                    self.record.steps_per_execution,
                    f"timing the pipeline alone did not work: {probe['reason']}",
                )

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            # Epochs are numbered across fit() calls, so steps of two calls never
            # measure from one call's last step to the next call's first.
            self._epoch = self._epochs_seen
            self._epochs_seen += 1
            self.record.epoch_begins[self._epoch] = time.perf_counter()

        def _close_epoch(self) -> None:
            if self._epoch in self.record.epoch_ends:
                return
            self.record.epoch_ends[self._epoch] = time.perf_counter()
            rows = trained_rows(keras, self.model)
            if rows is not None:
                self.record.epoch_rows[self._epoch] = rows

        def on_test_begin(self, logs: dict | None = None) -> None:
            # Validation inside fit() runs before on_epoch_end: the epoch's
            # training ends here, after Keras has waited for its results.
            if self._epoch >= 0:
                self._close_epoch()

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self._close_epoch()

        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            self.record.steps.append(
                Step(epoch=self._epoch, begin=time.perf_counter(), first_batch=batch)
            )

        def report(self) -> dict[str, object]:
            """Plain numbers for the steps recorded so far (see ``step_summary.summarize``)."""
            return step_summary.summarize(self.record, self.skip, self.batch_size, self.ledger)

    return StepTimer()
