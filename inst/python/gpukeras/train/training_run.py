"""What both training loops share about a run: its GPUs, its monitor, and the value returned.

gpu_fit() trains with Keras' own ``model.fit()`` (``gpukeras.train.fit``), or under
multi-worker training with a loop of its own (``gpukeras.train.multiworker``). Both
measure the run with the same monitor and return the same value (history
columns, monitor report, timeline, settings), so these pieces are made here,
once: which GPUs the run uses, the monitor's setup and its report, and the
parts of the value that do not depend on the loop.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any

from gpukeras.core import compat
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.distribute import strategies
from gpukeras.gpu import devices, setup, tensors
from gpukeras.gpu.simulated import simulated_gpu
from gpukeras.train import flops, monitor
from gpukeras.train.advice import TrainingContext

MONITOR_HZ = 10.0
# Training steps (batches) left out of the timing at the start (tracing, compiling): as many
# calls as hold them, and at least the first call.
TIMER_SKIP = 2


# The GPUs -----------------------------------------------------------------------
def devices_in_use(keras: ModuleType, model: Model) -> list[str] | None:
    """The devices a strategy or distribution trains ``model`` on, as 'GPU:1', 'CPU:0', ...

    On TensorFlow, the strategy the model was built under (Keras' public
    ``distribute_strategy``); on JAX, Keras' distribution in force. None
    without one: Keras then computes on the first visible GPU (or the CPU).
    """
    if keras.backend.backend() == "jax":
        distribution = keras.distribution.distribution()
        if distribution is None:
            return None
        return [tensors.normalize_device(str(d)) for d in distribution.device_mesh.devices.flat]
    strategy = getattr(model, "distribute_strategy", None)
    if strategy is None:
        return None
    try:
        placed = strategy.extended.worker_devices
    except (AttributeError, RuntimeError):  # TensorFlow's default strategy has no devices
        return None
    return [tensors.normalize_device(str(device)) for device in placed]


def gpus_in_use(keras: ModuleType, model: Model, rows: list[Record] | None = None) -> list[Record]:
    """Device rows (``devices.list_devices``) of the GPUs this training runs on.

    Exactly those of its strategy or distribution (``devices_in_use``), in
    its order: a OneDeviceStrategy on GPU:1 uses GPU:1 alone, a mirrored one
    over GPU:0 and GPU:2 those two. Without one, the first visible GPU.

    Args:
        rows: the device rows to choose from; ``devices.list_devices()`` when None.
    """
    gpus = [
        row for row in (devices.list_devices() if rows is None else rows) if row["type"] == "GPU"
    ]
    names = devices_in_use(keras, model)
    if names is None:
        return gpus[:1]
    by_name = {row["device"]: row for row in gpus}
    return [by_name[name] for name in names if name in by_name]


def device_setting(gpu_rows: list[Record]) -> object:
    """The ``device`` of gpu_fit()'s settings: 'GPU:0', a list of GPUs, or 'CPU:0'."""
    if len(gpu_rows) > 1:
        return [row["device"] for row in gpu_rows]
    return gpu_rows[0]["device"] if gpu_rows else "CPU:0"


# The monitor ----------------------------------------------------------------------
def make_monitor(
    gpu_rows: list[Record],
    batch_size: int | None,
    measure_input: bool | str = "auto",
    resumed_steps: int = 0,
    dataset: object = None,
    steps_per_execution: int = 1,
) -> monitor.TrainingMonitor:
    """The monitor of a run on ``gpu_rows``'s GPUs.

    Args:
        gpu_rows: ``gpus_in_use``'s rows.
        batch_size: rows per batch, where known.
        measure_input: time the wait for input; "auto" times it where that
            leaves Keras' loop as it is, and elsewhere times ``dataset``
            alone after training (see ``gpukeras.train.timing``).
        resumed_steps: calls a resumed epoch lets go by, which are not worth timing.
        dataset: the tf.data dataset training reads (``DataAdapter.tf_dataset``).
            A train function marked as one whose batches are on the device
            (``timing.mark_input_on_device``) waits for nothing by construction.
        steps_per_execution: batches per call: the calls left out at the start
            hold ``TIMER_SKIP`` batches (at least one call), so that a fit of
            few long calls still has some timed.
    """
    return monitor.TrainingMonitor(
        [int(r["nvml_index"]) for r in gpu_rows if r["nvml_index"] is not None],
        batch_size=batch_size,
        skip=-(-TIMER_SKIP // max(1, steps_per_execution)) + resumed_steps,
        measure_input=measure_input,
        hz=MONITOR_HZ,
        # A MIG instance has no NVML index of its own: watched by UUID, memory only.
        mig_uuids=[str(r["uuid"]) for r in gpu_rows if r.get("mig_parent") is not None],
        dataset=dataset,
    )


def counted_flops(model: Model, gpu_rows: list[Record]) -> Record:
    """The model's FLOPs per sample and, where every GPU in use is in the table, the sum
    of their peaks for the compute dtype (the throughput measured is all of theirs)."""
    counted = flops.model_flops(model)
    if counted["per_sample"] is not None and gpu_rows:
        counted["peak"] = flops.combined_peak(
            [(str(row.get("name")), row.get("compute_capability")) for row in gpu_rows],
            model.dtype_policy.compute_dtype,
        )
    return counted


def layers_without_jit(model: Model) -> list[str]:
    """The layers, nested ones included, that Keras cannot compile with XLA on this backend."""
    return [
        f"{layer.name} ({type(layer).__name__})"
        for layer in compat.flatten_layers(model)
        if compat.blocks_xla(layer)
    ]


def takes_images(model: Model) -> bool:
    """Whether the model takes images: an input of rank 4 or more, the batch included (False
    where its inputs are not known, as for a subclassed model not yet built)."""
    try:
        inputs = list(model.inputs)
    except (AttributeError, ValueError, TypeError):
        return False
    return any(len(getattr(tensor, "shape", ())) >= 4 for tensor in inputs)


def monitor_report(
    watcher: monitor.TrainingMonitor,
    model: Model,
    gpu_rows: list[Record],
    settings: Record,
    pipeline_steps: list[str] | None = None,
    gpu_dataset: Record | None = None,
) -> Record:
    """The monitor's report (``monitor.training_report``) on a run with these ``settings``."""
    first = gpu_rows[0] if gpu_rows else {}
    simulated = None if gpu_rows else simulated_gpu()  # GPUKERAS_SIMULATE_GPU
    if simulated is not None:
        first = dataclasses.asdict(simulated)
    context = TrainingContext(
        backend=str(settings["backend"]),
        gpus=[str(r["name"]) for r in gpu_rows] or ([simulated.name] if simulated else []),
        simulated=simulated.label if simulated else None,
        compute_capability=first.get("compute_capability"),
        memory_total_mib=first.get("memory_total_mib"),
        dtype_policy=str(settings["dtype_policy"]),
        jit_compile=bool(settings["jit_compile"]),
        layers_without_jit=layers_without_jit(model),
        steps_per_execution=int(settings["steps_per_execution"]),
        batch_size=settings["batch_size"],
        nvml_reason=watcher.gpu.reason,
        pipeline_steps=pipeline_steps,
        gpu_dataset=gpu_dataset,
        data=settings.get("data"),
        images=takes_images(model),
        seconds=settings.get("seconds"),
        tuned=settings.get("tuned"),
    )
    return watcher.report(context, counted_flops(model, gpu_rows), gpu_rows)


# The value returned ---------------------------------------------------------------
def history_columns(
    keras_history: Any, backup_history: list[dict] | None = None
) -> dict[str, list]:
    """Epoch logs as columns, ``epoch`` 1-based; from the backup when resuming (all epochs)."""
    if backup_history is not None:
        rows = backup_history
    else:
        logs = keras_history.history if keras_history is not None else {}
        epochs = keras_history.epoch if keras_history is not None else []
        rows = [
            {"epoch": epoch + 1, **{name: values[i] for name, values in logs.items()}}
            for i, epoch in enumerate(epochs)
        ]
    names = [name for row in rows for name in row if name != "epoch"]
    columns: dict[str, list] = {"epoch": [int(row["epoch"]) for row in rows]}
    for name in dict.fromkeys(names):
        columns[name] = [None if row.get(name) is None else float(row[name]) for row in rows]
    return columns


def result(
    history: dict[str, list],
    report: Record | None,
    watcher: monitor.TrainingMonitor | None,
    started: float,
    settings: Record,
) -> Record:
    """gpu_fit()'s value: ``history``, ``monitor``, ``timeline`` (empty without the monitor),
    ``settings``."""
    return {
        "history": history,
        "monitor": report,
        "timeline": watcher.timeline(started)
        if watcher is not None
        else monitor.timeline(started, [], []),
        "settings": settings,
    }


# The settings ---------------------------------------------------------------------
def resumed_from(state: Any) -> dict[str, object] | None:
    """Where a resumed run started (1-based epoch, batches done in it), and why it used the
    backup before the newest, when it did (``state``: a ``backup.BackupState``, or None)."""
    if state is None:
        return None
    start: dict[str, object] = {"epoch": state.epoch + 1, "batches_done": state.batches_done}
    if state.fallback is not None:
        start["fallback"] = state.fallback
    return start


def _simulated_label(gpu_rows: list[Record]) -> str | None:
    """What the "auto" choices of a run on no GPU were made for under
    ``GPUKERAS_SIMULATE_GPU``; None where a GPU is in use or nothing is simulated."""
    simulated = None if gpu_rows else simulated_gpu()
    return simulated.label if simulated is not None else None


def settings(
    request: Any,
    adapter: Any,
    applied: Record,
    model: Model,
    gpu_rows: list[Record],
    plan: strategies.StrategyPlan | None,
    state: Any,
    stop: Any,
    seconds: float,
    **loop_own: object,
) -> Record:
    """gpu_fit()'s ``settings``, what was in force, as both loops report it: the request
    (``fit_request.FitRequest``, its seed the one trained with), the data's adapter, what
    ``fit_request.apply_settings`` applied, the strategy's plan (None: no strategy), the
    backup resumed from (``state``), a signal that came once the last step had begun
    (``stop``, a ``preempt.Stop``: training completed all the same), the data's description
    (``DataAdapter.description``), whether the backend's
    ops were deterministic (``setup.deterministic_in_force``, read when training ended),
    and each loop's own (``loop_own``)."""
    return {
        "epochs": request.epochs,
        "batch_size": adapter.batch_size,
        "steps_per_epoch": adapter.steps_per_epoch,
        **applied,
        "backup_dir": request.backup_dir,
        "backup_freq": request.backup_freq if request.backup_dir is not None else None,
        "resumed_from": resumed_from(state),
        "signals": request.signals,
        "signal_after_training": stop.received,
        "seed": request.seed,
        "deterministic": setup.deterministic_in_force(),
        "backend": config.keras().backend.backend(),
        "device": device_setting(gpu_rows),
        # the "auto" choices made for a simulated GPU (GPUKERAS_SIMULATE_GPU), said as such
        "simulated_gpu": _simulated_label(gpu_rows),
        "strategy": None
        if plan is None
        else strategies.strategy_settings(plan, adapter.batch_size),
        "dtype_policy": model.dtype_policy.name,
        "data": adapter.kind,
        # data_info, validation_data_info, weights, data_path (``gpukeras.data.feed``)
        **adapter.description,
        **loop_own,
        "monitor": request.monitor,
        "tuned": request.tuned,
        "seconds": seconds,
    }
