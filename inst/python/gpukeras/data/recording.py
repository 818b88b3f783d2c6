"""The ``data_encoding`` verb: the encoding of R data as the core records it
(``encoding.data_encoding``), with what recording training data has to say; for new data,
the training encoding it is encoded by, and what scoring it has to say.

Training labels that are a factor come with their codes (R's, 1-based, NA as R's
NA_integer_): a level no row has is kept, as R's factor has it (a unit of the model's
output, a column of predict()'s), and said, as an image folder's class folder without
images is (``image_source.empty_classes``): the warning class "empty_levels".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gpukeras.core.handles import Record
from gpukeras.data.encoding import (
    FRAME,
    data_encoding,
    is_frame,
    label_spec,
    plain_encoding,
    quoted,
    strings,
)
from gpukeras.data.image_source import pixel_range


def empty_levels(y: Mapping[str, object] | None) -> list[Record]:
    """The warning for training labels ``y`` (R's account: ``type``, ``levels``, ``values``
    its codes) with levels no row has; none for other labels, or when every level has a row."""
    if y is None or y.get("type") != "factor" or y.get("values") is None:
        return []
    levels = strings(y.get("levels"))
    codes = np.asarray(y["values"]).reshape(-1).astype(np.int64)
    used = np.bincount(codes[(codes >= 1) & (codes <= len(levels))], minlength=len(levels) + 1)
    empty = [level for level, count in zip(levels, used[1:]) if count == 0]
    if not empty:
        return []
    message = [
        f"The labels `y` have {len(empty)} level(s) no row has: {quoted(empty)}.",
        f"They are kept, as R's factor has them: the model needs an output of {len(levels)} "
        "units, one per level, and predict() gives each level a column. Drop them first to "
        "train without them: y <- droplevels(y).",
    ]
    return [{"class": "empty_levels", "message": message}]


def frame_account(frame: Mapping[str, Any]) -> dict[str, Any]:
    """R's account of a data.frame, as ``encoding.data_encoding`` takes it, from its columns handed
    over as a frame (R's frame_handover(), its numbers left out): each column's type,
    "character" (its ``appearance``), "factor" (it has levels), "logical" or "numeric" (R's
    ``number``), else its R class; and a factor's or character column's levels."""
    columns: dict[str, dict[str, object]] = {}
    for name, handed in frame[FRAME]["columns"].items():
        if handed.get("appearance"):
            kind = "character"
        elif handed.get("levels") is not None:
            kind = "factor"
        elif not handed.get("number"):
            kind = str(handed["class"])
        else:
            kind = "logical" if handed.get("typeof") == "logical" else "numeric"
        columns[name] = {"type": kind, "levels": handed.get("levels")}
    return {"type": "data.frame", "columns": columns}


def record(
    inputs: Mapping[str, Any],
    y: Mapping[str, object] | None,
    several: bool,
    na: str,
    factors: str | Mapping[str, str] | None = "one_hot",
    encoding: Mapping[str, Any] | None = None,
    highest: float | None = None,
) -> Record:
    """``data_encoding`` of these arguments as ``{"encoding", "warnings"}``, raising as
    ``data_encoding`` does; a data.frame input may be the frame R hands over
    (``frame_account``).

    For training data (no ``encoding``, ``factors`` not None): the encoding recorded, and
    the warnings recording it gives (``empty_levels``). For new data checked against the
    training ``encoding``: that encoding (plain), its labels' spec the training labels' or,
    for a model trained without labels, the new labels' own (none without new labels), and
    for a model trained on an image folder, ``pixel_range``'s warning about new images whose
    pixels reach ``highest`` (R's largest value of its array; None: nothing to check).
    ``factors`` None (new data for a model with no recorded encoding): the encoding of the
    new data itself, nothing said."""
    inputs = {
        name: frame_account(part) if is_frame(part) else part for name, part in inputs.items()
    }
    made = data_encoding(inputs, y, several, na, factors, encoding)
    if encoding is None:
        return {"encoding": made, "warnings": empty_levels(y) if factors is not None else []}
    plain = plain_encoding(encoding)
    images = plain.get("images")
    return {
        "encoding": {**plain, "y": None if y is None else plain["y"] or label_spec(y)},
        "warnings": pixel_range(images, highest) if images and highest is not None else [],
    }
