"""Who uses a GPU: this process's own share, apart from other processes'.

NVML's utilization and memory are the whole GPU's, so another job's training
makes a GPU look busy whether or not this process uses it. NVML also reports
per process: the memory each holds (``nvmlDeviceGetComputeRunningProcesses``)
and, on a whole GPU, each one's share of SM time in NVML's last sample period
(``nvmlDeviceGetProcessUtilization``: one sample per process that used the SMs
since a given time; none on MIG instances). A sampler thread reads both while
gpu_check()'s probe trains.

Inside a container NVML may report the host's process ids, which this process
cannot recognise as its own; the summary then says so, and only the
whole-GPU figures are left.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from types import ModuleType

from gpukeras.core.handles import Record
from gpukeras.gpu import nvml
from gpukeras.gpu.samplers import SamplerThread


@dataclass
class ProcessUse:
    """What NVML showed of one process on the GPU: memory and SM share, the most seen."""

    pid: int
    memory_mib: float | None = None
    sm_max: float | None = None


@dataclass
class ProcessSampler(SamplerThread):
    """Samples per-process memory and SM use of one GPU or MIG instance until stopped.

    Use as a context manager; it reads once on entry and once on exit, so a
    short run still has figures. With nothing to watch or no NVML it reads
    nothing and ``notes`` say why.

    Attributes:
        device: the NVML device to watch (None: none, e.g. the CPU).
        pid: this process's id.
        since_us: NVML sample time (CPU microseconds) to count utilization from.
        hz: readings per second.
    """

    device: nvml.NvmlDevice | None
    pid: int = field(default_factory=os.getpid)
    since_us: int = field(default_factory=lambda: int(time.time() * 1e6))
    hz: float = 5.0
    processes: dict[int, ProcessUse] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    utilization_sampled: bool = True
    samples_seen: bool = False

    def __enter__(self) -> ProcessSampler:
        if self.device is None:
            self.notes.append("no GPU to watch")
            return self
        self._start(self._run, "gpukeras-processes")
        return self

    def _run(self) -> None:
        if self.device is None:  # __enter__ starts no thread then
            return
        try:
            with nvml.session() as pynvml:
                try:
                    handle = nvml.device_handle(pynvml, self.device)
                except pynvml.NVMLError as error:
                    self.notes.append(f"NVML could not open this GPU: {error}")
                    return
                self.read(pynvml, handle)
                self._ready.set()
                while not self._stop.wait(1.0 / self.hz):
                    self.read(pynvml, handle)
                self.read(pynvml, handle)
        except nvml.NvmlUnavailable as error:
            self.notes.append(str(error))
        finally:
            self._ready.set()

    def _use(self, pid: int) -> ProcessUse:
        return self.processes.setdefault(pid, ProcessUse(pid))

    def read(self, pynvml: ModuleType, handle: object) -> None:
        """One reading of every process's memory and of new SM samples."""
        try:
            running = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except pynvml.NVMLError as error:
            running = []
            self._note(f"NVML lists no processes here: {error}")
        for process in running:
            use = self._use(int(process.pid))
            if process.usedGpuMemory is not None:
                mib = process.usedGpuMemory / nvml.MIB
                use.memory_mib = max(use.memory_mib or 0.0, mib)
        if not self.utilization_sampled:
            return
        try:
            samples = pynvml.nvmlDeviceGetProcessUtilization(handle, self.since_us)
        except pynvml.NVMLError_NotSupported:
            self.utilization_sampled = False
            self._note(
                "per-process utilization: not available on MIG"
                if self.device is not None and self.device.is_mig
                else "per-process utilization: NVML does not measure it on this GPU"
            )
            return
        except pynvml.NVMLError:  # NOT_FOUND: no process used the SMs since the last sample
            return
        for sample in samples:
            self.samples_seen = True
            use = self._use(int(sample.pid))
            use.sm_max = max(use.sm_max or 0.0, float(sample.smUtil))
            self.since_us = max(self.since_us, int(sample.timeStamp))

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def summary(self) -> Record:
        """This process's figures (None where NVML did not show it) and the others'.

        ``own_sm_max`` is 0 when NVML sampled per-process utilization (it
        returned samples, of some process) and this process never used the
        SMs; None when it cannot be told.
        """
        own = self.processes.get(self.pid)
        notes = list(self.notes)
        if own is None and self.processes:
            notes.append(
                f"this process (pid {self.pid}) is not among the processes NVML lists on "
                f"the GPU (pids {', '.join(map(str, sorted(self.processes)))}): inside a "
                "container NVML shows the host's process ids, so its own share cannot be "
                "told apart"
            )
        seen = own is not None
        if self.device is not None and self.utilization_sampled and not self.samples_seen:
            notes.append("NVML returned no per-process utilization samples")
        sampled = self.utilization_sampled and self.samples_seen
        sm = (own.sm_max or 0.0) if own is not None and sampled else None
        others = [asdict(use) for pid, use in sorted(self.processes.items()) if pid != self.pid]
        return {
            "pid": self.pid,
            "own_memory_mib": own.memory_mib if own is not None else None,
            "own_sm_max": sm,
            "others": others if seen else [],
            "notes": notes,
        }
