"""The training monitor: the GPU and host samplers (``gpu.samplers``) and the step timer
(``train.timing``) around a fit, and the training report built from them.

``training_report`` turns the step timer's numbers (``gpukeras.train.timing``) and
the samples into gpu_fit()'s monitor report: throughput, step time, the input
verdict with the TF profiler's thresholds (< 5 % of step time waiting for
input: not input-bound; 5-20 %: moderately; >= 20 %: highly) applied to the
share less its margin (``input_verdict``), GPU utilization
and memory, host CPU, achieved TFLOP/s and MFU where the FLOPs are known, and
advice chosen from that evidence, and notes: findings not to act on
(``gpukeras.train.advice``).
"""

from __future__ import annotations

import statistics
import time

from gpukeras.core.handles import Record
from gpukeras.gpu.samplers import (
    MIG_UTILIZATION,
    HostCpuSampler,
    HostSample,
    Sample,
    UtilizationSampler,
)
from gpukeras.train.advice import TrainingContext, advice, notes, tuned_notes

# The TF profiler's input-pipeline thresholds (share of step time waiting for input).
MODERATELY_INPUT_BOUND = 0.05
HIGHLY_INPUT_BOUND = 0.20


def input_verdict(
    share: float | None,
    wait_ms: float | None = None,
    resolution_ms: float | None = None,
    margin: float | None = None,
) -> str | None:
    """The TF profiler's verdict for a share of step time spent waiting for input, with a
    stated margin.

    The rule: a share is "highly input-bound" when its lower bound (``share -
    margin``) is at least ``HIGHLY_INPUT_BOUND`` (20 %), "moderately input-bound"
    when it is at least ``MODERATELY_INPUT_BOUND`` (5 %), else "not input-bound".
    So a share within its margin above a line is given the band below it: noise
    the margin covers cannot raise the verdict, and ``near_line`` says which
    line it is near. ``margin`` is the 95 % margin of the run's share from how
    much its windows of steps differ (``gpukeras.train.step_ledger.share_margin``);
    None (too few steps to tell, or an estimate) judges the share alone.

    A wait of less than ``resolution_ms`` per step is within what the measure
    can tell apart from nothing (the step timer's: what taking an always-ready
    batch from Python costs, ``fetch_floor_ms``, which varies by about as much
    as itself): not input-bound, whatever its share of a very short step.
    """
    if share is None:
        return None
    if wait_ms is not None and resolution_ms is not None and wait_ms < resolution_ms:
        return "not input-bound"
    low = share - (margin or 0.0)
    if low >= HIGHLY_INPUT_BOUND:
        return "highly input-bound"
    if low >= MODERATELY_INPUT_BOUND:
        return "moderately input-bound"
    return "not input-bound"


def near_line(share: float | None, margin: float | None) -> float | None:
    """The verdict's line (5 % or 20 %) that ``share`` is within ``margin`` of, the nearer
    one where both are; None when it is clear of both, or no margin is known."""
    if share is None or not margin:
        return None
    lines = (MODERATELY_INPUT_BOUND, HIGHLY_INPUT_BOUND)
    close = [line for line in lines if abs(share - line) <= margin]
    return min(close, key=lambda line: abs(share - line)) if close else None


def timed_input_verdict(steps: Record) -> str | None:
    """``input_verdict`` for a step timer's report (``step_summary.summarize``): of the wait
    where it was timed, with its margin, else of the share of a step the pipeline needs alone
    (``input_share_alone``, what the wait would be without overlap: an estimate)."""
    if steps.get("input_wait_share") is None:
        return input_verdict(steps.get("input_share_alone"))
    return input_verdict(
        steps.get("input_wait_share"),
        steps.get("input_wait_mean_ms"),
        steps.get("fetch_floor_ms"),
        steps.get("input_wait_margin"),
    )


def percentile(values: list[float], share: float) -> float:
    """Linear-interpolated percentile (numpy's default), ``share`` in [0, 1]."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * share
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _within(samples: list, window: tuple[float, float] | None) -> list:
    """Samples inside the timed window; all of them when the window holds none."""
    if window is None:
        return list(samples)
    inside = [s for s in samples if window[0] <= s.time <= window[1]]
    return inside or list(samples)


def each_gpu(
    gpus: list[Record], samples: list[Sample], window: tuple[float, float] | None
) -> list[Record]:
    """One row per GPU in use: its device, name, NVML index and its own figures in the
    timed window (None where NVML has no samples of it; a MIG instance's, matched by
    UUID, have memory but no utilization)."""
    rows = []
    for gpu in gpus:
        key = gpu["nvml_index"] if gpu["nvml_index"] is not None else gpu.get("uuid")
        own = [s for s in samples if key is not None and s.gpu == key]
        timed = _within(own, window)
        utilization = [s.utilization_gpu for s in timed if s.utilization_gpu is not None]
        powers = [s.power_w for s in timed if s.power_w is not None]
        rows.append(
            {
                "device": gpu["device"],
                "name": gpu["name"],
                "nvml_index": gpu["nvml_index"],
                "utilization_mean": statistics.fmean(utilization) if utilization else None,
                "utilization_p95": percentile(utilization, 0.95) if utilization else None,
                "memory_used_max_mib": max(s.memory_used_mib for s in own) if own else None,
                "power_mean_w": statistics.fmean(powers) if powers else None,
            }
        )
    return rows


def training_report(
    steps: Record,
    gpu_samples: list[Sample],
    host_samples: list[HostSample],
    window: tuple[float, float] | None,
    context: TrainingContext,
    flops: Record | None = None,
    monitor_cpu_seconds: float = 0.0,
    wall_seconds: float | None = None,
    gpus: list[Record] | None = None,
) -> Record:
    """gpu_fit()'s monitor report from the step timer's summary and the samples.

    Args:
        steps: ``gpukeras.train.step_summary.summarize`` output.
        gpu_samples: NVML samples of the GPUs in use.
        host_samples: host CPU samples.
        window: ``perf_counter`` span of the timed steps (compilation left
            out); samples outside it are not averaged.
        context: facts the advice depends on.
        flops: ``gpukeras.train.flops.model_flops`` output and the GPU's peak
            (``flops.peak``), or None when not counted.
        monitor_cpu_seconds: CPU time the sampler threads used.
        wall_seconds: how long they ran; ``monitor_cpu_share`` is the ratio
            (a share of one core).
        gpus: device rows (``devices.list_devices``) of the GPUs in use, for
            the per-GPU figures; None to leave them out.

    Returns:
        Plain data: the keys listed in gpu_fit()'s documentation (``notes``: what
        ``advice.notes`` says), plus ``steps_timed`` (executions), ``batches_timed`` and
        ``batch_time_mean_ms`` (time per training step, one batch),
        ``steps_per_execution``, ``input_on_device`` (the wait is 0 by
        construction), ``input_wait_margin`` (the share's 95 % margin; None
        where too few steps were timed to tell), ``input_near_line`` (the
        verdict's line, 0.05 or 0.2, the share is within its margin of; else
        None), ``input_wait_estimated`` (the verdict rests on the pipeline
        timed alone, not on a wait timed in Keras' loop), ``pipeline_batch_ms``
        and ``input_share_alone`` (where
        the wait could not be timed: the pipeline timed alone, see
        ``gpukeras.train.timing``), ``input_wait_method``, ``input_wait_mean_ms``,
        ``fetch_floor_ms`` (what taking a ready batch took, not counted as
        waiting),
        ``between_steps_share``, ``gpu_sample_hz``, ``gpu_power_mean_w``, ``peak_tflops``,
        ``peak_source``, ``flops_method``, ``monitor_cpu_share``,
        ``gpu_not_measured`` (why, when there are no GPU numbers), ``gpus``
        (``each_gpu``'s rows) and, with two GPUs or more measured,
        ``gpu_utilization_imbalance`` (points between the busiest GPU's mean
        utilization and the idlest's) and ``gpu_memory_imbalance_mib``.
    """
    share = steps.get("input_wait_share")
    # Reports made before training steps were counted (and synthetic ones) hold
    # whole executions of steps_per_execution batches.
    executions, execution_ms = steps.get("steps"), steps.get("step_time_mean_ms")
    per_call = context.steps_per_execution
    batches = steps.get("batches") or (executions * per_call if executions else None)
    batch_ms = steps.get("batch_time_mean_ms") or (
        execution_ms / per_call if execution_ms is not None else None
    )
    report: Record = {
        "samples_per_second": steps.get("samples_per_second"),
        "wall_samples_per_second": steps.get("wall_samples_per_second"),
        "step_time_mean_ms": steps.get("step_time_mean_ms"),
        "step_time_sd_ms": steps.get("step_time_sd_ms"),
        "input_wait_share": share,
        "input_wait_margin": steps.get("input_wait_margin"),
        "input_near_line": near_line(share, steps.get("input_wait_margin")),
        "input_wait_estimated": share is None and steps.get("input_share_alone") is not None,
        "input_verdict": timed_input_verdict(steps),
        "gpu_utilization_mean": None,
        "gpu_utilization_p95": None,
        "gpu_memory_used_max_mib": None,
        "host_cpu_percent_mean": None,
        "flops_per_step": None,
        "achieved_tflops": None,
        "mfu": None,
        "advice": [],
        "steps_timed": steps.get("steps"),
        "batches_timed": batches,
        "batch_time_mean_ms": batch_ms,
        "steps_per_execution": steps.get("steps_per_execution") or per_call,
        "input_on_device": bool(steps.get("input_on_device")),
        "pipeline_batch_ms": steps.get("pipeline_batch_ms"),
        "input_share_alone": steps.get("input_share_alone"),
        "input_wait_method": steps.get("method"),
        "input_wait_mean_ms": steps.get("input_wait_mean_ms"),
        "fetch_floor_ms": steps.get("fetch_floor_ms"),
        "between_steps_share": steps.get("between_steps_share"),
        "gpu_sample_hz": None,
        "gpu_power_mean_w": None,
        "peak_tflops": None,
        "peak_source": None,
        "flops_method": None,
        "monitor_cpu_share": monitor_cpu_seconds / wall_seconds if wall_seconds else None,
        "gpu_not_measured": None,
        "gpus": each_gpu(gpus or [], gpu_samples, window),
        "gpu_utilization_imbalance": None,
        "gpu_memory_imbalance_mib": None,
    }
    measured = [row for row in report["gpus"] if row["utilization_mean"] is not None]
    if len(measured) > 1:
        means = [float(row["utilization_mean"]) for row in measured]
        memory = [float(row["memory_used_max_mib"]) for row in measured]
        report["gpu_utilization_imbalance"] = max(means) - min(means)
        report["gpu_memory_imbalance_mib"] = max(memory) - min(memory)
    gpu = _within(gpu_samples, window)
    if gpu:
        utilization = [s.utilization_gpu for s in gpu if s.utilization_gpu is not None]
        powers = [s.power_w for s in gpu if s.power_w is not None]
        per_gpu = max(1, len({s.gpu for s in gpu}))
        span = gpu[-1].time - gpu[0].time
        report.update(
            gpu_utilization_mean=statistics.fmean(utilization) if utilization else None,
            gpu_utilization_p95=percentile(utilization, 0.95) if utilization else None,
            gpu_memory_used_max_mib=max(s.memory_used_mib for s in gpu_samples),
            gpu_sample_hz=(len(gpu) / per_gpu - 1) / span if span > 0 else None,
            gpu_power_mean_w=statistics.fmean(powers) if powers else None,
        )
        if not utilization:  # only MIG instances: NVML measures no utilization there
            report["gpu_not_measured"] = MIG_UTILIZATION
    else:
        report["gpu_not_measured"] = (
            "no GPU in use" if not context.gpus else context.nvml_reason or "no NVML samples"
        )
    host = _within(host_samples, window)
    if host:
        report["host_cpu_percent_mean"] = statistics.fmean(s.cpu_percent for s in host)
    if flops and flops.get("per_sample") is not None:
        train_per_sample = float(flops["per_sample"]) * 3
        report["flops_method"] = flops.get("method")
        samples, batches = steps.get("samples"), report["batches_timed"]
        if samples and batches:
            report["flops_per_step"] = train_per_sample * samples / batches
        rate = steps.get("samples_per_second")
        if rate:
            achieved = train_per_sample * rate / 1e12
            report["achieved_tflops"] = achieved
            peak = flops.get("peak")
            if peak:
                report["peak_tflops"] = peak["tflops"]
                report["peak_source"] = peak["source"]
                report["mfu"] = achieved / peak["tflops"]
    report["advice"] = advice(report, context)
    report["notes"] = notes(report, context) + tuned_notes(report, context)
    return report


def timeline(start: float, gpu: list[Sample], host: list[HostSample]) -> dict[str, dict[str, list]]:
    """The samples as columns (``gpu`` and ``host``), times in seconds since ``start``."""
    return {
        "gpu": {
            "time_s": [s.time - start for s in gpu],
            "nvml_index": [s.nvml_index for s in gpu],
            "utilization": [s.utilization_gpu for s in gpu],
            "memory_used_mib": [s.memory_used_mib for s in gpu],
            "power_w": [s.power_w for s in gpu],
        },
        "host": {
            "time_s": [s.time - start for s in host],
            "cpu_percent": [s.cpu_percent for s in host],
        },
    }


class TrainingMonitor:
    """What gpu_fit() measures while Keras trains: a step timer, and GPU and host samplers.

    Use as a context manager around ``model.fit()``, giving it ``callbacks``.
    Per step, only the step timer runs (two ``perf_counter`` calls and one
    Python call); the samplers run on their own threads at ``hz``.

    Args:
        nvml_indices: NVML indices of the GPUs in use.
        batch_size: rows per batch where known (for throughput when batches are not seen).
        skip: steps left out of the timing at the start.
        measure_input: time the wait for input: True, False or "auto" (see
            ``gpukeras.train.timing.step_timer``).
        hz: samples per second of each sampler.
        mig_uuids: UUIDs of the MIG instances in use (memory only; see
            ``UtilizationSampler``).
        dataset: the tf.data dataset training reads, timed alone where the
            wait cannot be timed ("auto").
    """

    def __init__(
        self,
        nvml_indices: list[int],
        batch_size: int | None,
        skip: int,
        measure_input: bool | str,
        hz: float = 10.0,
        mig_uuids: list[str] | None = None,
        dataset: object = None,
    ) -> None:
        from gpukeras.train import timing

        self.timer = timing.step_timer(
            batch_size=batch_size,
            skip=skip,
            measure_input=measure_input,
            dataset=dataset,
        )
        self.gpu = UtilizationSampler(nvml_indices, hz=hz, mig_uuids=mig_uuids or [])
        self.host = HostCpuSampler(hz=hz)
        self.started = 0.0
        self.finished = 0.0

    @property
    def callbacks(self) -> list[object]:
        return [self.timer]

    def __enter__(self) -> TrainingMonitor:
        self.started = time.perf_counter()
        self.gpu.__enter__()
        self.host.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.host.__exit__(*exc)
        self.gpu.__exit__(*exc)
        self.finished = time.perf_counter()

    def window(self) -> tuple[float, float] | None:
        """``perf_counter`` span from the first timed step to the last epoch's end."""
        record = self.timer.record
        timed = record.steps[self.timer.skip :]
        if not timed or not record.epoch_ends:
            return None
        return timed[0].begin, max(record.epoch_ends.values())

    def observed_batch_size(self) -> int | None:
        """The largest batch the timer saw (rows per batch of a dataset); None if unseen."""
        record = self.timer.record
        rows = [step.samples for step in record.steps if step.samples is not None]
        return max(rows) // max(1, record.steps_per_execution) if rows else None

    def report(
        self,
        context: TrainingContext,
        flops: Record | None,
        gpus: list[Record] | None = None,
    ) -> Record:
        """``training_report`` for what was measured on ``gpus`` (device rows)."""
        return training_report(
            self.timer.report(),
            self.gpu.samples,
            self.host.samples,
            self.window(),
            context,
            flops,
            self.gpu.cpu_seconds + self.host.cpu_seconds,
            self.finished - self.started,
            gpus,
        )

    def timeline(self, start: float) -> dict[str, dict[str, list]]:
        return timeline(start, self.gpu.samples, self.host.samples)
