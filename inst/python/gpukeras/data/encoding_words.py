"""The encoding in words, as R prints it and the fit's report writes it: each input's
columns, the labels and the NA rule (``encoding_lines``); the encoding itself is
``data.encoding``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpukeras.data.encoding import (
    column_rule,
    describe_columns,
    frames,
    ints,
    part_columns,
    parts,
    plain_encoding,
    strings,
)


def _columns_lines(encoding: Mapping[str, Any]) -> list[str]:
    """Each data.frame input described (its name first when there are several)."""
    named = bool(encoding.get("several"))
    return [
        f"{name + ': ' if named else ''}{describe_columns(part)}" for name, part in frames(encoding)
    ]


def _print_lines(encoding: Mapping[str, Any]) -> list[str]:
    """print()'s lines: each input, the labels, the images' settings, the NA rule."""

    def kind(column: Mapping[str, Any]) -> str:
        if column["type"] != "factor":
            return str(column["type"])
        n, rule = len(strings(column.get("levels"))), column_rule(column)
        rule = "one-hot" if rule == "one_hot" else "codes"
        return (
            f"character, {n} values, {rule}" if column.get("character") else f"factor({n}), {rule}"
        )

    lines = ["<gpukeras_encoding>"]
    for name, part in parts(encoding):
        if part["type"] == "data.frame":
            types = ", ".join(f"{c} <{kind(column)}>" for c, column in part_columns(part))
            lines.append(f"  {name}: data.frame, {types}")
        elif part["type"] == "text":
            lines.append(f"  {name}: texts, tokenized by the model's preset")
        else:
            lines.append(
                f"  {name}: array, rows of shape ({', '.join(map(str, ints(part['shape'])))})"
            )
    y = encoding.get("y") or {}
    if y.get("type") == "factor":
        lines.append(f"  y: factor, levels {', '.join(strings(y.get('levels')))}")
    elif y.get("type") == "numeric":
        lines.append("  y: numeric")
    images = encoding.get("images")
    if images:
        size = ints(images["image_size"])
        top = 255 * float(images.get("rescale") or 1)
        lines.append(
            f"  images: {size[0]} x {size[1]}, {images['color_mode']}, pixels in [0, {top:.4g}]"
        )
    lines.append(f"  NA rule in training: {encoding.get('na') or 'error'}")
    return lines


def _texts(encoding: Mapping[str, Any]) -> bool:
    """Whether ``encoding``'s inputs are texts (gpu_text_data()'s, for a KerasHub model)."""
    return any(part["type"] == "text" for part in encoding["inputs"].values())


def _fit_line(encoding: Mapping[str, Any]) -> list[str]:
    """The fit report's line: the data.frame inputs' columns and the classes."""
    classes = strings((encoding.get("y") or {}).get("levels"))
    more = f", and {len(classes) - 10} more" if len(classes) > 10 else ""
    parts = [
        *(["; ".join(_columns_lines(encoding))] if frames(encoding) else []),
        *(["texts"] if _texts(encoding) else []),
        *([f"classes {', '.join(classes[:10])}{more}"] if classes else []),
    ]
    return [
        f"Encoding:       {'; '.join(parts) or 'numbers, by column'}; predict(fit, newdata) and "
        "gpu_save() encode new data the same way"
    ]


def encoding_lines(
    encoding: Mapping[str, Any] | None, form: str = "print", prefix: str = ""
) -> list[str]:
    """``encoding`` in words, as lines for R to print, each after ``prefix``: ``form``
    "print" (print()'s), "fit" (the fit report's one line) or "columns" (each data.frame
    input's columns); none for no encoding (None)."""
    if encoding is None:
        return []
    forms = {"print": _print_lines, "fit": _fit_line, "columns": _columns_lines}
    return [prefix + line for line in forms[form](plain_encoding(encoding))]
