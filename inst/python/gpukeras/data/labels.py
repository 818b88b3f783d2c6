"""Labels that do not suit the model's loss, caught before training with the loss to use.

Keras meets class numbers under ``categorical_crossentropy`` with "Arguments `target` and
`output` must have the same rank", which does not say that ``sparse_categorical_crossentropy``
takes them; and it trains ``binary_crossentropy`` on labels outside [0, 1] without a word, to a
loss that means nothing (a negative one, for labels 1 to 3).
"""

from __future__ import annotations

import re

import numpy as np

from gpukeras.core.errors import BadDataError
from gpukeras.data import pipeline
from gpukeras.data.adapters import Given

ONE_HOT_LOSSES = {"categoricalcrossentropy", "categoricalfocalcrossentropy"}
BINARY_LOSSES = {"binarycrossentropy", "binaryfocalcrossentropy"}


def loss_name(model: object) -> str | None:
    """The compiled loss's name as given ("categorical_crossentropy", or its Loss object's or
    function's name); None for several losses."""
    loss = getattr(model, "loss", None)
    name = loss if isinstance(loss, str) else getattr(loss, "name", getattr(loss, "__name__", None))
    return name if isinstance(name, str) else None


def _key(name: str) -> str:
    """A loss's name as one word: "CategoricalCrossentropy" and "categorical_crossentropy" alike."""
    return re.sub(r"[_\s]", "", name).lower()


def _label_spec(data: Given) -> tuple[tuple, np.ndarray | None] | None:
    """The labels' shape (a batch's, for a dataset) and, where they are in memory, their
    values; None for data whose labels cannot be seen without reading it, or several outputs'."""
    if data.arrays is not None:
        y = data.arrays[1]
        if y is None or isinstance(y, dict):
            return None
        labels = np.asarray(y)
        return labels.shape, labels
    if data.dataset:
        spec = data.data.element_spec  # type: ignore[attr-defined]
        if not isinstance(spec, tuple) or len(spec) < 2 or isinstance(spec[1], dict):
            return None
        made = pipeline.in_memory(data.data)
        values = None if made is None or isinstance(made.y, dict) else np.asarray(made.y)
        return tuple(spec[1].shape), values
    return None


def check(model: object, data: Given) -> str | None:
    """Refuse labels the loss cannot take; a warning for labels it takes to no sense, else None.

    Args:
        model: the compiled model.
        data: the training data as given (``adapters.given``).

    Raises:
        BadDataError: class numbers (one per row) for a one-hot loss
            (``categorical_crossentropy``) whose output has several units.
    """
    name = loss_name(model)
    key = _key(name) if name is not None else None
    if key not in ONE_HOT_LOSSES | BINARY_LOSSES:
        return None
    found = _label_spec(data)
    if found is None:
        return None
    shape, values = found
    if key in ONE_HOT_LOSSES:
        try:
            units = model.outputs[0].shape[-1]  # type: ignore[attr-defined]
        except (AttributeError, IndexError, TypeError, ValueError):  # subclassed or not built
            units = None
        one_per_row = len(shape) == 1 or (len(shape) == 2 and shape[-1] == 1)
        if one_per_row and units != 1:
            columns = f", {units} here" if units else ""
            raise BadDataError(
                f"The loss is {name}, which takes one-hot labels (a column per "
                f"class{columns}), but the labels are one class number per row. Compile with "
                'loss = "sparse_categorical_crossentropy", which takes class numbers (a '
                "factor's codes), or give one-hot labels."
            )
        return None
    if values is None or values.size == 0 or values.dtype.kind not in "biuf":
        return None
    low, high = float(np.min(values)), float(np.max(values))
    if low >= 0 and high <= 1:
        return None
    return (
        f"The loss is {name}, which takes labels in [0, 1], but they range from "
        f"{low:g} to {high:g}: Keras trains on them, to a loss that means nothing. For two "
        "classes code them 0 and 1 (a factor with two levels is coded so); for more, compile "
        'with loss = "sparse_categorical_crossentropy" and an output of one unit per class.'
    )
