"""gpu_audit(): what in a Keras model keeps it from running well on a GPU.

Every check reads the built model only (layers, their configs, shapes and
dtypes); nothing is trained or run. The checks and where their rules come from:

- ``dims_not_multiple_of_8``: under mixed precision (a layer computing in
  float16/bfloat16), NVIDIA's Tensor Cores run matrix multiplies and
  convolutions at full rate when the sizes are multiples of 8 (cuBLAS and
  cuDNN pad or fall back to slower kernels otherwise). Checked: Dense units,
  convolution filters, Embedding widths, LSTM/GRU units, attention head sizes,
  and the input width where it comes straight from the data. A model output's
  width is the task's (10 classes) and is left alone, as are layers with under
  1 % of the model's FLOPs.
- ``batch_not_multiple_of_8``: the same rule for the batch dimension.
- ``output_in_low_precision``: a final softmax/sigmoid in float16/bfloat16
  (``gpukeras.gpu.precision``).
- ``dominant_layer``: one very large layer (a kernel of >= 4096 x 4096
  weights) doing most of the model's FLOPs (``gpukeras.train.flops`` counts them).
- ``separable_conv``: a Conv1D/Conv2D whose multiply-adds a depthwise +
  pointwise (separable) convolution would cut by a large factor:
  k * cin * cout against k * cin + cin * cout per output position, k the
  kernel's spatial size.
- ``cpu_only_layer``: TextVectorization, StringLookup, IntegerLookup, Hashing
  and HashedCrossing run TensorFlow ops pinned to ``CPU:0`` (Keras 3.15
  source), so inside a model every step goes through the CPU; on JAX they
  cannot be part of a compiled model at all.
- ``lambda_layer``: a Lambda layer's function cannot be inspected.
- ``rnn_no_cudnn``: Keras 3.15 runs LSTM and GRU with the fused cuDNN kernel
  (TensorFlow, JAX and PyTorch backends) only with tanh activation, sigmoid
  recurrent activation, a bias, no unrolling, no recurrent dropout,
  ``use_cudnn`` not FALSE, and for GRU ``reset_after = TRUE``; SimpleRNN and
  an RNN wrapped around a cell never use it.
- ``rnn_mask_on_jax``: on JAX, Keras 3.15 uses cuDNN only for unmasked
  sequences (a Masking layer or Embedding(mask_zero = TRUE) upstream).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

from gpukeras.core import arguments, compat
from gpukeras.core.errors import BadModelError
from gpukeras.core.handles import Layer, Model, Tensor
from gpukeras.core.runtime import config
from gpukeras.gpu import precision
from gpukeras.train import flops

TENSOR_CORE_MULTIPLE = 8
LOW_PRECISION = precision.LOW_PRECISION
SMALL_SHARE = 0.01  # layers below this share of FLOPs are not worth reshaping
DOMINANT_SHARE = 0.5
DOMINANT_WEIGHTS = 4096 * 4096
SEPARABLE_SHARE = 0.05
SEPARABLE_FACTOR = 3.0
CPU_ONLY_LAYERS = (
    "TextVectorization",
    "StringLookup",
    "IntegerLookup",
    "Hashing",
    "HashedCrossing",
)
CONV_WITH_FILTERS = (*sorted(flops.CONV_LAYERS), "SeparableConv1D", "SeparableConv2D")
SEVERITY_ORDER = ("warning", "info")


@dataclass
class Finding:
    """One thing to change, about one layer (or about the batch)."""

    layer: str
    layer_class: str
    check: str
    severity: str  # "warning": costs speed as it is; "info": worth a look
    finding: str
    advice: str
    flops_share: float | None = None  # the layer's share of the model's counted FLOPs
    factor: float | None = None  # how many times fewer multiply-adds the advice needs


@dataclass
class _Place:
    """A layer as the walk met it: its path, and what it is connected to."""

    layer: Layer
    path: str
    parent: Layer | None  # the (non-model) layer it sits inside, if any
    is_output: bool  # its output is the model's output
    takes_data: bool  # its input is the model's input


def _flat(keras: ModuleType, tensors: Tensor) -> list[object]:
    return list(keras.tree.flatten(tensors)) if tensors is not None else []


def _connected(keras: ModuleType, tensors: Tensor, targets: Tensor) -> bool:
    targets = _flat(keras, targets)
    return any(any(t is target for target in targets) for t in _flat(keras, tensors))


def _tensor(layer: Layer, which: str) -> Tensor | None:
    """A layer's symbolic input or output; None where it has none or several (shared layers)."""
    try:
        return getattr(layer, which)
    except (AttributeError, ValueError):
        return None


def _walk(
    keras: ModuleType, model: Model, prefix: str, outputs: bool, data: bool
) -> Iterator[_Place]:
    """Every layer, through nested models and inside layers (LSTM cells, attention)."""
    model_outputs = getattr(model, "outputs", None) if outputs else None
    model_inputs = getattr(model, "inputs", None) if data else None
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        path = prefix + layer.name
        is_output = _connected(keras, _tensor(layer, "output"), model_outputs)
        takes_data = _connected(keras, _tensor(layer, "input"), model_inputs)
        if isinstance(layer, keras.Model):
            yield from _walk(keras, layer, f"{path}/", is_output, takes_data)
            continue
        yield _Place(layer, path, None, is_output, takes_data)
        # A wrapper (TimeDistributed, Bidirectional) is connected as its inner
        # layer is; a layer inside another (a custom block) may be an output
        # when its parent is, but gets its input from its parent's code.
        wraps = isinstance(layer, (keras.layers.Wrapper, keras.layers.Bidirectional))
        for inner in compat.flatten_layers(layer):
            yield _Place(inner, f"{path}/{inner.name}", layer, is_output, takes_data and wraps)


def _mirror(place: _Place) -> bool:
    """A Bidirectional layer's backward copy, which would repeat the forward layer's findings."""
    parent = place.parent
    return (
        parent is not None
        and type(parent).__name__ == "Bidirectional"
        and place.layer is parent.backward_layer
    )


def _flops(layer: Layer) -> float | None:
    """Forward FLOPs per sample of a layer and its sublayers; None if some cannot be counted."""
    counts = [flops.layer_flops(leaf) for leaf in flops.leaves(layer) or [layer]]
    known = [count for count in counts if count is not None]
    return sum(known) if len(known) == len(counts) else None


def _share(layer: Layer, total: float) -> float | None:
    count = _flops(layer)
    return None if count is None or total <= 0 else count / total


def _last_dim(tensor: Tensor) -> int | None:
    shape = getattr(tensor, "shape", None)
    return None if not shape or shape[-1] is None else int(shape[-1])


def _channels(layer: Layer) -> int | None:
    tensor = _tensor(layer, "input")
    if getattr(layer, "data_format", "channels_last") == "channels_first":
        shape = getattr(tensor, "shape", None)
        return None if not shape or len(shape) < 2 or shape[1] is None else int(shape[1])
    return _last_dim(tensor)


def _widths(place: _Place) -> tuple[list[tuple[str, int]], tuple[str, int] | None]:
    """The widths the user chose for a layer, and its input width where the data sets it."""
    layer, kind = place.layer, type(place.layer).__name__
    own: list[tuple[str, int | None]] = []
    given: tuple[str, int | None] | None = None
    if kind == "Dense":
        own = [("units", layer.units)]
        given = ("input features", _last_dim(_tensor(layer, "input")))
    elif kind in CONV_WITH_FILTERS:
        own = [("filters", layer.filters)]
        given = ("input channels", _channels(layer))
    elif kind in ("LSTM", "GRU"):
        own = [("units", layer.units)]
        given = ("input features", _last_dim(_tensor(layer, "input")))
    elif kind == "Embedding":
        own = [("output_dim", layer.output_dim)]
    elif kind == "MultiHeadAttention":
        own = [("key_dim", layer.key_dim), ("value_dim", layer.value_dim)]
    if place.is_output:
        own = []  # the task sets an output's width (the number of classes)
    if not place.takes_data:
        given = None  # it is the previous layer's width, checked there
    return (
        [(name, int(value)) for name, value in own if value],
        (given[0], int(given[1])) if given and given[1] else None,
    )


def _odd(widths: list[tuple[str, int]]) -> list[tuple[str, int]]:
    return [(name, value) for name, value in widths if value % TENSOR_CORE_MULTIPLE]


def _round_up(value: int) -> int:
    return math.ceil(value / TENSOR_CORE_MULTIPLE) * TENSOR_CORE_MULTIPLE


def _describe(widths: list[tuple[str, int]]) -> str:
    return ", ".join(f"{name} {value}" for name, value in widths)


def _check_dims(place: _Place, share: float | None) -> list[Finding]:
    layer = place.layer
    dtype = getattr(layer, "compute_dtype", None)
    if dtype not in LOW_PRECISION:
        return []
    if share is not None and 0 < share < SMALL_SHARE:
        return []
    own, given = _widths(place)
    kind = type(layer).__name__
    found = []
    odd = _odd(own)
    if odd:
        found.append(
            Finding(
                place.path,
                kind,
                "dims_not_multiple_of_8",
                "warning",
                f"It computes in {dtype} with {_describe(odd)}, not a multiple of 8: Tensor "
                "Cores run its matrix multiplies below full rate.",
                "Round to a multiple of 8 ("
                + ", ".join(f"{name} {_round_up(value)}" for name, value in odd)
                + "); the extra width costs little and often makes the layer faster.",
                share,
            )
        )
    if given and given[1] % TENSOR_CORE_MULTIPLE:
        found.append(
            Finding(
                place.path,
                kind,
                "dims_not_multiple_of_8",
                "info",
                f"It computes in {dtype} and its {given[0]} ({given[1]}) come from the data, "
                "not a multiple of 8.",
                f"If this layer matters for speed, pad the data to {_round_up(given[1])} "
                f"{given[0]} (zeros); for a first layer on {given[1]} features or colour "
                "channels the gain is usually small.",
                share,
            )
        )
    return found


def _check_dominant(place: _Place, share: float | None) -> list[Finding]:
    layer, kind = place.layer, type(place.layer).__name__
    kernel = getattr(layer, "kernel", None)
    if share is None or kernel is None or share < DOMINANT_SHARE:
        return []
    shape = [int(d) for d in kernel.shape]
    weights = math.prod(shape)
    if weights < DOMINANT_WEIGHTS:
        return []
    advice = 'For inference, gpu_quantize(model, "int8") stores it in a quarter of the memory.'
    if kind == "Dense":
        inputs, units = shape
        rank = max(TENSOR_CORE_MULTIPLE, _round_up(min(inputs, units) // 8))
        cut = inputs * units / (rank * (inputs + units))
        advice = (
            "If it follows a Flatten of feature maps, pool them first "
            "(GlobalAveragePooling2D) so it gets far fewer inputs; or factor it into two "
            f"Dense layers through a narrower one ({inputs} -> {rank} -> {units} needs "
            f"{cut:.1f}x fewer multiply-adds; retrain and compare accuracy). " + advice
        )
    return [
        Finding(
            place.path,
            kind,
            "dominant_layer",
            "warning" if kind == "Dense" else "info",
            f"It does {share:.0%} of the model's counted FLOPs with a "
            f"{' x '.join(map(str, shape))} kernel ({weights / 1e6:.1f} M weights): its "
            "size sets the model's speed and memory.",
            advice,
            share,
        )
    ]


def _check_separable(place: _Place, share: float | None) -> list[Finding]:
    layer, kind = place.layer, type(place.layer).__name__
    if kind not in ("Conv1D", "Conv2D") or share is None or share < SEPARABLE_SHARE:
        return []
    if getattr(layer, "groups", 1) != 1:
        return []
    shape = [int(d) for d in layer.kernel.shape]
    *spatial, inputs, filters = shape
    k = math.prod(spatial)
    if k <= 1:
        return []
    factor = k * inputs * filters / (k * inputs + inputs * filters)
    if factor < SEPARABLE_FACTOR:
        return []
    size = "x".join(map(str, spatial))
    separable = "Separable" + kind
    # The keras3 R function and argument the user writes.
    call = f"layer_separable_conv_{len(spatial)}d(filters = {filters}, kernel_size = " + (
        f"{spatial[0]})" if len(spatial) == 1 else f"c({', '.join(map(str, spatial))}))"
    )
    return [
        Finding(
            place.path,
            kind,
            "separable_conv",
            "info",
            f"A {size} convolution from {inputs} to {filters} channels, {share:.0%} of the "
            f"counted FLOPs: a {separable} (depthwise {size} + pointwise 1x1) needs "
            f"{factor:.1f}x fewer multiply-adds.",
            f"Try {call} here (as MobileNet "
            "and Xception do); it is a different model, so retrain and compare accuracy. "
            "Depthwise convolutions use the GPU less efficiently than dense ones, so the "
            "speed-up is smaller than the FLOP cut.",
            share,
            factor,
        )
    ]


def _check_cpu_layers(place: _Place) -> list[Finding]:
    kind = type(place.layer).__name__
    if kind not in CPU_ONLY_LAYERS:
        return []
    where = (
        "It uses TensorFlow internally, so on the JAX backend it cannot be part of a compiled model"
        if config.backend == "jax"
        else "Keras runs it with TensorFlow ops pinned to the CPU, so every step moves "
        "its data from the GPU to the CPU and back"
    )
    return [
        Finding(
            place.path,
            kind,
            "cpu_only_layer",
            "warning",
            f"{kind} has no GPU kernel. {where}.",
            "Apply it in the input pipeline instead (gpu_dataset(..., map = ), or "
            "dataset.map(layer)) and give the model its numeric output; the CPU then "
            "prepares the next batches while the GPU trains.",
        )
    ]


def _check_lambda(place: _Place) -> list[Finding]:
    if type(place.layer).__name__ != "Lambda":
        return []
    return [
        Finding(
            place.path,
            "Lambda",
            "lambda_layer",
            "info",
            "A Lambda layer's function cannot be checked: NumPy calls in it cannot be "
            "compiled to the GPU, and TensorFlow (tf.*) calls tie the model to the "
            "TensorFlow backend.",
            "Make sure it uses keras.ops only (they run on the GPU on every backend), or "
            "write it as a custom layer.",
        )
    ]


def _activation_name(function: object) -> str | None:
    return getattr(function, "__name__", None)


def _cudnn_blockers(layer: Layer, kind: str) -> list[str]:
    """Why Keras' fused cuDNN kernel is not used for an LSTM/GRU layer (none: it is)."""
    reasons = []
    if getattr(layer, "use_cudnn", "auto") is False:
        reasons.append("use_cudnn = FALSE")
    if _activation_name(layer.activation) != "tanh":
        reasons.append(f"activation {_activation_name(layer.activation)} (needs tanh)")
    if _activation_name(layer.recurrent_activation) != "sigmoid":
        reasons.append(
            f"recurrent_activation {_activation_name(layer.recurrent_activation)} (needs sigmoid)"
        )
    if not layer.use_bias:
        reasons.append("use_bias = FALSE")
    if layer.unroll:
        reasons.append("unroll = TRUE")
    if layer.recurrent_dropout:
        reasons.append(f"recurrent_dropout = {layer.recurrent_dropout:g}")
    if kind == "GRU" and not layer.reset_after:
        reasons.append("reset_after = FALSE")
    return reasons


def _masked(keras: ModuleType, layer: Layer) -> bool:
    """Whether a mask reaches ``layer`` from a Masking layer or Embedding(mask_zero = TRUE).

    Walks back through layers that pass masks on; stops at one that does not.
    """
    nodes = compat.inbound_nodes(layer)[:1]
    seen: set[int] = set()
    while nodes:
        node = nodes.pop()
        for parent in node.parent_nodes:
            operation = parent.operation
            if id(operation) in seen:
                continue
            seen.add(id(operation))
            if isinstance(operation, keras.layers.Masking) or getattr(
                operation, "mask_zero", False
            ):
                return True
            if getattr(operation, "supports_masking", False):
                nodes.append(parent)
    return False


def _check_rnn(keras: ModuleType, place: _Place) -> list[Finding]:
    layer, kind = place.layer, type(place.layer).__name__
    if kind in ("LSTM", "GRU"):
        found = []
        reasons = _cudnn_blockers(layer, kind)
        defaults = "activation tanh, recurrent_activation sigmoid, use_bias, no unroll" + (
            ", reset_after = TRUE" if kind == "GRU" else ""
        )
        if reasons:
            found.append(
                Finding(
                    place.path,
                    kind,
                    "rnn_no_cudnn",
                    "warning",
                    f"It cannot use the fused cuDNN {kind} kernel because of "
                    f"{'; '.join(reasons)}: it runs step by step, often several times slower "
                    "on a GPU.",
                    f"Keep Keras' defaults ({defaults}); for regularisation use dropout on "
                    "the inputs rather than recurrent_dropout.",
                )
            )
        if config.backend == "jax" and not reasons and _masked(keras, place.parent or layer):
            found.append(
                Finding(
                    place.path,
                    kind,
                    "rnn_mask_on_jax",
                    "warning",
                    "A mask (from Masking or Embedding(mask_zero = TRUE)) reaches it, and on "
                    "JAX Keras uses the fused cuDNN kernel only for unmasked sequences.",
                    "Drop the mask where padding can be tolerated, or bucket sequences by "
                    "length; the TensorFlow backend's cuDNN kernel takes right-padded masks.",
                )
            )
        return found
    cell = type(getattr(layer, "cell", None)).__name__
    if kind == "SimpleRNN" or (kind == "RNN" and cell in ("LSTMCell", "GRUCell")):
        better = {"LSTMCell": "an LSTM layer", "GRUCell": "a GRU layer"}.get(cell, "GRU or LSTM")
        return [
            Finding(
                place.path,
                kind,
                "rnn_no_cudnn",
                "warning" if kind == "RNN" else "info",
                f"{kind} ({cell}) has no fused cuDNN kernel: it runs step by step.",
                f"Use {better} with Keras' default settings, which runs as one cuDNN kernel.",
            )
        ]
    return []


def _check_batch(model: Model, batch_size: int | None) -> list[Finding]:
    if batch_size is None or batch_size % TENSOR_CORE_MULTIPLE == 0:
        return []
    dtypes = {str(getattr(leaf, "compute_dtype", None)) for leaf in flops.leaves(model)}
    low = sorted(dtypes & set(LOW_PRECISION))
    if not low:
        return []
    return [
        Finding(
            "(batch)",
            "",
            "batch_not_multiple_of_8",
            "warning",
            f"The batch size {batch_size} is not a multiple of 8, and the model computes in "
            f"{', '.join(low)}: Tensor Cores run the batch dimension below full rate.",
            f"Use a batch size of {_round_up(batch_size)} (or another multiple of 8).",
        )
    ]


def audit(model: Model, batch_size: int | None = None) -> dict[str, object]:
    """Findings on how well a built Keras 3 model suits a GPU, worst first.

    Args:
        model: a built Keras 3 model (functional, Sequential, nested).
        batch_size: the batch size it will train with, to check too; None to skip.

    Returns:
        ``findings`` (rows of ``Finding``, warnings first, then by FLOPs share;
        empty when nothing was found), and ``model`` (its name), ``backend``,
        ``layers`` (how many were checked), ``flops_per_sample`` (counted
        forward FLOPs) and ``uncounted`` (classes of layers FLOPs could not be
        counted for, so shares are of the counted FLOPs).
    """
    keras = config.keras()
    arguments.check_keras_model(keras, model)
    if not model.built or not model.layers:
        raise BadModelError(
            "The model is not built, so its layers have no shapes to check: start it with an "
            "Input (keras$Input(shape = ...)) or call model$build() first."
        )
    counted = [(leaf, flops.layer_flops(leaf)) for leaf in flops.leaves(model)]
    total = sum(count for _, count in counted if count is not None)
    uncounted = sorted({type(leaf).__name__ for leaf, count in counted if count is None})
    findings: list[Finding] = []
    issue = precision.output_precision_issue(model)
    if issue is not None:
        layer: Layer = issue["layer"]
        findings.append(
            Finding(
                layer.name,
                type(layer).__name__,
                "output_in_low_precision",
                "warning",
                str(issue["finding"]),
                str(issue["advice"]),
                _share(layer, total),
            )
        )
    places = [place for place in _walk(keras, model, "", True, True) if not _mirror(place)]
    for place in places:
        share = _share(place.layer, total)
        findings += _check_dims(place, share)
        findings += _check_dominant(place, share)
        findings += _check_separable(place, share)
        findings += _check_cpu_layers(place)
        findings += _check_lambda(place)
        findings += _check_rnn(keras, place)
    findings += _check_batch(model, batch_size)
    findings.sort(key=lambda f: (SEVERITY_ORDER.index(f.severity), -(f.flops_share or 0.0)))
    return {
        "findings": findings,
        "model": model.name,
        "backend": config.backend,
        "layers": sum(place.parent is None for place in places),
        "flops_per_sample": total or None,
        "uncounted": uncounted,
    }
