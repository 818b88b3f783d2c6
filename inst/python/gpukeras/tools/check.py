"""gpu_check(): run real work and say, with evidence, whether the GPU is used."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpukeras.core import stack
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.handles import Record
from gpukeras.core.runtime import config
from gpukeras.gpu import devices, gpu_processes, nvml, placement, setup, xla_env
from gpukeras.tools import diagnose, probe, repair
from gpukeras.train import pretrained

NOT_ON_MIG = "not available on MIG: NVML does not measure a MIG instance's utilization"


def _stopwatch() -> Callable[[], float]:
    started = time.perf_counter()
    return lambda: time.perf_counter() - started


def run_check(
    probe_training: bool = True,
    probe_seconds: float = 3.0,
    matmul_size: int = 1024,
    requirements: Sequence[str] = (),
    caller: Mapping[str, str | None] | None = None,
    symbols: Mapping[str, str] | None = None,
    renviron: str = "~/.Renviron",
    preset: str | None = None,
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
        caller: what only the caller knows, first in the stack: ``r``, ``reticulate``
            (their versions) and ``python_chosen_by`` (why this Python).
        symbols: the ``bullet`` and ``arrow`` the caller's console shows.
        renviron: the .Renviron R reads, which a repair's ``how`` names (``repair.how``).
        preset: a KerasHub preset (a name or a folder) to check that it loads
            (``pretrained.check_preset``: KerasHub is imported for it alone); None checks none.

    Returns:
        A dict with stack (with its builds in words, see ``builds``), nvml, devices,
        setup (the settings in force, see ``setup.current_settings``), placement,
        utilization (None without a probe), verdict, reasons, advice, repairs
        (``repair.plan``: what gpu_check(fix = TRUE) can change), timings (seconds per
        phase), preset (``pretrained.check_preset``'s row; absent without ``preset``; one that
        does not load adds its repair to the advice) and lines (``check_lines``: the evidence
        in words).
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
    preset_row = None
    if preset is not None:
        elapsed = _stopwatch()
        preset_row = pretrained.check_preset(preset)
        timings["preset"] = elapsed()
    software["nvidia_driver"] = report.driver_version
    software["cuda_driver_version"] = report.cuda_driver_version
    software = {**(caller or {}), **software, **builds(software)}
    software["python_chosen_by"] = software.pop("python_chosen_by", None)
    found: Record = {
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
        **({"preset": preset_row} if preset_row is not None else {}),
        "repairs": [
            {**dataclasses.asdict(r), "how": repair.how(r, renviron)}
            for r in repair.plan(evidence, list(requirements))
        ],
        "timings": timings,
    }
    if preset_row is not None and not preset_row["loads"]:
        found["advice"] = [*found["advice"], preset_row["problem"]]
    return {**found, "lines": check_lines(found, **(symbols or {}))}


# The evidence in words --------------------------------------------------------------
def or_na(value: object, text: str = "none") -> str:
    """``value`` as text, or ``text`` where it is None."""
    return text if value is None else str(value)


def mib_text(mib: float | None) -> str:
    """Memory as a size: "2.0 GiB" from 1 GiB on, "512 MiB" below, "?" where not known."""
    if mib is None or mib != mib:  # None, or R's NA (NaN)
        return "?"
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def builds(software: Record) -> Record:
    """The builds of a ``stack.collect_stack()`` record in words: ``tensorflow_build`` (its
    version, distribution and CUDA, or "not installed"), ``jax_build`` (its version and CUDA
    plugin; None without JAX) and ``keras_hub_build`` (with its tensorflow-text; None
    without KerasHub)."""
    s = software
    if s["tensorflow"] is None:
        tensorflow = "not installed"
    elif s["is_cuda_build"]:
        tensorflow = (
            f"{s['tensorflow']} ({s['tensorflow_distribution']}, CUDA {or_na(s['cuda_version'])}, "
            f"cuDNN {or_na(s['cudnn_version'])})"
        )
    else:
        tensorflow = f"{s['tensorflow']} ({or_na(s['tensorflow_distribution'])}, CPU-only build)"
    hub = s.get("keras_hub")
    return {
        "tensorflow_build": tensorflow,
        "jax_build": s["jax"] and f"{s['jax']} ({or_na(s['jax_cuda_plugin'], 'no CUDA plugin')})",
        "keras_hub_build": hub
        and f"{hub} (tensorflow-text {or_na(s.get('tensorflow_text'), 'not installed')})",
    }


def check_lines(check: Record, bullet: str = "*", arrow: str = "->") -> dict[str, list[str]]:
    """A ``run_check()`` result's evidence in words, by section: ``stack`` (versions, the
    Python and why, the driver), ``devices`` (those in use, then the GPUs the driver shows
    that the backend does not use, and why), ``placement`` (each matmul and the speed-up)
    and ``probe`` (the training probe, the whole GPU's use, and this process's own apart
    from others'), and ``preset`` where one was checked (``preset_lines``). ``bullet`` and
    ``arrow``: the symbols the console shows."""
    s = check["stack"]
    backend = s["keras_backend"]
    driver = (
        "none"
        if s["nvidia_driver"] is None
        else f"{s['nvidia_driver']} (CUDA {s['cuda_driver_version']})"
    )
    stack = [
        f"R {s.get('r')} {bullet} reticulate {s.get('reticulate')} {bullet} "
        f"Python {s['python']} {bullet} Keras {s['keras']} on {backend}",
        f"JAX {s['jax_build']}" if backend == "jax" else f"TensorFlow {s['tensorflow_build']}",
        *([f"KerasHub {s['keras_hub_build']}"] if s.get("keras_hub_build") else []),
        f"Python: {s['python_executable']} "
        f"(chosen by {or_na(s.get('python_chosen_by'), 'unknown')})",
        f"NVIDIA driver: {driver} {bullet} "
        f"CUDA_VISIBLE_DEVICES: {or_na(s['cuda_visible_devices'], 'unset')} "
        f"{bullet} {s['os']} {s['os_release']} {s['machine']}",
    ]
    return {
        "stack": stack,
        "devices": _device_lines(check, or_na(backend, "the backend")),
        "placement": _placement_lines(check["placement"], arrow),
        "probe": _probe_lines(check["utilization"], check["nvml"]),
        **({"preset": preset_lines(check["preset"])} if check.get("preset") else {}),
    }


VERDICT_TEXT = {
    "gpu_used": "the GPU is used",
    "gpu_available_not_used": "a GPU is available but NOT used",
    "no_gpu": "no GPU is used",
}

PLACEMENT_HEADING = (
    "Placement (float32 matmul of n x n matrices, n grown per device until one takes 5 ms; "
    "median of 5 runs):"
)


def check_text(
    verdict: str,
    reasons: Sequence[str],
    advice: Sequence[str],
    lines: Mapping[str, Sequence[str]],
    setup: Sequence[str],
    repairs: Mapping[str, Sequence[Any]] | None = None,
    bullet: str = "*",
    arrow: str = "->",
) -> list[str]:
    """print(gpu_check())'s lines: the verdict in words (``VERDICT_TEXT``), then each section
    indented under its title: the ``reasons`` and ``advice`` (R's, with what R alone knows
    added), ``lines``' sections (``check_lines``), the ``setup`` lines (gpu_setup()'s print
    but its first line), and the ``repairs`` (columns ``what``, ``how``, ``needs_restart``,
    ``status``): those gpu_check(fix = TRUE) can make, or, once it was asked to, what became
    of each."""

    def section(title: str, items: Sequence[str]) -> list[str]:
        # as R's paste0("  ", lines) wrote it: no lines is one empty one
        return [title, *(f"  {item}" for item in items or [""])]

    text = [
        f"<gpukeras check> Verdict: {verdict} ({VERDICT_TEXT[verdict]})",
        *section("Reasons:", [f"{bullet} {reason}" for reason in reasons or [""]]),
        *(section("Advice:", [f"{arrow} {said}" for said in advice]) if advice else []),
        *section("Stack:", lines.get("stack", [])),
        *section("Devices:", lines.get("devices", [])),
        *section("Setup (gpu_setup()):", [line.strip() for line in setup]),
        *section(PLACEMENT_HEADING, lines.get("placement", [])),
        *section("Training probe:", lines.get("probe", [])),
        *(
            section("KerasHub preset (gpu_check(preset = )):", lines["preset"])
            if lines.get("preset")
            else []
        ),
    ]
    columns = ("what", "how", "needs_restart", "status")
    rows = list(zip(*(repairs.get(column) or [] for column in columns))) if repairs else []
    if not rows:
        return text
    # a status is R's NA (sent as "NA") until gpu_check(fix = TRUE) made the repairs
    if all(status in (None, "NA") for *_, status in rows):
        can = [
            f"  {arrow} {what} ({how}{'; then restart R' if restart else ''})"
            for what, how, restart, _ in rows
        ]
        return [*text, "Repairs gpu_check(fix = TRUE) can make:", *can]
    made = [f"  [{status}] {what} ({how})" for what, how, _, status in rows]
    return [*text, "Repairs (gpu_check(fix = TRUE)):", *made]


def preset_lines(row: Record) -> list[str]:
    """A ``pretrained.check_preset`` row in words: the preset, and what loads or why not."""
    if not row["loads"]:
        return [f"{row['preset']}: does NOT load", f"  {row['problem']}"]
    count = row["parameters"]
    return [
        f"{row['preset']}: loads ({row['backbone']}"
        + ("" if count is None else f", {count:,} parameters")
        + ")",
        f"  tasks: {', '.join(row['tasks']) or 'none listed'}",
    ]


def _device_lines(check: Record, backend: str) -> list[str]:
    lines = []
    for row in check["devices"]:
        compute = (
            ""
            if row.get("compute_capability") is None
            else f" (compute {row['compute_capability']})"
        )
        mig = row.get("mig_parent")
        lines.append(
            f"{row['device']:<6} {row['name']}{compute}, "
            f"{mib_text(row['memory_total_mib'])} total, {mib_text(row['memory_free_mib'])} free"
            + ("" if mig is None else f" [MIG instance of nvidia-smi's GPU {mig}]")
        )
    # GPUs the driver sees that the backend does not use: the evidence behind "a CPU-only
    # build" and "hidden by CUDA_VISIBLE_DEVICES".
    for gpu in check["nvml"].get("devices", []):
        if gpu.get("in_use"):
            continue
        mig_mode = (
            ""
            if gpu.get("mig_instances") is None
            else f", MIG mode with {gpu['mig_instances']} instance(s)"
        )
        total = f"{mib_text(gpu['memory_total_mib'])} total{mig_mode}"
        if gpu.get("error") is not None:
            why = f"not readable: {gpu['error']}"
        elif gpu["visible"]:
            why = f"{total}; the driver sees it, {backend} does not use it"
        else:
            why = f"{total}; hidden by CUDA_VISIBLE_DEVICES"
        lines.append(f"NVML {gpu['index']} {gpu['name']}: {why}")
    return lines


def _placement_lines(matmul: Record, arrow: str) -> list[str]:
    lines = [
        f"{run['requested']:<6} {arrow} {run['actual']:<6} n = {run.get('size', 'NA')!s:<5} "
        f"{run['median_ms']:8.2f} ms  {run['gflops']:7.1f} GFLOP/s"
        for run in matmul["runs"]
    ]
    speedup = matmul["speedup"]
    return [
        *lines,
        f"GPU speed-up over CPU: {'n/a (no GPU run)' if speedup is None else f'{speedup:.1f}x'}",
    ]


def _probe_lines(u: Record | None, nvml_report: Record) -> list[str]:
    if u is None:
        return ["not run (probe = FALSE)"]
    rate = u.get("samples_per_second")
    lines = [
        f"{u['steps']} steps of batch {u['batch_size']} on {u['device']} in {u['seconds']:.1f} s: "
        f"{'NA' if rate is None else f'{round(rate):,}'} samples/s; "
        f"weights on {u['weights_device']}"
    ]
    if not u["gpus"]:
        reason = or_na(
            u.get("nvml_reason") if nvml_report["available"] else nvml_report["reason"],
            "no samples",
        )
        # On a MIG instance NVML has no utilization to measure: not a failure to measure it.
        lines.append(
            f"GPU utilization: {reason}"
            if reason.startswith("not available")
            else f"GPU utilization: not measured ({reason})"
        )
    for gpu in u["gpus"]:
        lines.append(
            f"GPU {gpu['nvml_index']} (whole GPU): "
            f"utilization mean {gpu['utilization_mean']:.0f}%, max {gpu['utilization_max']:.0f}%; "
            f"memory used up to {mib_text(gpu['memory_used_max_mib'])} "
            f"({gpu['samples']} samples at {gpu['sample_hz']:.1f} Hz)"
        )
    p = u.get("processes")
    if p is None or p.get("notes") == ["no GPU to watch"]:
        return lines
    sm = "n/a" if p.get("own_sm_max") is None else f"{p['own_sm_max']:.0f}%"
    memory = "n/a" if p.get("own_memory_mib") is None else mib_text(p["own_memory_mib"])
    lines.append(f"this process (pid {p['pid']}): SM up to {sm}, memory {memory}")
    for other in p["others"]:
        share = "n/a" if other.get("sm_max") is None else f"{other['sm_max']:.0f}%"
        lines.append(
            f"other process (pid {other['pid']}): SM up to {share}, "
            f"memory {mib_text(other['memory_mib'])}"
        )
    return [*lines, *(f"note: {note}" for note in p["notes"])]
