"""gpu_tune(): the fastest numerically sound training settings, measured on copies of a model.

The settings that decide throughput are tried together: the dtype policy
(precision), the batch size, ``steps_per_execution`` and ``jit_compile``.
Every axis at once would be a product of dozens of runs, so the search is
coordinate descent: a baseline first, then one axis at a time, each axis
keeping the best sound value found before it moves on to the next
(precision, batch size, steps per execution, XLA). Every combination trains
a fresh copy of the user's model (``model_copies.clone``, with its weights,
rebuilt under the combination's policy), so the user's model is never
trained or changed and every trial starts from the same weights.

A trial (``tune_trial``) trains one combination on its copy, timed, and stops at its
share of what is left of ``time_budget`` or early when clearly slower; it is sound when its
losses and weights are finite and loss scaling overflowed rarely.

Steps per epoch. For arrays, the batch sizes tried make at least
``batch_rules.MIN_STEPS_PER_EPOCH`` (8) steps per epoch over the data's rows, as
gpu_batch_size() recommends them: gpu_batch_size()'s search stops at the
largest such size, and sizes given that make fewer are left out (said in
``batch_sizes_from``). A dataset keeps its own batches. Each trial has its
``steps_per_epoch``.

Memory. The search asks gpu_memory_plan() first: on a GPU, the batch sizes it measures
stop at the largest power of two the plan fits in the free memory, and a combination the
plan says cannot fit (mixed precision halving the activations) is not run; nor is one
that runs out of memory when it trains. Both are in ``skipped`` with their ``reason``.

Loss. Each trial records the mean loss of each execution (recovered from
Keras' running mean, which restarts each epoch). The table's ``loss`` is
the mean training loss over the same first ``loss_samples`` samples for
every trial: the fewest samples a trial that ran its full share trained.
Trials that trained fewer (stopped early) have none.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from gpukeras.core import arguments, compat, messages
from gpukeras.core.errors import BadArgumentError, OutOfMemoryError
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import adapters, batch_rules
from gpukeras.gpu import devices
from gpukeras.gpu.precision import POLICIES, precisions_for
from gpukeras.gpu.simulated import simulated_gpu
from gpukeras.tools import batch_size, memory_plan, tune_trial
from gpukeras.tools.tune_trial import Combination, Trial
from gpukeras.train import fit_request, training_run

AXES = ("precision", "batch_size", "steps_per_execution", "jit_compile")
STEPS_PER_EXECUTION = (1, 8, 32)
# Sizes taken from gpu_batch_size()'s search: its fastest few that fit.
SEARCHED_SIZES = 3


# Choosing ---------------------------------------------------------------------
def recommend(trials: Sequence[Trial]) -> Trial | None:
    """The fastest trial among the numerically sound ones that were timed; None if none is."""
    sound = [t for t in trials if t.sound and t.samples_per_second is not None]
    return max(sound, key=lambda t: t.samples_per_second or 0.0) if sound else None


def loss_over(losses: Sequence[tuple[int, float]], samples: int) -> float | None:
    """Mean loss over the first ``samples`` rows, from (rows, mean loss) per execution.

    Executions are counted whole, up to the first that reaches ``samples``;
    None when fewer rows were trained.
    """
    total, weighted = 0, 0.0
    for rows, loss in losses:
        if total >= samples:
            break
        total, weighted = total + rows, weighted + rows * loss
    return weighted / total if total and total >= samples else None


def steps_per_epoch(given: adapters.Given, size: int) -> int | None:
    """Batches in one pass over the data gpu_fit() would train on (``given``, looked at once
    by ``adapters.given``): arrays in batches of ``size``, or a dataset's own batches; None
    when not known."""
    if given.count is not None:
        return batch_rules.steps_per_epoch(given.count, size)
    return (given.info or {}).get("batches") or None  # type: ignore[return-value]


def within_epoch(values: Sequence[int], steps: int | None) -> list[int]:
    """Steps per execution worth trying with ``steps`` batches an epoch: an execution never
    runs past its epoch, so a larger value is the epoch's ``steps`` (one per epoch)."""
    if steps is None:
        return list(values)
    return sorted({min(value, steps) for value in values})


# The search -------------------------------------------------------------------
def _values(name: str, values: object) -> list:
    given = list(values) if isinstance(values, (list, tuple)) else [values]
    if not given or any(value is None for value in given):
        raise BadArgumentError(f"{name} must hold at least one value.")
    return given


@dataclass
class Memory:
    """What gpu_memory_plan() says of the model where it trains: its plan, the device's free
    memory (None on a CPU, or where not known), and whether its policy is mixed already."""

    plan: memory_plan.Plan | None = None
    free_mib: float | None = None
    mixed: bool = False

    def needs(self, combination: Combination) -> float | None:
        """The plan's peak for ``combination``; None where the plan is not known."""
        if self.plan is None:
            return None
        half = combination.precision != "float32" and not self.mixed
        return self.plan.peak_mib(combination.batch_size, half_activations=half)

    def too_big(self, combination: Combination) -> str | None:
        """Why ``combination`` cannot fit by the plan, or None (it fits, or nobody knows)."""
        needed = self.needs(combination)
        if needed is None or self.free_mib is None or needed <= self.free_mib:
            return None
        return (
            f"memory: needs {needed:,.0f} MiB by gpu_memory_plan(), {self.free_mib:,.0f} MiB free"
        )


def _memory(keras: Any, model: Model) -> Memory:
    """The model's memory plan and the free memory of its GPU (see ``Memory``)."""
    if not model.built:
        return Memory()
    plan, _ = memory_plan.plan_of(keras, model)
    free = memory_plan.free_memory(keras, model, None).get("free_mib")
    mixed = model.dtype_policy.compute_dtype != model.dtype_policy.variable_dtype
    return Memory(plan, None if free is None else float(free), mixed)


def _batch_candidates(
    model: Model,
    looked: adapters.Given,
    rows: int,
    given: list | None,
    max_batch: int,
    memory: Memory,
) -> tuple[list[int], str]:
    """The batch sizes to try and where they come from, for the data ``looked`` at (arrays of
    ``rows`` rows, or a dataset whose first batch has ``rows``)."""
    if looked.dataset:
        if given is not None:
            raise BadArgumentError(
                "batch_sizes is for arrays: this dataset is already batched (gpu_fit() cannot "
                "change its batches). Leave batch_sizes NULL, or give R data."
            )
        return [rows], "the dataset's own batches"
    # The rule of gpu_batch_size(): no size that makes fewer than 8 steps per epoch.
    most = batch_rules.largest_batch_for_steps(rows)
    rule = f"{batch_rules.MIN_STEPS_PER_EPOCH} or more steps per epoch over {rows:,} rows"
    if given is not None:
        sizes = sorted({arguments.count("batch_sizes", size) for size in given})
        kept = [size for size in sizes if size <= most]
        if not kept:
            raise BadArgumentError(
                f"batch_sizes: every size makes fewer than {batch_rules.MIN_STEPS_PER_EPOCH} "
                f"steps per epoch over the data's {rows:,} rows. Give sizes of at most "
                f"{most:,}, or leave batch_sizes NULL."
            )
        left_out = [size for size in sizes if size > most]
        note = (
            f" ({', '.join(map(str, left_out))} left out: {rule} need batch_size {most:,} or less)"
            if left_out
            else ""
        )
        return kept, "given" + note
    # The plan bounds the search: no size it tries can then run out of memory.
    fits = None
    if memory.plan is not None and memory.free_mib is not None:
        fits = memory.plan.largest_batch(memory.free_mib)
        if fits < 1:
            raise OutOfMemoryError(
                f"gpu_tune() has no batch size to try: by gpu_memory_plan() not even one row "
                f"fits ({memory.plan.peak_mib(1):,.0f} MiB needed, {memory.free_mib:,.0f} MiB "
                "free).",
                model=model,
                batch_size=1,
            )
        max_batch = min(max_batch, 2 ** int(math.log2(fits)))
    by_plan = max_batch
    max_batch = min(max_batch, most)
    searched = batch_size.search(model, looked.data, max_batch=max_batch, steps=2, warmup=1)
    fitting = [t for t in searched["trials"] if t.fits and t.samples_per_second]
    fastest = sorted(fitting, key=lambda t: -t.samples_per_second)[:SEARCHED_SIZES]
    source = f"gpu_batch_size()'s fastest sizes up to {max_batch:,} (for {rule}"
    if fits is not None:
        source += f"; {by_plan:,} by gpu_memory_plan(), which fits {fits:,} rows"
    return sorted({t.batch_size for t in fastest}), source + ")"


def tune(
    model: Model,
    data: object,
    time_budget: object = 120,
    precisions: object = None,
    batch_sizes: object = None,
    steps_per_execution: object = STEPS_PER_EXECUTION,
    jit_compile: object = (False, True),
    max_batch: object = 1024,
    seed: object = None,
) -> Record:
    """Search the settings on copies of ``model`` (see the module's notes).

    Args:
        model: a compiled Keras 3 model; it is not changed.
        data: arrays as ``(x, y)``, or a batched tf.data dataset.
        time_budget: seconds for the whole search (the batch-size search included).
        precisions: dtype policies to try; None: what the device computes natively.
        batch_sizes: sizes to try; None: gpu_batch_size()'s fastest few (a
            dataset: its own batch size). Sizes making fewer than 8 steps per epoch
            are left out (see the module).
        steps_per_execution, jit_compile: the values to try.
        max_batch: the largest size gpu_batch_size()'s search tries.
        seed: seeds Keras before each trial, so all start alike.

    Returns:
        ``trials`` (``Trial`` rows in the order run), ``recommended`` (the
        fastest sound one's settings, None if none is sound), ``baseline``,
        ``loss_samples``, ``skipped`` (combinations not run, each with its ``reason``:
        ``memory: ...`` where the plan says it cannot fit or it ran out of memory,
        ``time: ...`` where the budget was spent),
        ``device``, ``device_name``, ``backend``, ``batch_sizes_from`` and
        ``settings``.
    """
    budget = arguments.positive("time_budget", time_budget)
    if budget is None:
        raise BadArgumentError("time_budget must be a positive number of seconds.")
    seeded = arguments.seed(seed)
    policies = None if precisions is None else _values("precisions", precisions)
    for policy in policies or []:
        if policy not in POLICIES:
            raise BadArgumentError(
                "precisions must be among 'float32', 'mixed_bfloat16' and 'mixed_float16', "
                f"not {policy!r}."
            )
    sizes_given = None if batch_sizes is None else _values("batch_sizes", batch_sizes)
    spes = sorted(
        {
            arguments.count("steps_per_execution", v)
            for v in _values("steps_per_execution", steps_per_execution)
        }
    )
    jits = _values("jit_compile", jit_compile)
    if any(not isinstance(v, (bool, np.bool_)) for v in jits):
        raise BadArgumentError(f"jit_compile must be TRUE and/or FALSE, not {jit_compile!r}.")
    jits = list(dict.fromkeys(bool(v) for v in jits))
    largest = arguments.count("max_batch", max_batch)

    keras = config.keras()
    arguments.check_compiled_model(keras, model)
    started = time.perf_counter()
    # The data looked at once, here, before anything else reads it (bench/data_walk.py
    # measures its way): a sample of rows for the trials, what it is, and its rows.
    parts = batch_size.sample_batch(data)
    looked = adapters.given(data, training=False)
    sample_rows = adapters.row_count(parts[0])
    gpus = training_run.gpus_in_use(keras, model)
    simulated = None if gpus else simulated_gpu()  # GPUKERAS_SIMULATE_GPU
    capability = (
        str(gpus[0].get("compute_capability"))
        if gpus
        else simulated.compute_capability
        if simulated
        else None
    )
    policies = [POLICIES[p] for p in (policies or precisions_for(capability))]
    memory = _memory(keras, model)
    sizes, sizes_from = _batch_candidates(model, looked, sample_rows, sizes_given, largest, memory)

    baseline_jit = fit_request.resolve_jit(model, "auto")
    baseline_size = sizes[len(sizes) // 2]
    baseline = Combination(
        "float32" if "float32" in policies else policies[0],
        baseline_size,
        within_epoch(spes, steps_per_epoch(looked, baseline_size))[0],
        baseline_jit if baseline_jit in jits else jits[0],
    )
    axes = {
        "precision": list(dict.fromkeys(policies)),
        "batch_size": sizes,
        "steps_per_execution": spes,
        "jit_compile": jits,
    }
    planned = 1 + sum(len(values) - 1 for values in axes.values())
    trials: list[Trial] = []
    skipped: list[Record] = []
    limits: Record = {"best_rate": None, "deadline": 0.0, "first": True, "overheads": []}

    def attempt(combination: Combination, axis: str) -> None:
        left = budget - (time.perf_counter() - started)
        remaining = planned - len(trials) - len(skipped)
        # What a run costs besides its timed steps (copying, compiling, warm-up), as seen so far.
        overheads = limits["overheads"]
        overhead = sum(overheads) / len(overheads) if overheads else 0.0
        too_big = memory.too_big(combination)
        if too_big is not None or left <= overhead:
            reason = too_big or "time: the budget was spent"
            skipped.append({**asdict(combination), "axis": axis, "reason": reason})
            return
        limits["deadline"] = time.perf_counter() + max(0.0, left / max(1, remaining) - overhead)
        if seeded is not None:
            compat.set_random_seed(keras, seeded)
        try:
            trial = tune_trial.run_trial(model, parts, combination, axis, limits)
        except Exception as error:
            # The plan is an estimate: a trial the device could not hold is skipped, said so.
            if not messages.is_out_of_memory(error):
                raise
            reason = f"memory: out of memory when it ran ({messages.last_line(error)})"
            skipped.append({**asdict(combination), "axis": axis, "reason": reason})
            return
        trial.steps_per_epoch = steps_per_epoch(looked, combination.batch_size)
        trials.append(trial)
        if trial.sound and trial.samples_per_second:
            limits["best_rate"] = max(limits["best_rate"] or 0.0, trial.samples_per_second)

    attempt(baseline, "baseline")
    current = baseline
    for axis in AXES:
        if axis == "steps_per_execution":  # for the batch size chosen by now
            axes[axis] = within_epoch(spes, steps_per_epoch(looked, current.batch_size))
        for value in axes[axis]:
            if value != getattr(current, axis):
                attempt(replace(current, **{axis: value}), axis)
        on_axis = [
            t for t in trials if getattr(t, axis) in axes[axis] and _differs_only(t, current, axis)
        ]
        best = recommend(on_axis)
        if best is not None:
            current = replace(current, **{axis: getattr(best, axis)})

    complete = [t.samples for t in trials if not t.stopped_early and t.samples]
    common = min(complete) if complete else None
    for trial in trials:
        trial.loss = loss_over(trial.losses, common) if common else None
    chosen = recommend(trials)
    return {
        "trials": [{k: v for k, v in asdict(t).items() if k != "losses"} for t in trials],
        "recommended": None if chosen is None else asdict(chosen.combination()),
        "baseline": asdict(baseline),
        "loss_samples": common,
        "skipped": skipped,
        "device": str(gpus[0]["device"]) if gpus else "CPU:0",
        "device_name": str(gpus[0]["name"]) if gpus else devices.cpu_name(),
        "backend": keras.backend.backend(),
        "batch_sizes_from": sizes_from,
        "seconds": time.perf_counter() - started,
        "settings": {
            "time_budget": budget,
            "warmup_executions": tune_trial.WARMUP_EXECUTIONS,
            "min_timed": tune_trial.MIN_TIMED,
            "slower_share": tune_trial.SLOWER_SHARE,
            "seed": seeded,
        },
    }


def _differs_only(trial: Trial, current: Combination, axis: str) -> bool:
    """Whether ``trial`` is ``current`` with at most ``axis`` changed."""
    return all(getattr(trial, other) == getattr(current, other) for other in AXES if other != axis)
