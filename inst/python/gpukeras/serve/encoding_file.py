"""The encoding file beside a saved model (``name.gpukeras.json``): what a valid one holds.

gpu_save() writes how its training data became numbers (``data.encoding.plain_encoding``)
and R reads it back for predict(); a file edited by hand, cut short or written by another
tool must fail as a bad model, saying what is wrong, before R reads a field of it: never as
a raw R error or as "please report it". And the file must fit the model it is beside: the
width of each input, the image size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpukeras.core.errors import BadModelError
from gpukeras.core.handles import Model
from gpukeras.data import encoding as frame_encoding


def _fail(path: str, what: str) -> BadModelError:
    return BadModelError(
        f"The encoding file '{path}' is not one gpu_save() wrote: {what}. Save the model "
        "again with gpu_save(), or remove that file to load the model without an encoding."
    )


def _strings(value: object, distinct: bool = False) -> bool:
    return (
        isinstance(value, list)
        and all(isinstance(item, str) for item in value)
        and (not distinct or len(set(value)) == len(value))
    )


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_column(name: str, column: object, where: str, path: str) -> None:
    kinds = ("numeric", "logical", "factor")
    if not isinstance(column, Mapping) or column.get("type") not in kinds:
        raise _fail(path, f"{where} column {name!r} has no type numeric, logical or factor")
    if column["type"] != "factor":
        return
    if not _strings(column.get("levels"), distinct=True) or not column["levels"]:
        raise _fail(path, f"{where} column {name!r} has levels that are not distinct strings")
    if frame_encoding.column_rule(column) not in frame_encoding.FACTOR_RULES:
        raise _fail(path, f"{where} column {name!r} has an encoding other than one_hot or codes")


def _check_input(name: str, part: object, path: str) -> None:
    where = f"input {name!r}:"
    if not isinstance(part, Mapping):
        raise _fail(path, f"{where} not a record")
    if part.get("type") == "data.frame":
        columns, order = part.get("columns"), part.get("column_order")
        if not isinstance(columns, Mapping) or not _strings(order, distinct=True):
            raise _fail(path, f"{where} its columns or their order are missing")
        if set(order) != set(columns):  # type: ignore[arg-type]
            raise _fail(path, f"{where} its column order does not name its columns")
        for column in order:  # type: ignore[union-attr]
            _check_column(column, columns[column], where, path)
    elif part.get("type") == "array":
        shape, names = part.get("shape"), part.get("names")
        if not isinstance(shape, list) or not shape or not all(_whole(d) for d in shape):
            raise _fail(path, f"{where} its shape is not a list of whole numbers")
        if names is not None and not _strings(names, distinct=True):
            raise _fail(path, f"{where} its column names are not distinct strings")
    elif part.get("type") != "text":
        raise _fail(path, f"{where} its type is neither data.frame, array nor text")


def check(encoding: object, path: str) -> None:
    """Raise BadModelError naming what is wrong in the ``encoding`` read from ``path``."""
    if not isinstance(encoding, Mapping):
        raise _fail(path, "its encoding is not a record")
    inputs, order = encoding.get("inputs"), encoding.get("input_order")
    if not isinstance(inputs, Mapping) or not inputs or not _strings(order, distinct=True):
        raise _fail(path, "its inputs or their order are missing")
    if set(order) != set(inputs):  # type: ignore[arg-type]
        raise _fail(path, "its input order does not name its inputs")
    for name in order:  # type: ignore[union-attr]
        _check_input(name, inputs[name], path)
    y = encoding.get("y")
    if y is not None:
        if not isinstance(y, Mapping) or y.get("type") not in ("factor", "numeric"):
            raise _fail(path, "its labels have no type factor or numeric")
        if y["type"] == "factor" and not _strings(y.get("levels"), distinct=True):
            raise _fail(path, "its label levels are not distinct strings")
    if encoding.get("na", "error") not in ("error", "drop"):
        raise _fail(path, "its NA rule is neither error nor drop")
    images = encoding.get("images")
    if images is not None:
        size = images.get("image_size") if isinstance(images, Mapping) else None
        if not isinstance(size, list) or len(size) != 2 or not all(_whole(d) and d for d in size):
            raise _fail(path, "its image size is not two whole numbers")
        rescale = images.get("rescale")
        if rescale is not None and not (
            isinstance(rescale, (int, float)) and math.isfinite(rescale) and rescale > 0
        ):
            raise _fail(path, "its rescale is not a positive number")


def part_width(part: Mapping) -> int:
    """The columns an input receives: a data.frame's (a one-hot factor's levels each)."""
    if part["type"] == "array":
        return math.prod(part["shape"])
    return frame_encoding.frame_width(part["columns"])


def check_fits(encoding: Mapping, model: Model, path: str) -> None:
    """Raise BadModelError when the encoding's inputs do not fit ``model``'s: a data.frame's
    width, an array's shape, the image size, where the model's input shapes are known; texts
    (a KerasHub model's) are its preset's to tokenize, into inputs of its own."""
    if any(part["type"] == "text" for part in encoding["inputs"].values()):
        return
    try:
        tensors = list(model.inputs)
    except (AttributeError, ValueError, TypeError):
        return
    parts = encoding["inputs"]
    if len(tensors) != len(parts):
        raise _fail(path, f"it has {len(parts)} input(s), the model {len(tensors)}")
    named = {str(getattr(t, "name", "")).split(":")[0]: t for t in tensors}
    for position, (name, part) in enumerate(parts.items()):
        tensor = named.get(name, tensors[position])
        wanted = list(tensor.shape)[1:]
        if None in wanted:
            continue
        if part["type"] == "array":
            images = encoding.get("images")
            if images is not None and len(wanted) == 3 and wanted[:2] != images["image_size"]:
                raise _fail(
                    path,
                    f"its image size is {images['image_size']}, the model takes {wanted[:2]}",
                )
            if math.prod(part["shape"]) != math.prod(wanted):
                shape = part["shape"]
                raise _fail(path, f"input {name!r} has rows of shape {shape}, the model {wanted}")
        elif len(wanted) == 1 and part_width(part) != wanted[0]:
            given = part_width(part)
            raise _fail(path, f"input {name!r} gives {given} columns, the model takes {wanted[0]}")
