"""What a model takes and gives: its inputs' and outputs' names and shapes.

R reads no attribute of a Keras model itself (LAYOUT.md): serving's ``/metadata``
(the outputs) and the row shape it takes for a model saved without an encoding
(the input) come from here.
"""

from __future__ import annotations

from typing import Any

from gpukeras.core.handles import Model


def _shape(tensor: Any) -> list[int | None]:
    """A symbolic tensor's shape: a size per axis, None for one not fixed (the rows)."""
    return [None if size is None else int(size) for size in tensor.shape]


def _tensors(model: Model, which: str) -> list[Any]:
    """The model's symbolic inputs or outputs; none for a model not built (a subclassed one)."""
    try:
        tensors = getattr(model, which)
    except (AttributeError, ValueError):
        return []
    return list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]


def output_names(model: Model) -> list[str]:
    """The outputs' names as the layers name them ("dense_1", or a functional model's own).

    Not the symbolic tensors' names ("keras_tensor_2"). A Sequential model has no
    ``output_names``: its one output is its last layer's.
    """
    named = getattr(model, "output_names", None)
    if named:
        return [str(name) for name in named]
    layers = getattr(model, "layers", None) or []
    return [str(layers[-1].name)] if layers else []


def describe(model: Model) -> dict[str, list[dict[str, Any]]]:
    """``{"inputs": [...], "outputs": [...]}``, each ``{"name": str, "shape": [size or None]}``.

    The outputs are named by :func:`output_names` (a tensor's own name where it gives
    fewer); both lists are empty for a model with no symbolic inputs.
    """
    names = output_names(model)
    outputs = _tensors(model, "outputs")
    return {
        "inputs": [{"name": str(t.name), "shape": _shape(t)} for t in _tensors(model, "inputs")],
        "outputs": [
            {"name": names[i] if i < len(names) else str(t.name), "shape": _shape(t)}
            for i, t in enumerate(outputs)
        ],
    }
