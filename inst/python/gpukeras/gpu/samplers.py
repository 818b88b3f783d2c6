"""Samplers on background threads: NVML's GPU utilization, memory and power, and the host's
CPU load, until stopped.

NVML's utilization is the share of time a kernel ran during the driver's last
sample period (1/6 s to 1 s), so sampling at >= 5 Hz sees short idle gaps.
Host CPU load comes from /proc/stat deltas (no psutil). The threads only call
NVML or read /proc; they never run R or framework code, and each records its
own CPU time (``cpu_seconds``) so their cost can be reported. gpu_fit()'s
monitor (``train.monitor``) and gpu_check()'s probe (``tools.probe``) use them.
Every sampler here and ``gpu_processes.ProcessSampler`` runs its thread the
same way: ``SamplerThread``.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

from gpukeras.gpu import nvml

MIG_UTILIZATION = "utilization not available on MIG: NVML measures none for a MIG instance"


@dataclass
class SamplerThread:
    """A sampler's daemon thread, as every sampler runs it: ``_start`` runs ``run`` on it
    (waiting, with ``ready``, until the thread sets ``_ready``, at most 10 s); leaving the
    ``with`` block sets ``_stop``, which the thread's loop waits on, and joins it (at most
    10 s). A subclass's ``__enter__`` starts it, or leaves it unstarted with nothing to read.
    """

    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _ready: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    def _start(
        self, run: Callable[..., None], name: str, *args: object, ready: bool = True
    ) -> None:
        self._thread = threading.Thread(target=run, args=args, name=name, daemon=True)
        self._thread.start()
        if ready:
            self._ready.wait(timeout=10)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


@dataclass
class Sample:
    """One reading of one GPU; a MIG instance's has its ``uuid``, no index and no utilization."""

    time: float
    nvml_index: int | None
    utilization_gpu: float | None
    memory_used_mib: float
    power_w: float | None
    uuid: str | None = None

    @property
    def gpu(self) -> int | str:
        """Which GPU it is: its NVML index, or a MIG instance's UUID."""
        return self.nvml_index if self.nvml_index is not None else str(self.uuid)


@dataclass
class UtilizationSampler(SamplerThread):
    """Samples NVML utilization, memory and power of some GPUs until stopped.

    Use as a context manager. When NVML is unavailable it records nothing and
    ``reason`` says why, so callers report "not measured" rather than zero.

    Attributes:
        nvml_indices: NVML indices of the GPUs to watch.
        hz: samples per second per GPU.
        mig_uuids: MIG instances to watch, by UUID: NVML reads their memory
            through their own handles, but measures no utilization on MIG.
    """

    nvml_indices: list[int]
    hz: float = 10.0
    mig_uuids: list[str] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    reason: str | None = None
    cpu_seconds: float = 0.0

    def __enter__(self) -> UtilizationSampler:
        if not self.nvml_indices and not self.mig_uuids:
            self.reason = "no GPU to watch"
            return self
        self._start(self._run, "gpukeras-nvml")
        return self

    def _run(self) -> None:
        try:
            with nvml.session() as pynvml:
                try:
                    self._sample(pynvml)
                except pynvml.NVMLError as error:  # a bad index; no utilization on MIG GPUs
                    self.reason = f"NVML stopped sampling: {error}"
        except nvml.NvmlUnavailable as error:
            self.reason = str(error)
        finally:
            self.cpu_seconds = time.thread_time()
            self._ready.set()

    def _sample(self, pynvml: ModuleType) -> None:
        """Sample every watched GPU until stopped; NVML errors propagate to ``_run``."""
        handles: dict[int | str, object] = {
            index: pynvml.nvmlDeviceGetHandleByIndex(index) for index in self.nvml_indices
        }
        handles.update({uuid: pynvml.nvmlDeviceGetHandleByUUID(uuid) for uuid in self.mig_uuids})
        self._ready.set()
        period = 1.0 / self.hz
        while not self._stop.is_set():
            started = time.perf_counter()
            for index, handle in handles.items():
                self.samples.append(self._read(pynvml, index, handle, started))
            self._stop.wait(max(0.0, period - (time.perf_counter() - started)))

    @staticmethod
    def _read(pynvml: ModuleType, gpu: int | str, handle: object, now: float) -> Sample:
        """One reading of ``gpu`` (an NVML index, or a MIG instance's UUID)."""
        try:
            power: float | None = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000
        except pynvml.NVMLError:
            power = None
        utilization: float | None = None  # none on a MIG instance (NVML: NOT_SUPPORTED)
        if isinstance(gpu, int):
            utilization = float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        return Sample(
            time=now,
            nvml_index=gpu if isinstance(gpu, int) else None,
            utilization_gpu=utilization,
            memory_used_mib=pynvml.nvmlDeviceGetMemoryInfo(handle).used / nvml.MIB,
            power_w=power,
            uuid=gpu if isinstance(gpu, str) else None,
        )

    def summary(self, since: float | None = None) -> list[dict[str, object]]:
        """Per-GPU statistics of the samples taken at or after ``since`` (perf_counter time),
        for the GPUs watched by NVML index (a MIG instance has no utilization to sum up)."""
        rows: list[dict[str, object]] = []
        for index in self.nvml_indices:
            chosen = [
                s
                for s in self.samples
                if s.nvml_index == index and (since is None or s.time >= since)
            ]
            if not chosen:
                continue
            # GPUs watched by index have a utilization in every sample (MIG instances have none)
            utilization = [s.utilization_gpu for s in chosen if s.utilization_gpu is not None]
            span = chosen[-1].time - chosen[0].time
            powers = [s.power_w for s in chosen if s.power_w is not None]
            rows.append(
                {
                    "nvml_index": index,
                    "samples": len(chosen),
                    "sample_hz": (len(chosen) - 1) / span if span > 0 else None,
                    "utilization_mean": statistics.fmean(utilization) if utilization else None,
                    "utilization_max": max(utilization) if utilization else None,
                    "memory_used_max_mib": max(s.memory_used_mib for s in chosen),
                    "power_mean_w": statistics.fmean(powers) if powers else None,
                }
            )
        return rows


PROC_STAT = "/proc/stat"


def read_cpu_times(path: str = PROC_STAT) -> tuple[int, int] | None:
    """Busy and total CPU time (jiffies, all cores) since boot; None where /proc/stat is missing.

    Busy is everything but idle and iowait; guest time is already part of
    user time, so it is not added again.
    """
    try:
        with open(path) as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(value) for value in fields[1:9]]  # user .. steal
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values)
    return total - idle, total


@dataclass
class HostSample:
    time: float
    cpu_percent: float


@dataclass
class HostCpuSampler(SamplerThread):
    """Samples the host's CPU load (% of all cores busy) from /proc/stat until stopped.

    Use as a context manager. Each sample is the load since the one before, so
    the mean over a span is the load over that span. Where /proc/stat cannot
    be read, nothing is recorded and ``reason`` says so.
    """

    hz: float = 10.0
    path: str = PROC_STAT
    samples: list[HostSample] = field(default_factory=list)
    reason: str | None = None
    cpu_seconds: float = 0.0

    def __enter__(self) -> HostCpuSampler:
        first = read_cpu_times(self.path)
        if first is None:
            self.reason = f"{self.path} cannot be read here"
            return self
        self._start(self._run, "gpukeras-host-cpu", first, ready=False)
        return self

    def _run(self, before: tuple[int, int]) -> None:
        period = 1.0 / self.hz
        try:
            while not self._stop.wait(period):
                now = read_cpu_times(self.path)
                if now is None:
                    self.reason = f"{self.path} stopped being readable"
                    return
                busy, total = now[0] - before[0], now[1] - before[1]
                if total > 0:
                    self.samples.append(HostSample(time.perf_counter(), 100.0 * busy / total))
                before = now
        finally:
            self.cpu_seconds = time.thread_time()
