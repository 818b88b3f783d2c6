"""The live line while training: GPU use, host CPU and the input wait, beside the loss.

gpu_fit() keeps Keras' own progress display (a bar where someone watches, a
line per epoch in logs). This callback adds the monitor's latest figures to
the logs that display prints:

- ``gpu_%``: utilization of the GPUs in use (their mean), where NVML measures it;
- ``gpu_mem_GiB``: memory they use (their sum);
- ``cpu_%``: the host's CPU load (all cores);
- ``input_wait_%``: the share of the recent steps' time spent waiting for a batch
  (beyond the time taking a ready one takes); on each epoch's line, the share
  over that epoch's timed steps. 0 for batches already on the device, which wait for
  nothing by construction; not shown where the wait is not timed (TensorFlow with
  several batches per call, where the report's figure is an estimate made after
  training, which the live line cannot show).

It reads what the monitor's samplers and step timer hold already, so it adds
no measurement of its own. The input wait comes from the step timer's ledger
(``gpukeras.train.step_ledger``), the same entries the report's
``input_wait_share`` sums: the report's share is the total over the run of the
epochs' figures (each weighted by its steps' time), never a second measure.
The figures are for the display only: gpu_fit() puts the History callback
before this one, so the history keeps the loss and metrics alone.

Keras' progress display prints every number in its logs with four decimals
(``cpu_%: 52.6000``). Each figure is therefore a ``Figure``: a float that
formats itself with its own digits, whatever format it is asked for (whole
percentages from 10 %, one decimal below; GiB with two).
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpukeras.core.handles import Callback
from gpukeras.train import step_ledger

if TYPE_CHECKING:
    from gpukeras.train.monitor import TrainingMonitor

# How recent a reading must be to be shown, and how many steps the input wait covers.
FRESH_SECONDS = 3.0
RECENT_STEPS = 50
GIB = 1024.0


class Figure(float):
    """A float that prints with its own number of decimals, whatever format is asked.

    Keras' progress display formats each logged value with ``:.4f`` (or
    ``:.4e`` near zero) after dividing it by a count of 1; both keep the
    figure's own digits here. It compares and computes as the float it is.
    """

    digits: int

    def __new__(cls, value: float, digits: int) -> Figure:
        made = super().__new__(cls, round(value, digits))
        made.digits = digits
        return made

    def __format__(self, spec: str) -> str:
        return f"{float(self):.{self.digits}f}"

    def __str__(self) -> str:
        return format(self, "")

    def __truediv__(self, other: object) -> Figure:
        return Figure(float(self) / float(other), self.digits)  # type: ignore[arg-type]


def as_keras_shows(value: Any) -> str:
    """A logged value as Keras' progress display shows it: 4 decimals, or 4 in scientific
    notation near zero; a ``Figure`` with its own digits. A background job's epoch lines
    show it so, as a fit in the R session does."""
    if isinstance(value, Figure):
        return str(value)
    number = float(value)
    return f"{number:.4f}" if abs(number) > 1e-3 else f"{number:.4e}"


def percent(value: float) -> Figure:
    """A percentage as people read one: whole from 10 %, with one decimal below."""
    return Figure(value, 0 if abs(value) >= 10 else 1)


def figures(watcher: TrainingMonitor, now: float, epoch: int | None = None) -> dict[str, float]:
    """The latest figures the monitor holds at ``now`` (``perf_counter`` seconds), as
    ``Figure``s; the input wait over the ``RECENT_STEPS`` last timed steps, or over
    ``epoch``'s (numbered as the step timer numbers them) at its end."""
    shown: dict[str, float] = {}
    latest: dict[object, Any] = {}
    for sample in reversed(watcher.gpu.samples[-64:]):
        if now - sample.time > FRESH_SECONDS:
            break
        latest.setdefault(sample.nvml_index if sample.uuid is None else sample.uuid, sample)
    if latest:
        used = [s.utilization_gpu for s in latest.values() if s.utilization_gpu is not None]
        if used:
            shown["gpu_%"] = percent(sum(used) / len(used))
        shown["gpu_mem_GiB"] = Figure(sum(s.memory_used_mib for s in latest.values()) / GIB, 2)
    host = watcher.host.samples[-1:] if watcher.host.samples else []
    if host and now - host[0].time <= FRESH_SECONDS:
        shown["cpu_%"] = percent(host[0].cpu_percent)
    timer: Any = watcher.timer  # the step timer, a Keras callback made at run time
    record = timer.record
    if record.input_on_device:
        shown["input_wait_%"] = percent(0.0)
    timer.ledger.update(record)
    window = (
        timer.ledger.of_epoch(epoch) if epoch is not None else timer.ledger.recent(RECENT_STEPS)
    )
    waited = step_ledger.share(window)
    if waited is not None:
        shown["input_wait_%"] = percent(100.0 * waited)
    return shown


def callback(keras: ModuleType, watcher: TrainingMonitor) -> Callback:
    """A Keras callback putting ``figures`` into each batch's and each epoch's logs."""
    import time

    callback_base: Any = keras.callbacks.Callback  # Keras has no types

    class LiveFigures(callback_base):
        # Reads lists other threads append to, and updates the timer's ledger under its
        # lock: safe on Keras' worker thread.
        async_safe = True

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if logs is not None:
                logs.update(figures(watcher, time.perf_counter()))

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if logs is not None:
                # the timer's number for the epoch just ended (it counts across fit() calls)
                ended = max(watcher.timer.record.epoch_begins, default=None)
                logs.update(figures(watcher, time.perf_counter(), ended))

    return LiveFigures()


def display_callbacks(keras: ModuleType, watcher: TrainingMonitor | None, verbose: object) -> list:
    """The callbacks that end gpu_fit()'s list: History, the live figures, the progress display.

    Keras adds a History and a ProgbarLogger itself when none is given, after
    every given callback; giving them here puts the figures between the two.
    """
    if watcher is None or verbose == 0:
        return []
    return [keras.callbacks.History(), callback(keras, watcher), keras.callbacks.ProgbarLogger()]
