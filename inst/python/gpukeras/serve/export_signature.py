"""The function a SavedModel serves: raw columns in, the training encoding, named outputs out.

gpu_export(format = "savedmodel") puts the training encoding (columns, factor levels,
one-hot or codes) into the served function itself, as TensorFlow ops around the model's
own function, so that a server that only loads the SavedModel (TensorFlow Serving,
``tf.saved_model.load``) takes each raw column by name and encodes it exactly as
predict() does. The rules (the inputs' and columns' order, a factor's table index for
each level and for unseen ones, whether ``unknown`` scores them, its model columns by
index) are the core encoder's (``gpukeras.data.encoding``: ``parts``, ``part_columns``,
``factor_plan``); only their execution as graph ops is here:

- numeric column: ``tf.float64`` (R's numbers), cast to float32 as predict() does;
- logical column: ``tf.bool``, 1 for true;
- factor or character column: ``tf.string``, matched to the training levels by
  name (its plan's index), then its plan's table row at that index;
- array input (a matrix, images): the model's own float32 tensor, rows first.

Outputs are a dict: ``output`` (the model's output, as predict() gives it); for a
classifier (factor labels) with one output, one output per level named by the
level (its column of ``output``) when there is one column per level, and
``class``, the level predict(type = "class") gives (``data.class_rule``: its decisions,
executed here as graph ops). A model with several outputs
gives each under its name. Names a signature cannot take (TensorFlow allows
letters, digits and ``_`` in input names) are sanitised; ``serving_names`` says
which column each name is.

The encoding ops live in the outer ``tf.function``, around the function Keras made
for the model (on JAX a jax2tf conversion), so they work on both engines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpukeras.core.handles import Record
from gpukeras.data import class_rule
from gpukeras.data import encoding as frame_encoding

# Output names the served function gives itself: a level of the same name is renamed.
RESERVED_OUTPUTS = ("output", "class")


@dataclass
class ServedInput:
    """One input of the served signature.

    Attributes:
        name: the signature's input name (sanitised).
        input: the model input it feeds ("x" for a model with one).
        column: the data.frame column it is (None for an array input).
        type: "numeric", "logical", "factor" or "array".
        dtype: the TensorFlow dtype the signature takes.
        shape: the shape after the rows (an array input's; [] for a column).
        levels: a factor's training levels, in their order.
        rule: a factor's encoding, "one_hot" or "codes".
        unknown: what an unseen level becomes: "error", "zero" (one-hot) or "code".
        plan: a factor's plan (``data.encoding.factor_plan``), which the others record.
    """

    name: str
    input: str
    column: str | None
    type: str
    dtype: str
    shape: list[int | None] = field(default_factory=list)
    levels: list[str] | None = None
    rule: str | None = None
    unknown: str | None = None
    plan: frame_encoding.FactorPlan | None = None


def sanitise(name: str) -> str:
    """``name`` as a signature input name: letters, digits and ``_``, starting with a letter."""
    cleaned = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")
    if not cleaned or not cleaned[0].isalpha():
        cleaned = "c_" + cleaned
    return cleaned


def _unique(name: str, taken: set[str]) -> str:
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}_{number}"
    taken.add(candidate)
    return candidate


def served_inputs(encoding: Mapping, unknown: str) -> list[ServedInput]:
    """The served signature's inputs for ``encoding`` (the plain form,
    ``data.encoding.plain_encoding``): one per column of each data.frame input, one per
    array input. Several inputs name a column by its own name unless two inputs share it
    (then ``<input>_<column>``)."""
    parts = frame_encoding.parts(encoding)
    names = [c for _, part in parts if part["type"] == "data.frame" for c in part["columns"]]
    shared = {c for c in names if names.count(c) > 1}
    taken: set[str] = set()
    served: list[ServedInput] = []
    for input_name, part in parts:
        if part["type"] != "data.frame":
            shape = [None if d is None else int(d) for d in part["shape"]]
            name = _unique(sanitise(input_name), taken)
            served.append(ServedInput(name, input_name, None, "array", "float32", shape))
            continue
        for column, spec in frame_encoding.part_columns(part):
            wanted = f"{input_name}_{column}" if column in shared else column
            name = _unique(sanitise(wanted), taken)
            kind = spec["type"]
            plan = frame_encoding.factor_plan(spec, unknown) if kind == "factor" else None
            dtype = {"factor": "string", "logical": "bool"}.get(kind, "float64")
            fields = (plan.levels, plan.rule, plan.unknown, plan) if plan else ()
            served.append(ServedInput(name, input_name, column, kind, dtype, [], *fields))
    return served


def plain_inputs(served: list[ServedInput]) -> list[Record]:
    """The inputs as plain records (for R and for the JSON beside the model)."""
    return [{k: v for k, v in asdict(item).items() if k != "plan"} for item in served]


def _encode_factor(tf: Any, values: Any, plan: frame_encoding.FactorPlan, column: str) -> Any:
    """The rows of ``plan``'s table at each value's index (its level's, else ``unseen``),
    after asserting that no level is unseen where ``plan`` does not score them."""
    matches = tf.equal(tf.reshape(values, [-1, 1]), tf.reshape(tf.constant(plan.levels), [1, -1]))
    known = tf.reduce_any(matches, axis=1)
    found = tf.argmax(tf.cast(matches, tf.int32), axis=1, output_type=tf.int32)
    checks = []
    if not plan.scored:
        message = (
            f"Column `{column}` has level(s) not seen in training (the model knows "
            f"{frame_encoding.quoted(plan.levels)}); export with unknown = "
            f'"{plan.advice}" to score them. Unseen:'
        )
        unseen = tf.boolean_mask(values, tf.logical_not(known))
        checks.append(tf.debugging.Assert(tf.reduce_all(known), [message, unseen], summarize=10))
    with tf.control_dependencies(checks):
        return tf.gather(tf.constant(plan.table()), tf.where(known, found, plan.unseen))


def _encode_column(tf: Any, values: Any, item: ServedInput) -> Any:
    if item.type == "array":
        return tf.cast(values, tf.float32)
    if item.plan is not None:
        return _encode_factor(tf, values, item.plan, str(item.column))
    return tf.reshape(tf.cast(values, tf.float32), [-1, 1])


def signature_specs(tf: Any, served: list[ServedInput]) -> dict[str, Any]:
    """The served function's input signature: a TensorSpec per input, named by it."""
    return {
        item.name: tf.TensorSpec([None, *item.shape], getattr(tf, item.dtype), name=item.name)
        for item in served
    }


def encode(tf: Any, features: Mapping[str, Any], served: list[ServedInput]) -> dict[str, Any]:
    """The model's inputs from the raw ``features``: per model input, its columns encoded
    and joined in the training order (an array input as it is)."""
    blocks: dict[str, list[Any]] = {}
    for item in served:
        blocks.setdefault(item.input, []).append(_encode_column(tf, features[item.name], item))
    return {
        name: parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)
        for name, parts in blocks.items()
    }


@dataclass
class OutputPlan:
    """What the served function returns besides ``output``: the labels' levels (for a
    classifier), the names of the model's outputs (several), and the names given."""

    levels: list[str] | None
    output_names: list[str] | None
    names: list[Record] = field(default_factory=list)


def _float32(tf: Any, tensor: Any) -> Any:
    """A floating output in float32 (float16, bfloat16 cast up; float64 kept)."""
    if tensor.dtype.is_floating and tensor.dtype not in (tf.float32, tf.float64):
        return tf.cast(tensor, tf.float32)
    return tensor


def name_outputs(tf: Any, predicted: Any, plan: OutputPlan) -> dict[str, Any]:
    """The served outputs of the model's ``predicted`` (see the module's notes); records
    each name given in ``plan.names`` (name, what, level)."""
    plan.names.clear()
    taken: set[str] = set()
    if isinstance(predicted, Mapping):
        predicted = list(predicted.values())
    # a model in mixed precision (or built in bfloat16/float16) serves float32, as predict()
    # gives R doubles: a client of the SavedModel reads its outputs' declared dtype
    predicted = tf.nest.map_structure(lambda t: _float32(tf, t), predicted)
    if isinstance(predicted, (list, tuple)):
        named = {}
        for position, tensor in enumerate(predicted):
            wanted = (plan.output_names or [])[position] if plan.output_names else ""
            name = _unique(str(wanted) or f"output_{position + 1}", taken)
            named[name] = tensor
            plan.names.append({"name": name, "what": "output", "position": position + 1})
        return named
    outputs = {"output": predicted}
    taken.update(RESERVED_OUTPUTS)
    plan.names.append({"name": "output", "what": "output", "position": 1})
    levels = plan.levels
    width = predicted.shape[-1] if len(predicted.shape) == 2 else None
    if levels and width == len(levels):
        for position, level in enumerate(levels):
            name = _unique(level or f"level_{position + 1}", taken)
            outputs[name] = predicted[:, position]
            plan.names.append({"name": name, "what": "level", "level": level})
    # the class rule's decisions (data/class_rule.py), as graph ops
    names = class_rule.class_names(width, levels)
    if names is not None:
        if class_rule.thresholded(width):
            best = tf.cast(predicted[:, 0] > class_rule.THRESHOLD, tf.int64)
        else:
            best = tf.argmax(predicted, axis=1)
        outputs["class"] = tf.gather(tf.constant(names), best)
        plan.names.append({"name": "class", "what": "class"})
    return outputs
