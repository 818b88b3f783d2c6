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
from gpukeras.data import encoding_plain


def _fail(path: str, what: str) -> BadModelError:
    return BadModelError(
        f"The encoding file '{path}' is not one gpu_save() wrote: {what}. Save the model "
        "again with gpu_save(), or remove that file to load the model without an encoding."
    )


def check(encoding: object, path: str) -> None:
    """Raise BadModelError naming what is wrong in the ``encoding`` read from ``path``
    (``data.encoding_plain.plain_problem``: what the core's own encodings are)."""
    problem = encoding_plain.plain_problem(encoding)
    if problem:
        raise _fail(path, problem)


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
        given = frame_encoding.part_width(part)
        if part["type"] == "array":
            images = encoding.get("images")
            if images is not None and len(wanted) == 3 and wanted[:2] != images["image_size"]:
                raise _fail(
                    path,
                    f"its image size is {images['image_size']}, the model takes {wanted[:2]}",
                )
            if given != math.prod(wanted):
                shape = part["shape"]
                raise _fail(path, f"input {name!r} has rows of shape {shape}, the model {wanted}")
        elif len(wanted) == 1 and given != wanted[0]:
            raise _fail(path, f"input {name!r} gives {given} columns, the model takes {wanted[0]}")
