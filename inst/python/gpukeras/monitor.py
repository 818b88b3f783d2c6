"""GPU utilization sampling on a background thread.

NVML's utilization is the share of time a kernel ran during the driver's last
sample period (1/6 s to 1 s), so sampling at >= 5 Hz sees short idle gaps.
The thread only calls NVML; it never runs R or framework code.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from types import ModuleType

from gpukeras import nvml


@dataclass
class Sample:
    time: float
    nvml_index: int
    utilization_gpu: float
    memory_used_mib: float
    power_w: float | None


@dataclass
class UtilizationSampler:
    """Samples NVML utilization, memory and power of some GPUs until stopped.

    Use as a context manager. When NVML is unavailable it records nothing and
    ``reason`` says why, so callers report "not measured" rather than zero.

    Attributes:
        nvml_indices: NVML indices of the GPUs to watch.
        hz: samples per second per GPU.
    """

    nvml_indices: list[int]
    hz: float = 10.0
    samples: list[Sample] = field(default_factory=list)
    reason: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _ready: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> UtilizationSampler:
        if not self.nvml_indices:
            self.reason = "no GPU to watch"
            return self
        self._thread = threading.Thread(target=self._run, name="gpukeras-nvml", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

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
            self._ready.set()

    def _sample(self, pynvml: ModuleType) -> None:
        """Sample every watched GPU until stopped; NVML errors propagate to ``_run``."""
        handles = {index: pynvml.nvmlDeviceGetHandleByIndex(index) for index in self.nvml_indices}
        self._ready.set()
        period = 1.0 / self.hz
        while not self._stop.is_set():
            started = time.perf_counter()
            for index, handle in handles.items():
                self.samples.append(self._read(pynvml, index, handle, started))
            self._stop.wait(max(0.0, period - (time.perf_counter() - started)))

    @staticmethod
    def _read(pynvml: object, index: int, handle: object, now: float) -> Sample:
        try:
            power: float | None = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000  # type: ignore[attr-defined]
        except pynvml.NVMLError:  # type: ignore[attr-defined]
            power = None
        return Sample(
            time=now,
            nvml_index=index,
            utilization_gpu=float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu),  # type: ignore[attr-defined]
            memory_used_mib=pynvml.nvmlDeviceGetMemoryInfo(handle).used / nvml.MIB,  # type: ignore[attr-defined]
            power_w=power,
        )

    def summary(self, since: float | None = None) -> list[dict[str, object]]:
        """Per-GPU statistics of the samples taken at or after ``since`` (perf_counter time)."""
        rows = []
        for index in self.nvml_indices:
            chosen = [
                s
                for s in self.samples
                if s.nvml_index == index and (since is None or s.time >= since)
            ]
            if not chosen:
                continue
            utilization = [s.utilization_gpu for s in chosen]
            span = chosen[-1].time - chosen[0].time
            powers = [s.power_w for s in chosen if s.power_w is not None]
            rows.append(
                {
                    "nvml_index": index,
                    "samples": len(chosen),
                    "sample_hz": (len(chosen) - 1) / span if span > 0 else None,
                    "utilization_mean": statistics.fmean(utilization),
                    "utilization_max": max(utilization),
                    "memory_used_max_mib": max(s.memory_used_mib for s in chosen),
                    "power_mean_w": statistics.fmean(powers) if powers else None,
                }
            )
        return rows
