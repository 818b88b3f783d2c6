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

A trial. The copy trains with Keras' own ``fit()`` on the data's rows (the
first rows, repeated to whole executions; a dataset gives its first batch,
so a pipeline's own speed is not part of it), on the device where gpu_fit()
would train arrays there (``gpukeras.train.resident``; ``steps_per_execution`` is
then its steps per dispatch), timed by gpu_fit()'s monitor
(``timing.step_timer``): samples per second over the steps after the first
``WARMUP_EXECUTIONS`` executions, which hold tracing and compiling. It stops
at its share of what is left of ``time_budget``, less the mean cost of a
run's copying, compiling and warm-up so far (after at least ``MIN_TIMED``
timed executions; a run the budget cannot pay that cost for is skipped), or
early when, a quarter of its share in, it runs at less than ``SLOWER_SHARE``
of the best rate so far: it is clearly slower, and the rest of the budget is
better spent elsewhere.

Numerics. A trial is sound when every loss it logged and every weight it
ended with is finite, and, under loss scaling (mixed_float16), when overflows
skipped at most ``MAX_SKIPPED_SHARE`` of its steps. Keras' dynamic loss scale
halves on every overflow and grows only every 2,000 good steps, so over a
shorter trial the number of overflows is log2(initial scale / final scale).

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
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from gpukeras.core import arguments, compat, messages
from gpukeras.core.errors import BadArgumentError, OutOfMemoryError
from gpukeras.core.handles import Callback, Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import adapters, batch_rules
from gpukeras.data.feed import feed
from gpukeras.distribute import jax_cluster
from gpukeras.gpu import devices
from gpukeras.gpu.precision import POLICIES, precisions_for
from gpukeras.gpu.simulated import simulated_gpu
from gpukeras.tools import batch_size, memory_plan
from gpukeras.train import fit_request, model_copies, timing, training_run
from gpukeras.train import resident as resident_loop

AXES = ("precision", "batch_size", "steps_per_execution", "jit_compile")
STEPS_PER_EXECUTION = (1, 8, 32)
WARMUP_EXECUTIONS = 2
MIN_TIMED = 3
SLOWER_SHARE = 0.5
MAX_SKIPPED_SHARE = 0.25
# Rows of data a trial repeats at most per epoch (each trial has its own copy of them).
MAX_TRIAL_BYTES = 256 * 2**20
# Sizes taken from gpu_batch_size()'s search: its fastest few that fit.
SEARCHED_SIZES = 3


@dataclass(frozen=True)
class Combination:
    """One set of settings to try."""

    precision: str
    batch_size: int
    steps_per_execution: int
    jit_compile: bool


@dataclass
class Trial:
    """One combination trained and measured (see the module's notes).

    Attributes:
        axis: the axis this trial varied ("baseline" for the first).
        samples_per_second: over the timed executions; None when none was timed.
        samples: rows trained in all.
        loss: mean training loss over the first ``loss_samples`` rows (set at the end).
        finite: every logged loss and final weight finite.
        overflows: loss-scale overflows (steps skipped); None without loss scaling.
        sound: finite, and few enough overflows.
        stopped_early: stopped as clearly slower than the best so far.
        note: what was unsound, or why it stopped.
        data: where the rows were: "device" (``gpukeras.train.resident``) or "host".
        steps_per_epoch: batches of this size in one pass over the data (None where not
            known).
    """

    precision: str
    batch_size: int
    steps_per_execution: int
    jit_compile: bool
    axis: str
    samples_per_second: float | None = None
    samples: int = 0
    loss: float | None = None
    finite: bool = True
    overflows: int | None = None
    sound: bool = True
    stopped_early: bool = False
    seconds: float = 0.0
    note: str | None = None
    data: str = "host"
    steps_per_epoch: int | None = None
    losses: list[tuple[int, float]] = field(default_factory=list, repr=False)

    def combination(self) -> Combination:
        return Combination(
            self.precision, self.batch_size, self.steps_per_execution, self.jit_compile
        )


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


# A trial ----------------------------------------------------------------------
def _watch(keras: Any, rows_per_execution: int, trial: Trial, limits: Record) -> Callback:
    """A callback that keeps each execution's loss and stops the fit (see the module)."""

    class Watch(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.means: list[tuple[int, Any]] = []  # (batches into the epoch, running mean)
            self.in_epoch = 0
            self.executions = 0
            self.timed_from: float | None = None
            self.timed_until: float | None = None

        def on_epoch_begin(self, epoch: int, logs: Record | None = None) -> None:
            self.in_epoch = 0

        def on_train_batch_end(self, batch: int, logs: Record | None = None) -> None:
            # The running mean is kept unread (reading it would wait for the device).
            self.in_epoch += rows_per_execution
            self.means.append((self.in_epoch, (logs or {}).get("loss")))
            self.executions += 1
            now = time.perf_counter()
            if self.executions == WARMUP_EXECUTIONS:
                self.timed_from = now
            self.timed_until = now
            timed = self.executions - WARMUP_EXECUTIONS
            if timed < MIN_TIMED or self.timed_from is None:
                return
            rate = timed * rows_per_execution / max(now - self.timed_from, 1e-9)
            best = limits["best_rate"]
            # Judged once a quarter of the trial's time is timed: a few short steps are noise.
            judged = now - self.timed_from >= 0.25 * (limits["deadline"] - self.timed_from)
            if best is not None and judged and rate < SLOWER_SHARE * best:
                trial.stopped_early = True
                trial.note = f"stopped early: under {SLOWER_SHARE:.0%} of the best rate so far"
                self.model.stop_training = True
            elif now >= limits["deadline"]:
                self.model.stop_training = True

        def execution_losses(self) -> list[tuple[int, float]]:
            """(rows, mean loss) of each execution, from Keras' running means."""
            out, before = [], (0, 0.0)
            for rows, mean in self.means:
                value = float(mean) if mean is not None else math.nan
                done, previous = before if rows > before[0] else (0, 0.0)
                out.append((rows - done, (rows * value - done * previous) / (rows - done)))
                before = (rows, value)
            return out

    return Watch()


def _overflows(copy: Model, batches: int) -> int | None:
    """Loss-scale overflows in a trial of ``batches`` steps; None without loss scaling."""
    optimizer = copy.optimizer
    scale = getattr(optimizer, "dynamic_scale", None)
    if scale is None:
        return None
    initial = float(optimizer.initial_scale)
    final = float(np.asarray(scale))
    if batches >= int(optimizer.dynamic_growth_steps) or final <= 0:
        return None  # the scale may have grown meanwhile: overflows not countable
    return max(0, round(math.log2(initial / final)))


def run_trial(
    model: Model,
    parts: tuple[object, ...],
    combination: Combination,
    axis: str,
    limits: Record,
) -> Trial:
    """Train a fresh copy of ``model`` with ``combination`` and measure it."""
    keras = config.keras()
    trial = Trial(**asdict(combination), axis=axis)
    started = time.perf_counter()
    copy = model_copies.clone(
        keras, model, "gpu_tune()", weights=True, policy=combination.precision
    )
    copy.steps_per_execution = combination.steps_per_execution
    # Keras turns it off where XLA cannot run
    trial.jit_compile = compat.set_jit_compile(copy, combination.jit_compile)
    per_execution = combination.batch_size * combination.steps_per_execution
    row_bytes = sum(np.asarray(a).nbytes / len(a) for a in keras.tree.flatten(parts))
    executions = max(1, min(8, int(MAX_TRIAL_BYTES // max(1.0, row_bytes * per_execution))))
    rows = batch_size.rows_of(parts, per_execution * executions)
    # the trial's rows, in order, as gpu_fit() feeds them (on the device where they go there)
    context = adapters.FeedContext(
        keras.backend.backend(),
        batch_size=combination.batch_size,
        seed=0,
        shuffle=False,
        jit_compile=trial.jit_compile,
        several_processes=jax_cluster.multi_process(),
    )
    with batch_size.refused_as_bad_data(combination.batch_size):
        adapter = feed(copy, rows, None, context)
    on_device = None
    if isinstance(adapter, adapters.ResidentAdapter):
        trial.data = "device"
        on_device = resident_loop.ResidentLoop(adapter.device_rows)
        on_device.install(copy, combination.steps_per_execution)
    timer: Callback = timing.step_timer(
        # on the device, batches are not seen: the rows come from the batch size
        batch_size=combination.batch_size,
        skip=WARMUP_EXECUTIONS,
    )
    watch = _watch(keras, per_execution, trial, limits)
    callbacks = [timer, watch] + ([on_device.callback(keras)] if on_device is not None else [])
    with batch_size.refused_as_bad_data(combination.batch_size, active=limits["first"]):
        copy.fit(
            **adapter.fit_args,
            epochs=10**9,
            verbose=0,
            callbacks=callbacks,
        )
    limits["first"] = False
    trial.seconds = time.perf_counter() - started
    timed = (watch.timed_until or 0.0) - (watch.timed_from or 0.0)
    limits["overheads"].append(trial.seconds - timed)
    trial.losses = watch.execution_losses()
    trial.samples = sum(rows for rows, _ in trial.losses)
    trial.samples_per_second = timer.report()["samples_per_second"]
    weights_finite = all(
        np.isfinite(np.asarray(w, dtype=np.float64)).all() for w in copy.get_weights()
    )
    losses_finite = all(math.isfinite(loss) for _, loss in trial.losses)
    trial.finite = weights_finite and losses_finite
    trial.overflows = _overflows(copy, trial.samples // combination.batch_size)
    problems = []
    if not losses_finite:
        problems.append("the loss became NaN or infinite")
    if not weights_finite:
        problems.append("weights became NaN or infinite")
    batches = max(1, trial.samples // combination.batch_size)
    if trial.overflows is not None and trial.overflows > MAX_SKIPPED_SHARE * batches:
        problems.append(f"loss scaling overflowed on {trial.overflows} of {batches} steps")
    if problems:
        trial.sound = False
        trial.note = "unsound: " + "; ".join(problems)
    return trial


# The search -------------------------------------------------------------------
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
    given: Sequence[int] | None,
    max_batch: int,
    memory: Memory,
) -> tuple[list[int], str]:
    """The batch sizes to try and where they come from, for the data ``looked`` at (arrays of
    ``rows`` rows, or a dataset whose first batch has ``rows``)."""
    if looked.dataset:
        if given is not None:
            raise BadArgumentError(
                "`batch_sizes` is for R data: a dataset keeps its own batches (gpu_fit() cannot "
                "change them). Leave `batch_sizes` NULL."
            )
        return [rows], "the dataset's own batches"
    # The rule of gpu_batch_size(): no size that makes fewer than 8 steps per epoch.
    most = batch_rules.largest_batch_for_steps(rows)
    rule = f"{batch_rules.MIN_STEPS_PER_EPOCH} or more steps per epoch over {rows:,} rows"
    if given is not None:
        sizes = sorted(set(given))
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
        max_batch = min(max_batch, batch_rules.power_of_two_within(fits))
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
    time_budget: float = 120,
    precisions: Sequence[str] | None = None,
    batch_sizes: Sequence[int] | None = None,
    steps_per_execution: Sequence[int] = STEPS_PER_EXECUTION,
    jit_compile: Sequence[bool] = (False, True),
    max_batch: int = 1024,
    seed: int | None = None,
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
    spes = sorted(set(steps_per_execution))
    jits = list(dict.fromkeys(jit_compile))

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
    policies = [POLICIES[p] for p in (precisions or precisions_for(capability))]
    memory = _memory(keras, model)
    sizes, sizes_from = _batch_candidates(
        model, looked, sample_rows, batch_sizes, max_batch, memory
    )

    baseline_jit = fit_request.resolve_jit(model, "auto")
    baseline_size = sizes[len(sizes) // 2]
    baseline = Combination(
        "float32" if "float32" in policies else policies[0],
        baseline_size,
        within_epoch(spes, steps_per_epoch(looked, baseline_size))[0],
        baseline_jit if baseline_jit in jits else jits[0],
    )
    axes: dict[str, list[Any]] = {
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
        left = time_budget - (time.perf_counter() - started)
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
        if seed is not None:
            compat.set_random_seed(keras, seed, model)
        try:
            trial = run_trial(model, parts, combination, axis, limits)
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
            "time_budget": time_budget,
            "warmup_executions": WARMUP_EXECUTIONS,
            "min_timed": MIN_TIMED,
            "slower_share": SLOWER_SHARE,
            "seed": seed,
        },
    }


def _differs_only(trial: Trial, current: Combination, axis: str) -> bool:
    """Whether ``trial`` is ``current`` with at most ``axis`` changed."""
    return all(getattr(trial, other) == getattr(current, other) for other in AXES if other != axis)
