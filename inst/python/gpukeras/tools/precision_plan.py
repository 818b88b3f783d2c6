"""The memory plan by precision and by what trains, and gpu_fit()'s precision chosen from it.

A fine-tuning's peak (``memory_plan``'s rules, its layer estimate) for each precision:

- float32: weights, gradients, optimizer slots and activations in 4 bytes;
- mixed_bfloat16: float32 weights, gradients and slots, activations in 2 bytes;
- bfloat16: everything in 2 bytes, the optimizer's slots too (Keras makes them like the
  weights); LoRA's adapters stay float32 (Keras makes them so), with their gradients and
  slots;

and for what trains: "full" (every weight a layer made trainable, without LoRA's adapters)
and, where it differs, the model as it is: "LoRA" (only the adapters, and the weights left
trainable beside them, have gradients and slots) or "as set" (layers frozen: their weights
have none). The input batch is counted as it is; activations the plan cannot count (layers
whose output shape Keras does not know) are not, in any row.

``choose`` is gpu_fit()'s "auto" precision: on a GPU (or a simulated one), where the model's
policy does not fit the free memory at the batch size but a lower one does
(mixed_bfloat16, then bfloat16 weights; compute capability >= 8.0), the model is given that
policy in place (``precision.change_policy``) before it trains. A policy the user chose is
kept: gpu_setup(mixed_precision = ) given, or a model built under a policy gpu_setup()'s
"auto" did not choose (a preset's own dtype is KerasHub's, not the user's, and may change).

``auto_batch`` is gpu_fit(batch_size = "auto"): the largest power of two that fits by the row
of the policy the model then has, within the rows and ``batch_rules.AUTO_MOST``; 32 on the CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType

from gpukeras.core import compat
from gpukeras.core.errors import OutOfMemoryError
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import batch_rules
from gpukeras.data.adapters import DEFAULT_BATCH_SIZE
from gpukeras.gpu import precision
from gpukeras.gpu.nvml import MIB
from gpukeras.gpu.simulated import simulated_gpu
from gpukeras.tools import memory_plan
from gpukeras.train import pretrained, training_run

# Bytes per value of the weights (and their gradients and slots) and of the activations.
WEIGHT_BYTES = {"float32": 4, "mixed_bfloat16": 4, "bfloat16": 2}
ACTIVATION_BYTES = {"float32": 4, "mixed_bfloat16": 2, "bfloat16": 2}


@dataclass
class Counts:
    """Values (not bytes) of a model's float weights, by what trains."""

    adapters: int  # LoRA's adapters (float32 whatever the policy)
    others: int  # every other float weight
    trainable: int  # the trainable weights now, adapters included
    full: int  # what full training trains: every weight a layer made trainable, no adapters
    other_bytes: int  # weights that are not floats (counts, seeds), as they are


def counts(model: Model) -> Counts:
    """``model``'s weights counted for the table."""
    floats = [v for v in model.weights if "float" in str(v.dtype)]
    adapter = {id(v) for v in floats if v.path.endswith(precision.LORA_ADAPTERS)}
    made = {
        id(v)
        for layer in compat.flatten_layers(model, include_self=True)
        for v in compat.created_trainable(layer)
    }

    def size(variables: list) -> int:
        return sum(math.prod(v.shape) for v in variables)

    return Counts(
        adapters=size([v for v in floats if id(v) in adapter]),
        others=size([v for v in floats if id(v) not in adapter]),
        trainable=size([v for v in model.trainable_weights if "float" in str(v.dtype)]),
        full=size([v for v in floats if id(v) in made and id(v) not in adapter]),
        other_bytes=memory_plan.variable_bytes(
            [v for v in model.weights if "float" not in str(v.dtype)]
        ),
    )


def slot_copies(model: Model) -> float | None:
    """Copies of the trainable weights the optimizer keeps: its built variables over the
    trainable weights, else by its type (``memory_plan.slot_factor``); None where not known."""
    optimizer = model.optimizer
    if getattr(optimizer, "built", False):
        trainable = memory_plan.variable_bytes(model.trainable_weights)
        slots, _ = memory_plan.optimizer_slots(model)
        return slots / trainable if trainable else 0.0
    factor = memory_plan.slot_factor(optimizer)
    return None if factor is None else float(factor)


def option(
    found: Counts,
    plan: memory_plan.Plan,
    slots: float,
    policy: str,
    training: str,
    batch_size: int,
    free_mib: float | None,
) -> Record:
    """One row of the table: ``precision``, ``training``, ``trainable`` (values),
    ``peak_mib`` at ``batch_size``, ``fits`` (None where free memory is not known) and
    ``largest_batch`` (None likewise)."""
    weight = WEIGHT_BYTES[policy]
    lora = training == "LoRA"
    trainable = found.full if training == "full" else found.trainable
    adapters = found.adapters if lora else 0
    # the adapters are float32, and so are their gradients and slots
    step_bytes = (1 + slots) * ((trainable - adapters) * weight + adapters * 4)
    fixed = (found.others * weight + adapters * 4 + found.other_bytes + step_bytes) / MIB
    inputs = plan.per_sample.get("input batch", 0)
    per_sample = (inputs + plan.activation_values * ACTIVATION_BYTES[policy]) / MIB
    peak = fixed + batch_size * per_sample
    largest = None
    if free_mib is not None:
        room = free_mib - fixed
        largest = max(0, math.floor(room / per_sample)) if per_sample > 0 else None
    return {
        "precision": policy,
        "training": training,
        "trainable": trainable,
        "peak_mib": peak,
        "fits": None if free_mib is None else peak <= free_mib,
        "largest_batch": largest,
    }


def trainings(found: Counts) -> list[str]:
    """The rows' kinds of training: full, and the model as it is where that differs."""
    if found.adapters:
        return ["full", "LoRA"]
    return ["full", "as set"] if found.trainable != found.full else ["full"]


def options(
    model: Model, plan: memory_plan.Plan, batch_size: int, free_mib: float | None
) -> Record:
    """The table of peaks by precision and training (``option``'s rows), and a ``note`` on what
    it leaves out (None where nothing)."""
    found, slots = counts(model), slot_copies(model)
    rows = [
        option(found, plan, slots or 0.0, policy, training, batch_size, free_mib)
        for training in trainings(found)
        for policy in WEIGHT_BYTES
    ]
    notes = []
    if slots is None:
        notes.append("the optimizer's slots (its type is not known before it is built)")
    if plan.uncounted:
        notes.append(f"the outputs of {len(plan.uncounted)} layers whose shapes are not known")
    note = f"not counted: {'; '.join(notes)}" if notes else None
    return {"rows": rows, "note": note}


def option_lines(table: Record) -> list[str]:
    """The table in words, as print(gpu_memory_plan()) shows it."""
    rows = [("precision", "training", "peak", "largest batch")]
    for row in table["rows"]:
        largest = "" if row["largest_batch"] is None else f"{row['largest_batch']:,}"
        fits = {True: "", False: " (does not fit)", None: ""}[row["fits"]]
        peak = memory_plan.plan_mib(row["peak_mib"]) + fits
        rows.append((row["precision"], row["training"], peak, largest))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["By precision (estimate by layer):"]
    lines += [
        f"   {a:<{widths[0]}} {b:<{widths[1]}} {c:>{widths[2]}} {d:>{widths[3]}}".rstrip()
        for a, b, c, d in rows
    ]
    return lines + ([f"   ({table['note']})"] if table["note"] else [])


def memory_plan_by_precision(
    model: Model, batch_size: int, device: str | None = None, sequence_length: int | None = None
) -> Record:
    """gpu_memory_plan(): ``memory_plan.memory_plan``'s record (same arguments, same errors)
    with ``precisions``, the table's rows (``options``), and its lines after the plan's."""
    planned = memory_plan.memory_plan(model, batch_size, device, sequence_length)
    plan, _ = memory_plan.plan_of(config.keras(), model, length=sequence_length)
    table = options(model, plan, batch_size, planned["free_mib"])
    return {**planned, "precisions": table["rows"], "lines": planned["lines"] + option_lines(table)}


# gpu_fit()'s "auto" precision ----------------------------------------------------------------
def _gpu_memory(keras: ModuleType, model: Model) -> tuple[float | None, str | None]:
    """The memory (MiB) free for ``model``'s training and the compute capability of the GPU it
    trains on: what is free and what its weights hold there already; a simulated GPU's
    (``GPUKERAS_SIMULATE_GPU``: all its memory) where there is no GPU; (None, None) on the
    CPU."""
    rows = training_run.gpus_in_use(keras, model)
    if rows:
        free = memory_plan.free_memory(keras, model, None)["free_mib"]
        if free is not None:  # the model's weights, in use already, are the plan's to count
            free += memory_plan.variable_bytes(model.weights) / MIB
        return free, rows[0].get("compute_capability")
    simulated = simulated_gpu()
    if simulated is None:
        return None, None
    return simulated.memory_total_mib, simulated.compute_capability


def _users_own(model: Model) -> str | None:
    """Why ``model``'s policy is the user's own, to be kept; None where "auto" may change it."""
    ours = config.setup.precision
    policy = model.dtype_policy.name
    if ours is not None and not ours.automatic:
        return f"gpu_setup(mixed_precision = ) asked for {ours.policy}"
    if pretrained.preset_params(model):  # the preset's own dtype
        return None
    if ours is None or ours.policy != policy:
        return f'the model was built under {policy}, which gpu_setup()\'s "auto" did not choose'
    return None


def choose(model: Model, batch_size: int) -> Record | None:
    """gpu_fit()'s "auto" precision for ``model`` at ``batch_size`` (see the module), applied:
    ``policy`` (the one it trains under), ``changed`` (whether it was changed here) and
    ``reason``; None on the CPU, for a model not built, or where nothing needs choosing
    (the model's policy fits, or the plan knows no free memory)."""
    keras = config.keras()
    if not model.built:
        return None
    free, capability = _gpu_memory(keras, model)
    if free is None:
        return None
    plan, _ = memory_plan.plan_of(keras, model)
    found, slots = counts(model), slot_copies(model) or 0.0
    training = "LoRA" if found.adapters else "as set"
    policy = model.dtype_policy.name

    def peak(name: str) -> Record:
        return option(found, plan, slots, name, training, batch_size, free)

    if policy not in WEIGHT_BYTES or peak(policy)["fits"]:
        return None
    now = peak(policy)
    mib = memory_plan.plan_mib
    needs = f"{policy} needs {mib(now['peak_mib'])} at batch {batch_size}, {mib(free)} free"
    kept = _users_own(model)
    if kept is not None:
        return {"policy": policy, "changed": False, "reason": f"{needs}; kept: {kept}"}
    wanted = precision.choose_policy("auto", capability).policy
    lower = [
        p
        for p in ("mixed_bfloat16", "bfloat16")
        if WEIGHT_BYTES[p] + ACTIVATION_BYTES[p] < WEIGHT_BYTES[policy] + ACTIVATION_BYTES[policy]
    ]
    if wanted != "mixed_bfloat16" or not lower:
        why = "it is the lowest" if not lower else f"no bfloat16 on compute capability {capability}"
        return {"policy": policy, "changed": False, "reason": f"{needs}; kept: {why}"}
    fitting = [p for p in lower if peak(p)["fits"]]
    if not fitting:
        last = peak(lower[-1])
        return {
            "policy": policy,
            "changed": False,
            "reason": f"{needs}; {lower[-1]} would need {mib(last['peak_mib'])}, so it is kept",
        }
    chosen = fitting[0]
    if WEIGHT_BYTES[chosen] != WEIGHT_BYTES[policy] and getattr(model.optimizer, "built", False):
        return {
            "policy": policy,
            "changed": False,
            "reason": f"{needs}; {chosen} would fit, but the optimizer's state is built "
            "(the model has trained): load or build the model again to train it in "
            f"{chosen}",
        }
    precision.change_policy(keras, model, chosen)
    row = peak(chosen)
    weights = "bfloat16 weights" if chosen == "bfloat16" else "bfloat16 activations"
    tried = [f"{p} {mib(peak(p)['peak_mib'])}" for p in lower[: lower.index(chosen)]]
    return {
        "policy": chosen,
        "changed": True,
        "reason": f"auto: {chosen} ({weights}), {mib(row['peak_mib'])} by the memory plan; "
        f"{needs}{''.join(f', {t}' for t in tried)}; the largest batch in {chosen}: "
        f"{row['largest_batch']}",
    }


# gpu_fit(batch_size = "auto") ----------------------------------------------------------------
def auto_batch(model: Model, rows: int | None, accumulate: int = 1) -> Record:
    """gpu_fit(batch_size = "auto") for ``model`` (its policy chosen first: ``choose``) on
    ``rows`` rows of arrays (None where not known), each update ``accumulate`` micro-batches:
    ``batch_size`` (the update's batch, ``accumulate`` x ``micro_batch_size``) and ``reason``.

    On a GPU (or a simulated one) the micro-batch is the largest power of two within the
    largest batch that fits the free memory in the model's policy, by the table's row for what
    trains (``option``; accumulating holds one more copy of the gradients), within
    ``batch_rules.AUTO_MOST``, and within ``batch_rules.largest_batch_for_steps`` of the rows
    for the update (8 or more updates per epoch; a micro-batch of 1 at least). On the CPU, for
    a model not built, or where the plan knows no limit, it is ``DEFAULT_BATCH_SIZE``, the
    batch of R data given no ``batch_size``: the plan is for a GPU's memory.

    Raises:
        OutOfMemoryError: where not even one row fits, saying what to lower.
    """
    keras = config.keras()
    free = _gpu_memory(keras, model)[0] if model.built else None
    policy = model.dtype_policy.name
    if free is None or policy not in WEIGHT_BYTES:
        why = (
            "the model is not built, so there is no memory plan"
            if not model.built
            else "no GPU: the memory plan is for a GPU's memory"
            if free is None
            else f"the memory plan has no row for the {policy} policy"
        )
        return _batch_of(DEFAULT_BATCH_SIZE, accumulate, f"as with no batch_size ({why})")
    plan, _ = memory_plan.plan_of(keras, model)
    found, slots = counts(model), slot_copies(model) or 0.0
    counted = getattr(model.optimizer, "gradient_accumulation_steps", None)
    if accumulate > 1 and not counted:  # Keras' accumulators: a copy of the gradients
        slots += 1
    training = "LoRA" if found.adapters else "as set"
    row = option(found, plan, slots, policy, training, 1, free)
    largest, mib = row["largest_batch"], memory_plan.plan_mib
    if largest is None:
        why = "the memory plan counts no per-sample memory, so no batch is limited by it"
        return _batch_of(DEFAULT_BATCH_SIZE, accumulate, f"as with no batch_size ({why})")
    if largest < 1:
        raise OutOfMemoryError(
            f'`batch_size = "auto"`: not even one row fits the GPU\'s free memory by the memory '
            f"plan: a batch of 1 needs {mib(row['peak_mib'])} in {policy}, {mib(free)} free. "
            "Free GPU memory (other processes, other models in this session), train fewer "
            "weights (LoRA: a smaller rank; layers frozen), or recompute activations "
            "(gpu_fit(step = gpu_step(remat = TRUE))); gpu_memory_plan(model, 1) shows what "
            "takes the memory."
        )
    in_policy = f"{policy}{' with LoRA' if training == 'LoRA' else ''}"
    limits = [(largest, f"the {largest:,} rows that fit {mib(free)} free in {in_policy}")]
    if rows:
        most = max(1, batch_rules.largest_batch_for_steps(rows) // accumulate)
        steps = batch_rules.MIN_STEPS_PER_EPOCH
        limits.append((most, f"{most:,}, for {steps} or more updates per epoch of {rows:,} rows"))
    limits.append((batch_rules.AUTO_MOST, f'{batch_rules.AUTO_MOST:,}, the most "auto" takes'))
    bound, said = min(limits, key=lambda limit: limit[0])
    micro = batch_rules.power_of_two_within(bound)
    return _batch_of(micro, accumulate, f"the largest power of two within {said}")


def _batch_of(micro: int, accumulate: int, why: str) -> Record:
    """``auto_batch``'s record for micro-batches of ``micro`` rows, ``accumulate`` an update."""
    batch = micro * accumulate
    shown = f"{batch:,} = {accumulate} x {micro:,}" if accumulate > 1 else f"{batch:,}"
    return {"batch_size": batch, "micro_batch_size": micro, "reason": f"auto: {shown}, {why}"}
