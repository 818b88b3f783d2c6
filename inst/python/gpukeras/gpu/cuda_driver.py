"""The CUDA driver's own answer to "which GPU is CUDA device n?".

TensorFlow and JAX number their GPUs by CUDA ordinal (TensorFlow's physical
GPU:n; JAX's ``local_hardware_id``), but neither device object carries a UUID
or a PCI bus id (TensorFlow's details: device_name, compute_capability; JAX's
attributes: device_kind, compute_capability, core_count, coords). NVML numbers
GPUs as nvidia-smi does, which need not be CUDA's order. The driver
(libcuda.so.1) links the two: for each ordinal it gives the UUID (a MIG
instance's own with ``cuDeviceGetUuid_v2``) and the PCI bus id, after
CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER and a job's cgroup have applied.

The driver is only asked once CUDA runs in this process (a framework started
it). gpukeras never calls ``cuInit`` itself: CUDA reads CUDA_VISIBLE_DEVICES
once, at ``cuInit``, so starting it early would freeze the GPUs gpu_setup()
is about to choose.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

CUDA_SUCCESS = 0
CUDA_ERROR_NOT_INITIALIZED = 3
PCI_BUS_ID_LENGTH = 64


class CudaDriverUnavailable(Exception):
    """The driver cannot be asked here; the message says why."""


class CUuuid(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * 16)]


@dataclass
class CudaGpu:
    """One CUDA device of this process.

    Attributes:
        ordinal: CUDA's index of the device in this process.
        uuid: the hex digits of its UUID, 'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx',
            without NVML's 'GPU-' or 'MIG-' (the driver's bytes do not say which).
        pci_bus_id: 'dddd:bb:dd.f', or None when the driver does not say.
    """

    ordinal: int
    uuid: str
    pci_bus_id: str | None


def load() -> object:
    """libcuda.so.1, the driver's library that every CUDA framework loads."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        raise CudaDriverUnavailable(f"libcuda.so.1 (the CUDA driver) not found: {error}") from error


def uuid_text(raw: bytes) -> str:
    """The 16 bytes of a CUDA UUID as NVML writes them, less the prefix."""
    digits = raw.hex()
    return "-".join((digits[:8], digits[8:12], digits[12:16], digits[16:20], digits[20:]))


def _call(driver: object, name: str, *args: object) -> None:
    code = getattr(driver, name)(*args)
    if code == CUDA_ERROR_NOT_INITIALIZED:
        raise CudaDriverUnavailable("CUDA has not started in this process yet")
    if code != CUDA_SUCCESS:
        raise CudaDriverUnavailable(f"the CUDA driver's {name} failed (CUresult {code})")


def started(driver: object | None = None) -> bool:
    """Whether CUDA has started (``cuInit``) in this process, asked without starting it.

    Before ``cuInit`` every driver call but ``cuInit`` itself answers
    CUDA_ERROR_NOT_INITIALIZED, so ``cuDeviceGetCount`` tells. Once CUDA has
    started, CUDA_VISIBLE_DEVICES no longer changes which GPUs it shows. False
    where there is no driver (no GPU to choose).

    Args:
        driver: libcuda (``load()`` when None), or a stand-in with its functions.
    """
    count = ctypes.c_int(0)
    try:
        _call(driver if driver is not None else load(), "cuDeviceGetCount", ctypes.byref(count))
    except CudaDriverUnavailable:
        return False
    return True


def gpus(driver: object | None = None) -> list[CudaGpu]:
    """Every CUDA device this process sees, by ordinal, as the driver reports it.

    Args:
        driver: libcuda (``load()`` when None), or a stand-in with its functions.

    Raises:
        CudaDriverUnavailable: no libcuda, CUDA not started in this process,
            or a driver call failed.
    """
    driver = driver if driver is not None else load()
    count = ctypes.c_int(0)
    _call(driver, "cuDeviceGetCount", ctypes.byref(count))
    get_uuid = "cuDeviceGetUuid_v2" if hasattr(driver, "cuDeviceGetUuid_v2") else "cuDeviceGetUuid"
    found = []
    for ordinal in range(count.value):
        device = ctypes.c_int(0)
        _call(driver, "cuDeviceGet", ctypes.byref(device), ordinal)
        uuid = CUuuid()
        _call(driver, get_uuid, ctypes.byref(uuid), device)
        bus = ctypes.create_string_buffer(PCI_BUS_ID_LENGTH)
        try:
            _call(driver, "cuDeviceGetPCIBusId", bus, PCI_BUS_ID_LENGTH, device)
            bus_id: str | None = bus.value.decode().lower()
        except CudaDriverUnavailable:
            bus_id = None
        found.append(CudaGpu(ordinal, uuid_text(bytes(uuid.bytes)), bus_id))
    return found
