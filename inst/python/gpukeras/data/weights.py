"""Weights on training rows, as Keras' fit() takes them: sample weights given with the data,
or ``class_weight`` made into them.

Keras' fit() weighs each row's loss by its sample weight, and makes the weights of
``class_weight`` ({class number: weight}, a class not in it weighing 1) from the labels:
class numbers, or one-hot rows by their argmax. Like Keras, gpukeras takes one of the two,
not both, and ``class_weight`` only for a model with one output. So that every training
path (Keras' arrays, tf.data, the device-resident loop, several devices or workers) weighs
rows alike, the weights are made here, once, with Keras' own functions (``compat``): rows
in memory get them as a third array, a dataset gets Keras' own map adding them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from gpukeras.core import compat
from gpukeras.core.errors import BadArgumentError, BadDataError, DataFieldsError
from gpukeras.core.handles import Dataset
from gpukeras.core.r_words import strings

_BOTH = (
    "Give `class_weight` or sample weights, not both (Keras takes one of them): multiply "
    "the class weights into the sample weights instead."
)


def _listed(values: list[str]) -> str:
    return ", ".join(f'"{value}"' for value in values)


def class_weight_codes(weights: Mapping[str, float], levels: object) -> dict[str, float]:
    """gpu_fit(class_weight = ) as Keras takes it: {class number as text: weight}, in the
    order given.

    Args:
        weights: R's named numbers >= 0 (R checked their form) as it sends a named list,
            by name: a level of ``levels``, or a class number ("0", "1", ...).
        levels: the labels' levels (a factor's, an image folder's classes), which names
            are matched to first; None for labels that are not classes by name.

    Raises:
        DataFieldsError: gpukeras_error_bad_argument, for a name that is no level and no
            class number, or a class number beyond the levels.
    """
    names, levels = [str(name) for name in weights], strings(levels)
    codes = [
        levels.index(name)
        if name in levels
        else int(name)
        if re.fullmatch("[0-9]+", name)
        else None
        for name in names
    ]
    classes = (
        f"The classes are {_listed(levels)} (or their numbers 0 to {len(levels) - 1})."
        if levels
        else "The labels are not a factor: name the classes by their numbers, 0, 1, ..."
    )
    unknown = [name for name, code in zip(names, codes) if code is None]
    numbers = [code for code in codes if code is not None]
    if unknown:
        verb = "are" if len(unknown) > 1 else "is"
        message = f"`class_weight` names {_listed(unknown)}, which {verb} no class of the labels."
    elif levels and max(numbers) >= len(levels):
        message = (
            f"`class_weight` names class {max(numbers)}, but the labels have {len(levels)} "
            f"classes (0 to {len(levels) - 1})."
        )
    else:
        return {str(code): float(weight) for code, weight in zip(numbers, weights.values())}
    raise DataFieldsError(message, [classes], [BadArgumentError.r_class])


def _check_labels(y: object) -> None:
    if y is None:
        raise BadArgumentError("`class_weight` weighs rows by their labels: the data has none.")
    if isinstance(y, dict):
        raise BadArgumentError(
            "`class_weight` is for a model with one output; this data has labels for several: "
            "give sample weights instead."
        )


def row_weights(
    y: object, sample_weight: object, class_weight: dict[int, float] | None, rows: int
) -> np.ndarray | None:
    """The weight of each of ``rows`` rows in memory (float32), or None for unweighted.

    Args:
        y: the labels (an array, a dict of them for several outputs, or None).
        sample_weight: the rows' weights as given, or None.
        class_weight: {class number: weight}, or None.
        rows: the rows of the data.

    Raises:
        BadArgumentError: both kinds of weights; ``class_weight`` without labels, or for
            several outputs.
        BadDataError: sample weights that are not one number per row.
    """
    if sample_weight is not None:
        if class_weight is not None:
            raise BadArgumentError(_BOTH)
        if y is None:
            raise BadDataError("Sample weights weigh each row's loss: the data has no labels.")
        weights = np.asarray(sample_weight, dtype="float32")
        if weights.shape != (rows,):
            raise BadDataError(
                f"Sample weights must be one number per row ({rows} rows), not an array of "
                f"shape {weights.shape}."
            )
        return weights
    if class_weight is None:
        return None
    _check_labels(y)
    return np.asarray(compat.class_weight_to_sample_weights(y, class_weight), dtype="float32")


def weighted_dataset(dataset: Dataset, class_weight: dict[int, float]) -> Dataset:
    """``dataset`` with ``class_weight`` as its batches' sample weights (Keras' own map).

    Raises:
        BadArgumentError: elements that carry sample weights already, no labels, or
            labels for several outputs.
    """
    spec = dataset.element_spec
    parts = spec if isinstance(spec, tuple) else (spec,)
    if len(parts) == 3:
        raise BadArgumentError(_BOTH)
    _check_labels(parts[1] if len(parts) == 2 else None)
    return dataset.map(compat.class_weight_map(class_weight))


def describe(
    weighted: bool, validation_weighted: bool | None, class_weight: dict[int, float] | None
) -> dict[str, object] | None:
    """How the run's losses are weighted, for gpu_fit()'s settings; None when unweighted.

    ``weighted`` and ``validation_weighted``: whether the training and the validation data
    bring their own sample weights (arrays as ``(x, y, w)``, a dataset of ``(x, y,
    sample_weight)`` elements: ``adapters.Given.weighted``); None without validation data.

    What Keras 3 does (``trainers/trainer.py``, ``backend/*/trainer.py``): ``class_weight``
    weighs the training rows only; validation data is weighted by its own sample weights
    when it carries them (``validation_data = (x, y, w)``, and ``validation_split`` splits
    the weights with the rows, as gpu_dataset(validation_split = ) does), else not at all;
    metrics given to ``compile(metrics = )`` are never weighted, those given to
    ``compile(weighted_metrics = )`` are.

    Returns:
        ``training`` ("class_weight" or "sample_weight"), ``class_weight`` ({class
        number as text: weight}, or None), ``validation`` ("sample_weight", "none", or
        None without validation data) and ``note``: the sentence saying which losses are
        weighted, for the print.
    """
    if class_weight is not None:
        training = "class_weight"
    elif weighted:
        training = "sample_weight"
    else:
        return None
    by = "class_weight" if training == "class_weight" else "the sample weights"
    if validation_weighted is None:
        validation, said = None, "there is no validation loss."
    elif validation_weighted:
        validation = "sample_weight"
        said = "the validation loss is weighted by the validation rows' own sample weights."
    else:
        validation = "none"
        unweighted = (
            "Keras applies class_weight to training only"
            if training == "class_weight"
            else "the validation data has none"
        )
        said = f"the validation loss is not ({unweighted}), so the two losses are not on one scale."
    note = (
        f"The training loss is weighted by {by}; {said} Metrics from compile(metrics = ) "
        "are not weighted (compile(weighted_metrics = ) are)."
    )
    return {
        "training": training,
        "class_weight": None
        if class_weight is None
        else {str(k): float(v) for k, v in class_weight.items()},
        "validation": validation,
        "note": note,
    }
