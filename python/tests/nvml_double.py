"""A stand-in for the pynvml calls gpukeras makes, fed with values and errors NVIDIA documents.

NVML cannot run without an NVIDIA driver, so its behaviour on machines this
one is not (devices another job holds, cgroup-blocked devices, several GPUs)
is exercised through this double. Its errors are nvidia-ml-py's own classes
(``pynvml.NVMLError(code)`` makes the subclass NVML would raise), so the code
under test catches exactly what it would catch on a GPU machine.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

import pynvml

MIB = 1024 * 1024


@dataclass
class FakeGpu:
    """One device as the double reports it; ``fails`` maps a pynvml call to an NVML error code."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    capability: tuple[int, int] = (9, 0)
    memory_total_mib: float = 81559.0
    memory_used_mib: float = 512.0
    utilization: int = 0
    fails: dict[str, int] = field(default_factory=dict)


def fake_pynvml(gpus: list[FakeGpu], driver: str = "580.95.05", cuda: int = 13000) -> object:
    """A module with the pynvml functions gpukeras calls, answering for ``gpus``."""
    module = types.ModuleType("pynvml")
    for name in dir(pynvml):
        if name.startswith(("NVMLError", "NVML_ERROR")):
            setattr(module, name, getattr(pynvml, name))

    def device_call(call: str, read: object) -> object:
        def answer(handle: int) -> object:
            code = gpus[handle].fails.get(call)
            if code is not None:
                raise pynvml.NVMLError(code)
            return read(gpus[handle])  # type: ignore[operator]

        return answer

    def handle_by_index(index: int) -> int:
        code = gpus[index].fails.get("nvmlDeviceGetHandleByIndex")
        if code is not None:
            raise pynvml.NVMLError(code)
        return index

    memory = types.SimpleNamespace
    functions = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: driver,
        "nvmlSystemGetCudaDriverVersion": lambda: cuda,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": handle_by_index,
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
    }
    for name, function in functions.items():
        setattr(module, name, function)
    return module
