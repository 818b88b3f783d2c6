"""Whether an encoding in the plain form (a file gpu_save() wrote, of any version) is one the
core makes (``plain_problem``), by the rules ``data.encoding`` makes them with."""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpukeras.data.encoding import FACTOR_RULES, PLAIN_TYPES, column_rule


def _names(value: object) -> bool:
    """Whether ``value`` is a list of distinct strings."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return False
    return len(set(value)) == len(value)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _part_problem(part: object) -> str | None:
    if not isinstance(part, Mapping):
        return "not a record"
    if part.get("type") == "data.frame":
        columns, order = part.get("columns"), part.get("column_order")
        if not isinstance(columns, Mapping) or not _names(order):
            return "its columns or their order are missing"
        if set(order) != set(columns):  # type: ignore[arg-type]
            return "its column order does not name its columns"
        for name in order:  # type: ignore[union-attr]
            column = columns[name]
            if not isinstance(column, Mapping) or column.get("type") not in PLAIN_TYPES:
                return f"column {name!r} has no type numeric, logical or factor"
            if column["type"] != "factor":
                continue
            if not _names(column.get("levels")) or not column["levels"]:
                return f"column {name!r} has levels that are not distinct strings"
            if column_rule(column) not in FACTOR_RULES:
                return f"column {name!r} has an encoding other than one_hot or codes"
    elif part.get("type") == "array":
        shape, names = part.get("shape"), part.get("names")
        if not isinstance(shape, list) or not shape or not all(_whole(d) for d in shape):
            return "its shape is not a list of whole numbers"
        if names is not None and not _names(names):
            return "its column names are not distinct strings"
    elif part.get("type") != "text":
        return "its type is neither data.frame, array nor text"
    return None


def plain_problem(plain: object) -> str | None:
    """What makes ``plain`` (an encoding in the plain form, as JSON gives it back: a file
    gpu_save() wrote, of any version) other than an encoding ``data_encoding`` or
    ``image_encoding`` makes, in words ("its label levels are not distinct strings"); None
    for a valid one. Its inputs and their order, each data.frame's columns and their order,
    each column's type, a factor's levels (distinct strings, one at least) and rule, an
    array's shape (whole numbers) and column names, the labels' type and levels, the NA
    rule, the images' size and ``rescale``."""
    if not isinstance(plain, Mapping):
        return "its encoding is not a record"
    inputs, order = plain.get("inputs"), plain.get("input_order")
    if not isinstance(inputs, Mapping) or not inputs or not _names(order):
        return "its inputs or their order are missing"
    if set(order) != set(inputs):  # type: ignore[arg-type]
        return "its input order does not name its inputs"
    for name in order:  # type: ignore[union-attr]
        problem = _part_problem(inputs[name])
        if problem:
            return f"input {name!r}: {problem}"
    y = plain.get("y")
    if y is not None:
        if not isinstance(y, Mapping) or y.get("type") not in ("factor", "numeric"):
            return "its labels have no type factor or numeric"
        if y["type"] == "factor" and not _names(y.get("levels")):
            return "its label levels are not distinct strings"
    if plain.get("na", "error") not in ("error", "drop"):
        return "its NA rule is neither error nor drop"
    images = plain.get("images")
    if images is not None:
        size = images.get("image_size") if isinstance(images, Mapping) else None
        if not isinstance(size, list) or len(size) != 2 or not all(_whole(d) and d for d in size):
            return "its image size is not two whole numbers"
        rescale = images.get("rescale")
        if rescale is not None and not (
            isinstance(rescale, int | float) and math.isfinite(rescale) and rescale > 0
        ):
            return "its rescale is not a positive number"
    return None
