"""The devices a framework can use, with what the driver knows about each.

TensorFlow and JAX name a GPU and its compute capability; NVML adds memory
totals and free memory. A framework's GPU is matched to NVML's by UUID, through
the CUDA driver (see ``gpukeras.gpu.cuda_driver``), never by index: NVML numbers
GPUs as nvidia-smi does, CUDA after CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER
and a job's cgroup. Rows are plain dicts so R can bind them into a data.frame.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

from gpukeras.core.handles import Device, Record
from gpukeras.core.runtime import config
from gpukeras.gpu import cuda_driver, nvml

MIG_NOT_SAMPLED = (
    "a MIG instance: NVML gives its memory but measures no utilization on MIG, so it is not sampled"
)


def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it where it exists."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_memory_mib() -> tuple[float | None, float | None]:
    """Total and available host memory in MiB (available only where /proc/meminfo exists)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / nvml.MIB
    except (ValueError, OSError, AttributeError):
        total = None
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) / 1024
    except OSError:
        pass
    return total, available


def jax_gpus() -> list[Device]:
    """JAX's GPU devices; empty when no GPU backend is installed or found (JAX raises then)."""
    jax = config.backend_module()
    try:
        return list(jax.devices("gpu"))
    except RuntimeError:
        return []


def _cuda_ordinal(device: object, position: int) -> int:
    """A JAX GPU's CUDA ordinal: ``local_hardware_id``; its position where JAX has none."""
    ordinal = getattr(device, "local_hardware_id", None)
    return int(ordinal) if ordinal is not None else position


def framework_gpus() -> list[Record]:
    """GPUs the running backend can use, in its order, with name and capability.

    ``cuda_index`` is the GPU's CUDA ordinal in this process (JAX's
    ``local_hardware_id``; TensorFlow's physical device index), which differs
    from its framework index after TensorFlow's set_visible_devices
    (gpu_setup(devices = ) on TensorFlow hides GPUs that way).
    """
    if config.backend == "jax":
        return [
            {
                "framework_name": str(device),
                "name": device.device_kind,
                "compute_capability": getattr(device, "compute_capability", None),
                "cuda_index": _cuda_ordinal(device, position),
            }
            for position, device in enumerate(jax_gpus())
        ]
    tf = config.backend_module()
    physical = tf.config.list_physical_devices("GPU")
    rows = []
    for device in tf.config.get_visible_devices("GPU"):
        details = tf.config.experimental.get_device_details(device)
        capability = details.get("compute_capability")
        rows.append(
            {
                "framework_name": device.name,
                "name": details.get("device_name", device.name),
                "compute_capability": ".".join(map(str, capability)) if capability else None,
                "cuda_index": physical.index(device),
            }
        )
    return rows


@dataclass
class CudaView:
    """NVML's device for each CUDA ordinal of this process.

    Attributes:
        devices: by CUDA ordinal, the NVML GPU or MIG instance, None where
            none matches.
        source: 'driver' (the CUDA driver said) or 'CUDA_VISIBLE_DEVICES'
            (parsed, because CUDA has not started: what it will see).
        reason: why the driver was not asked.
    """

    devices: list[nvml.NvmlDevice | None]
    source: str
    reason: str | None = None


def _match(report: nvml.NvmlReport, gpu: cuda_driver.CudaGpu) -> nvml.NvmlDevice | None:
    """NVML's device with the driver's UUID; by PCI bus id for a whole GPU as a fallback."""
    for device in report.units():
        if device.uuid.lower().partition("-")[2] == gpu.uuid:
            return device
    by_bus = [
        device
        for device in report.devices
        if gpu.pci_bus_id and device.pci_bus_id == gpu.pci_bus_id and not device.mig_enabled
    ]
    return by_bus[0] if len(by_bus) == 1 else None


def cuda_view(report: nvml.NvmlReport, driver: object | None = None) -> CudaView:
    """Which NVML device each CUDA ordinal is: the driver's answer where CUDA runs in
    this process, else CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER as CUDA will read them.

    Args:
        report: NVML's report.
        driver: libcuda or a stand-in (see ``cuda_driver.gpus``); loaded when None.
    """
    try:
        found = cuda_driver.gpus(driver)
    except cuda_driver.CudaDriverUnavailable as error:
        parsed: list[nvml.NvmlDevice | None] = list(nvml.cuda_devices(report.devices))
        return CudaView(parsed, "CUDA_VISIBLE_DEVICES", str(error))
    return CudaView([_match(report, gpu) for gpu in found], "driver")


def _words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def cuda_numbering(view: CudaView) -> str:
    """How this process's GPU numbers (CUDA's, the framework's) relate to nvidia-smi's, for
    messages: "CUDA_VISIBLE_DEVICES=2,3: GPUs 0 and 1 here are nvidia-smi's 2 and 3"."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    why = f"CUDA_VISIBLE_DEVICES={value}: " if value is not None else ""
    if not view.devices:
        return f"{why}CUDA lets this process see no GPU"
    known = [(ordinal, d) for ordinal, d in enumerate(view.devices) if d is not None]
    if not known:
        return f"{why}NVML does not know which GPUs they are"
    ours = _words([str(ordinal) for ordinal, _ in known])
    names = [device.nvidia_smi_name() for _, device in known]
    whole = not any(device.is_mig for _, device in known)
    theirs = _words([name.removeprefix("GPU ") if whole else name for name in names])
    gpus, verb = ("GPUs", "are") if len(known) > 1 else ("GPU", "is")
    return f"{why}{gpus} {ours} here {verb} nvidia-smi's {theirs}"


def _unmatched(report: nvml.NvmlReport, cuda_index: int) -> str:
    if not report.available:
        return f"NVML unavailable: {report.reason}"
    return f"no GPU NVML reads is CUDA's GPU {cuda_index}"


def _gpu_row(
    position: int, gpu: Record, found: nvml.NvmlDevice | None, report: nvml.NvmlReport
) -> Record:
    reason = None
    if found is None:
        reason = _unmatched(report, int(gpu["cuda_index"]))
    elif found.is_mig:
        reason = MIG_NOT_SAMPLED
    return {
        "device": f"GPU:{position}",
        "type": "GPU",
        "name": gpu["name"],
        "compute_capability": gpu["compute_capability"]
        or (found.compute_capability if found else None),
        "memory_total_mib": found.memory_total_mib if found else None,
        "memory_free_mib": found.memory_free_mib if found else None,
        "nvml_index": found.index if found and not found.is_mig else None,
        "uuid": found.uuid if found else None,
        "pci_bus_id": found.pci_bus_id if found else None,
        "mig_parent": found.mig_parent if found else None,
        "nvml_reason": reason,
    }


def list_devices(
    report: nvml.NvmlReport | None = None, driver: object | None = None
) -> list[Record]:
    """CPU and GPUs visible to the backend, one dict per device.

    Args:
        report: an NVML report to reuse; queried when None.
        driver: libcuda or a stand-in for it (see ``cuda_view``).

    Returns:
        Dicts with device ('CPU:0', 'GPU:0', ...), type, name, compute_capability,
        memory_total_mib, memory_free_mib (a MIG instance's own), nvml_index
        (the GPU's NVML index, for NVML's monitor; None for a MIG instance or
        when NVML has no match, and ``nvml_reason`` says why), uuid ('GPU-...'
        or 'MIG-...'), pci_bus_id and mig_parent (a MIG instance's GPU, by
        NVML index).
    """
    report = report if report is not None else nvml.query()
    total, available = host_memory_mib()
    rows: list[Record] = [
        {
            "device": "CPU:0",
            "type": "CPU",
            "name": cpu_name(),
            "compute_capability": None,
            "memory_total_mib": total,
            "memory_free_mib": available,
            "nvml_index": None,
            "uuid": None,
            "pci_bus_id": None,
            "mig_parent": None,
            "nvml_reason": None,
        }
    ]
    return rows + gpu_rows(framework_gpus(), report, driver)


def gpu_rows(
    gpus: list[Record], report: nvml.NvmlReport, driver: object | None = None
) -> list[Record]:
    """``list_devices``' rows for the framework's GPUs (``framework_gpus``' rows)."""
    # The driver is asked only when the framework has GPUs: CUDA then runs here.
    view = cuda_view(report, driver).devices if gpus else []
    rows = []
    for position, gpu in enumerate(gpus):
        cuda_index = int(gpu["cuda_index"])
        found = view[cuda_index] if cuda_index < len(view) else None
        rows.append(_gpu_row(position, gpu, found, report))
    return rows
