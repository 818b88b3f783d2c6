"""What the step timer records, and the one ledger of timed steps that the live line and the
report both read.

``StepRecord`` holds the timer's raw timestamps (``gpukeras.train.timing``). A
``Ledger`` turns them into timed steps, each accounted once, as soon as its
length is final: how long it took (from its begin to the next step's begin, or
to its epoch's end) and how long of that it waited for input (beyond what
taking an always-ready batch costs, ``StepRecord.fetch_floor_seconds``). The
live ``input_wait_%`` column shows a window of these entries (the recent steps,
or the epoch just ended) and the report's ``input_wait_share`` is the same sum
over all of them: the report's share is the total of the live windows, by
construction, never a second measurement.

Which steps count: the first ``skip`` (tracing and compiling) do not, nor the
first step with each batch size not seen before (a last, smaller batch makes
the step compile again for its shape), nor a step whose length cannot be known
(the last one of a fit() that failed inside its epoch).

The margin (``share_margin``) says how far the run's share could be from the
share the same steps would give over and over: the timed steps are cut into
``MARGIN_WINDOWS`` consecutive windows at most (``MIN_WINDOW_STEPS`` steps each
at least), and the margin is the 95 % half-width of a ratio of sums from how
much the windows differ (Student's t, their number less one degrees of
freedom), at least ``MARGIN_FLOOR``. Windows, not single steps, because the
waits of neighbouring steps are not independent (a prefetch buffer that runs
dry stays dry for a while).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# The margin's windows: at most this many, of at least this many steps; none with fewer than 3.
MARGIN_WINDOWS = 10
MIN_WINDOW_STEPS = 5
MIN_WINDOWS = 3
# Two-sided 95 % quantiles of Student's t by degrees of freedom (windows less one).
T_975 = {2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
# The smallest margin stated: runs on a shared host differ by more than one point from
# one another even where the windows of one run agree closely.
MARGIN_FLOOR = 0.01


@dataclass
class Step:
    """One train step (one execution) as the timer saw it.

    Attributes:
        epoch: the epoch it ran in.
        begin: ``perf_counter()`` at ``on_train_batch_begin``.
        fetch_seconds: seconds in ``next(iterator)``; None when not measured.
        returned: ``perf_counter()`` when ``train_function`` returned, or, where
            the step after it was dropped (it found no batch), when that search
            ended: the search is this step's input wait, not time between steps.
            None when not measured.
        samples: rows in the batch(es) it trained on, where they were seen.
        first_batch: Keras' index of its first batch in the epoch (None when
            not given: the step is then ``steps_per_execution`` batches).
    """

    epoch: int
    begin: float
    fetch_seconds: float | None = None
    returned: float | None = None
    samples: int | None = None
    first_batch: int | None = None


@dataclass
class StepRecord:
    """Everything a timer recorded in one or more ``fit()`` calls.

    Attributes (beyond the obvious): ``steps_per_epoch``: batches per epoch
    where Keras knows them; ``epoch_rows``: rows Keras counted per epoch
    (``trained_rows``); ``input_on_device``: the batches were in device
    memory already; ``pipeline``: ``pipeline_seconds``' result, where run.
    """

    steps: list[Step] = field(default_factory=list)
    epoch_begins: dict[int, float] = field(default_factory=dict)
    epoch_ends: dict[int, float] = field(default_factory=dict)
    steps_per_execution: int = 1
    backend: str | None = None
    method: str = "not run"
    fetch_floor_seconds: float | None = None
    steps_per_epoch: int | None = None
    epoch_rows: dict[int, int] = field(default_factory=dict)
    input_on_device: bool = False
    pipeline: dict[str, Any] | None = None


@dataclass(frozen=True)
class Timed:
    """One step the ledger accounted.

    Attributes:
        index: its position in ``StepRecord.steps``.
        epoch: the epoch it ran in.
        seconds: from its begin to the next step's begin, or to its epoch's end.
        waited: seconds of it spent waiting for input beyond the fetch floor;
            None where the wait was not timed.
    """

    index: int
    epoch: int
    seconds: float
    waited: float | None


def totals(entries: Sequence[Timed]) -> tuple[float, float] | None:
    """Seconds waited and seconds in all over ``entries``; None when there are none, or the
    wait of one was not timed."""
    if not entries or any(entry.waited is None for entry in entries):
        return None
    waited = math.fsum(entry.waited for entry in entries)  # type: ignore[misc]
    return waited, math.fsum(entry.seconds for entry in entries)


def share(entries: Sequence[Timed]) -> float | None:
    """The share of the steps' time spent waiting for input (at most 1); None where not known."""
    summed = totals(entries)
    if summed is None or summed[1] <= 0:
        return None
    return min(1.0, summed[0] / summed[1])


def share_margin(entries: Sequence[Timed]) -> float | None:
    """The 95 % margin of ``share(entries)`` from window-to-window variation (see the module's
    notes); None with fewer than ``MIN_WINDOWS`` windows of ``MIN_WINDOW_STEPS`` steps."""
    count = min(MARGIN_WINDOWS, len(entries) // MIN_WINDOW_STEPS)
    whole = share(entries)
    if count < MIN_WINDOWS or whole is None:
        return None
    cuts = [round(k * len(entries) / count) for k in range(count + 1)]
    windows = [totals(entries[a:b]) for a, b in zip(cuts, cuts[1:])]
    waits = [window[0] for window in windows if window is not None]
    spans = [window[1] for window in windows if window is not None]
    mean_span = math.fsum(spans) / count
    if mean_span <= 0:
        return None
    # The ratio estimator's standard error: residuals of each window's wait from the share.
    spread = math.fsum((w - whole * s) ** 2 for w, s in zip(waits, spans)) / (count - 1)
    error = math.sqrt(spread / count) / mean_span
    return max(MARGIN_FLOOR, T_975[count - 1] * error)


class Ledger:
    """The timed steps of one ``StepRecord`` (see the module's notes), accounted as they close.

    ``update(record)`` accounts the steps whose length has become final since
    the last call (work in proportion to those steps alone), adding them to
    ``entries``. The live line calls it on
    Keras' batch ends (a worker thread where Keras dispatches them
    asynchronously), the report once after training: a lock keeps the two from
    accounting a step twice.
    """

    def __init__(self, skip: int) -> None:
        self.skip = skip
        self.entries: list[Timed] = []
        self.new_batch_size_steps = 0
        self._next = skip
        self._seen: set[int | None] | None = None
        self._lock = threading.Lock()

    def update(self, record: StepRecord) -> None:
        """Account the steps of ``record`` whose length has become final."""
        with self._lock:
            steps = record.steps
            while self._next < len(steps):
                position = self._next
                step = steps[position]
                seconds = _final_seconds(record, position)
                if seconds is None:
                    break
                self._next += 1
                if self._seen is None:
                    self._seen = {s.samples for s in steps[: max(self.skip, 1)]}
                if step.samples is not None and step.samples not in self._seen:
                    # the first step with this batch size compiled the step again
                    self._seen.add(step.samples)
                    self.new_batch_size_steps += 1
                    continue
                self.entries.append(
                    Timed(position, step.epoch, seconds, _waited(record, step.fetch_seconds))
                )

    def recent(self, steps: int) -> list[Timed]:
        """The last ``steps`` entries accounted."""
        with self._lock:
            return self.entries[-steps:]

    def of_epoch(self, epoch: int) -> list[Timed]:
        """The entries of one epoch (numbered as the timer numbers them, across fit() calls)."""
        with self._lock:
            found = []
            for entry in reversed(self.entries):
                if entry.epoch < epoch:
                    break
                if entry.epoch == epoch:
                    found.append(entry)
            return found[::-1]


def _final_seconds(record: StepRecord, position: int) -> float | None:
    """The length of step ``position`` once it is final; None while it may still change.

    A step's length runs to the next step's begin in its epoch, else to its
    epoch's end. It is final once its epoch has ended, or once the next step
    has taken its batches (it returned, or a step after it began): until then
    the next step may turn out to have had no batch, and be dropped, its search
    counted as this step's wait (``gpukeras.train.timing``).
    """
    steps = record.steps
    step = steps[position]
    following = steps[position + 1] if position + 1 < len(steps) else None
    ended = step.epoch in record.epoch_ends
    if following is not None and following.epoch == step.epoch:
        if ended or following.returned is not None or len(steps) > position + 2:
            return following.begin - step.begin
        return None
    if ended:
        return record.epoch_ends[step.epoch] - step.begin
    return None


def _waited(record: StepRecord, fetch_seconds: float | None) -> float | None:
    """Seconds of a fetch spent waiting: beyond what taking a ready batch costs, per batch."""
    if fetch_seconds is None:
        return None
    floor = (record.fetch_floor_seconds or 0.0) * record.steps_per_execution
    return max(0.0, fetch_seconds - floor)
