"""NVIDIA's management library (NVML): what the driver sees, independent of any framework.

NVML answers questions TensorFlow and JAX cannot: is there a driver at all,
which GPUs exist even when CUDA_VISIBLE_DEVICES hides them, how busy they are.
It comes from nvidia-ml-py (NVIDIA's binding; `pynvml` the package is deprecated).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType

MIB = 1024 * 1024


class NvmlUnavailable(Exception):
    """NVML cannot be used here; the message says why, for the user."""


@dataclass
class NvmlDevice:
    """One GPU as NVML reads it.

    Attributes:
        error: why NVML could not read this device (then its figures are
            None): NVML counts GPUs a process may not open, e.g. those a
            SLURM job's cgroup or a container leaves out.
    """

    index: int
    name: str
    uuid: str
    compute_capability: str | None
    memory_total_mib: float | None
    memory_used_mib: float | None
    memory_free_mib: float | None
    utilization_gpu: float | None
    error: str | None = None


@dataclass
class NvmlReport:
    available: bool
    reason: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    devices: list[NvmlDevice] = field(default_factory=list)


def _explain(pynvml: ModuleType, error: Exception) -> str:
    if isinstance(error, pynvml.NVMLError_LibraryNotFound):
        return "libnvidia-ml.so.1 (NVML) not found, so no NVIDIA driver is installed"
    if isinstance(error, pynvml.NVMLError_DriverNotLoaded):
        return "the NVIDIA kernel driver is installed but not loaded"
    if isinstance(error, pynvml.NVMLError_NoPermission):
        return "no permission to talk to the NVIDIA driver"
    return f"NVML failed to start: {error}"


@contextlib.contextmanager
def session() -> Iterator[ModuleType]:
    """An initialised NVML; raises NvmlUnavailable with the reason when there is none.

    NVML counts nvmlInit/nvmlShutdown pairs, so nested sessions are safe.
    """
    try:
        import pynvml
    except ImportError as error:
        raise NvmlUnavailable(
            "nvidia-ml-py is not installed in this Python (pip install nvidia-ml-py)"
        ) from error
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        raise NvmlUnavailable(_explain(pynvml, error)) from error
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _unreadable(pynvml: ModuleType, error: Exception) -> str:
    """Why a device NVML counts cannot be read, for the user."""
    if isinstance(error, pynvml.NVMLError_NoPermission):
        return (
            "NVML has no permission to read this GPU (it may belong to another job or user); "
            f"NVML: {error}"
        )
    if isinstance(error, pynvml.NVMLError_OperatingSystem):
        return (
            "the operating system blocked access to this GPU (outside this job's cgroup, "
            f"as under SLURM or in a container); NVML: {error}"
        )
    return f"NVML could not read this GPU: {error}"


def _device(pynvml: ModuleType, index: int) -> NvmlDevice:
    """The device at ``index``; one that cannot be read is reported with the reason."""
    try:
        return _readable_device(pynvml, index)
    except pynvml.NVMLError as error:
        return NvmlDevice(
            index=index,
            name=f"GPU {index} (not readable)",
            uuid="",
            compute_capability=None,
            memory_total_mib=None,
            memory_used_mib=None,
            memory_free_mib=None,
            utilization_gpu=None,
            error=_unreadable(pynvml, error),
        )


def _readable_device(pynvml: ModuleType, index: int) -> NvmlDevice:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    try:
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        capability: str | None = f"{major}.{minor}"
    except pynvml.NVMLError:
        capability = None
    try:
        utilization: float | None = float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except pynvml.NVMLError:
        utilization = None
    return NvmlDevice(
        index=index,
        name=_text(pynvml.nvmlDeviceGetName(handle)),
        uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
        compute_capability=capability,
        memory_total_mib=memory.total / MIB,
        memory_used_mib=memory.used / MIB,
        memory_free_mib=memory.free / MIB,
        utilization_gpu=utilization,
    )


def query() -> NvmlReport:
    """Driver version and every GPU the driver sees (not only the visible ones).

    Never raises: without NVML, or when NVML fails after it started, the
    report says why; a GPU that cannot be read is listed with its ``error``.
    """
    try:
        with session() as pynvml:
            try:
                cuda = pynvml.nvmlSystemGetCudaDriverVersion()
                count = pynvml.nvmlDeviceGetCount()
                driver = _text(pynvml.nvmlSystemGetDriverVersion())
            except pynvml.NVMLError as error:
                return NvmlReport(available=False, reason=f"NVML started but failed: {error}")
            return NvmlReport(
                available=True,
                driver_version=driver,
                cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}",
                devices=[_device(pynvml, index) for index in range(count)],
            )
    except NvmlUnavailable as error:
        return NvmlReport(available=False, reason=str(error))


def visible_indices(uuids: list[str], cuda_visible_devices: str | None = None) -> list[int]:
    """NVML indices of the GPUs CUDA lets a process see, in CUDA's order.

    Parses CUDA_VISIBLE_DEVICES the way the CUDA runtime does: comma-separated
    indices or UUID prefixes, stopping at the first entry that names no GPU
    (so '-1' or '' hides every GPU). Unset means all GPUs.

    A GPU NVML cannot read (uuid '') is one this process cannot open: under a
    SLURM job's cgroup NVML lists every GPU of the node, CUDA only the job's.
    So CUDA's indices count the readable GPUs alone, and the others are never
    visible.

    Args:
        uuids: NVML UUIDs of all GPUs, by NVML index ('' where not readable).
        cuda_visible_devices: the variable's value; read from the environment when None.
    """
    value = (
        os.environ.get("CUDA_VISIBLE_DEVICES")
        if cuda_visible_devices is None
        else cuda_visible_devices
    )
    openable = [index for index, uuid in enumerate(uuids) if uuid]
    if value is None:
        return openable
    chosen: list[int] = []
    for token in (piece.strip() for piece in value.split(",")):
        if token.isdigit() and int(token) < len(openable):
            index = openable[int(token)]
        else:
            matches = [i for i, uuid in enumerate(uuids) if token and uuid.startswith(token)]
            if len(matches) != 1:
                break
            index = matches[0]
        if index in chosen:
            break
        chosen.append(index)
    return chosen
