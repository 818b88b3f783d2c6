"""The encoding of a data.frame, in the core: R's columns as they are, made into the
float32 matrix the model reads in one pass.

R hands a data.frame input over as a *frame* (``{FRAME: {...}}``, R's
``frame_handover()``): its name, the training encoding's spec of its columns (the plain
form R records and gpu_save() writes: ``{column: {"type": "numeric" | "logical" |
"factor", "levels": [...], "encoding": "one_hot" | "codes"}}``, in the model's column
order), the rule for levels training did not have (``unknown``), and each column once:
a numeric or logical column as doubles (R's NA a NaN), a factor (a character column
as the factor of its values, ``appearance`` true) as its 1-based integer codes (R's NA_integer_ the
smallest int32) and its own levels; with each, its R ``class`` and
``typeof``, which the errors name, and ``number`` (whether R has numbers for it). The
encoding is recorded from the same frame without its numbers (``recording.frame_account``).
Levels are matched by name: a level's code is its
position among the training levels. A factor becomes one indicator column per
training level ("one_hot": 1 for the row's level, NaN across the row for NA, 0
across it for an unseen level with ``unknown = "zero"``) or one code ("codes":
0-based, NaN for NA, ``len(levels)`` for an unseen level with ``unknown = "code"``);
an encoding recorded before one-hot existed has no ``encoding``: codes.

The encoding itself is made here too, once, from R's account of the training data
(``data_encoding``): which inputs and columns, each column's type, each factor's levels
and rule (``factors``), the label's levels and the NA rule, in the plain form above; and
new data is checked against it here (``check_new_data``: its inputs, columns, row shapes
and kind of labels), R keeping only what needs no Python (argument shapes, column names).

Unseen levels and columns of the wrong type are ``DataFieldsError``s with R's
condition class and fields (``column``, ``levels``, ``type``). NaN and infinities are
left in the matrix for the caller's one check of it (``array_source.check_values``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpukeras.core.errors import BadDataError, DataFieldsError
from gpukeras.data import indicators
from gpukeras.data.indicators import BLOCK_ROWS, FrameCodes, aligned_empty, in_blocks

# The key R's frame_handover() puts a data.frame under.
FRAME = "gpukeras_frame"
# The key R's labels_handover() puts factor labels under.
LABELS = "gpukeras_labels"
# How a factor column becomes the model's: indicator columns, or one column of its codes.
FACTOR_RULES = ("one_hot", "codes")
# What the levels training did not have become: an error, or scored (FactorPlan.advice).
UNKNOWN_RULES = ("error", "zero", "code")
# R's NA_integer_, as a factor's code.
R_NA_INTEGER = np.iinfo(np.int32).min
# R's NA_real_: a NaN whose payload R reads as NA (a plain NaN is NaN to R).
R_NA_REAL = float(np.array(0x7FF00000000007A2, dtype=np.uint64).view(np.float64))
MESSAGE_LEVELS = 10
# The types a data.frame's column may have, as R accounts for them.
COLUMN_TYPES = ("numeric", "logical", "factor", "character")
# The types of a column in the plain form (a character column's is factor).
PLAIN_TYPES = COLUMN_TYPES[:3]


def is_frame(value: object) -> bool:
    """Whether ``value`` is a data.frame R handed over (``{FRAME: {...}}``)."""
    return isinstance(value, dict) and list(value) == [FRAME]


def is_labels(value: object) -> bool:
    """Whether ``value`` is factor labels R handed over (``{LABELS: {...}}``)."""
    return isinstance(value, dict) and list(value) == [LABELS]


def label_codes(labels: Mapping[str, object]) -> np.ndarray:
    """The int32 codes (0-based, aligned) of factor labels R handed over (R's
    labels_handover(): ``values``, R's 1-based codes without NA; ``levels``, their own;
    ``training``, the levels they are matched to by name; ``appearance``, whether they
    were a character vector). Raises DataFieldsError (gpukeras_error_new_levels, fields
    ``column`` "y" and ``levels``) for labels training did not have."""
    lookup = _factor_codes(labels, FactorPlan(strings(labels["training"]), "codes", False), "y")
    values = np.asarray(labels["values"]).reshape(-1)
    codes = aligned_empty((len(values),), np.dtype(np.int32))
    codes[:] = lookup[np.maximum(values, 0)]
    return codes


def strings(value: object) -> list[str]:
    """R's character vector as reticulate gives it (one string alone as a str)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]  # type: ignore[attr-defined]


def quoted(values: Sequence[str]) -> str:
    return ", ".join(f'"{v}"' for v in values[:MESSAGE_LEVELS])


def check_types(name: str, types: Mapping[str, str]) -> None:
    """Refuse a data.frame ``name`` with columns of other ``types`` (by column: their R
    type, or the class R gave for one of none of COLUMN_TYPES): DataFieldsError
    gpukeras_error_bad_data naming them."""
    bad = [f"{column} ({kind})" for column, kind in types.items() if kind not in COLUMN_TYPES]
    if bad:
        raise DataFieldsError(
            f"Column(s) of unsupported type in `{name}`: {', '.join(bad)}.",
            [
                "Use numeric, logical, factor or character columns (convert dates with "
                "as.numeric(), drop list columns)."
            ],
            ["gpukeras_error_bad_data"],
        )


def factor_rule(factors: str | Mapping[str, str], column: str) -> str:
    """How factor column ``column`` is encoded by gpu_dataset()'s ``factors``: one rule for
    every factor, or rules named by column (a factor not named: one-hot)."""
    if isinstance(factors, str):
        return factors
    return str(factors.get(column, "one_hot"))


def _column_spec(column: Mapping[str, object], rule: str) -> dict[str, object]:
    """One training column's spec from R's account of it (``type``: "numeric", "logical",
    "factor" or "character"; ``levels`` for the last two): a character column is the
    factor of its values, recorded as character for the prints that show it."""
    kind = str(column["type"])
    if kind not in ("factor", "character"):
        return {"type": kind}
    spec: dict[str, object] = {
        "type": "factor",
        "levels": strings(column.get("levels")),
        "encoding": rule,
    }
    if kind == "character":
        spec["character"] = True
    return spec


def label_spec(y: Mapping[str, object] | None) -> dict[str, object] | None:
    """The labels' spec from R's account of them (None: no labels)."""
    if y is None:
        return None
    if y["type"] == "factor":
        return {"type": "factor", "levels": strings(y.get("levels"))}
    return {"type": str(y["type"])}


def data_encoding(
    inputs: Mapping[str, Any],
    y: Mapping[str, object] | None,
    several: bool,
    na: str,
    factors: str | Mapping[str, str] | None = "one_hot",
    encoding: Mapping[str, Any] | None = None,
) -> dict[str, object] | None:
    """The encoding of training data, in the plain form gpu_save() writes (R's
    encoding_from_plain() reads it), from R's account of it: ``inputs`` by name, each
    ``{"type": "data.frame", "columns": {column: {"type", "levels"}}}`` (in the data's
    column order), ``{"type": "array", "shape", "names", "describe"}`` (``describe``: R's
    words for it) or a NumPy array R holds as it is (``numpy_shape``); ``y`` None (no
    labels), ``{"type": "factor", "levels"}`` (a factor's levels as R gives them, a
    character vector's sorted values) or ``{"type": "numeric"}``, with ``describe``;
    ``several`` whether there are several named inputs; ``na`` the NA rule; ``factors`` as
    gpu_dataset() takes it, its form checked by R, or None for new data to score with a
    model that has no recorded encoding (numbers only). With the training ``encoding`` (new
    data), None once the data is checked against it (``check_new_data``).

    Raises DataFieldsError (gpukeras_error_bad_argument) when ``factors`` names columns
    that are not factor or character columns of a data.frame input, and
    (gpukeras_error_bad_data, ``check_types``) for columns of other types, or for factor or
    character columns with ``factors`` None: their codes would be the new data's own.
    """
    if encoding is not None:
        check_new_data(inputs, y, several, encoding)
        return None
    inputs = {name: _account(part, name) for name, part in inputs.items()}
    coded = [
        column
        for part in inputs.values()
        if part["type"] == "data.frame"
        for column, given in part["columns"].items()
        if given["type"] in ("factor", "character")
    ]
    if factors is None and coded:
        raise _bad(
            f"`newdata` has factor or character columns ({', '.join(coded)}), but the model's "
            "training encoding is not known.",
            "It was trained on NumPy arrays or a dataset not made by gpu_dataset() from R data: "
            "give the new data as the numbers it was trained on.",
        )
    factors = factors or "one_hot"
    unknown = [] if isinstance(factors, str) else [c for c in factors if c not in coded]
    if unknown:
        raise DataFieldsError(
            "`factors` names column(s) that are not factor or character columns of `x`: "
            f"{', '.join(unknown)}.",
            [
                f"Its factor and character columns: {', '.join(dict.fromkeys(coded))}."
                if coded
                else "`x` has no factor or character column."
            ],
            ["gpukeras_error_bad_argument"],
        )
    plain_inputs: dict[str, object] = {}
    for name, part in inputs.items():
        if part["type"] == "data.frame":
            columns: Mapping[str, Mapping[str, object]] = part["columns"]
            check_types(name, {column: str(given["type"]) for column, given in columns.items()})
            plain_inputs[name] = {
                "type": "data.frame",
                "columns": {
                    column: _column_spec(given, factor_rule(factors, column))
                    for column, given in columns.items()
                },
                "column_order": list(columns),
            }
        else:
            plain_inputs[name] = {
                "type": "array",
                "shape": ints(part["shape"]),
                "names": strings(part.get("names")) or None,
            }
    return {
        "inputs": plain_inputs,
        "input_order": list(inputs),
        "several": bool(several),
        "y": label_spec(y),
        "na": na,
        "x_dtype": "float32",
    }


def numpy_shape(array: object, name: str) -> list[int]:
    """The shape of ``array``, a NumPy array R data holds as it is (gpu_as_numpy()), rows
    first. BadDataError naming ``name`` unless it is an array of numbers or booleans."""
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
        kind = (
            f"a NumPy array of {array.dtype}"
            if isinstance(array, np.ndarray)
            else type(array).__name__
        )
        raise BadDataError(
            f"`{name}` is {kind}: a NumPy part of R data must hold numbers. Convert it, or "
            "give it as R data."
        )
    return [int(d) for d in array.shape]


def _account(part: Any, name: str) -> Mapping[str, Any]:
    """R's account of an input, a NumPy array's made here: an array of its row shape."""
    if isinstance(part, Mapping):
        return part
    shape = numpy_shape(part, name)
    return {"type": "array", "shape": shape[1:] if len(shape) > 1 else [1], "numpy": True}


def _bad(message: str, *details: str) -> DataFieldsError:
    return DataFieldsError(message, list(details), ["gpukeras_error_bad_data"])


def _inputs_words(names: Sequence[str], several: bool) -> str:
    return f"the inputs {', '.join(f'`{n}`' for n in names)}" if several else "one input"


def _missing_columns(have: Sequence[str], wanted: Sequence[str], name: str) -> None:
    """Refuse new data ``name`` whose columns ``have`` lack some the model was trained on."""
    missing = [column for column in wanted if column not in have]
    if missing:
        raise _bad(
            f"`{name}` lacks column(s) the model was trained on: {', '.join(missing)}.",
            "Give every training column, by name (their order and any other columns do not "
            "matter).",
        )


def check_new_data(
    inputs: Mapping[str, Any],
    y: Mapping[str, object] | None,
    several: bool,
    encoding: Mapping[str, Any],
) -> None:
    """Refuse new data (R's account of it, as ``data_encoding`` takes it) that is not in the
    form of the training ``encoding``: other inputs, a data.frame where training had none
    or the other way round, training columns missing (a data.frame's, or a matrix's named
    ones), rows of another shape, labels of another kind. DataFieldsError
    gpukeras_error_bad_data, each saying what to give."""
    plain = plain_encoding(encoding)
    wanted = plain["inputs"]
    if bool(several) != plain["several"] or (several and set(inputs) != set(wanted)):
        raise _bad(
            f"The new data has {_inputs_words(list(inputs), several)}; the model was trained "
            f"on {_inputs_words(list(wanted), plain['several'])}.",
            "Give the new data in the form the training data had.",
        )
    for name, spec in wanted.items():
        given = inputs[name if several else next(iter(inputs))]
        frame = isinstance(given, Mapping) and given["type"] == "data.frame"
        if spec["type"] == "data.frame":
            if not frame:
                words = (
                    given.get("describe")
                    if isinstance(given, Mapping)
                    else f"a numpy.ndarray of length {len(given)}"
                )
                raise _bad(
                    f"`{name}` must be a data.frame, as in training, not {words}.",
                    f"Give the columns {', '.join(spec['columns'])}.",
                )
            _missing_columns(list(given["columns"]), list(spec["columns"]), name)
            continue
        names = spec.get("names") or []
        if frame:
            if not names:
                raise _bad(
                    f"`{name}` must be a matrix or array, as in training, not a data.frame.",
                    "The training columns had no names to match a data.frame's by: give the "
                    "columns in training's order, as.matrix().",
                )
            _missing_columns(list(given["columns"]), names, name)
            continue
        account = _account(given, name)
        have = strings(account.get("names"))
        if names and have and have != names:
            _missing_columns(have, names, name)
        elif ints(account["shape"]) != ints(spec["shape"]):
            shape = ", ".join(map(str, ints(account["shape"])))
            raise _bad(
                f"Each row of `{name}` has shape ({shape}); the model was trained on rows of "
                f"shape ({', '.join(map(str, ints(spec['shape'])))}).",
                "Give the new data with the training data's columns (and image size).",
            )
    label = plain.get("y")
    if y is not None and label is not None and y["type"] != label["type"]:
        raise _bad(
            f"`y` must be a factor or character vector, as in training, not {y['describe']}."
            if label["type"] == "factor"
            else "`y` must be a numeric, logical, factor or character vector (or a numeric "
            f"matrix), not {y['describe']}."
        )


def normalized(plain: Mapping[str, Any]) -> dict[str, Any]:
    """The plain form ``plain`` (a file gpu_save() wrote, of any version) in full, as
    ``data_encoding`` makes it: the inputs and each data.frame's columns in their recorded
    order (``input_order``, ``column_order``), each factor column's rule (codes, for an
    encoding recorded before one-hot existed), ``several`` and the NA rule ("error" where
    none was recorded), its fields in data_encoding's order and any others (``images``)
    after them. R reads this form as it is (encoding_from_plain())."""
    inputs = plain["inputs"]
    order = list(plain.get("input_order") or inputs)
    parts: dict[str, object] = {}
    for name in order:
        part = dict(inputs[name])
        if part["type"] == "data.frame":
            part["columns"] = {
                column: {**given, "encoding": column_rule(given)}
                if given.get("type") == "factor"
                else dict(given)
                for column, given in part_columns(part)
            }
            part["column_order"] = list(part["columns"])
        parts[name] = part
    full = {
        "inputs": parts,
        "input_order": order,
        "several": bool(plain.get("several")),
        "y": plain.get("y"),
        "na": plain.get("na") or "error",
        "x_dtype": plain.get("x_dtype") or "float32",
    }
    return {**full, **{key: value for key, value in plain.items() if key not in full}}


def image_encoding(
    class_names: Sequence[str],
    image_size: Sequence[int],
    channels: int,
    color_mode: str,
    rescale: float | None,
) -> dict[str, Any]:
    """The encoding of an image folder, in the plain form: one input ``x`` of images
    (``image_size`` x ``channels``), the class names as the labels' levels, and how the
    pixels were read (``images``: image_size, color_mode, rescale), so that a folder of
    new images is read and labelled the same way."""
    size = [int(d) for d in image_size]
    return normalized(
        {
            "inputs": {"x": {"type": "array", "shape": [*size, int(channels)], "names": None}},
            "several": False,
            "y": {"type": "factor", "levels": list(class_names)},
            "images": {"image_size": size, "color_mode": color_mode, "rescale": rescale},
        }
    )


# The fields of the plain form that are arrays, whatever their length.
ARRAY_FIELDS = ("levels", "shape", "names", "image_size")


def plain_encoding(encoding: Mapping[str, Any]) -> dict[str, Any]:
    """``encoding`` as R sends it (reticulate gives a vector of one value, one level or one
    dimension, as that value, and tuples for some) in the JSON-ready plain form
    ``normalized`` gives: every ARRAY_FIELDS value at any depth a list (None stays None),
    a column named like one of them left as it is."""

    def listed(value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        out = {key: listed(item) for key, item in value.items()}
        for key in ARRAY_FIELDS:
            item = out.get(key)
            if item is not None and not isinstance(item, Mapping):
                out[key] = [item] if isinstance(item, str | int | float) else list(item)
        return out

    return normalized(listed(encoding))


def same_encoding(given: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether data encoded by ``given`` (a gpu_dataset()'s encoding, plain) reads as data
    encoded by ``wanted`` (the training data's) does: the same inputs, each data.frame's
    columns with their types, levels and rules (a character column as the factor of its
    values), each array's shape (and column names where both have them), texts as texts
    (a KerasHub model's, which its preset tokenizes), the labels' levels where ``given`` has
    some, and the image settings. Both as R sends them (``plain_encoding``)."""
    given, wanted = plain_encoding(given), plain_encoding(wanted)
    if list(given["inputs"]) != list(wanted["inputs"]):
        return False
    for name, part in given["inputs"].items():
        other = wanted["inputs"][name]
        if part["type"] != other["type"]:
            return False
        if part["type"] == "data.frame":
            if _as_factors(part) != _as_factors(other):
                return False
        elif part["type"] == "text":
            continue  # a KerasHub model's texts, its preset's to tokenize
        elif ints(part["shape"]) != ints(other["shape"]) or (
            part.get("names") and other.get("names") and part["names"] != other["names"]
        ):
            return False
    levels = (given.get("y") or {}).get("levels")
    if levels is not None and levels != (wanted.get("y") or {}).get("levels"):
        return False
    return given.get("images") == wanted.get("images")


def check_same_encoding(
    given: Mapping[str, Any] | None, wanted: Mapping[str, Any] | None, arg: str
) -> None:
    """Refuse a gpu_dataset() ``arg`` whose encoding ``given`` is not the training data's
    ``wanted`` (``same_encoding``): DataFieldsError gpukeras_error_bad_data, saying how to
    make one that is. Nothing to check where either is None (a dataset made elsewhere, a
    model trained without a recorded encoding)."""
    if given is None or wanted is None or same_encoding(given, wanted):
        return
    raise DataFieldsError(
        f"`{arg}` is a gpu_dataset() encoded otherwise than the training data (other columns, "
        "factor levels or image settings).",
        [
            "Make it with gpu_dataset(..., like = <the training dataset or fit>), or give the R "
            "data itself."
        ],
        ["gpukeras_error_bad_data"],
    )


def _as_factors(part: Mapping[str, Any]) -> list[tuple[str, dict[str, object]]]:
    """A data.frame part's columns in order, a character column as the factor of its values."""
    return [
        (c, {k: v for k, v in spec.items() if k != "character"}) for c, spec in part_columns(part)
    ]


def ints(values: object) -> list[int]:
    """R's whole numbers as reticulate gives them (one alone as a number)."""
    return [int(d) for d in np.asarray(values).reshape(-1)]


def frame_width(spec: Mapping[str, Mapping[str, object]]) -> int:
    """The model columns a data.frame of these columns' ``spec`` becomes."""
    return sum(column_width(column) for column in spec.values())


def column_rule(column: Mapping[str, object]) -> str:
    """How a factor column of the spec is encoded: one of FACTOR_RULES (an encoding recorded
    before one-hot existed has none: codes)."""
    return str(column.get("encoding") or "codes")


def column_width(column: Mapping[str, object]) -> int:
    """The model columns one column of the spec becomes: a one-hot factor's levels, else 1."""
    if column.get("type") == "factor" and column_rule(column) == "one_hot":
        return len(strings(column.get("levels")))
    return 1


def part_width(part: Mapping[str, Any]) -> int:
    """The model columns one row of an input of the spec is: a data.frame's
    (``frame_width``), else its shape's product (1 where no shape is known)."""
    if part["type"] == "data.frame":
        return frame_width(part["columns"])
    return math.prod(ints(part.get("shape") or [1]))


@dataclass(frozen=True)
class FactorPlan:
    """How a factor column of the spec becomes the model's columns, as plain data that NumPy
    (``frame_codes``) and TensorFlow (the export's signature) apply alike: a level's table
    index is its position among ``levels``, an unseen level's ``unseen`` (``len(levels)``)
    where ``scored`` (else it is an error, which ``unknown = advice`` would score), NA's
    ``unseen + 1``; ``table()`` holds each index's model columns (float32): one-hot,
    ``indicator_table`` (an unseen level all 0, NA all NaN); codes, the index itself (NA NaN).
    ``unknown``: what an unseen level becomes, ``advice`` or "error"."""

    levels: list[str]
    rule: str
    scored: bool

    @property
    def unseen(self) -> int:
        return len(self.levels)

    @property
    def advice(self) -> str:
        return "zero" if self.rule == "one_hot" else "code"

    @property
    def unknown(self) -> str:
        return self.advice if self.scored else "error"

    def table(self) -> np.ndarray:
        if self.rule == "one_hot":
            return indicators.indicator_table(self.unseen)
        return np.array([*range(self.unseen + 1), np.nan], np.float32).reshape(-1, 1)


def factor_plan(column: Mapping[str, object], unknown: str) -> FactorPlan:
    """The plan of a factor column of the spec, its unseen levels scored where ``unknown``
    (one of UNKNOWN_RULES) is its rule's ``advice``."""
    plan = FactorPlan(strings(column.get("levels")), column_rule(column), False)
    return replace(plan, scored=unknown == plan.advice)


def encode_frame(frame: Mapping[str, object]) -> np.ndarray:
    """The float32 matrix (rows x model columns, C order, aligned) a handed-over
    data.frame ``frame`` (see the module's notes: ``name``, ``spec``, ``unknown``,
    ``columns``) becomes: its columns in the spec's order, a number column as one column
    of its values, a factor as its indicator columns or its code: ``frame_codes``'s
    form expanded on the host. Raises as ``frame_codes`` does."""
    coded = frame_codes(frame)
    return coded.host() if isinstance(coded, FrameCodes) else coded


def frame_codes(frame: Mapping[str, object]) -> np.ndarray | FrameCodes:
    """A handed-over data.frame ``frame`` as the model's columns, its one-hot factors kept as
    codes: a ``FrameCodes`` (``np.asarray`` of it is ``encode_frame``'s matrix), or for a
    frame without one-hot factors that float32 matrix itself.

    Raises DataFieldsError (gpukeras_error_new_levels, fields ``column`` and ``levels``)
    for levels training did not have, unless ``unknown`` says how to score them, and
    (gpukeras_error_wrong_type, fields ``column`` and ``type``) for a factor given where
    training had numbers or the other way round, and (``check_types``) for a column R
    handed over without values, of a type it has no numbers for (its ``class``). NA stays
    NaN (a one-hot factor's: its NA code), for the caller's check.
    """
    name = str(frame["name"])
    spec: Mapping[str, Mapping[str, object]] = frame["spec"]  # type: ignore[assignment]
    given: Mapping[str, Mapping[str, object]] = frame["columns"]  # type: ignore[assignment]
    unknown = str(frame.get("unknown") or "error")
    kinds = {
        c: "numeric" if h.get("values") is not None else str(h["class"]) for c, h in given.items()
    }
    check_types(name, kinds)
    # (values, lookup from R's code, None for numbers: a one-hot factor's table index, a
    # code's model column; one-hot levels or None) per column
    columns: list[tuple[np.ndarray, np.ndarray | None, int | None]] = []
    rows: int | None = None
    for column, rule in spec.items():
        where = f"{name}${column}"
        handed = given[column]
        values = np.asarray(handed["values"]).reshape(-1)
        rows = len(values) if rows is None else rows
        if rule.get("type") == "factor":
            plan = factor_plan(rule, unknown)
            lookup = _factor_codes(handed, plan, where)
            if plan.rule == "one_hot":
                columns.append((values, lookup, plan.unseen))
            else:
                columns.append((values, plan.table()[lookup, 0], None))
        else:
            if handed.get("levels") is not None:
                _wrong_type(
                    where, handed, str(rule.get("type")), "Give it as numbers, as in training."
                )
            columns.append((values, None, None))
    count = rows or 0
    layout: list[tuple[str, int, int]] = []
    n_dense = n_codes = 0
    for _, _, levels in columns:
        if levels is not None:
            layout.append(("one_hot", n_codes, levels))
            n_codes += 1
        elif layout and layout[-1][0] == "dense":
            layout[-1] = ("dense", layout[-1][1], layout[-1][2] + 1)
            n_dense += 1
        else:
            layout.append(("dense", n_dense, 1))
            n_dense += 1
    dense = aligned_empty((count, n_dense), np.dtype(np.float32))
    codes = aligned_empty((count, n_codes), np.dtype(np.int32)) if n_codes else None

    def fill(begin: int) -> None:
        block = slice(begin, min(begin + BLOCK_ROWS, count))
        at_dense = at_codes = 0
        # one errstate for the block's columns: entering one costs as much as a small
        # column's copy (a 1-row request to gpu_serve())
        with np.errstate(invalid="ignore", over="ignore"):
            for values, lookup, levels in columns:
                # a factor's R codes: NA reads the lookup's entry 0
                column = values[block] if lookup is None else lookup[np.maximum(values[block], 0)]
                if levels is not None:
                    codes[block, at_codes] = column  # type: ignore[index]
                    at_codes += 1
                    continue
                dense[block, at_dense] = column
                at_dense += 1

    in_blocks(fill, count)
    return dense if codes is None else FrameCodes(dense, codes, layout)


def _given(handed: Mapping[str, object]) -> str:
    """What a handed-over column is, in words: "a factor", or "numeric (<R class>)" and
    "not numeric (<R class>)" (a logical column, a character column among them)."""
    if handed.get("levels") is not None and not handed.get("appearance"):
        return "a factor"
    numeric = handed.get("typeof") in ("double", "integer")
    return f"{'numeric' if numeric else 'not numeric'} ({handed.get('class')})"


def _wrong_type(where: str, handed: Mapping[str, object], was: str, advice: str) -> None:
    raise DataFieldsError(
        f"`{where}` is {_given(handed)}; in training it was {was}.",
        [advice],
        ["gpukeras_error_wrong_type", "gpukeras_error_bad_data"],
        column=where,
        type=str(handed.get("typeof")),
    )


def _factor_codes(handed: Mapping[str, object], plan: FactorPlan, where: str) -> np.ndarray:
    """The lookup from a factor's R codes (1-based; entry 0 for NA) to ``plan``'s table
    indices. Raises for unseen levels that ``plan`` does not score."""
    if handed.get("levels") is None:
        _wrong_type(
            where,
            handed,
            "a factor",
            "Give it as a factor or character vector: its values are matched to the training "
            "levels by name.",
        )
    own, levels = strings(handed["levels"]), plan.levels
    position = {level: code for code, level in enumerate(levels)}
    indices = (position.get(level, plan.unseen) for level in own)
    lookup = np.array([plan.unseen + 1, *indices], dtype=np.int64)
    if own == levels or plan.scored or not (lookup[1:] == plan.unseen).any():
        return lookup
    r_codes = np.asarray(handed["values"]).reshape(-1)
    used = np.bincount(np.maximum(r_codes, 0), minlength=len(own) + 1)
    unseen = np.flatnonzero((lookup == plan.unseen) & (used > 0))
    if len(unseen):
        if handed.get("appearance"):  # a character column: in the order the values come
            unseen = unseen[np.argsort([int(np.argmax(r_codes == code)) for code in unseen])]
        new = [own[code - 1] for code in unseen]
        raise DataFieldsError(
            f"`{where}` has level(s) not seen in training: {quoted(new)}.",
            [
                f"The model knows {quoted(levels)}.",
                'Remove those rows, or give unknown = "zero" to score them with every '
                "indicator column of that factor 0."
                if plan.rule == "one_hot"
                else 'Remove those rows, or give unknown = "code" to score them with the '
                "reserved code length(levels).",
            ],
            ["gpukeras_error_new_levels"],
            column=where,
            levels=new,
        )
    return lookup


# An encoding in words: print(), the fit's report and gpu_dataset()'s print show these
# lines (R prints them, ``encoding_lines``; serve.scoring ``check_widths`` checks a model
# against them). ``encoding`` is the plain form (data_encoding's, or gpu_save()'s file).


def parts(encoding: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The inputs of ``encoding``, by name, in their order."""
    inputs = encoding["inputs"]
    return [(name, inputs[name]) for name in encoding.get("input_order") or list(inputs)]


def frames(encoding: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The data.frame inputs of ``encoding``, by name, in the inputs' order."""
    return [(name, part) for name, part in parts(encoding) if part["type"] == "data.frame"]


def part_columns(part: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """A data.frame part's columns in order."""
    columns = part["columns"]
    return [(c, columns[c]) for c in part.get("column_order") or list(columns)]


def describe_columns(part: Mapping[str, Any]) -> str:
    """The model columns a data.frame part becomes, in words: "5 columns: income, region (4
    levels, one-hot)"."""
    words = [
        f"{name} ({len(strings(column.get('levels')))} levels, "
        f"{'one-hot' if column_rule(column) == 'one_hot' else 'integer codes'})"
        if column["type"] == "factor"
        else name
        for name, column in part_columns(part)
    ]
    width = frame_width(part["columns"])
    return f"{width} column{'' if width == 1 else 's'}: {', '.join(words)}"


def vocabulary(encoding: Mapping[str, Any]) -> dict[str, list[str]]:
    """The levels of each factor column of ``encoding``'s data.frame inputs, by column name
    in the inputs' and columns' order, and the labels' as ``y``: the vocabulary a dataset of
    R data shows."""
    plain = plain_encoding(encoding)
    words = {
        column: strings(spec.get("levels"))
        for _, part in frames(plain)
        for column, spec in part_columns(part)
        if spec["type"] == "factor"
    }
    y = plain.get("y") or {}
    if y.get("type") == "factor":
        words["y"] = strings(y.get("levels"))
    return words
