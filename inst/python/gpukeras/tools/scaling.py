"""gpu_scaling(): does training on N devices pay? The same global batch timed on one device
and on N, each on a copy of the model.

A mirrored or DataParallel strategy splits each global batch over N devices and adds the
gradients' all-reduce to every step, so a small model can train slower on N devices than
on one (keras-team/keras#20998: no speed-up on two GPUs with JAX). ``scaling`` trains a
copy of the model (with its weights, compiled as it is) on the first of the devices and
another under a mirrored strategy over all of them, with the same data, global batch and
seed, alternating ``rounds`` times, each run timed by its fastest epoch after the first
(which compiles; an epoch is the same rows on both sides, whatever the steps per
dispatch), and keeps each side's best run. The
efficiency is the N-device throughput over N times the one-device throughput: 1 is
perfect scaling, 1/N no gain.
"""

from __future__ import annotations

import time
from typing import Any, cast

from gpukeras.core import arguments
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import batch_rules
from gpukeras.distribute import strategies
from gpukeras.tools import result_lines
from gpukeras.train import fit, model_copies

# Below this efficiency, gpu_scaling() says what to change.
GOOD_EFFICIENCY = 0.8
# A replica's share of the batch below which it has too little work per all-reduce.
SMALL_REPLICA_BATCH = 128
# Input wait on N devices above which the pipeline is what holds them back.
INPUT_BOUND = 0.1


def advice(
    efficiency: float,
    replicas: int,
    global_batch: int | None,
    steps_per_execution: int,
    input_wait_share: float | None,
    backend: str,
) -> list[str]:
    """What to change when the efficiency is below ``GOOD_EFFICIENCY``; nothing above it.

    The rules: a replica's batch under ``SMALL_REPLICA_BATCH`` rows, a larger global batch;
    one step per execution on TensorFlow, more; N devices waiting for input over
    ``INPUT_BOUND`` of a step, more input workers; where none of these holds, a larger
    global batch all the same; and N devices slower than one, or hardly faster, staying on
    one.
    """
    if efficiency >= GOOD_EFFICIENCY:
        return []
    found = []
    if global_batch is not None and global_batch // replicas < SMALL_REPLICA_BATCH:
        per_replica = global_batch // replicas
        found.append(
            f"Each device gets {per_replica} rows a step, too little work for each exchange "
            f"of gradients: give a larger global batch (batch_size = {global_batch * 4}, "
            "with the learning rate raised to match)."
        )
    if backend == "tensorflow" and steps_per_execution == 1:
        found.append(
            "Run more steps per call (gpu_fit(step = gpu_step(steps_per_execution = 8))): "
            "each call pays the host's dispatch to every device."
        )
    if input_wait_share is not None and input_wait_share > INPUT_BOUND:
        found.append(
            f"On {replicas} devices training waits for input {input_wait_share:.0%} of the "
            "step: feed it faster (a gpu_dataset() with cache, a parallel map, prefetch), or "
            "more input workers, before adding devices."
        )
    if not found and global_batch is not None:  # nothing else explains it: the exchange does
        found.append(
            f"{replicas} devices reach {efficiency:.0%} of {replicas} times one device's "
            "throughput: each step's exchange of gradients costs more than the work it divides. "
            f"A larger global batch (batch_size = {global_batch * 2}) gives each device more "
            "work per exchange."
        )
    speedup = efficiency * replicas
    if speedup < 1.2:
        found.append(
            f"Stay on one device: {replicas} train {speedup:.2f}x as fast as one, for this "
            "model and batch."
        )
    return found


def _epoch_ends(keras: Any) -> Any:
    """A callback that notes when each epoch ends."""

    class EpochEnds(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.ends: list[float] = []

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self.ends.append(time.perf_counter())

    return EpochEnds()


def _run(model: Model, data: object, strategy: object, request: dict[str, Any]) -> dict[str, Any]:
    """One timed run on a copy of ``model``: its throughput in its fastest epoch after the
    first (which compiles), whatever the steps per dispatch, and what the monitor saw."""
    keras = config.keras()
    copy = model_copies.clone(keras, model, "gpu_scaling()", weights=True)
    timer = _epoch_ends(keras)
    result: dict[str, Any] = fit.fit(copy, data, strategy=strategy, callbacks=[timer], **request)
    monitor = result["monitor"] or {}
    settings = result["settings"]
    rows = settings["steps_per_epoch"] * settings["batch_size"]
    ends = timer.ends
    return {
        # the fastest epoch: a stray compilation or another process takes from the others
        "samples_per_second": rows / min(b - a for a, b in zip(ends, ends[1:])),
        "step_time_ms": monitor.get("batch_time_mean_ms"),
        "input_wait_share": monitor.get("input_wait_share"),
        "batch_size": settings["batch_size"],
        "steps_per_execution": settings["steps_per_execution"],
        "data": settings["data"],
    }


def scaling(
    model: Model,
    data: object,
    devices: list[str] | None = None,
    batch_size: int | None = None,
    epochs: int = 3,
    rounds: int = 2,
    seed: int | None = 1,
) -> Record:
    """Time ``model`` on the first device of ``devices`` and on all of them (see the notes).

    Args:
        model: a compiled Keras 3 model; it is not changed (copies train).
        data: what gpu_fit() takes (arrays ``(x, y)``, a dataset).
        devices: two devices or more ('GPU:0', 'CPU:1', ...); None: every GPU, else every
            logical CPU device (as a mirrored gpu_strategy() takes them).
        batch_size: the global batch for arrays (None: a dataset's own).
        epochs: epochs a run trains, at least 2 (the first compiles and is not timed).
        rounds: runs on each side, alternating; the best of each counts.
        seed: the seed of every run.

    Returns:
        ``efficiency``, ``speedup`` (throughput on N over one), ``replicas``, ``devices``,
        ``runs`` (one row per run: ``devices``, ``round``, ``samples_per_second``,
        ``step_time_ms``, ``input_wait_share``, ``batch_size``, ``steps_per_execution``,
        ``data``: how the data was fed), ``batch_size``, ``per_replica_batch_size``,
        ``backend`` and ``advice``.

    Raises:
        BadArgumentError: fewer than two devices; BadModelError: a model that cannot be
            copied or is not compiled.
    """
    batch_rules.check_batch_size_for(batch_size, data)
    keras = config.keras()
    arguments.check_compiled_model(keras, model)
    if int(epochs) < 2:
        raise BadArgumentError(
            "gpu_scaling() times the epochs after the first, which compiles: give epochs >= 2."
        )
    several = strategies.make("mirrored", devices)
    plan = cast(strategies.StrategyPlan, several["plan"])
    if plan.replicas < 2:
        raise BadArgumentError(
            f"gpu_scaling() compares one device with several, but found "
            f"{plan.replicas} ({', '.join(plan.devices)}): give devices = "
            'c("GPU:0", "GPU:1"), '
            "or on a CPU make logical devices first with gpu_setup(cpu_devices = 2)."
        )
    first = plan.devices[0]
    one = strategies.make("one_device", [first])
    request = {"epochs": int(epochs), "batch_size": batch_size, "seed": seed, "verbose": 0}
    runs: list[dict[str, Any]] = []
    for round_ in range(1, int(rounds) + 1):
        for side, made in ((1, one), (plan.replicas, several)):
            run = _run(model, data, made["strategy"], request)
            runs.append({"devices": side, "round": round_, **run})
    best = {
        side: max(
            (r for r in runs if r["devices"] == side),
            key=lambda r: r["samples_per_second"] or 0.0,
        )
        for side in (1, plan.replicas)
    }
    alone, together = best[1], best[plan.replicas]
    replicas = int(plan.replicas)
    speedup = float(together["samples_per_second"]) / float(alone["samples_per_second"])
    efficiency = speedup / replicas
    global_batch = together["batch_size"]
    result: Record = {
        "efficiency": efficiency,
        "speedup": speedup,
        "replicas": replicas,
        "devices": list(plan.devices),
        "runs": runs,
        "batch_size": global_batch,
        "per_replica_batch_size": int(global_batch) // replicas if global_batch else None,
        "backend": plan.backend,
        "advice": advice(
            efficiency,
            replicas,
            int(global_batch) if global_batch else None,
            int(together["steps_per_execution"]),
            together["input_wait_share"],
            str(plan.backend),
        ),
    }
    result["lines"] = result_lines.scaling_lines(result)
    return result
