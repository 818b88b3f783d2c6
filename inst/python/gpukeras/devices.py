"""The devices a framework can use, with what the driver knows about each.

TensorFlow and JAX name a GPU and its compute capability; NVML adds memory
totals and free memory. Rows are plain dicts so R can bind them into a data.frame.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from gpukeras import nvml
from gpukeras.runtime import config


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


def jax_gpus() -> list[object]:
    """JAX's GPU devices; empty when no GPU backend is installed or found (JAX raises then)."""
    jax = config.backend_module()
    try:
        return list(jax.devices("gpu"))
    except RuntimeError:
        return []


def framework_gpus() -> list[dict[str, object]]:
    """GPUs the running backend can use, in its order, with name and capability.

    ``cuda_index`` is the GPU's position among those CUDA lets the process see,
    which differs from its framework index after TensorFlow's
    set_visible_devices (gpu_setup(devices = ) on TensorFlow hides GPUs that way).
    """
    if config.backend == "jax":
        return [
            {
                "framework_name": str(device),
                "name": device.device_kind,
                "compute_capability": getattr(device, "compute_capability", None),
                "cuda_index": position,
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


def list_devices(report: nvml.NvmlReport | None = None) -> list[dict[str, object]]:
    """CPU and GPUs visible to the backend, one dict per device.

    Args:
        report: an NVML report to reuse; queried when None.

    Returns:
        Dicts with device ('CPU:0', 'GPU:0', ...), type, name, compute_capability,
        memory_total_mib, memory_free_mib, nvml_index (None when NVML has no match).
    """
    report = report if report is not None else nvml.query()
    total, available = host_memory_mib()
    rows: list[dict[str, object]] = [
        {
            "device": "CPU:0",
            "type": "CPU",
            "name": cpu_name(),
            "compute_capability": None,
            "memory_total_mib": total,
            "memory_free_mib": available,
            "nvml_index": None,
        }
    ]
    visible = nvml.visible_indices([device.uuid for device in report.devices])
    for position, gpu in enumerate(framework_gpus()):
        cuda_index = int(gpu["cuda_index"])  # type: ignore[call-overload]
        nvml_device = report.devices[visible[cuda_index]] if cuda_index < len(visible) else None
        rows.append(
            {
                "device": f"GPU:{position}",
                "type": "GPU",
                "name": gpu["name"],
                "compute_capability": gpu["compute_capability"]
                or (nvml_device.compute_capability if nvml_device else None),
                "memory_total_mib": nvml_device.memory_total_mib if nvml_device else None,
                "memory_free_mib": nvml_device.memory_free_mib if nvml_device else None,
                "nvml_index": nvml_device.index if nvml_device else None,
            }
        )
    return rows
