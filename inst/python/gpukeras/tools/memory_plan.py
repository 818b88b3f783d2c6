"""gpu_memory_plan(): the expected peak memory of a training step, by part, and the
largest batch that fits in a GPU's free memory.

A step of batch size n holds, at its peak (the start of the backward pass):

- parameters: every weight of the model, in its variable dtype (float32 master
  weights under a mixed policy);
- gradients: one per trainable weight, in the same dtype;
- optimizer slots: the optimizer's per-weight state. Where the optimizer is
  built (it has trained), its own variables are counted (scalars such as the
  step count and the learning rate left out). Before that, by its type, as a
  multiple of the trainable weights (``slot_factor``): 2 for Adam, AdamW,
  Nadam, Adamax, Lamb, Adadelta and Ftrl (3 with amsgrad), 1 for Adagrad,
  Lion and Adafactor (whose factored parts are left out), 1 for SGD with
  momentum and 0 without, 1 for RMSprop (+1 centered, +1 with momentum); +1
  with gradient accumulation, +1 with an exponential moving average; a
  LossScaleOptimizer as the one it wraps. Another type (Muon, a subclass) is
  counted only once built;
- the input batch: n x the model's inputs (labels are not counted);
- activations, per layer: n x the layer's output in its compute dtype (half
  of float32 under mixed_float16 or mixed_bfloat16).

The activations are an approximation: what Keras and XLA really keep for the
backward pass is taken to be every layer's output, once. XLA fuses some
intermediates away and rematerializes others; some layers keep more (a
dropout mask, a normalization's statistics, attention's scores), the backward
pass holds gradients of activations, and cuDNN workspaces, the runtime's own
memory and fragmentation are not counted. Layers whose output shape Keras does
not know (a subclassed model's layers, and its inputs) are listed as not
counted; a layer called more than once counts each call's output.

On JAX the step itself is measured instead (``xla_bytes``): Keras' train step,
compiled by XLA for the device the model trains on at the batch size and at
twice it, without running it; its peak is XLA's own buffer assignment
(``memory_analysis()``), and the two give the plan's fixed and per-sample bytes.
Measured on an H100 (bench/memory_plan.py), layer outputs alone came to 0.67, 0.43
and 0.28 of the peak of an MLP, a CNN and a transformer block. The parts then
still show the estimate, by layer, and one more part, what XLA's step holds
beyond them (negative where it holds less: it reuses buffers). Where JAX's GPU
allocator grows (memory growth: XLA_PYTHON_CLIENT_PREALLOCATE=false, as in gpu_search()'s
and gpu_cv()'s workers), the step's temporaries count as the allocator holds them
(``held_bytes``).

The largest batch: (free memory - parameters - gradients - slots) / (the
per-sample parts), on the GPU the model trains on or the one named. Free
memory is JAX's allocator's (its limit less what is in use) where it reports
one, else the driver's (NVML). Memory this process already holds counts as
used, the model's own weights included, so the figure errs on the small side;
a TensorFlow process that reserved the GPU's memory up front (no memory
growth) shows little free to the driver.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from gpukeras.core import arguments, compat, messages
from gpukeras.core.errors import BadModelError
from gpukeras.core.handles import Layer, Model, Record, Tensor
from gpukeras.core.runtime import config
from gpukeras.data import labels
from gpukeras.gpu import devices, peak_memory, scope, xla_env
from gpukeras.gpu.nvml import MIB
from gpukeras.train import flops, model_copies, pretrained, resident, training_run

DTYPE_BYTES = {"bfloat16": 2, "float16": 2}  # NumPy may not know bfloat16
# The part that reconciles the layer-by-layer estimate with XLA's measure of the step.
XLA_PART = "step buffers beyond these parts (XLA)"
# XLA's BFC allocator splits a free chunk for a block only when the rest is at least this
# large or the chunk is at least twice the block (tsl's bfc_allocator.cc).
ALLOCATOR_MOST_UNSPLIT = 128 * 2**20
# Per-weight state by optimizer type, in copies of the trainable weights (see the module).
SLOT_FACTORS = {
    "Adam": 2,
    "AdamW": 2,
    "Nadam": 2,
    "Adamax": 2,
    "Lamb": 2,
    "Adadelta": 2,
    "Ftrl": 2,
    "Adagrad": 1,
    "Lion": 1,
    "Adafactor": 1,
}


# Sizes ----------------------------------------------------------------------------
def itemsize(dtype: object) -> int:
    """Bytes per value of a dtype (a Keras/NumPy dtype or its name)."""
    name = str(getattr(dtype, "name", dtype))
    return DTYPE_BYTES.get(name) or np.dtype(name).itemsize


def variable_bytes(variables: list[Tensor]) -> int:
    return sum(math.prod(v.shape) * itemsize(v.dtype) for v in variables)


def filled(shape: tuple, length: int | None) -> tuple:
    """A shape less its batch, each dimension the model leaves open (a sequence's length:
    ``None``) taken as ``length`` (left open where that is None too)."""
    return tuple(length if dim is None else dim for dim in shape[1:])


def sequence_length(model: Model, given: int | None = None) -> int | None:
    """The length of the sequences a plan of ``model`` counts where its inputs leave it open:
    ``given``, else its (KerasHub) preprocessor's ``sequence_length``, else None."""
    if given is not None:
        return given
    length = getattr(getattr(model, "preprocessor", None), "sequence_length", None)
    return length if isinstance(length, int) else None


def output_elements(keras: ModuleType, layer: Layer, length: int | None = None) -> int | None:
    """Values per sample in a layer's outputs, every call of it in the model's graph
    counted, open dimensions as ``length`` (``filled``); None where Keras does not know them
    (a subclassed model's layers, an open dimension without a length)."""
    outputs = [
        t for node in compat.inbound_nodes(layer) for t in keras.tree.flatten(node.output_tensors)
    ]
    shapes = [filled(tuple(tensor.shape), length) for tensor in outputs]
    if not shapes or any(dim is None for shape in shapes for dim in shape):
        return None
    return sum(math.prod(shape) for shape in shapes)


# The optimizer ----------------------------------------------------------------------
def slot_factor(optimizer: object) -> int | None:
    """Copies of the trainable weights an unbuilt optimizer will keep; None for a type
    not known here."""
    inner = getattr(optimizer, "inner_optimizer", None)  # LossScaleOptimizer
    if inner is not None:
        return slot_factor(inner)
    kind = type(optimizer).__name__
    if kind == "SGD":
        factor: int | None = int(bool(getattr(optimizer, "momentum", 0)))
    elif kind == "RMSprop":
        factor = 1 + bool(getattr(optimizer, "centered", False))
        factor += bool(getattr(optimizer, "momentum", 0))
    else:
        factor = SLOT_FACTORS.get(kind)
        if factor is not None and getattr(optimizer, "amsgrad", False):
            factor += 1
    if factor is None:
        return None
    factor += bool((getattr(optimizer, "gradient_accumulation_steps", None) or 1) > 1)
    return factor + bool(getattr(optimizer, "use_ema", False))


def optimizer_slots(model: Model) -> tuple[int, Record]:
    """Bytes of the optimizer's per-weight state, and how they were counted."""
    optimizer = model.optimizer
    name = type(optimizer).__name__
    if getattr(optimizer, "built", False):
        slots = [v for v in optimizer.variables if len(v.shape) > 0]
        return variable_bytes(slots), {"name": name, "counted": "its variables"}
    factor = slot_factor(optimizer)
    if factor is None:
        return 0, {
            "name": name,
            "counted": "not known before it is built: train one step to count its variables",
        }
    per_copy = variable_bytes(model.trainable_weights)
    return factor * per_copy, {
        "name": name,
        "counted": f"by type: {factor} x the trainable weights",
    }


# The plan ---------------------------------------------------------------------------
@dataclass
class Plan:
    """Bytes of a step: ``fixed`` ones and ``per_sample`` ones (by part name), and where XLA
    measured the compiled step, its ``xla`` fixed and per-sample bytes, which then rule."""

    fixed: dict[str, int]
    per_sample: dict[str, int]
    uncounted: list[str] = field(default_factory=list)
    xla: tuple[float, float] | None = None
    xla_missing: str | None = None  # why XLA did not measure a step it could have
    activation_values: int = 0  # the counted layer outputs' values per sample, in any dtype

    def fixed_bytes(self) -> float:
        return self.xla[0] if self.xla else sum(self.fixed.values())

    def per_sample_bytes(self) -> float:
        return self.xla[1] if self.xla else sum(self.per_sample.values())

    def parts(self, batch_size: int) -> list[Record]:
        """Every part in MiB at ``batch_size``, largest first; with ``xla``, the step's
        buffers beyond the parts too, so that the parts add up to the peak."""
        sized: list[tuple[str, float]] = [*self.fixed.items()]
        sized += [(k, v * batch_size) for k, v in self.per_sample.items()]
        if self.xla:
            counted = sum(size for _, size in sized)
            peak = self.xla[0] + self.xla[1] * batch_size
            sized.append((XLA_PART, peak - counted))
        rows = [{"part": part, "mib": size / MIB} for part, size in sized]
        return sorted(rows, key=lambda row: -row["mib"])

    def peak_mib(self, batch_size: int, half_activations: bool = False) -> float:
        """The expected peak at ``batch_size``; with ``half_activations``, as under a mixed
        policy for a float32 plan (activations in 16 bits, the input batch as it is)."""
        inputs = self.per_sample.get("input batch", 0)
        activations = self.per_sample_bytes() - inputs
        per_sample = inputs + (activations / 2 if half_activations else activations)
        return (self.fixed_bytes() + batch_size * per_sample) / MIB

    def largest_batch(self, free_mib: float) -> int:
        """The largest n whose plan is within ``free_mib`` (0 when even 1 is not)."""
        room = free_mib * MIB - self.fixed_bytes()
        return max(0, math.floor(room / self.per_sample_bytes()))


def plan_of(
    keras: ModuleType, model: Model, batch_size: int | None = None, length: int | None = None
) -> tuple[Plan, Record]:
    """The plan of a built, compiled model, and how its optimizer was counted; with
    ``batch_size``, on JAX, measured by XLA at that size (``xla_bytes``). Dimensions the
    model leaves open are sequences of ``length`` (``sequence_length``)."""
    length = sequence_length(model, length)
    slots, optimizer = optimizer_slots(model)
    fixed = {
        "parameters": variable_bytes(model.weights),
        "gradients": variable_bytes(model.trainable_weights),
        "optimizer slots": slots,
    }
    inputs = [(*filled(tuple(t.shape), length), itemsize(t.dtype)) for t in _inputs(model)]
    per_sample, uncounted, values = {}, [], 0
    if inputs and None not in (dim for shape in inputs for dim in shape):
        per_sample["input batch"] = sum(math.prod(shape) for shape in inputs)
    else:  # a subclassed model's inputs, or a dimension known only at the call (a sequence)
        uncounted.append("input batch")
    for layer in flops.leaves(model):
        if isinstance(layer, keras.layers.InputLayer):  # the input batch, above
            continue
        elements = output_elements(keras, layer, length)
        if elements is None:
            uncounted.append(layer.name)
        else:
            values += elements
            per_sample[f"activations: {layer.name}"] = elements * itemsize(layer.compute_dtype)
    measured, missing = xla_bytes(keras, model, batch_size, length) if batch_size else (None, None)
    return Plan(fixed, per_sample, uncounted, measured, missing, values), optimizer


# One input's (or the labels') shape less the batch, and dtype; the features' are one, or
# several by name or in order, as the model takes them.
Spec = tuple[tuple[int, ...], str]
Specs = tuple["Spec | dict[str, Spec] | list[Spec]", Spec]


def _step_specs(keras: ModuleType, model: Model, length: int | None = None) -> Specs | None:
    """The shape (less the batch) and dtype of the model's inputs, in the structure it takes
    them (one, a dict by name, a list), and of its labels, for a model of one output: labels
    are class numbers for a sparse loss, else like the output. Open dimensions are
    ``length``. None where that cannot be told."""
    inputs, outputs = _inputs(model), _outputs(model)
    if not inputs or len(outputs) != 1:
        return None
    loss = labels.loss_name(model)
    if loss is None:
        return None
    out = filled(tuple(outputs[0].shape), length)
    specs = {id(t): (filled(tuple(t.shape), length), str(t.dtype)) for t in inputs}
    if None in out or any(None in shape for shape, _ in specs.values()):
        return None
    structure = _input_structure(model)
    x: Spec | dict[str, Spec] | list[Spec]
    if isinstance(structure, dict):
        x = {name: specs[id(tensor)] for name, tensor in structure.items()}
    elif isinstance(structure, (list, tuple)):
        x = [specs[id(tensor)] for tensor in structure]
    else:
        x = specs[id(inputs[0])]
    label = (out[:-1], "int32") if "sparse" in loss.lower() else (out, "float32")
    return x, label


def _batch(specs: Specs, rows: int, make: Any) -> tuple[object, object]:
    """A batch of ``rows`` like ``specs``, each array ``make(shape, dtype)``."""
    x, label = specs
    if isinstance(x, dict):
        made: object = {name: make((rows, *shape), dtype) for name, (shape, dtype) in x.items()}
    elif isinstance(x, list):
        made = [make((rows, *shape), dtype) for shape, dtype in x]
    else:
        made = make((rows, *x[0]), x[1])
    return made, make((rows, *label[0]), label[1])


def xla_bytes(
    keras: ModuleType, model: Model, batch_size: int, length: int | None = None
) -> tuple[tuple[float, float] | None, str | None]:
    """On JAX, the fixed and per-sample bytes of Keras' train step for ``model`` as XLA
    compiles it for the device it trains on: its peak at ``batch_size`` and at twice it;
    and, where it could not be measured for the model itself, why (else None).

    Nothing runs: the step is compiled for shapes, on a copy of the model (new weights,
    its optimizer built), whose variables are released after: Keras' models hold
    reference cycles, so without a collection the copy's weights and optimizer state
    stayed on the device (measured on an H100: 128 MiB more in use for an MLP whose
    training state is 120 MiB). No bytes on TensorFlow, where the labels' form is not
    known (see ``_step_specs``), where XLA does not say, for a model clone_model() cannot
    copy (unregistered custom classes), or whose step does not compile at those sizes:
    the plan is then the layer estimate, which needs neither, rather than an error.
    """
    if keras.backend.backend() != "jax":
        return None, None
    specs = _step_specs(keras, model, length)
    if specs is None:
        return None, None
    jax = config.backend_module()
    try:
        copy = model_copies.clone(keras, model, "gpu_memory_plan()", weights=False)
        pretrained.lora_like(model, copy)
    except BadModelError as error:
        cause = error.__cause__ or error
        return None, (
            "XLA measures the step on a copy of the model, which clone_model() could not "
            f"make ({type(cause).__name__}: {messages.error_message(cause).split('. ')[0]}); "
            "registering the model's custom classes with "
            "keras.saving.register_keras_serializable() lets it"
        )
    try:
        peaks = _compiled_peaks(jax, copy, specs, (batch_size, 2 * batch_size))
    except Exception as error:
        # e.g. a layer that refuses the larger batch as it is traced: the plan is still
        # wanted, most of all in an out-of-memory error's message
        return None, (
            f"XLA could not compile the step at batch {batch_size} and {2 * batch_size} "
            f"({type(error).__name__}: {messages.error_message(error).split('. ')[0]})"
        )
    finally:
        del copy
        gc.collect()
    if peaks is None:
        return None, None
    per_sample = max(0.0, (peaks[1] - peaks[0]) / batch_size)
    return (peaks[0] - per_sample * batch_size, per_sample), None


def _compiled_peaks(
    jax: ModuleType, copy: Model, specs: Specs, sizes: tuple[int, ...]
) -> list[int] | None:
    """The compiled train step's peak for each batch size in ``sizes`` (see ``xla_bytes``)."""
    compat.symbolic_build(copy, _batch(specs, 1, np.zeros))
    state = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), resident.training_state(copy)
    )
    step = jax.jit(copy.train_step, donate_argnums=0)
    grows = jax.default_backend() == "gpu" and xla_env.allocator_grows()
    peaks = []
    for rows in sizes:
        data = _batch(specs, rows, jax.ShapeDtypeStruct)
        peak = compiled_peak(step.lower(state, data).compile().memory_analysis(), grows)
        if peak is None:
            return None
        peaks.append(peak)
    return peaks


def compiled_peak(analysis: object, grows: bool = False) -> int | None:
    """A compiled step's peak bytes from JAX's ``memory_analysis()``: XLA's own figure where
    it gives one that holds the step's parts, else the parts: arguments and outputs (less
    those that share a buffer) and temporaries, these as a growing allocator holds them
    where ``grows`` (``held_bytes``); None where there is no analysis.

    A step that JAX loaded from its persistent compilation cache (gpukeras keeps one,
    core.compile_cache: a later session's plan is of a loaded step) reports a figure
    without its temporaries (jaxlib 0.7.1 on the CPU), where the step compiled anew
    reports the parts' sum: a figure under the parts is not taken."""
    if analysis is None:
        return None
    temp = int(getattr(analysis, "temp_size_in_bytes", 0))
    sizes = [getattr(analysis, f"{name}_size_in_bytes", 0) for name in ("argument", "output")]
    shared = getattr(analysis, "alias_size_in_bytes", 0)
    peak = int(getattr(analysis, "peak_memory_in_bytes", None) or 0)
    if peak >= sum(sizes) + temp - shared > 0:
        return peak
    held = held_bytes(temp) if grows else temp
    return int(sum(sizes) + held - shared)


def held_bytes(block: int) -> int:
    """The device memory JAX's growing GPU allocator holds for one ``block`` (a step's
    temporaries, one allocation): the power of two above it, unless that leaves
    ``ALLOCATOR_MOST_UNSPLIT`` or more unused. Its regions double in size, and a chunk
    under twice the block is handed out whole. On an H100 (2026-11-26, bench/results/gpu-
    visit-NVIDIA-H100-80GB-HBM3-2026-11-26.md) temporaries of 72.0, 46.0 and 217.6 MiB
    raised the peak by 128, 64 and 256 MiB, 832.2 MiB (192 left of 1024) by 832.2; counted
    as XLA gives them, an MLP's plan was 0.68 of its peak."""
    if block <= 0:
        return block
    region = 1 << (block - 1).bit_length()
    return region if region - block < ALLOCATOR_MOST_UNSPLIT else block


def _inputs(model: Model) -> list[Tensor]:
    """The model's symbolic inputs; none for a subclassed model."""
    try:
        return list(config.keras().tree.flatten(model.inputs))
    except (AttributeError, ValueError):
        return []


def _input_structure(model: Model) -> object:
    """The structure a functional model takes its inputs in (a dict by name, a list, or one);
    None where Keras does not say (a Sequential model, a subclassed one: one input)."""
    try:
        return model.input
    except (AttributeError, ValueError):
        return None


def _outputs(model: Model) -> list[Tensor]:
    """The model's symbolic outputs; none for a subclassed model."""
    try:
        return list(config.keras().tree.flatten(model.outputs))
    except (AttributeError, ValueError):
        return []


# Changes that lower the peak ------------------------------------------------------------
def changes(plan: Plan, batch_size: int, free_mib: float | None, mixed: bool) -> list[Record]:
    """The changes that lower the peak at ``batch_size``, each with its expected peak (by this
    plan's rules) and whether that fits in ``free_mib`` (None where free memory is not known).

    - a smaller batch: the largest that fits (half of ``batch_size`` where not known);
    - mixed precision (unless ``mixed``, the policy is mixed already): activations in 16
      bits, half their bytes;
    - accumulation: ``gpu_fit(accumulate = f)``, the smallest factor of ``batch_size``
      whose micro-batch fits (2 where not known), paying one more copy of the gradients;
    - rematerialization: ``gpu_fit(step = gpu_step(remat = TRUE))``, whose layers recompute their
      outputs in the backward pass, so about the largest layer output is held per sample
      (an estimate: what XLA keeps is its own choice).
    """
    fixed, gradients = plan.fixed_bytes() / MIB, plan.fixed.get("gradients", 0) / MIB
    activations = [size / MIB for part, size in plan.per_sample.items() if part != "input batch"]
    inputs = plan.per_sample.get("input batch", 0) / MIB

    def fits(peak: float) -> bool | None:
        return None if free_mib is None else peak <= free_mib

    growing = plan.per_sample_bytes() > 0
    smaller = plan.largest_batch(free_mib) if free_mib is not None and growing else 0
    smaller = min(smaller, batch_size - 1) or max(1, batch_size // 2)
    factors = [f for f in range(2, batch_size + 1) if batch_size % f == 0] or [1]
    micro = [(f, plan.peak_mib(batch_size // f) + gradients) for f in factors]
    factor, micro_peak = next(((f, p) for f, p in micro if fits(p)), micro[0])
    rows: list[Record] = [
        {
            "change": "a smaller batch",
            "setting": f"batch_size = {smaller}",
            "peak_mib": plan.peak_mib(smaller),
        },
        {
            "change": "mixed precision",
            "setting": 'gpu_setup(mixed_precision = "bfloat16"), then build the model',
            "peak_mib": plan.peak_mib(batch_size, half_activations=True),
        },
        {
            "change": "accumulation",
            "setting": f"gpu_fit(batch_size = {batch_size}, accumulate = {factor})",
            "peak_mib": micro_peak,
        },
        {
            "change": "rematerialization",
            "setting": "gpu_fit(step = gpu_step(remat = TRUE))",
            "peak_mib": fixed + batch_size * (inputs + max(activations, default=0.0)),
        },
    ]
    return [
        {**row, "fits": fits(row["peak_mib"])}
        for row in rows
        if not (mixed and row["change"] == "mixed precision")
    ]


# Free memory ------------------------------------------------------------------------
def free_memory(keras: ModuleType, model: Model, device: str | None) -> Record:
    """The GPU the plan is for (``device``, or the one the model trains on) and its free
    memory: ``device``, ``device_name``, ``free_mib`` and ``source`` (or ``reason``)."""
    rows = devices.list_devices()
    if device is not None:
        device = scope.check_device(device)
        chosen = [row for row in rows if row["device"] == device]
    else:
        chosen = training_run.gpus_in_use(keras, model, rows)
    if not chosen or chosen[0]["type"] != "GPU":
        return {
            "device": device or "CPU:0",
            "device_name": devices.cpu_name(),
            "free_mib": None,
            "source": None,
            "reason": "no GPU: the plan is for a GPU's memory; on the CPU, gpu_batch_size() "
            "judges sizes against the host's memory",
        }
    row = chosen[0]
    found = {"device": row["device"], "device_name": row["name"]}
    if keras.backend.backend() == "jax":
        stats = peak_memory.jax_device(row["device"]).memory_stats() or {}
        if "bytes_limit" in stats:
            free = (stats["bytes_limit"] - stats.get("bytes_in_use", 0)) / MIB
            return {**found, "free_mib": free, "source": "JAX's allocator", "reason": None}
    if row["memory_free_mib"] is None:
        why = row.get("nvml_reason") or "NVML does not report it"
        return {**found, "free_mib": None, "source": None, "reason": f"free memory unknown: {why}"}
    return {
        **found,
        "free_mib": row["memory_free_mib"],
        "source": "the driver (NVML)",
        "reason": None,
    }


# The call from R --------------------------------------------------------------------
def memory_plan(
    model: Model, batch_size: int, device: str | None = None, sequence_length: int | None = None
) -> Record:
    """The expected peak memory of a training step of ``model`` at ``batch_size``.

    Args:
        model: a built, compiled Keras 3 model; it is not changed.
        batch_size: the batch size planned for.
        device: the GPU whose free memory the largest batch is judged against
            ('GPU:1'); None for the one the model trains on.
        sequence_length: the length of the sequences where the model's inputs leave it
            open (a language model's); None: its preprocessor's (``sequence_length``).

    Returns:
        ``parts`` (``part``, ``mib``; largest first), ``total_mib``, ``batch_size``,
        ``fixed_mib`` and ``per_sample_mib`` (the plan is ``fixed + n x per_sample``),
        ``largest_batch`` (None where not known, ``largest_batch_reason`` says why),
        ``device``, ``device_name``, ``free_mib``, ``free_source``, ``backend``,
        ``dtype_policy``, ``optimizer`` (``name``, ``counted``) and ``uncounted`` (the
        parts whose shapes are not known: layers by name, or the input batch), ``changes``
        (``change``, ``setting``, ``peak_mib``, ``fits``: see ``changes``), and in words
        ``lines`` (``plan_lines``: what print() shows) and ``plot_title``.

    Raises:
        BadArgumentError, BadModelError, ModelNotCompiledError, UnknownDeviceError.
    """
    keras = config.keras()
    arguments.check_compiled_model(keras, model)
    if not model.built:
        raise BadModelError(
            "The model is not built, so its shapes are not known: give it an input "
            "(keras$Input(shape = ...) first in a Sequential model) or build it."
        )
    plan, optimizer = plan_of(keras, model, batch_size, sequence_length)
    memory = free_memory(keras, model, device)
    largest, reason = None, memory["reason"]
    if memory["free_mib"] is not None:
        if plan.per_sample_bytes() == 0:
            reason = "no per-sample part is counted, so no batch size is limited by it"
        else:
            largest = plan.largest_batch(memory["free_mib"])
            if largest == 0:
                reason = (
                    f"even a batch of 1 does not fit: the fixed parts alone take "
                    f"{plan.fixed_bytes() / MIB:.0f} MiB of {memory['free_mib']:.0f} MiB free"
                )
    parts = plan.parts(batch_size)
    mixed = model.dtype_policy.name.startswith("mixed")
    result: Record = {
        "parts": parts,
        "total_mib": sum(row["mib"] for row in parts),
        "batch_size": batch_size,
        "fixed_mib": plan.fixed_bytes() / MIB,
        "per_sample_mib": plan.per_sample_bytes() / MIB,
        "largest_batch": largest,
        "largest_batch_reason": reason,
        "device": memory["device"],
        "device_name": memory["device_name"],
        "free_mib": memory["free_mib"],
        "free_source": memory["source"],
        "backend": keras.backend.backend(),
        "dtype_policy": model.dtype_policy.name,
        "optimizer": optimizer,
        "uncounted": plan.uncounted,
        "method": "XLA's compiled step" if plan.xla else "layer outputs (an estimate)",
        "method_note": plan.xla_missing,
        "changes": changes(plan, batch_size, memory["free_mib"], mixed),
    }
    total = plan_mib(result["total_mib"])
    title = f"Memory plan: batch {batch_size} on {memory['device']}, {total} in all"
    return {**result, "lines": plan_lines(result), "plot_title": title}


def explain_out_of_memory(model: Model, batch_size: int) -> tuple[list[str], Record]:
    """What an out-of-memory error adds for R: lines saying what took the memory at
    ``batch_size`` (the plan's largest parts) and the changes that lower the peak with their
    expected peaks (``changes``), and the plan (``memory_plan``) itself."""
    plan = memory_plan(model, batch_size)
    free = plan["free_mib"]
    largest = ", ".join(f"{row['part']} {row['mib']:.3g} MiB" for row in plan["parts"][:4])
    room = f" of {free:.0f} MiB free on {plan['device']}" if free is not None else ""
    lines = [
        f"By the memory plan, a step of batch {batch_size} needs about "
        f"{plan['total_mib']:.3g} MiB{room}; the largest parts: {largest}.",
        "What lowers the peak, and the peak expected"
        + (" (free memory not known here):" if free is None else ":"),
    ]
    verdict = {True: ", which fits", False: ", which does not fit", None: ""}
    for row in plan["changes"]:
        lines.append(
            f"{row['change'].capitalize()}: {row['setting']}, about {row['peak_mib']:.3g} MiB"
            f"{verdict[row['fits']]}."
        )
    return lines, plan


# The plan in words -------------------------------------------------------------------
def plan_mib(mib: float) -> str:
    """``mib`` to three significant digits in KiB, MiB or GiB ("512 KiB", "1.21 GiB"):
    parts differ by orders of magnitude; XLA's reconciling part can be negative."""
    size = abs(mib)
    value, unit = (
        (mib * 1024, "KiB") if size < 1 else (mib, "MiB") if size < 1024 else (mib / 1024, "GiB")
    )
    rounded = float(f"{value:.3g}")
    return f"{int(rounded):,} {unit}" if rounded.is_integer() else f"{rounded:g} {unit}"


def plan_lines(plan: Record) -> list[str]:
    """The lines print() shows of a ``memory_plan()`` result: its parts as a table with
    their shares, the plan per sample, the optimizer, the largest batch, the changes that
    lower the peak, what is not counted, and how the total was measured."""
    total = plan["total_mib"]
    rows = [
        (row["part"], plan_mib(row["mib"]), f"{100 * row['mib'] / total:.1f}%")
        for row in plan["parts"]
    ]
    rows = [("part", "memory", "share"), *rows, ("total", plan_mib(total), "")]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    table = [f"   {a:<{widths[0]}} {b:>{widths[1]}} {c:>{widths[2]}}" for a, b, c in rows]
    largest = plan["largest_batch"]
    if not largest:
        largest_text = f"{'not known' if largest is None else '0'} ({plan['largest_batch_reason']})"
    else:
        free = plan_mib(plan["free_mib"])
        largest_text = (
            f"{largest:,}, in {free} free on {plan['device']} as {plan['free_source']} reports it"
        )
    fits = {True: ", fits", False: ", does not fit", None: ""}
    changes = [
        f"  {row['change']} ({row['setting']}): {plan_mib(row['peak_mib'])}{fits[row['fits']]}"
        for row in plan["changes"]
    ]
    uncounted = plan["uncounted"]
    if plan["method"] == "XLA's compiled step":
        method = [
            "The total is XLA's peak for the compiled step; the parts, an estimate by layer "
            "(see ?gpu_memory_plan)."
        ]
    else:
        method = [f"Not XLA's measure: {plan['method_note']}."] if plan["method_note"] else []
        method.append(
            "Activations are approximated by every layer's output, kept once "
            "(see ?gpu_memory_plan)."
        )
    return [
        f"<gpukeras memory plan> batch {plan['batch_size']} on {plan['device']} "
        f"({plan['device_name']}, {plan['backend']}, policy {plan['dtype_policy']}): "
        f"{plan_mib(total)}",
        *table,
        f"Plan:          {plan_mib(plan['fixed_mib'])} + {plan_mib(plan['per_sample_mib'])} "
        f"per sample ({plan['method']})",
        f"Optimizer:     {plan['optimizer']['name']}, slots counted {plan['optimizer']['counted']}",
        f"Largest batch: {largest_text}",
        *(["Lower peaks:", *changes] if changes else []),
        *([f"Not counted:   {', '.join(uncounted)} (shapes not known)"] if uncounted else []),
        *method,
    ]
