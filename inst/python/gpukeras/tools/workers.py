"""Where gpu_cv() and gpu_search() run their fits: one worker process per device, or more.

Each fit runs in a worker process that sees one device alone (its own
``CUDA_VISIBLE_DEVICES``), so the session that searches holds no device memory; a
worker runs one fit after another, Keras' state reset between them (``reset``). This
module decides the slots (the "auto" rules live here, R only checks the arguments):
which devices, how many workers on each, and, with ``per_device = "auto"``, whether
more fit one GPU once a fit's memory plan is known. It asks NVML (no framework starts).
"""

from __future__ import annotations

import gc
import math
import os
import time
from typing import Any

from gpukeras.core import compat
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.runtime import config
from gpukeras.gpu import nvml
from gpukeras.gpu.simulated import SimulatedGpu, simulated_gpu

# Workers sharing one GPU take turns on its compute: past a few, more only queue.
MOST_PER_DEVICE = 4
# What a worker's fits may use of a GPU's memory, the rest left to the CUDA contexts
# (a few hundred MiB each: each slot's worker, and a spare of an earlier pool or a
# replacement starting its runtime) and the memory plan's error (within 25 % on an H100).
MEMORY_SHARE = 0.8


def plan(
    devices: str | list[int] = "all",
    workers: int | None = None,
    per_device: str | int = "auto",
) -> dict[str, Any]:
    """The worker slots: ``slots`` (each a ``device`` name such as "GPU 0" or "CPU",
    ``visible``, the CUDA_VISIBLE_DEVICES value that shows that GPU alone, or None on
    the CPU, and ``memory_total_mib``), ``gpus`` (how many GPUs are used) and ``reason``.

    ``devices``: "all" (every GPU this process may see), or CUDA indices among them.
    ``workers``: the total number of workers (spread over the devices in turn); None for
    ``per_device`` on each GPU, or one worker where there is no GPU. ``per_device``:
    workers per GPU, or "auto" (one, until ``fitting`` says more fit).
    """
    if workers is not None:
        workers = int(workers)  # R gives whole numbers as doubles
    visible = _visible_gpus()
    if devices != "all":
        wanted = [int(index) for index in devices]
        missing = [index for index in wanted if index >= len(visible)]
        if missing:
            raise BadArgumentError(
                f"`devices` names GPU {', '.join(map(str, missing))}, but this process sees "
                f"{len(visible)} GPU{'s' if len(visible) != 1 else ''} "
                f'(CUDA indices 0 to {len(visible) - 1}). Give devices = "all" or indices '
                "from gpu_devices()."
                if visible
                else f"`devices` names GPU {', '.join(map(str, missing))}, but no GPU is "
                'visible here: leave devices = "all" to run on the CPU.'
            )
        visible = [visible[index] for index in wanted]
    simulated = simulated_gpu() if not visible and devices in ("all", [0]) else None
    if simulated is not None:
        return _simulated_plan(simulated, workers, per_device)
    if not visible:
        count = workers or 1
        return {
            "slots": [{"device": "CPU", "visible": None, "memory_total_mib": None}] * count,
            "gpus": 0,
            "plan_memory": False,
            "reason": f"no GPU is visible: {count} worker{'s' if count > 1 else ''} on the CPU",
        }
    each = 1 if per_device == "auto" else int(per_device)
    count = workers or each * len(visible)
    slots = [
        {
            "device": f"GPU {index}",
            "visible": gpu.uuid,
            "memory_total_mib": gpu.memory_total_mib,
        }
        for index, gpu in (
            (slot % len(visible), visible[slot % len(visible)]) for slot in range(count)
        )
    ]
    return {
        "slots": slots,
        "gpus": len(visible),
        # with per_device "auto", a fit's memory plan decides whether more workers fit a GPU
        "plan_memory": per_device == "auto",
        "reason": f"{count} worker{'s' if count > 1 else ''} on {len(visible)} GPU"
        f"{'s' if len(visible) > 1 else ''}, each seeing its GPU alone",
    }


def _simulated_plan(
    simulated: SimulatedGpu, workers: int | None, per_device: str | int
) -> dict[str, Any]:
    """``plan`` for one simulated GPU (``GPUKERAS_SIMULATE_GPU``): its slots on the CPU, no
    device hidden from them, the memory plan deciding how many share it as on a GPU."""
    each = 1 if per_device == "auto" else int(per_device)
    count = workers or each
    slot = {"device": "GPU 0", "visible": None, "memory_total_mib": simulated.memory_total_mib}
    return {
        "slots": [dict(slot) for _ in range(count)],
        "gpus": 1,
        "plan_memory": per_device == "auto",
        "reason": f"{count} worker{'s' if count > 1 else ''} on a {simulated.label}",
    }


def ahead(workers: str | int) -> dict[str, Any]:
    """The slots gpu_setup(workers_ahead = ) starts a worker for ahead, each loading itself in
    the background (Python, Keras, the runtime started, one step compiled) until the
    session's first gpu_cv() or gpu_search() takes it: ``slots`` (as ``plan``'s, so that
    they are the first pool's: its default one per GPU, or ``gpu_workers(workers = n)``'s)
    and ``line``, the words the setup's print adds.

    ``workers``: "auto" (a worker per GPU, real or simulated; none where no GPU is visible,
    where a worker's start would take the cores the session works on while it loads), or
    how many (0 for none).
    """
    if workers == "auto":
        default = plan()
        slots = default["slots"] if default["gpus"] else []
        why = "" if slots else " (no GPU is visible: workers_ahead = 1 starts one on the CPU)"
    else:
        slots = plan(workers=int(workers))["slots"] if int(workers) > 0 else []
        why = ""
    devices = [slot["device"] for slot in slots]
    started = (
        f"{len(slots)} on {', '.join(dict.fromkeys(devices))}, loading for the first "
        "gpu_cv() or gpu_search()"
        if slots
        else "none"
    )
    return {"slots": slots, "line": f"  workers ahead:   {started}{why}"}


def _visible_gpus() -> list[nvml.NvmlDevice]:
    report = nvml.query()
    if not report.available:
        return []
    return nvml.cuda_devices(report.devices)


def fitting(memory_total_mib: float | None, peak_mib: float | None) -> dict[str, Any]:
    """How many workers' fits fit one GPU together, by one fit's planned peak memory:
    ``workers`` (1 to ``MOST_PER_DEVICE``) and ``reason``."""
    if not memory_total_mib or not peak_mib or peak_mib <= 0:
        return {"workers": 1, "reason": "one worker per GPU: no memory plan to share it by"}
    fit = max(1, min(MOST_PER_DEVICE, math.floor(MEMORY_SHARE * memory_total_mib / peak_mib)))
    return {
        "workers": fit,
        "reason": f"{fit} worker{'s' if fit > 1 else ''} per GPU: a fit's plan peaks at "
        f"{peak_mib:,.0f} MiB of {memory_total_mib:,.0f} MiB "
        f"(at most {MOST_PER_DEVICE}, within {MEMORY_SHARE:.0%} of the memory)",
    }


def grow(
    slots: list[dict[str, Any]], slot: int, peak_mib: float | None, cores: int | None = None
) -> dict[str, Any]:
    """The pool's ``slots`` once a fit on ``slots[slot]`` (0-based) planned ``peak_mib``:
    as many slots on its GPU as ``fitting`` says fit there, but no more than the host's
    ``cores`` (None: this machine's) shared by the pool's GPUs, since each worker is a
    process that needs a core to feed its GPU; the new ones (copies of that slot) after the
    others, none taken away; and the ``reason``."""
    grown = slots[slot]
    fit = fitting(grown["memory_total_mib"], peak_mib)
    devices = len({other["device"] for other in slots})
    per_device = max(1, (cores or os.cpu_count() or 1) // devices)
    workers, reason = fit["workers"], fit["reason"]
    if workers > per_device:
        workers = per_device
        reason = (
            f"{workers} worker{'s' if workers > 1 else ''} per GPU: the host's CPU cores "
            f"shared by its {devices} GPU{'s' if devices > 1 else ''} (the memory would take "
            f"{fit['workers']})"
        )
    there = sum(other["device"] == grown["device"] for other in slots)
    return {
        "slots": list(slots) + [dict(grown) for _ in range(workers - there)],
        "reason": reason,
    }


def warm() -> dict[str, Any]:
    """Start this worker's backend on its device and compile one small training step (a
    dense layer's loss, its gradient and the update) as the worker starts, before its first
    task (a spare started ahead has done it when a call finds it):
    ``backend`` and ``seconds``, or ``compiled`` False where it only started the runtime.

    Last, what the worker then holds is frozen (``gc.freeze``): Python's collections, those
    of ``reset`` after each task and those while a fit runs, look only at what the tasks
    made.

    Call it after the session's gpu_setup() (the runtime starts here, with its settings).
    Where the step is in the compilation cache (core.compile_cache) it is loaded, not
    compiled: the worker's fit then loads its programs too, where they are there.

    A process's first compiled program costs more than its later ones (the compiler's own
    start). A trial's model_fn and first training step, in a fresh process on 2 CPU cores,
    took 0.3-0.4 s less after it on JAX (0.8 -> 0.6-0.7 s and 1.1-1.25 -> 0.9-1.0 s) and
    0.05-0.1 s less on TensorFlow, time the worker now spends before its task comes
    (2026-11-26, Keras 3.15, JAX 0.7.1, TensorFlow 2.21).
    """
    started = time.perf_counter()
    backend = config.backend
    module = config.backend_module()
    if backend == "jax":
        numpy = module.numpy

        def loss(weights: Any, x: Any) -> Any:
            return numpy.mean(numpy.square(x @ weights))

        def step(weights: Any, x: Any) -> Any:
            return weights - 0.01 * module.grad(loss)(weights, x)

        module.jit(step)(numpy.ones((8, 4)), numpy.ones((2, 8))).block_until_ready()
    else:
        weights = module.Variable(module.ones((8, 4)))

        @module.function
        def train_step(x: Any) -> Any:
            with module.GradientTape() as tape:
                loss = module.reduce_mean(module.square(module.matmul(x, weights)))
            weights.assign_sub(0.01 * tape.gradient(loss, weights))
            return loss

        train_step(module.ones((2, 8))).numpy()
    # (Python, the frameworks and the core: some 350,000 objects on JAX with TensorFlow
    # loaded, which live as long as the worker; after a fit, a full collection took 0.65 s
    # on 2 CPU cores, 0.06-0.08 s frozen, freeing the same objects)
    gc.freeze()
    return {"backend": backend, "seconds": round(time.perf_counter() - started, 3)}


def seed(seed: int) -> None:
    """Keras' global seed as a worker's fit starts, as gpu_fit(seed = ) seeds
    (``compat.set_random_seed``: Python, NumPy, the backend and Keras; TensorFlow where it
    is loaded, else when gpukeras loads it for tf.data): the fold or trial is then the same
    as a fit run by hand after ``keras$utils$set_random_seed(seed)``. A JAX worker so does
    not load TensorFlow for its seed alone."""
    compat.set_random_seed(config.keras(), seed)


def reset() -> None:
    """After a worker's task, what its fit left: Keras' global state (``clear_session``:
    its models, layer names, the backend's graph and TensorFlow's) and Python's garbage,
    so that the worker's next fit is the same as one in a fresh worker (its seed is set
    by ``seed`` as it starts). The runtime and what was compiled stay, and so does what
    the session's gpu_setup() set in Keras' global state, which ``clear_session`` would
    clear too: the dtype policy (mixed precision) and the distribution."""
    keras = config.keras()
    policy = keras.config.dtype_policy()
    distribution = keras.distribution.distribution()
    keras.backend.clear_session(free_memory=False)  # one collection, below, not two
    keras.config.set_dtype_policy(policy)
    if distribution is not None:
        keras.distribution.set_distribution(distribution)
    gc.collect()
