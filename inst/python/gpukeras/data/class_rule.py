"""The class rule: which class a row's prediction is, written once for every way of scoring.

predict(type = "class") in R, predict-to-file's ``class`` column, the service's ``type =
"class"`` answer and the exported SavedModel's ``class`` output all take each row's class
from a classifier's one output (rows x columns) by this rule:

- one column (a sigmoid's probability of the second class): class 1 where the value is
  greater than ``THRESHOLD``, else class 0;
- several columns (one per class): the largest, the first of ties.

A row with a missing value (NaN: a row left out by ``na = "drop"``) has no class. The
classes are named by the labels' levels where the levels name every class the rule can
give (``class_names``); the export signature builds the same decisions as graph ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpukeras.core.errors import BadArgumentError
from gpukeras.data.encoding import R_NA_INTEGER

THRESHOLD = 0.5
NOT_CLASSES = 'type = "class" needs outputs with one row per example and one column per class.'


def thresholded(width: int | None) -> bool:
    """Whether an output ``width`` columns wide gives classes by ``THRESHOLD`` (one column)
    rather than by its largest column."""
    return width == 1


def class_count(width: int) -> int:
    """How many classes an output ``width`` columns wide gives: two for one column."""
    return 2 if thresholded(width) else width


def class_codes(values: Any) -> np.ndarray:
    """Each row's class number (0-based, int64) by the rule; -1 for a row with a missing value.

    Args:
        values: one output, rows x columns.

    Raises:
        BadArgumentError: ``values`` is not rows x columns (``NOT_CLASSES``).
    """
    values = np.asarray(values, dtype="float64")
    if values.ndim != 2:
        raise BadArgumentError(NOT_CLASSES)
    if thresholded(values.shape[1]):
        codes = (values[:, 0] > THRESHOLD).astype("int64")
    else:
        codes = np.argmax(np.nan_to_num(values, nan=-np.inf), axis=1).astype("int64")
    codes[np.isnan(values).any(axis=1)] = -1
    return codes


def r_class_codes(values: Any) -> list[int]:
    """``class_codes`` as R's predict(type = "class") takes them: a list (R's integer vector),
    R's NA_integer_ for a row with a missing value."""
    codes = class_codes(values)
    return np.where(codes < 0, R_NA_INTEGER, codes).tolist()


def class_names(width: int | None, levels: list[Any] | None) -> list[Any] | None:
    """The name of each class number an output ``width`` columns wide gives: the labels'
    ``levels`` where there are enough of them (one per column, two for one column); None
    otherwise (the classes are their numbers)."""
    if not levels or width is None or len(levels) < class_count(width):
        return None
    return list(levels)
