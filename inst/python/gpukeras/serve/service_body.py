"""A POST /predict body: JSON into the model's features, and each refusal of it.

Contract. ``features`` reads a body into the model's features: rows of plain numbers for
a model of unnamed rows (an image model's) straight into float32 (``numeric_rows``, no
Python object per value), any other body through ``parse`` and ``request_features``.
``parse`` reads the body's bytes as JSON (``Refused`` 400 ``malformed_json`` or
``bad_body``); ``request_features`` takes the parsed value in one of its forms (records,
columns or one record, rows of numbers) and returns the float32 features of the rows
scored (a data.frame input's as ``FrameRows``, its columns checked, encoded by
``model_features`` at the model's call, with the other requests of its batch: ``stack``),
which rows those are (None: all; else a mask, the NA rule "drop"), the request's rows and
the warnings predict() would give (pixels out of the training range). The rows are
counted before any column is read, and only the model's columns are read. Every
refusal is ``Refused(status, {"error": code, "message": ..., <fields>})``, echoing at
most a few of the client's values, each cut to 40 characters.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, NoReturn, Protocol

import numpy as np

from gpukeras.core.errors import DataFieldsError
from gpukeras.core.handles import Record
from gpukeras.data import encoding as frame_encoding
from gpukeras.data.image_source import pixel_range


class Served(Protocol):
    """What the checks of a request read of the service (service.Service)."""

    part: dict[str, Any]
    encoding: Mapping[str, Any] | None
    settings: dict[str, Any]
    max_rows: int
    max_bytes: int
    hosts: dict[str, Any]
    paths: dict[str, str]


# float32's largest finite value: numbers beyond it become infinite in the model's copy.
FLOAT32_MAX = float(np.finfo(np.float32).max)
ROWS_SHOWN = 100
NUMBER_STRINGS = {"NA": np.nan, "NaN": np.inf, "Inf": np.inf, "-Inf": -np.inf}


class Refused(Exception):
    """A request refused: its ``status`` and JSON ``problem``."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(problem["message"])
        self.status = status
        self.problem = problem


def refuse(status: int, code: str, message: str, **fields: Any) -> NoReturn:
    problem = {"error": code, "message": message}
    problem.update({k: v for k, v in fields.items() if v is not None})
    raise Refused(status, problem)


def client_text(text: object, width: int = 40) -> str:
    """Text a client sent, as an answer may echo it: no control characters (as "?"), at
    most ``width`` characters."""
    value = re.sub(r"[\x00-\x1f\x7f-\x9f]", "?", str(text))
    value = value.encode("utf-8", "replace").decode("utf-8", "replace").replace("\ufffd", "?")
    return value if len(value) <= width else value[: width - 3] + "..."


def one_line(message: str) -> str:
    return " ".join(line.strip() for line in str(message).splitlines() if line.strip())


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


# What a text model (a KerasHub preset's, gpu_text_classifier()) takes: an array of strings.
TEXTS_EXAMPLE = '["a good movie", "a bad one"]'


def example_request(part: Mapping[str, Any]) -> str:
    """One record of the served input, as an example of what to send."""
    if part["type"] == "text":
        return TEXTS_EXAMPLE
    names = columns_of(part)
    if part["type"] == "data.frame":
        specs = part["columns"]
        record: dict[str, Any] = {
            name: specs[name]["levels"][0]
            if specs[name]["type"] == "factor"
            else (True if specs[name]["type"] == "logical" else 0)
            for name in names or []
        }
    elif names:
        record = dict.fromkeys(names, 0)
    else:
        size = int(np.prod(part.get("shape") or [1]))
        return json.dumps([[0] * size], separators=(",", ":"))
    return json.dumps([record], separators=(",", ":"), ensure_ascii=False)


def parse(raw: bytes, part: Mapping[str, Any]) -> Any:
    """The body as JSON values (no NaN or Infinity literals: JSON has none)."""
    if not raw:
        refuse(
            400,
            "bad_body",
            f"The request has no body: send JSON records, e.g. {example_request(part)}.",
        )
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:
        said = client_text(one_line(str(error)), 200)
        refuse(400, "malformed_json", f"The body is not valid JSON: {said}")


def features(raw: bytes, served: Served) -> tuple[Any, np.ndarray | None, int, list[str]]:
    """The body's features, which rows they are, its rows and the warnings, as
    ``request_features`` gives them; rows of plain numbers read by ``numeric_rows``."""
    if served.part["type"] == "text":
        texts = text_rows(parse(raw, served.part), served.max_rows)
        return texts, None, len(texts), []
    array = numeric_rows(raw, served.part)
    if array is None:
        return request_features(parse(raw, served.part), served)
    check_rows(len(array), served.max_rows)
    return _numeric_rows(served, array, None, len(array))


def text_rows(value: Any, max_rows: int) -> np.ndarray:
    """A text model's texts, which its preset tokenizes: a JSON array of strings (or one
    string) as an array of them; a null refused as NA is, anything else as a bad body."""
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not all(t is None or isinstance(t, str) for t in texts):
        refuse(
            400,
            "bad_body",
            f"This model takes texts: send them as a JSON array of strings, e.g. {TEXTS_EXAMPLE}.",
        )
    check_rows(len(texts), max_rows)
    missing = np.array([text is None for text in texts])
    if missing.any():
        abort_missing([], missing)
    return np.array(texts, dtype=object)


SPACES = b" \t\r\n"
NUMBER_BYTES = b"0123456789.eE+-"
BRACKETS_AS_SPACES = bytes.maketrans(b"[]", b"  ")
EMPTY_SLOTS = (b",,", b"[,", b",]", b"[]")


def numeric_rows(raw: bytes, part: Mapping[str, Any]) -> np.ndarray | None:
    """A body of rows of numbers of the input's row shape (``part["shape"]``, an array of
    one or more dimensions without names), nested as that shape, holding numbers alone (no
    null, string or other value), as float32 (numbers beyond its range infinite), read
    without a Python object per value (numbers as C's strtod reads them, which also takes
    "+1", ".5" and "1."); None for any other body, which JSON values then read or refuse.
    Twice the body's bytes of memory at most, and the values' own."""
    shape = part.get("shape")
    if part["type"] != "array" or part.get("names") or not shape:
        return None
    compact = raw.translate(None, SPACES)
    # a slot without a number: strtod would give it -1
    if any(empty in compact for empty in EMPTY_SLOTS):
        return None
    skeleton = compact.translate(None, NUMBER_BYTES)  # brackets and commas alone
    del compact
    if not skeleton or skeleton.translate(None, b"[],"):
        return None
    nested = b""  # one row with its numbers taken out
    for length in reversed(shape):
        nested = b"[" + b",".join([nested] * length) + b"]"
    rows = (len(skeleton) - 1) // (len(nested) + 1)
    if not rows or skeleton != b"[" + b",".join([nested] * rows) + b"]":
        return None
    del skeleton
    # strtod stops at a slot it cannot read whole ("1.2.3", "1 2", "-"), with fewer values
    # than the slots and the 0 put after them (and a DeprecationWarning; a ValueError in
    # later NumPy)
    try:
        values = np.fromstring(raw.translate(BRACKETS_AS_SPACES) + b",0", dtype=np.float32, sep=",")
    except ValueError:
        return None
    size = rows * math.prod(shape)
    return values[:size].reshape(rows, *shape) if values.size == size + 1 else None


def form_of(value: Any) -> str:
    """ "records" (an array of objects), "columns" (an object), "rows" (an array of
    arrays) or "other"; the first item tells records from rows."""
    if isinstance(value, dict):
        return "columns"
    if not isinstance(value, list) or not all(isinstance(item, (list, dict)) for item in value):
        return "other"
    if not value:
        return "other"
    return "rows" if isinstance(value[0], list) else "records"


def check_rows(rows: int, max_rows: int) -> None:
    if rows == 0:
        refuse(400, "no_rows", "The body holds no rows.")
    if rows > max_rows:
        refuse(
            413,
            "too_many_rows",
            f"The body has {rows} rows; this service takes at most {max_rows} per request "
            "(max_rows): send them in parts.",
            limit="max_rows",
            max_rows=max_rows,
        )


def check_present(present: object, columns: list[str]) -> None:
    absent = [c for c in columns if c not in present]  # type: ignore[operator]
    if absent:
        refuse(
            400,
            "missing_column",
            f"The request lacks column(s) the model was trained on: {', '.join(absent)}. "
            f"Every row needs {', '.join(columns)}.",
            columns=absent,
        )


def named_cells(value: Any, form: str, columns: list[str], max_rows: int) -> dict[str, list[Any]]:
    """The model's ``columns`` from records or columns, each a list of cells (None: NA; a
    column absent from a record is NA in its row). Other keys are never read."""
    if form == "records":
        if not all(isinstance(record, dict) for record in value):
            refuse(400, "bad_body", BAD_FORM)
        keys: set[str] = set()
        for record in value:
            keys.update(record)
        check_present(keys, columns)
        check_rows(len(value), max_rows)
        return {c: [record.get(c) for record in value] for c in columns}
    check_present(value, columns)
    cells = {c: value[c] if isinstance(value[c], list) else [value[c]] for c in columns}
    lengths = [len(cells[c]) for c in columns]
    if len(set(lengths)) != 1:
        said = ", ".join(f"{c} {n}" for c, n in zip(columns, lengths))
        refuse(
            400,
            "bad_body",
            f"The columns have different lengths ({said}): each must have one value per row.",
        )
    check_rows(lengths[0], max_rows)
    return cells


BAD_FORM = (
    'The body must be JSON records [{"column": value, ...}, ...], columns {"column": [values], '
    "...}, or rows of numbers [[...], ...]."
)
TYPE_NAMES = {str: "strings", bool: "true/false", int: "numbers", float: "numbers"}
WANTED = {"numeric": "numbers", "logical": "true or false", "factor": "strings"}


def _kind(cells: list[Any], column: str) -> type | None:
    """The one kind of value a column's cells hold (None: only nulls); numbers and booleans
    mix as numbers, strings with either as strings, nested values refused."""
    kinds = {type(cell) for cell in cells if cell is not None}
    if kinds & {list, dict}:
        refuse(
            400,
            "wrong_type",
            f"Column `{column}` must hold single values, not nested arrays or objects.",
            column=column,
        )
    if not kinds:
        return None
    if str in kinds:
        return str
    return int if kinds & {int, float} else bool


def _wrong_type(column: str, kind: type, wanted: str) -> NoReturn:
    given = TYPE_NAMES[kind]
    refuse(400, "wrong_type", f"Column `{column}` must hold {wanted}, not {given}.", column=column)


def _numbers(cells: list[Any]) -> np.ndarray:
    return np.array([np.nan if cell is None else float(cell) for cell in cells], dtype="float64")


def _number_text(cell: Any) -> str:
    if isinstance(cell, bool):
        return "TRUE" if cell else "FALSE"
    if isinstance(cell, float) and cell.is_integer() and abs(cell) < 1e15:
        return str(int(cell))
    return str(cell) if isinstance(cell, (str, int)) else f"{cell:.15g}"


def abort_bad_numbers(columns: list[str], rows: np.ndarray) -> NoReturn:
    """Numbers the model cannot take (Inf, NaN, beyond float32's range) in ``columns``
    (none: "The rows"), in the rows of the mask ``rows``."""
    where = "The rows" if not columns else "Column " + ", ".join(f"`{c}`" for c in columns)
    at = (np.flatnonzero(rows) + 1).tolist()
    refuse(
        400,
        "bad_data",
        f"{where} has Inf, NaN or numbers beyond float32's range (about 3.4e+38) in {len(at)} "
        f"row(s) (first: {at[0]}): the model cannot take them; send finite numbers within it.",
        column=columns[0] if columns else None,
        rows=at[:ROWS_SHOWN],
    )


def abort_missing(columns: list[str], rows: np.ndarray) -> NoReturn:
    """NA where the NA rule is "error": the columns with some, and the rows."""
    if not columns:
        where = "The data is"
    elif len(columns) == 1:
        where = f"Column `{columns[0]}` is"
    else:
        where = "Columns " + ", ".join(f"`{c}`" for c in columns) + " are"
    at = (np.flatnonzero(rows) + 1).tolist()
    refuse(
        400,
        "missing_value",
        f"{where} null (NA) in {len(at)} row(s) (first: {at[0]}); the model was trained "
        "without NA.",
        column=columns[0] if columns else None,
        rows=at[:ROWS_SHOWN],
    )


def abort_unseen(column: str, unseen: list[str], known: list[str] | None) -> NoReturn:
    shown = [client_text(level) for level in unseen[:5]]
    more = f" and {len(unseen) - 5} more" if len(unseen) > 5 else ""
    knows = ""
    if known is not None:
        knows = " It knows " + ", ".join(f'"{level}"' for level in known[:20]) + "."
    quoted = ", ".join(f'"{level}"' for level in shown)
    refuse(
        400,
        "unseen_level",
        f"Column `{column}` has level(s) the model was not trained on: {quoted}{more}.{knows}",
        column=column,
        levels=shown,
    )


def _bad(values: np.ndarray) -> np.ndarray:
    """Where ``values`` are infinite or beyond float32 (NaN, an NA, compares False)."""
    return np.abs(values) > FLOAT32_MAX


def frame_features(served: Served, cells: dict[str, list[Any]]) -> tuple[Any, np.ndarray]:
    """A data.frame input's columns typed and checked: numbers (float64, NaN for NA) and
    booleans as arrays, a factor's values as a list of strings (numbers as their text, None
    for NA). Returns the columns, as ``FrameRows`` holds them, and the mask of rows with
    NA."""
    specs = served.part["columns"]
    columns: dict[str, Any] = {}
    numeric: list[str] = []
    missing: list[str] = []
    missing_rows = np.zeros(len(next(iter(cells.values()))), dtype=bool)
    for name, values in cells.items():
        kind = _kind(values, name)
        wanted = specs[name]["type"]
        if wanted == "factor":
            if kind is bool:
                _wrong_type(name, bool, WANTED["factor"])
            columns[name] = [None if cell is None else _number_text(cell) for cell in values]
        else:
            if kind is str:
                _wrong_type(name, str, WANTED[wanted])
            columns[name] = _numbers(values)
            numeric.append(name)
        if None in values:  # a C-level scan: a column's mask is made only where it has NA
            missing.append(name)
            missing_rows |= np.array([cell is None for cell in values], dtype=bool)
    if numeric:  # one check of every number column (a 1-row request's took 50 us a column)
        bad = _bad(np.column_stack([columns[name] for name in numeric]))
        if bad.any():
            abort_bad_numbers([n for n, b in zip(numeric, bad.any(axis=0)) if b], bad.any(axis=1))
    if missing and (served.encoding or {}).get("na", "error") == "error":
        abort_missing(missing, missing_rows)
    return columns, missing_rows


def request_features(value: Any, served: Served) -> tuple[Any, np.ndarray | None, int, list[str]]:
    """The features of the rows scored, which rows (None: all), the request's rows, and
    the warnings (see the module's contract)."""
    part = served.part
    if isinstance(value, list) and not value:
        check_rows(0, served.max_rows)
    form = form_of(value)
    columns = columns_of(part)
    if form in ("records", "columns") and columns is not None:
        cells = named_cells(value, form, columns, served.max_rows)
        rows = len(cells[columns[0]])
        if part["type"] == "data.frame":
            frame, missing = frame_features(served, cells)
            keep = ~missing if missing.any() else None
            return FrameRows(frame, keep), keep, rows, []
        for name in columns:
            kind = _kind(cells[name], name)
            if kind is str:
                _wrong_type(name, str, "numbers")
        matrix = np.column_stack([_numbers(cells[name]) for name in columns])
        return _numeric_rows(served, matrix, columns, rows)
    if form == "rows" and part["type"] != "data.frame":
        return _numeric_rows(served, _rows_array(value, served), columns, len(value))
    if form == "rows":
        example = _example_record(part)
        refuse(
            400, "bad_body", f"This model takes named columns: send records, e.g. [{{{example}}}]."
        )
    if form in ("records", "columns"):
        refuse(
            400,
            "bad_body",
            "This model takes rows of numbers: send them as arrays, e.g. [[5.1, 3.5], [4.9, 3.0]].",
        )
    refuse(400, "bad_body", BAD_FORM)


def _example_record(part: Mapping[str, Any]) -> str:
    specs = part["columns"]
    shown = {"numeric": "1.5", "logical": "true"}
    return ", ".join(
        f'"{name}": '
        + shown.get(specs[name]["type"], f'"{(specs[name].get("levels") or [""])[0]}"')
        for name in (part.get("column_order") or list(specs))
    )


def _rows_array(value: list[Any], served: Served) -> np.ndarray:
    """Rows of numbers as a float64 array of the input's row shape, or a refusal."""
    part = served.part
    check_rows(len(value), served.max_rows)
    shape = part.get("shape")
    if shape is not None and len(shape) == 1:
        for at, row in enumerate(value, 1):
            if len(row) != shape[0]:
                names = part.get("names")
                said = f" ({', '.join(names)})" if names else ""
                refuse(
                    400,
                    "bad_data",
                    f"Each row must hold {shape[0]} numbers{said}; row {at} holds {len(row)}.",
                )
    try:
        cells = np.array(value, dtype=object)
        # strings as jsonlite reads them in an array of numbers: "NA" is NA; "NaN" and
        # "Inf", numbers the model cannot take, refused as such below
        flat = [
            np.nan
            if cell is None
            else NUMBER_STRINGS.get(cell, cell)
            if isinstance(cell, str)
            else cell
            for cell in cells.reshape(-1)
        ]
        if any(isinstance(cell, (str, list, dict)) for cell in flat):
            raise ValueError
        array = np.array(flat, dtype="float64").reshape(cells.shape)
    except (ValueError, TypeError):
        refuse(400, "wrong_type", "Rows must hold numbers only, each row of the same shape.")
    if shape is not None and list(array.shape[1:]) != list(shape):
        wanted = ", ".join(str(d) for d in shape)
        given = ", ".join(str(d) for d in array.shape[1:])
        refuse(400, "bad_data", f"Each row must have shape ({wanted}); these have ({given}).")
    return array


def _numeric_rows(
    served: Served, array: np.ndarray, columns: list[str] | None, rows: int
) -> tuple[np.ndarray, np.ndarray | None, int, list[str]]:
    """Rows of numbers checked (Inf, NaN, NA) and as float32; the pixel-range warning."""
    flat = array.reshape(len(array), -1)
    missing = np.isnan(flat)
    bad = _bad(flat)
    if bad.any():
        named = (
            [columns[i] for i in np.flatnonzero(bad.any(axis=0))]
            if columns and array.ndim == 2
            else []
        )
        abort_bad_numbers(named, bad.any(axis=1))
    keep = None
    if missing.any():
        named = (
            [columns[i] for i in np.flatnonzero(missing.any(axis=0))]
            if columns and array.ndim == 2
            else []
        )
        if (served.encoding or {}).get("na", "error") == "error":
            abort_missing(named, missing.any(axis=1))
        keep = ~missing.any(axis=1)
        array = array[keep]
    warnings = pixel_warnings(served, array)
    return np.ascontiguousarray(array, dtype=np.float32), keep, rows, warnings


def pixel_warnings(served: Served, array: np.ndarray) -> list[str]:
    """predict()'s warning for images whose pixels are plainly not in the range the image
    folder was trained in (``image_source.pixel_range``, the one rule), as one line."""
    images = (served.encoding or {}).get("images")
    if not images or not array.size:
        return []
    said = pixel_range(images, float(np.nanmax(array)), request=True)
    return [" ".join(warning["message"]) for warning in said]


def columns_of(part: Mapping[str, Any]) -> list[str] | None:
    """The served input's column names (a data.frame's, or those of rows of numbers)."""
    if part["type"] == "data.frame":
        return list(part.get("column_order") or part["columns"])
    names = part.get("names")
    return [str(name) for name in names] if names else None


def frame_codes(values: list[Any]) -> tuple[np.ndarray, list[str]]:
    """A column of strings (None: NA) as a factor's 1-based codes and own levels, in the
    order the values come (R's NA as R_NA_INTEGER)."""
    levels: dict[str, int] = {}
    codes = np.empty(len(values), dtype=np.int32)
    for i, value in enumerate(values):
        if value is None:
            codes[i] = frame_encoding.R_NA_INTEGER
        else:
            codes[i] = levels.setdefault(value, len(levels) + 1)
    return codes, list(levels)


class FrameRows:
    """A data.frame request's columns, checked but not yet encoded (``frame_features``),
    and which of its rows are scored (``keep``, None: all). Its length is the rows scored.
    The encoding waits for the model's call (``model_features``), so that the requests a
    batch predicts together are encoded together, in one call of the core's encoding
    (``stack``): it costs about as much for 8 rows as for one."""

    def __init__(self, columns: dict[str, Any], keep: np.ndarray | None) -> None:
        self.columns = columns
        self.keep = keep
        self.given = len(next(iter(columns.values())))  # the rows given, scored or not

    def __len__(self) -> int:
        return self.given if self.keep is None else int(self.keep.sum())


def stack(parts: list[Any]) -> Any:
    """Requests' features one after the other, as one request's: arrays (rows of numbers,
    texts) concatenated, ``FrameRows`` column by column."""
    if not isinstance(parts[0], FrameRows):
        return np.concatenate(parts)
    columns = {
        name: (
            np.concatenate([part.columns[name] for part in parts])
            if isinstance(first, np.ndarray)
            else [value for part in parts for value in part.columns[name]]
        )
        for name, first in parts[0].columns.items()
    }
    if all(part.keep is None for part in parts):
        return FrameRows(columns, None)
    keep = [np.ones(part.given, dtype=bool) if part.keep is None else part.keep for part in parts]
    return FrameRows(columns, np.concatenate(keep))


def model_features(served: Served, features: Any) -> Any:
    """The model's input for a request's features (``features``) or a batch's (``stack``):
    ``FrameRows`` encoded (``encode``), its rows scored kept; anything else as it is."""
    if not isinstance(features, FrameRows):
        return features
    matrix = encode(served, features.columns)
    return matrix if features.keep is None else matrix[features.keep]


def encode(served: Served, columns: Mapping[str, Any]) -> np.ndarray:
    """A data.frame input's columns (numbers as float64, NaN for NA; a factor's values as
    strings, None for NA) as the model's float32 matrix, by the core's one encoding. An
    unseen level is a 400 unseen_level naming the column and a few levels."""
    part = served.part
    order = columns_of(part) or []
    handed: dict[str, Record] = {}
    for name in order:
        given = columns[name]
        if isinstance(given, list):
            codes, levels = frame_codes(given)
            handed[name] = {"values": codes, "levels": levels, "appearance": True}
        else:
            handed[name] = {"values": given, "levels": None}
    frame = {
        "name": "x",
        "spec": {name: part["columns"][name] for name in order},
        "unknown": served.settings.get("unknown") or "error",
        "columns": handed,
    }
    try:
        return frame_encoding.encode_frame(frame)
    except DataFieldsError as error:
        fields = getattr(error, "fields", None) or {}
        column = str(fields.get("column", "")).split("$", 1)[-1]
        if "levels" in fields:
            abort_unseen(column, list(fields["levels"]), part["columns"][column]["levels"])
        refuse(400, "bad_data", client_text(one_line(str(error)), 300))
    raise AssertionError  # pragma: no cover
