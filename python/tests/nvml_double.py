"""Stand-ins for the pynvml and libcuda calls gpukeras makes, fed with values and errors
NVIDIA documents.

NVML cannot run without an NVIDIA driver, so its behaviour on machines this
one is not (devices another job holds, cgroup-blocked devices, several GPUs,
MIG instances, other processes on the GPU) is exercised through this double.
Its errors are nvidia-ml-py's own classes (``pynvml.NVMLError(code)`` makes
the subclass NVML would raise), so the code under test catches exactly what it
would catch on a GPU machine. ``FakeLibcuda`` answers the CUDA driver calls
of ``gpukeras.gpu.cuda_driver`` through the same ctypes arguments libcuda gets.
"""

from __future__ import annotations

import ctypes
import types
import uuid as uuids
from dataclasses import dataclass, field

import pynvml

MIB = 1024 * 1024
# What NVIDIA documents for these calls on a MIG instance, and on a GPU in MIG mode.
NOT_ON_MIG = ("nvmlDeviceGetUtilizationRates", "nvmlDeviceGetProcessUtilization")


@dataclass
class FakeProcess:
    """A process using a GPU: its memory and the SM share NVML's last sample gave it."""

    pid: int
    memory_mib: float | None = 1024.0
    sm_util: int = 0


@dataclass
class FakeGpu:
    """One device as the double reports it; ``fails`` maps a pynvml call to an NVML error code.

    ``migs`` (a GPU in MIG mode, when not None) are its MIG instances, in slots 0, 1, ...
    of ``MAX_MIG`` slots. ``sample_time`` is the CPU time (us) of NVML's last
    per-process sample.
    """

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    capability: tuple[int, int] = (9, 0)
    memory_total_mib: float = 81559.0
    memory_used_mib: float = 512.0
    utilization: int = 0
    pci_bus_id: str = "00000000:17:00.0"
    fails: dict[str, int] = field(default_factory=dict)
    migs: list[FakeGpu] | None = None
    processes: list[FakeProcess] = field(default_factory=list)
    sample_time: int = 1_000_000

    def __post_init__(self) -> None:
        unsupported = pynvml.NVML_ERROR_NOT_SUPPORTED
        if self.migs is not None:
            self.fails = {**dict.fromkeys(NOT_ON_MIG, unsupported), **self.fails}
            for mig in self.migs:
                mig.fails = {**dict.fromkeys(NOT_ON_MIG, unsupported), **mig.fails}


MAX_MIG = 7


def fake_mig(parent_uuid: str, size: str = "3g.40gb", memory_total_mib: float = 40192.0) -> FakeGpu:
    """A MIG instance as NVML names it, with a 'MIG-' UUID of its own."""
    return FakeGpu(
        name=f"NVIDIA H100 80GB HBM3 MIG {size}",
        uuid=f"MIG-{uuids.uuid5(uuids.NAMESPACE_OID, parent_uuid + size)}",
        memory_total_mib=memory_total_mib,
    )


def fake_pynvml(gpus: list[FakeGpu], driver: str = "580.95.05", cuda: int = 13000) -> object:
    """A module with the pynvml functions gpukeras calls, answering for ``gpus``."""
    module = types.ModuleType("pynvml")
    for name in dir(pynvml):
        if name.startswith(("NVMLError", "NVML_ERROR")):
            setattr(module, name, getattr(pynvml, name))

    def device_call(call: str, read: object) -> object:
        # A handle is the FakeGpu itself, a GPU's or a MIG instance's.
        def answer(handle: FakeGpu, *args: object) -> object:
            code = handle.fails.get(call)
            if code is not None:
                raise pynvml.NVMLError(code)
            return read(handle, *args)  # type: ignore[operator]

        return answer

    def handle_by_index(index: int) -> FakeGpu:
        code = gpus[index].fails.get("nvmlDeviceGetHandleByIndex")
        if code is not None:
            raise pynvml.NVMLError(code)
        return gpus[index]

    def handle_by_uuid(uuid: str | bytes) -> FakeGpu:
        """A GPU's or a MIG instance's handle by UUID (NVML takes 'MIG-...' too)."""
        wanted = uuid.decode() if isinstance(uuid, bytes) else uuid
        units = [unit for gpu in gpus for unit in (gpu, *(gpu.migs or []))]
        found = [unit for unit in units if unit.uuid == wanted]
        if not found:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return found[0]

    def mig_mode(gpu: FakeGpu) -> list[int]:
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if gpu.migs is not None else 0
        return [mode, mode]

    def mig_handle(gpu: FakeGpu, slot: int) -> FakeGpu:
        if gpu.migs is None or slot >= MAX_MIG:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if slot >= len(gpu.migs):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return gpu.migs[slot]

    def compute_processes(gpu: FakeGpu) -> list[object]:
        return [
            types.SimpleNamespace(
                pid=p.pid,
                usedGpuMemory=None if p.memory_mib is None else int(p.memory_mib * MIB),
                gpuInstanceId=0xFFFFFFFF,
                computeInstanceId=0xFFFFFFFF,
            )
            for p in gpu.processes
        ]

    def process_utilization(gpu: FakeGpu, last_seen: int) -> list[object]:
        """One sample per process with SM use in NVML's last period, if newer than last_seen."""
        busy = [p for p in gpu.processes if p.sm_util > 0 and gpu.sample_time > last_seen]
        if not busy:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return [
            types.SimpleNamespace(
                pid=p.pid,
                timeStamp=gpu.sample_time,
                smUtil=p.sm_util,
                memUtil=0,
                encUtil=0,
                decUtil=0,
            )
            for p in busy
        ]

    memory = types.SimpleNamespace
    functions = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: driver,
        "nvmlSystemGetCudaDriverVersion": lambda: cuda,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": handle_by_index,
        "nvmlDeviceGetHandleByUUID": handle_by_uuid,
        "nvmlDeviceGetName": device_call("nvmlDeviceGetName", lambda gpu: gpu.name),
        "nvmlDeviceGetUUID": device_call("nvmlDeviceGetUUID", lambda gpu: gpu.uuid),
        "nvmlDeviceGetCudaComputeCapability": device_call(
            "nvmlDeviceGetCudaComputeCapability", lambda gpu: gpu.capability
        ),
        "nvmlDeviceGetMemoryInfo": device_call(
            "nvmlDeviceGetMemoryInfo",
            lambda gpu: memory(
                total=int(gpu.memory_total_mib * MIB),
                used=int(gpu.memory_used_mib * MIB),
                free=int((gpu.memory_total_mib - gpu.memory_used_mib) * MIB),
            ),
        ),
        "nvmlDeviceGetUtilizationRates": device_call(
            "nvmlDeviceGetUtilizationRates", lambda gpu: memory(gpu=gpu.utilization, memory=0)
        ),
        "nvmlDeviceGetPowerUsage": device_call("nvmlDeviceGetPowerUsage", lambda gpu: 100_000),
        "nvmlDeviceGetPciInfo": device_call(
            "nvmlDeviceGetPciInfo", lambda gpu: memory(busId=gpu.pci_bus_id.upper().encode())
        ),
        "nvmlDeviceGetMigMode": device_call("nvmlDeviceGetMigMode", mig_mode),
        "nvmlDeviceGetMaxMigDeviceCount": device_call(
            "nvmlDeviceGetMaxMigDeviceCount", lambda gpu: MAX_MIG if gpu.migs is not None else 0
        ),
        "nvmlDeviceGetMigDeviceHandleByIndex": device_call(
            "nvmlDeviceGetMigDeviceHandleByIndex", mig_handle
        ),
        "nvmlDeviceGetComputeRunningProcesses": device_call(
            "nvmlDeviceGetComputeRunningProcesses", compute_processes
        ),
        "nvmlDeviceGetProcessUtilization": device_call(
            "nvmlDeviceGetProcessUtilization", process_utilization
        ),
    }
    module.NVML_DEVICE_MIG_ENABLE = pynvml.NVML_DEVICE_MIG_ENABLE
    for name, function in functions.items():
        setattr(module, name, function)
    return module


class FakeLibcuda:
    """libcuda's device calls, as ``ctypes.CDLL('libcuda.so.1')`` would answer them.

    Args:
        devices: (UUID as NVML writes it, PCI bus id) per CUDA ordinal; the
            UUID's prefix is dropped, as the driver's 16 bytes carry none.
        started: whether CUDA runs in the process (else CUDA_ERROR_NOT_INITIALIZED).
    """

    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_INVALID_DEVICE = 101

    def __init__(self, devices: list[tuple[str, str]], started: bool = True) -> None:
        self.devices = devices
        self.started = started

    def cuDeviceGetCount(self, count: object) -> int:
        if not self.started:
            return self.CUDA_ERROR_NOT_INITIALIZED
        count._obj.value = len(self.devices)  # type: ignore[attr-defined]
        return 0

    def cuDeviceGet(self, device: object, ordinal: int) -> int:
        if ordinal >= len(self.devices):
            return self.CUDA_ERROR_INVALID_DEVICE
        device._obj.value = ordinal  # type: ignore[attr-defined]
        return 0

    def cuDeviceGetUuid_v2(self, uuid: object, device: ctypes.c_int) -> int:
        hex_digits = self.devices[device.value][0].partition("-")[2].replace("-", "")
        ctypes.memmove(uuid._obj.bytes, bytes.fromhex(hex_digits), 16)  # type: ignore[attr-defined]
        return 0

    def cuDeviceGetPCIBusId(self, buffer: object, length: int, device: ctypes.c_int) -> int:
        buffer.value = self.devices[device.value][1].encode()  # type: ignore[attr-defined]
        return 0
