"""gpu_check(): run real work and say, with evidence, whether the GPU is used."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence

from gpukeras.core import stack
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.handles import Record
from gpukeras.core.runtime import config
from gpukeras.gpu import devices, gpu_processes, nvml, placement, setup, xla_env
from gpukeras.tools import diagnose, probe, repair

NOT_ON_MIG = "not available on MIG: NVML does not measure a MIG instance's utilization"


def _stopwatch() -> Callable[[], float]:
    started = time.perf_counter()
    return lambda: time.perf_counter() - started


def run_check(
    probe_training: bool = True,
    probe_seconds: float = 3.0,
    matmul_size: int = 1024,
    requirements: Sequence[str] = (),
) -> Record:
    """Gather the stack, devices, placement and utilization evidence, and diagnose it.

    Args:
        probe_training: also train a small model for ``probe_seconds`` while
            sampling NVML utilization.
        probe_seconds: steady-state length of the training probe.
        matmul_size: side the placement matmul starts from; each device's doubles
            until one multiply takes 5 ms (see ``gpukeras.gpu.placement``).
        requirements: install_gpukeras()'s pins for a GPU machine, for the repairs
            (``repair.plan``).

    Returns:
        A dict with stack, nvml, devices, setup (the settings in force, see
        ``setup.current_settings``), placement, utilization (None without a
        probe), verdict, reasons, advice, repairs (``repair.plan``: what
        gpu_check(fix = TRUE) can change) and timings (seconds per phase).
    """
    if not probe_seconds > 0 or not matmul_size >= 1:
        raise BadArgumentError("probe_seconds and matmul_size must be positive numbers.")
    timings: dict[str, float] = {}
    elapsed = _stopwatch()
    config.keras()
    timings["start_runtime"] = elapsed()

    elapsed = _stopwatch()
    report = nvml.query()
    software = stack.collect_stack()
    device_rows = devices.list_devices(report)
    gpus = [str(row["device"]) for row in device_rows if row["type"] == "GPU"]
    timings["inspect"] = elapsed()

    elapsed = _stopwatch()
    matmul = placement.measure_placement(gpus, size=int(matmul_size))
    timings["placement"] = elapsed()

    utilization = None
    probed = report.find(str(device_rows[1]["uuid"])) if gpus else None
    if probe_training:
        elapsed = _stopwatch()
        watched = [row["nvml_index"] for row in device_rows[1:2] if row["nvml_index"] is not None]
        with gpu_processes.ProcessSampler(probed) as processes:
            utilization = probe.run_training_probe(
                gpus[0] if gpus else "CPU:0", seconds=float(probe_seconds), nvml_indices=watched
            )
        utilization["processes"] = processes.summary()
        if probed is not None and probed.is_mig:  # the monitor watched nothing, and why
            utilization["nvml_reason"] = NOT_ON_MIG
        timings["probe"] = elapsed()

    gpu_stats = utilization["gpus"] if utilization else []
    own = utilization["processes"] if utilization else {}
    # The NVML devices CUDA shows this process (a MIG instance's GPU counts as shown).
    cuda = [device for device in devices.cuda_view(report).devices if device is not None]
    visible = {device.mig_parent if device.is_mig else device.index for device in cuda}
    in_use = {
        row["mig_parent"] if row["mig_parent"] is not None else row["nvml_index"]
        for row in device_rows[1:]
    }
    probe_reason = utilization["nvml_reason"] if utilization else None
    evidence = diagnose.Evidence(
        os=str(software["os"]),
        keras_backend=str(software["keras_backend"]),
        framework_gpus=len(gpus),
        tensorflow=software["tensorflow"],
        tensorflow_distribution=software["tensorflow_distribution"],
        is_cuda_build=software["is_cuda_build"],
        cuda_version=software["cuda_version"],
        cudnn_version=software["cudnn_version"],
        jax_cuda_plugin=software["jax_cuda_plugin"],
        cuda_visible_devices=software["cuda_visible_devices"],
        jax_platforms=software["jax_platforms"],
        nvml_available=report.available,
        nvml_reason=report.reason if not report.available else probe_reason,
        nvml_gpus=len(report.devices),
        nvml_visible_gpus=len(cuda),
        nvml_gpu_names=[device.name for device in cuda],
        driver_version=report.driver_version,
        cuda_driver_version=report.cuda_driver_version,
        placement_on_gpu=bool(matmul["on_gpu"]),
        placement_actual=[str(run["actual"]) for run in matmul["runs"][:-1]],
        speedup=matmul["speedup"],
        probe_ran=utilization is not None,
        probe_weights_device=utilization["weights_device"] if utilization else None,
        probe_utilization_mean=gpu_stats[0]["utilization_mean"] if gpu_stats else None,
        probe_utilization_max=gpu_stats[0]["utilization_max"] if gpu_stats else None,
        probe_on_mig=probed is not None and probed.is_mig,
        own_utilization_max=own.get("own_sm_max"),
        own_memory_mib=own.get("own_memory_mib"),
        other_processes=list(own.get("others", [])),
        pynvml_installed=nvml.binding_installed(),
        driver_gpus=nvml.kernel_driver_gpus(),
        memory_growth_asked=config.setup.memory_growth_asked,
        jax_preallocate=os.environ.get(xla_env.JAX_PREALLOCATE),
    )
    verdict = diagnose.diagnose(evidence)
    software["nvidia_driver"] = report.driver_version
    software["cuda_driver_version"] = report.cuda_driver_version
    return {
        "stack": software,
        "nvml": {
            "available": report.available,
            "reason": report.reason,
            "gpus": len(report.devices),
            # every GPU the driver sees, also those the framework does not (a CPU-only
            # build, CUDA_VISIBLE_DEVICES) and those NVML cannot read (their error says why)
            "devices": [
                {
                    "index": device.index,
                    "name": device.name,
                    "memory_total_mib": device.memory_total_mib,
                    "visible": device.index in visible,
                    "in_use": device.index in in_use,
                    "mig_instances": len(device.mig_devices) if device.mig_enabled else None,
                    "error": device.error,
                }
                for device in report.devices
            ],
        },
        "devices": device_rows,
        "setup": setup.current_settings(),
        "placement": matmul,
        "utilization": utilization,
        **dataclasses.asdict(verdict),
        "repairs": [dataclasses.asdict(r) for r in repair.plan(evidence, list(requirements))],
        "timings": timings,
    }
