"""NVIDIA's management library (NVML): what the driver sees, independent of any framework.

NVML answers questions TensorFlow and JAX cannot: is there a driver at all,
which GPUs exist even when CUDA_VISIBLE_DEVICES hides them, how busy they are.
It comes from nvidia-ml-py (NVIDIA's binding; `pynvml` the package is deprecated).

NVML numbers GPUs as nvidia-smi does, which need not be CUDA's numbering
(NVIDIA: "the NVML index may not correlate with the CUDA device index").
A GPU in MIG mode is split into MIG instances, each a CUDA device of its
own with its own UUID ("MIG-...") and memory; NVML measures no utilization
on them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TypeVar

MIB = 1024 * 1024
T = TypeVar("T")


class NvmlUnavailable(Exception):
    """NVML cannot be used here; the message says why, for the user."""


@dataclass
class NvmlDevice:
    """One GPU, or one MIG instance of a GPU, as NVML reads it.

    Attributes:
        index: NVML's (and nvidia-smi's) index of the GPU; for a MIG
            instance, that of the GPU it is part of.
        pci_bus_id: the GPU's PCI bus id, 'dddd:bb:dd.f' (a MIG instance's
            is its GPU's).
        error: why NVML could not read this device (then its figures are
            None): NVML counts GPUs a process may not open, e.g. those a
            SLURM job's cgroup or a container leaves out.
        mig_parent: for a MIG instance, the NVML index of its GPU; None for a GPU.
        mig_index: a MIG instance's index among its GPU's instances.
        mig_devices: a GPU in MIG mode's instances (CUDA sees those, not the GPU).
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
    pci_bus_id: str | None = None
    mig_parent: int | None = None
    mig_index: int | None = None
    mig_devices: list[NvmlDevice] = field(default_factory=list)

    @property
    def is_mig(self) -> bool:
        return self.mig_parent is not None

    @property
    def mig_enabled(self) -> bool:
        return bool(self.mig_devices)

    def nvidia_smi_name(self) -> str:
        """How nvidia-smi names it: 'GPU 2', or 'GPU 0 MIG device 1' for a MIG instance."""
        if self.is_mig:
            return f"GPU {self.mig_parent} MIG device {self.mig_index}"
        return f"GPU {self.index}"


@dataclass
class NvmlReport:
    available: bool
    reason: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    devices: list[NvmlDevice] = field(default_factory=list)

    def units(self) -> list[NvmlDevice]:
        """Every GPU and every MIG instance."""
        return [unit for device in self.devices for unit in (device, *device.mig_devices)]

    def find(self, uuid: str | None) -> NvmlDevice | None:
        """The GPU or MIG instance with this UUID."""
        return next((device for device in self.units() if uuid and device.uuid == uuid), None)


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


def pci_bus_id(value: str | bytes) -> str:
    """A PCI bus id as 'dddd:bb:dd.f': NVML writes an 8-digit domain, CUDA a 4-digit one."""
    domain, _, rest = _text(value).strip().lower().partition(":")
    return f"{int(domain, 16):04x}:{rest}" if rest else domain


def _optional(pynvml: ModuleType, read: Callable[[], T]) -> T | None:
    """What ``read`` gives, or None where NVML does not support it on this device."""
    try:
        return read()
    except pynvml.NVMLError:
        return None


def _readable_device(pynvml: ModuleType, index: int) -> NvmlDevice:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    major_minor = _optional(pynvml, lambda: pynvml.nvmlDeviceGetCudaComputeCapability(handle))
    device = _read(pynvml, handle, index)
    device.compute_capability = "{}.{}".format(*major_minor) if major_minor else None
    device.pci_bus_id = _optional(
        pynvml, lambda: pci_bus_id(pynvml.nvmlDeviceGetPciInfo(handle).busId)
    )
    mode = _optional(pynvml, lambda: pynvml.nvmlDeviceGetMigMode(handle)[0])
    if mode == pynvml.NVML_DEVICE_MIG_ENABLE:
        device.mig_devices = _mig_devices(pynvml, handle, device)
    return device


def _read(pynvml: ModuleType, handle: object, index: int) -> NvmlDevice:
    """Name, UUID, memory and utilization of a GPU's or a MIG instance's handle."""
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    utilization = _optional(pynvml, lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    return NvmlDevice(
        index=index,
        name=_text(pynvml.nvmlDeviceGetName(handle)),
        uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
        compute_capability=None,
        memory_total_mib=memory.total / MIB,
        memory_used_mib=memory.used / MIB,
        memory_free_mib=memory.free / MIB,
        utilization_gpu=float(utilization) if utilization is not None else None,
    )


def _mig_devices(pynvml: ModuleType, handle: object, gpu: NvmlDevice) -> list[NvmlDevice]:
    """The MIG instances of a GPU in MIG mode; empty slots (NOT_FOUND) are skipped."""
    found = []
    for slot in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except pynvml.NVMLError_NotFound:
            continue
        device = _read(pynvml, mig, gpu.index)
        device.compute_capability = gpu.compute_capability
        device.pci_bus_id = gpu.pci_bus_id
        device.mig_parent, device.mig_index = gpu.index, slot
        found.append(device)
    return found


def device_handle(pynvml: ModuleType, device: NvmlDevice) -> object:
    """NVML's handle of a GPU or of a MIG instance."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(device.mig_parent if device.is_mig else device.index)
    if device.is_mig:
        return pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, device.mig_index)
    return handle


def binding_installed() -> bool:
    """Whether nvidia-ml-py (the ``pynvml`` module) can be imported in this Python."""
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return False
    return True


def kernel_driver_gpus(folder: str = "/proc/driver/nvidia/gpus") -> int:
    """The GPUs the NVIDIA kernel driver lists (Linux), known without nvidia-ml-py; 0 without it."""
    try:
        return len(os.listdir(folder))
    except OSError:
        return 0


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


def _capability_key(device: NvmlDevice) -> tuple[int, ...]:
    return tuple(int(part) for part in (device.compute_capability or "0.0").split("."))


def _cuda_base_order(openable: list[NvmlDevice], device_order: str) -> list[NvmlDevice]:
    """The GPUs in the order CUDA numbers them before CUDA_VISIBLE_DEVICES applies.

    PCI_BUS_ID is the PCI bus order, nvidia-smi's. FASTEST_FIRST (CUDA's
    default) uses a heuristic NVIDIA does not document; the newest compute
    capability first, then PCI bus order, is the approximation taken here.
    """
    by_bus = sorted(openable, key=lambda d: (d.pci_bus_id or "", d.index))
    if device_order == "PCI_BUS_ID":
        return by_bus
    return sorted(by_bus, key=_capability_key, reverse=True)


def _cuda_units(gpu: NvmlDevice) -> list[NvmlDevice]:
    """What CUDA enumerates of a GPU: the GPU, or its MIG instances in MIG mode."""
    return gpu.mig_devices if gpu.mig_enabled else [gpu]


def cuda_devices(
    gpus: Sequence[NvmlDevice | str],
    cuda_visible_devices: str | None = None,
    device_order: str | None = None,
) -> list[NvmlDevice]:
    """The GPUs or MIG instances CUDA will let a process see, in CUDA's order, from NVML's list.

    Parses CUDA_VISIBLE_DEVICES the way the CUDA runtime does: comma-separated
    indices or UUID prefixes ('GPU-...' for a GPU, 'MIG-...' for a MIG
    instance), stopping at the first entry that names no device (so '-1' or
    '' hides every GPU). Unset means all GPUs. Indices count in the order
    CUDA_DEVICE_ORDER sets (see ``_cuda_base_order``).

    A GPU NVML cannot read (uuid '') is one this process cannot open: under a
    SLURM job's cgroup NVML lists every GPU of the node, CUDA only the job's.
    So CUDA's indices count the readable GPUs alone, and the others are never
    visible.

    This is what CUDA will do when it starts; once it has started,
    ``gpukeras.gpu.cuda_driver`` asks the driver itself.

    Args:
        gpus: NVML's GPUs by NVML index (a bare UUID stands for a GPU; '' where
            not readable).
        cuda_visible_devices: the variable's value; read from the environment when None.
        device_order: CUDA_DEVICE_ORDER; read from the environment when None.
    """
    value = (
        os.environ.get("CUDA_VISIBLE_DEVICES")
        if cuda_visible_devices is None
        else cuda_visible_devices
    )
    order = device_order or os.environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    devices = [
        gpu if isinstance(gpu, NvmlDevice) else _stand_in(index, gpu)
        for index, gpu in enumerate(gpus)
    ]
    base = _cuda_base_order([gpu for gpu in devices if gpu.uuid], order)
    if value is None:
        return [unit for gpu in base for unit in _cuda_units(gpu)]
    named = [*base, *(mig for gpu in base for mig in gpu.mig_devices)]
    chosen: list[NvmlDevice] = []
    for token in (piece.strip() for piece in value.split(",")):
        if token.isdigit() and int(token) < len(base):
            units = _cuda_units(base[int(token)])
        else:
            units = [gpu for gpu in named if token and gpu.uuid.startswith(token)]
            if len(units) != 1:
                break
            units = _cuda_units(units[0])
        if any(unit in chosen for unit in units):
            break
        chosen.extend(units)
    return chosen


def _stand_in(index: int, uuid: str) -> NvmlDevice:
    return NvmlDevice(index, "", uuid, None, None, None, None, None)
