"""The timed steps of a fit in plain numbers: ``summarize`` turns the step timer's record
(``gpukeras.train.timing``, whose notes say what is measured and its limits) into the mean
and spread of the step time, the time per training step, samples per second and the input
wait's share with its margin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpukeras.train.step_ledger import Ledger, StepRecord, share, share_margin, totals


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def step_batches(record: StepRecord) -> list[int]:
    """Batches each recorded step trained on, in ``record.steps``' order.

    From the first-batch indices Keras gives: the next step's index less this
    one's within an epoch; for an epoch's last step, the batches left in the
    epoch, at most ``steps_per_execution`` (all of it where the epoch's length
    is not known, or the step has no index).
    """
    per_step = record.steps_per_execution
    batches = []
    for position, step in enumerate(record.steps):
        following = record.steps[position + 1] if position + 1 < len(record.steps) else None
        if step.first_batch is None:
            batches.append(per_step)
        elif following is not None and following.epoch == step.epoch:
            if following.first_batch is None:
                batches.append(per_step)
            else:
                batches.append(max(1, following.first_batch - step.first_batch))
        elif record.steps_per_epoch is not None:
            batches.append(max(1, min(per_step, record.steps_per_epoch - step.first_batch)))
        else:
            batches.append(per_step)
    return batches


def step_rows(
    record: StepRecord, batches: Sequence[int], batch_size: int | None
) -> list[float | None]:
    """Rows each recorded step trained on: seen; else its share of its epoch's
    rows as Keras counted them (``epoch_rows``, by batches); else its batches x
    ``batch_size``; else None."""
    epoch_batches: dict[int, int] = {}
    for step, count in zip(record.steps, batches):
        epoch_batches[step.epoch] = epoch_batches.get(step.epoch, 0) + count
    rows: list[float | None] = []
    for step, count in zip(record.steps, batches):
        counted = record.epoch_rows.get(step.epoch)
        if step.samples is not None:
            rows.append(float(step.samples))
        elif counted:
            rows.append(counted * count / epoch_batches[step.epoch])
        elif batch_size is not None:
            rows.append(float(batch_size * count))
        else:
            rows.append(None)
    return rows


def ran_an_epoch(record: StepRecord) -> bool:
    """Whether some epoch ran all its batches (where their number is known; else ended).

    Only then may the pipeline be read again (``pipeline_seconds``): a cache
    that training left half-written would be started a second time.
    """
    if record.steps_per_epoch is None:
        return bool(record.epoch_ends)
    trained: dict[int, int] = {}
    for step, count in zip(record.steps, step_batches(record)):
        trained[step.epoch] = trained.get(step.epoch, 0) + count
    return any(trained.get(epoch, 0) >= record.steps_per_epoch for epoch in record.epoch_ends)


def _total(values: Sequence[float | None]) -> int | None:
    """The sum of ``values`` as a whole number of rows; None when any is not known."""
    if any(value is None for value in values):
        return None
    return round(sum(values))  # type: ignore[arg-type]


def _epochs_wall(
    record: StepRecord, rows: Sequence[float | None]
) -> tuple[float | None, float | None]:
    """Seconds the finished epochs took on the wall clock, and samples/s over them.

    Every step counts here, compiling and stalls included (TensorFlow 2.21
    sometimes stalls seconds at the end of training): the rate a user sees
    from the clock, beside the steady step-time rate.
    """
    finished = [epoch for epoch in record.epoch_begins if epoch in record.epoch_ends]
    seconds = sum(record.epoch_ends[epoch] - record.epoch_begins[epoch] for epoch in finished)
    if not finished or seconds <= 0:
        return None, None
    samples = _total([row for step, row in zip(record.steps, rows) if step.epoch in finished])
    return seconds, samples / seconds if samples is not None else None


def summarize(
    record: StepRecord, skip: int = 2, batch_size: int | None = None, ledger: Ledger | None = None
) -> dict[str, object]:
    """Turn recorded timestamps into plain numbers (see the module's notes).

    Args:
        record: what the timer recorded.
        skip: steps left out at the start (tracing and compiling).
        batch_size: rows per batch, used for ``samples_per_second`` when the
            batches were not seen and Keras counted no rows.
        ledger: the ledger of ``record``'s timed steps the live line read
            (``gpukeras.train.step_ledger``); None for a new one. Its entries
            are the timed steps, so the share is the live windows' total.

    Returns:
        ``steps`` (timed executions), ``skipped``, ``new_batch_size_steps``
        (left out, see the module's notes), ``seconds`` (their total),
        ``step_time_mean_ms``, ``step_time_sd_ms`` (per execution),
        ``batches`` (training steps in the timed executions),
        ``batch_time_mean_ms`` (time per training step), ``input_wait_share``,
        ``input_wait_mean_ms`` (both beyond ``fetch_floor_ms``, the time
        taking a ready batch took), ``between_steps_share``,
        ``input_on_device``, ``pipeline_batch_ms`` and ``pipeline_batches``
        (the probe's, see ``pipeline_seconds``), ``input_share_alone``
        (``pipeline_batch_ms`` / ``batch_time_mean_ms``), ``samples``,
        ``samples_per_second``, ``epochs_wall_seconds`` and
        ``wall_samples_per_second`` (over the finished epochs' wall time,
        every step included), ``steps_per_execution``, ``backend`` and
        ``method``; numbers that cannot be known are None.
    """
    batches = step_batches(record)
    rows = step_rows(record, batches, batch_size)
    wall_seconds, wall_rate = _epochs_wall(record, rows)
    probe = record.pipeline or {}
    result: dict[str, object] = {
        "steps": 0,
        "skipped": min(skip, len(record.steps)),
        "new_batch_size_steps": 0,
        "seconds": None,
        "step_time_mean_ms": None,
        "step_time_sd_ms": None,
        "batches": 0,
        "batch_time_mean_ms": None,
        "input_wait_share": None,
        "input_wait_mean_ms": None,
        "input_wait_margin": None,
        "fetch_floor_ms": None,
        "between_steps_share": None,
        "input_on_device": record.input_on_device,
        "pipeline_batch_ms": None,
        "pipeline_batches": probe.get("batches"),
        "input_share_alone": None,
        "samples": None,
        "samples_per_second": None,
        "epochs_wall_seconds": wall_seconds,
        "wall_samples_per_second": wall_rate,
        "steps_per_execution": record.steps_per_execution,
        "backend": record.backend,
        "method": record.method,
    }
    if probe.get("batch_seconds") is not None:
        result["pipeline_batch_ms"] = probe["batch_seconds"] * 1e3
    ledger = ledger or Ledger(skip)
    ledger.update(record)
    entries = list(ledger.entries)
    measured = [
        (record.steps[entry.index], batches[entry.index], rows[entry.index], entry.seconds)
        for entry in entries
    ]
    result["new_batch_size_steps"] = ledger.new_batch_size_steps
    result["steps"] = len(measured)
    if not measured:
        return result
    durations = [duration for *_, duration in measured]
    total = sum(durations)
    mean, sd = _mean_sd(durations)
    trained = sum(count for _, count, _, _ in measured)
    result.update(
        seconds=total,
        step_time_mean_ms=mean * 1e3,
        step_time_sd_ms=sd * 1e3,
        batches=trained,
        batch_time_mean_ms=total / trained * 1e3,
    )
    if record.input_on_device:
        result.update(input_wait_share=0.0, input_wait_mean_ms=0.0, input_wait_margin=0.0)
    summed = totals(entries)
    if summed is not None and total > 0:
        if record.fetch_floor_seconds is not None:
            result["fetch_floor_ms"] = record.fetch_floor_seconds * 1e3
        result["input_wait_share"] = share(entries)
        result["input_wait_margin"] = share_margin(entries)
        result["input_wait_mean_ms"] = summed[0] / len(entries) * 1e3
        between = [
            duration - (step.returned - step.begin)  # type: ignore[operator]
            for step, _, _, duration in measured
        ]
        result["between_steps_share"] = min(1.0, max(0.0, sum(between) / total))
    if result["pipeline_batch_ms"] is not None and total > 0:
        result["input_share_alone"] = result["pipeline_batch_ms"] / result["batch_time_mean_ms"]  # type: ignore[operator]
    samples = _total([row for _, _, row, _ in measured])
    if samples is not None:
        result["samples"] = samples
        result["samples_per_second"] = samples / total if total > 0 else None
    return result
