"""The verdict of gpu_check(): is the GPU used, and if not, why and what to do.

A pure function of the evidence gathered by ``check``, so every rule can be
tested, including those for systems this machine is not (Windows, macOS).

Utilization verdicts rest on this process's own figures where NVML gives
them (per-process SM share and memory), because the whole GPU's figures count
other processes' work too; those are reported apart.

Verdicts: ``gpu_used``; ``gpu_available_not_used`` when a GPU is there (the
framework or, not hidden by CUDA_VISIBLE_DEVICES, the driver sees it) but the
work did not run on it, as with a CPU-only TensorFlow next to a working
driver, the most common case behind "R Keras does not use my GPU"; ``no_gpu``
when there is none to use (none found, or all hidden on purpose).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpukeras.core.stack import parse_version

GPU_USED = "gpu_used"
GPU_AVAILABLE_NOT_USED = "gpu_available_not_used"
NO_GPU = "no_gpu"


@dataclass
class Evidence:
    """What the check observed. Fields left None were not observed.

    ``driver_gpus`` counts the GPUs the kernel driver lists (``nvml.kernel_driver_gpus``),
    known without nvidia-ml-py; ``memory_growth_asked`` is gpu_setup()'s last request in
    this process (None: not called); ``jax_preallocate`` is XLA_PYTHON_CLIENT_PREALLOCATE
    as set.
    """

    os: str
    keras_backend: str
    framework_gpus: int
    tensorflow: str | None = None
    tensorflow_distribution: str | None = None
    is_cuda_build: bool | None = None
    cuda_version: str | None = None
    cudnn_version: str | None = None
    jax_cuda_plugin: str | None = None
    cuda_visible_devices: str | None = None
    jax_platforms: str | None = None
    nvml_available: bool = False
    nvml_reason: str | None = None
    nvml_gpus: int = 0
    nvml_visible_gpus: int = 0
    nvml_gpu_names: list[str] = field(default_factory=list)
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    placement_on_gpu: bool = False
    placement_actual: list[str] = field(default_factory=list)
    speedup: float | None = None
    probe_ran: bool = False
    probe_weights_device: str | None = None
    probe_utilization_mean: float | None = None
    probe_utilization_max: float | None = None
    probe_on_mig: bool = False
    own_utilization_max: float | None = None
    own_memory_mib: float | None = None
    other_processes: list[dict[str, object]] = field(default_factory=list)
    # for gpu_check(fix = TRUE)'s repairs (``repair.plan``)
    pynvml_installed: bool = True
    driver_gpus: int = 0
    memory_growth_asked: bool | None = None
    jax_preallocate: str | None = None


@dataclass
class Diagnosis:
    verdict: str
    reasons: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)

    def add(self, reason: str, advice: str | None = None) -> None:
        self.reasons.append(reason)
        if advice and advice not in self.advice:
            self.advice.append(advice)


def _driver_sees(ev: Evidence) -> str:
    """The GPUs the driver shows this process, in words: 'NVIDIA H100 80GB HBM3'."""
    names = ev.nvml_gpu_names or [f"{ev.nvml_visible_gpus} GPU(s)"]
    listed = names[0] if len(names) == 1 else f"{len(names)} GPUs ({', '.join(names)})"
    return f"the driver sees {listed} (driver {ev.driver_version})"


def _jax_platforms_exclude_gpus(value: str | None) -> bool:
    """JAX_PLATFORMS names platforms, none of them a GPU (e.g. 'cpu')."""
    if value is None or not value.strip():
        return False
    platforms = {p.strip().lower() for p in value.split(",") if p.strip()}
    return not platforms & {"cuda", "gpu", "rocm"}


def _why_no_gpu(ev: Evidence, out: Diagnosis) -> None:
    tf_version = parse_version(ev.tensorflow)
    gpu_present = ev.nvml_available and ev.nvml_visible_gpus > 0
    if ev.os == "Darwin":
        out.add(
            "macOS: there is no CUDA (NVIDIA) GPU support for TensorFlow or JAX on macOS",
            "On Apple silicon, pip install tensorflow-metal in the gpukeras env for the "
            "Metal plugin; for CUDA, train on a Linux machine with an NVIDIA GPU.",
        )
    if ev.os == "Windows" and ev.keras_backend == "tensorflow" and tf_version[:2] > (2, 10):
        out.add(
            f"native Windows with TensorFlow {ev.tensorflow}: TensorFlow dropped GPU "
            "support on native Windows after 2.10",
            "Run R inside WSL2 (Ubuntu) and install_gpukeras(gpu = TRUE) there; native "
            "Windows GPU support ended with TensorFlow 2.10.",
        )
    if ev.keras_backend == "tensorflow" and ev.is_cuda_build is False:
        build = (
            f"{ev.tensorflow_distribution or 'tensorflow'} {ev.tensorflow} was built without CUDA"
        )
        out.add(
            f"{_driver_sees(ev)}, but TensorFlow is the CPU-only build ({build})"
            if gpu_present
            else f"CPU-only TensorFlow build ({build})",
            "Reinstall with GPU support: install_gpukeras(gpu = TRUE), then restart R.",
        )
    if ev.keras_backend == "jax" and ev.jax_cuda_plugin is None:
        out.add(
            f"{_driver_sees(ev)}, but JAX is CPU-only: no jax CUDA plugin is installed"
            if gpu_present
            else "CPU-only JAX: no jax CUDA plugin is installed",
            "pip install 'jax[cuda12]' (or cuda13) in the gpukeras env, then restart R.",
        )
    if (
        ev.cuda_visible_devices is not None
        and ev.nvml_visible_gpus == 0
        and (ev.nvml_gpus > 0 or ev.cuda_visible_devices.strip() in ("", "-1"))
    ):
        out.add(
            f"CUDA_VISIBLE_DEVICES='{ev.cuda_visible_devices}' hides every GPU",
            "Unset it before gpukeras starts Python: Sys.unsetenv('CUDA_VISIBLE_DEVICES') "
            "in a fresh R session (or set it to the GPU indices to use, e.g. '0').",
        )
    jax_kept_off = ev.keras_backend == "jax" and _jax_platforms_exclude_gpus(ev.jax_platforms)
    if jax_kept_off:
        kept_off = f"JAX_PLATFORMS='{ev.jax_platforms}' keeps JAX off the GPU"
        out.add(
            f"{_driver_sees(ev)}, but {kept_off}" if gpu_present else kept_off,
            "Unset it before gpukeras starts Python: Sys.unsetenv('JAX_PLATFORMS') in a "
            "fresh R session (or add cuda to it, e.g. 'cuda,cpu').",
        )
    if not ev.nvml_available and ev.os == "Linux":
        out.add(
            f"no usable NVIDIA driver: {ev.nvml_reason}",
            "Install the NVIDIA driver for your GPU; `nvidia-smi` must list the GPU "
            "before any framework can use it.",
        )
    hidden = ev.nvml_visible_gpus == 0 and ev.cuda_visible_devices is not None
    gpu_build = (
        ev.is_cuda_build is not False
        if ev.keras_backend == "tensorflow"
        else ev.jax_cuda_plugin is not None
    )
    if ev.nvml_available and ev.nvml_gpus > 0 and not hidden and not jax_kept_off and gpu_build:
        built = (
            f"built for CUDA {ev.cuda_version}, cuDNN {ev.cudnn_version}"
            if ev.keras_backend == "tensorflow"
            else f"with {ev.jax_cuda_plugin}"
        )
        out.add(
            f"the driver sees {ev.nvml_gpus} GPU(s) (driver {ev.driver_version}, CUDA "
            f"{ev.cuda_driver_version}) but {ev.keras_backend} ({built}) finds none: "
            "a CUDA/cuDNN library mismatch",
            f"Reinstall so pip brings matching CUDA libraries: install_gpukeras(gpu = TRUE); "
            f"remove other CUDA versions from LD_LIBRARY_PATH; the driver must support the "
            f"CUDA version the framework was built for (driver supports up to "
            f"{ev.cuda_driver_version}).",
        )
    if not out.reasons:
        out.add(
            f"{ev.keras_backend} sees no GPU",
            "Run `nvidia-smi` to confirm the GPU and driver, then install_gpukeras(gpu = TRUE).",
        )
    if gpu_present:
        out.verdict = GPU_AVAILABLE_NOT_USED


def diagnose(ev: Evidence) -> Diagnosis:
    """Turn the evidence into a verdict with reasons and concrete advice."""
    if ev.framework_gpus == 0:
        out = Diagnosis(NO_GPU)
        _why_no_gpu(ev, out)
        return out

    out = Diagnosis(GPU_USED)
    if not ev.placement_on_gpu:
        out.verdict = GPU_AVAILABLE_NOT_USED
        out.add(
            f"a matmul asked for the GPU ran on {', '.join(ev.placement_actual) or 'no device'}",
            "Check for a device scope or CUDA_VISIBLE_DEVICES that forces the CPU; build the "
            "model without a CPU device scope.",
        )
    else:
        speed = f", {ev.speedup:.1f}x the CPU's speed" if ev.speedup else ""
        out.add(f"a matmul ran on the GPU ({', '.join(ev.placement_actual)}){speed}")
    if ev.probe_ran:
        if ev.probe_weights_device and not ev.probe_weights_device.startswith("GPU"):
            out.verdict = GPU_AVAILABLE_NOT_USED
            out.add(
                f"the probe model's weights were placed on {ev.probe_weights_device}",
                "Build and train the model outside any CPU device scope.",
            )
        _utilization(ev, out)
    return out


def _others(ev: Evidence) -> str:
    """Other processes on the GPU, in words: 'pid 4242 (20480 MiB, SM up to 40%)'."""
    described = []
    for process in ev.other_processes:
        figures = [
            f"{process['memory_mib']:.0f} MiB" if process.get("memory_mib") is not None else None,
            f"SM up to {process['sm_max']:.0f}%" if process.get("sm_max") is not None else None,
        ]
        shown = ", ".join(figure for figure in figures if figure)
        described.append(f"pid {process['pid']}" + (f" ({shown})" if shown else ""))
    return "; ".join(described)


def _utilization(ev: Evidence, out: Diagnosis) -> None:
    """The probe's utilization evidence: this process's own where NVML gives it."""
    whole = (
        f"the whole GPU: mean {ev.probe_utilization_mean:.0f}%, max {ev.probe_utilization_max:.0f}%"
        if ev.probe_utilization_max is not None
        else None
    )
    if ev.own_utilization_max is not None and ev.own_utilization_max <= 0:
        out.verdict = GPU_AVAILABLE_NOT_USED
        busy_elsewhere = (ev.probe_utilization_max or 0) > 0
        out.add(
            "NVML measured no SM use by this process while the probe trained"
            + (f" ({whole}: other processes' work)" if busy_elsewhere and whole else ""),
            "Check that training runs on the GPU (keras.device) and that no other "
            "setting hides it.",
        )
    elif ev.own_utilization_max is not None:
        out.add(
            f"NVML measured up to {ev.own_utilization_max:.0f}% SM use by this process while "
            "Keras trained" + (f" ({whole})" if whole else "")
        )
    elif ev.probe_on_mig:
        memory = (
            f"; this process held {ev.own_memory_mib:.0f} MiB of the instance's memory"
            if ev.own_memory_mib
            else ""
        )
        out.add(
            "GPU utilization: not available on MIG (NVML does not measure a MIG instance's "
            f"utilization), so the verdict rests on where the work ran{memory}"
        )
    elif ev.probe_utilization_max is None:
        out.add(
            f"GPU utilization not measured: {ev.nvml_reason or 'no NVML samples'}",
            "pip install nvidia-ml-py in the gpukeras env to monitor utilization.",
        )
    elif ev.probe_utilization_max <= 0:
        out.verdict = GPU_AVAILABLE_NOT_USED
        out.add(
            "NVML measured 0% GPU utilization while the probe trained",
            "Check that training runs on the GPU (keras.device) and that no other "
            "setting hides it.",
        )
    else:
        shared = (
            " (a whole-GPU figure: other processes' work counts too)" if ev.other_processes else ""
        )
        out.add(
            f"NVML measured {ev.probe_utilization_mean:.0f}% mean, "
            f"{ev.probe_utilization_max:.0f}% max GPU utilization while Keras trained{shared}"
        )
    if ev.other_processes:
        out.add(f"other processes on this GPU: {_others(ev)}")
