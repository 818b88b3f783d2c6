"""gpu_quantize(): a smaller copy of a model for inference, with what it cost.

Keras 3's ``model.quantize(mode)`` replaces the float kernels of Dense,
EinsumDense and Embedding layers (exactly those classes, not subclasses) by
integer ones with per-channel float32 scales; other layers keep their float
weights. Modes kept here are the ones that make a smaller model for inference:

- ``int8``: one byte per weight (a quarter of float32); inputs are quantized
  on the fly too. Keras refuses it for layers that compute in float16.
- ``int4``: two weights per byte (an eighth of float32), weight-only; each
  output channel also keeps a scale and a zero point (and each input an
  index), so it only pays in large layers.

Not accepted: ``float8`` (Keras keeps the float32 weights and adds scaling
factors and their histories: it is for training with FP8 Tensor Cores on
Hopper-class GPUs, and makes the model larger), and ``gptq``/``awq`` (they
need calibration data and a description of the model's blocks, as for large
language models; call ``model.quantize()`` with their config directly).

Quantization happens on a copy (``clone_model``, which also compiles it as
the model was, and the same weights), so the float model stays as it was.
"""

from __future__ import annotations

import re
import warnings
from types import ModuleType
from typing import Any

import numpy as np

from gpukeras.core import arguments
from gpukeras.core.errors import BadArgumentError, BadModelError
from gpukeras.core.handles import Model, Record, Tensor
from gpukeras.core.runtime import config
from gpukeras.data import adapters, failures
from gpukeras.train import flops, model_copies

MODES = ("int8", "int4")
REFUSED = {
    "float8": (
        "float8 in Keras 3 is for training with FP8 Tensor Cores (Hopper-class GPUs): it keeps "
        "the float32 weights and adds scaling factors, so the model gets larger, not smaller."
    ),
    "gptq": (
        "gptq needs calibration data and a description of the model's blocks (it is made for "
        "large language models): call model$quantize(config = ...) with a GPTQConfig directly."
    ),
    "awq": (
        "awq needs calibration data and a description of the model's blocks (it is made for "
        "large language models): call model$quantize(config = ...) with an AWQConfig directly."
    ),
}
QUANTIZABLE = ("Dense", "EinsumDense", "Embedding", "ReversibleEmbedding")


def _check_mode(mode: object) -> str:
    if mode in MODES:
        return mode
    reason = (
        REFUSED.get(mode, f"{mode!r} is not a Keras quantization mode.")
        if isinstance(mode, str)
        else f"Not {mode!r}."
    )
    raise BadArgumentError(f"mode must be 'int8' or 'int4' (for inference). {reason}")


def _bytes(variable: Tensor) -> int:
    """Storage of one variable: elements x the bits its dtype's name says (bool: 8)."""
    dtype = str(variable.dtype)
    bits = re.search(r"\d+", dtype)
    size = int(np.prod([int(d) for d in variable.shape]))
    return size * (int(bits.group()) if bits else 8) // 8


def _size_by_dtype(model: Model) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for variable in model.weights:
        dtype = str(variable.dtype)
        sizes[dtype] = sizes.get(dtype, 0) + _bytes(variable)
    return dict(sorted(sizes.items()))


def _copy(keras: ModuleType, model: Model) -> Model:
    """The model cloned with its weights; Keras compiles the clone as the model was."""
    return model_copies.clone(
        keras,
        model,
        "gpu_quantize()",
        weights=True,
        hint=" Or call model$quantize() on the model itself (that changes it in place).",
    )


def _check_quantizable(model: Model, mode: str) -> None:
    candidates = [leaf for leaf in flops.leaves(model) if type(leaf).__name__ in QUANTIZABLE]
    if not candidates:
        raise BadModelError(
            "The model has no layer Keras can quantize: Keras 3 quantizes Dense, EinsumDense "
            "and Embedding layers, and this model has none (convolutions stay float)."
        )
    if mode == "int8":
        half = [leaf.name for leaf in candidates if leaf.compute_dtype == "float16"]
        if half:
            raise BadModelError(
                f"Keras refuses int8 for layers that compute in float16 ({', '.join(half)}). "
                "Quantize a float32 (or mixed_bfloat16) build of the model: build it again "
                "under that dtype policy, copy the weights with set_weights(), and quantize "
                "that; or use mode 'int4'."
            )


def _layer_rows(before: Model, after: Model) -> list[dict[str, Any]]:
    """Per layer with weights: whether it was quantized, and its bytes before and after."""
    rows = []
    for old, new in zip(flops.leaves(before), flops.leaves(after)):
        if not old.weights:
            continue
        rows.append(
            {
                "layer": new.name,
                "layer_class": type(new).__name__,
                "quantized": getattr(new.dtype_policy, "quantization_mode", None) is not None,
                "bytes_before": sum(_bytes(v) for v in old.weights),
                "bytes_after": sum(_bytes(v) for v in new.weights),
            }
        )
    return rows


def _split(data: object, batch_size: int | None) -> tuple[Any, Any, dict[str, Any]]:
    """Evaluation data as (x, y, keyword arguments), read as gpu_fit() reads validation data."""
    read = adapters.validation_args(adapters.given(data, training=False), batch_size)
    parts = read["validation_data"]
    if isinstance(parts, tuple):
        rows = {"batch_size": batch_size or adapters.DEFAULT_BATCH_SIZE}
        return parts[0], parts[1] if len(parts) > 1 else None, rows
    return parts, None, {}


def _outputs(keras: ModuleType, model: Model, x: object, kwargs: Record) -> np.ndarray:
    predicted = model.predict(x, verbose=0, **kwargs)
    parts = keras.tree.flatten(predicted)
    return np.concatenate([np.asarray(part, dtype=np.float64).ravel() for part in parts])


def _evaluate(model: Model, x: object, y: object, kwargs: Record) -> dict | None:
    if not getattr(model, "compiled", False):
        return None
    if y is None and not adapters.is_tf_dataset(x):
        return None
    scores = model.evaluate(x, y, verbose=0, return_dict=True, **kwargs)
    return {name: float(value) for name, value in scores.items()}


def quantize(
    model: Model, mode: str = "int8", data: object = None, batch_size: int | None = None
) -> Record:
    """A quantized copy of ``model`` for inference, and what quantizing changed.

    Args:
        model: a built Keras 3 model (functional or Sequential); it is not changed.
        mode: 'int8' or 'int4'.
        data: evaluation data, as gpu_fit() takes validation data: a tf.data
            dataset of (x, y) batches, or arrays as (x, y) or (x,); None to skip.
        batch_size: rows per batch for arrays (default 32).

    Returns:
        ``model`` (the quantized copy), ``mode``, ``backend``, ``size_before`` and
        ``size_after`` (bytes of the weights per dtype), ``bytes_before``,
        ``bytes_after``, ``layers`` (rows per layer with weights: ``layer``,
        ``layer_class``, ``quantized``, ``bytes_before``, ``bytes_after``),
        ``layers_quantized``, ``layers_kept``; with data, ``metrics`` (rows of
        ``metric``, ``before``, ``after``, ``change``: after - before; None unless the
        model is compiled and the data has labels), ``output_max_abs_diff`` and
        ``output_mean_abs_diff`` (between the two models' predictions).
    """
    keras = config.keras()
    arguments.check_keras_model(keras, model)
    mode = _check_mode(mode)
    if not model.built:
        raise BadModelError(
            "The model is not built, so it has no weights to quantize: start it with an Input "
            "(keras$Input(shape = ...)) or call model$build() first."
        )
    _check_quantizable(model, mode)
    copy = _copy(keras, model)
    with warnings.catch_warnings():
        # Keras warns once per layer it leaves as it is; the report counts them.
        warnings.filterwarnings("ignore", message=".*does not have a `quantize` method")
        copy.quantize(mode)
    layers = _layer_rows(model, copy)
    size_before, size_after = _size_by_dtype(model), _size_by_dtype(copy)
    result: Record = {
        "model": copy,
        "mode": mode,
        "backend": config.backend,
        "size_before": size_before,
        "size_after": size_after,
        "bytes_before": sum(size_before.values()),
        "bytes_after": sum(size_after.values()),
        "layers": layers,
        "layers_quantized": sum(row["quantized"] for row in layers),
        "layers_kept": sum(not row["quantized"] for row in layers),
        "metrics": None,
        "output_max_abs_diff": None,
        "output_mean_abs_diff": None,
    }
    if data is None:
        return result
    x, y, kwargs = _split(data, batch_size)
    try:  # the original model meets the data first: an error here is about the data
        outputs, before = _outputs(keras, model, x, kwargs), _evaluate(model, x, y, kwargs)
    except Exception as error:
        refused = failures.refused_data(error, "run on this data")
        if refused is None:
            raise
        raise refused from error
    difference = np.abs(outputs - _outputs(keras, copy, x, kwargs))
    result["output_max_abs_diff"] = float(difference.max())
    result["output_mean_abs_diff"] = float(difference.mean())
    after = _evaluate(copy, x, y, kwargs)
    if before is not None and after is not None:
        result["metrics"] = [
            {"metric": name, "before": value, "after": after[name], "change": after[name] - value}
            for name, value in before.items()
        ]
    return result
