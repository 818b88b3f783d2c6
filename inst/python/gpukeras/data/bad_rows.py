"""The core's one check of R data's rows: NA and non-finite values, named by part, column
and row, as R's classed errors; and the rows ``na = "drop"`` keeps, dropped in the hand-over
(``dropped``).

R hands its data over as it is (``array_source.handover``): arrays (a double's NA a NaN,
an integer's or a logical's NA_integer_, the smallest int32), data.frames as their columns
(``encoding.FRAME``: a number column as doubles, a factor as its codes, NA_integer_ for NA)
and factor labels as their codes (``encoding.LABELS``). Such ``parts`` are named as R names
them: ``x`` (or each input's name), ``y``, ``sample_weight``; a matrix's columns
``x$income`` (its column names, sent as ``columns``) or ``x$column 2``, a data.frame's
``x$region`` (a factor once, though it becomes indicator columns).

NA (R's ``is.na()``: NA and NaN alike) is ``gpukeras_error_missing_values``; Inf, -Inf and
doubles beyond float32's range, which the float32 copy makes infinite,
``gpukeras_error_not_finite``; both with the fields ``column`` (the columns, as the message
names them), ``rows`` (the first 100, counting from 1) and ``n_rows``. gpu_as_numpy()'s
numbers are checked and converted here too (``as_numpy``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from gpukeras.core.errors import BadDataError, DataFieldsError
from gpukeras.core.r_words import strings
from gpukeras.data.encoding import FRAME, LABELS, R_NA_INTEGER, is_frame, is_labels

# The largest float32: a double beyond it becomes infinite in the float32 copy Keras reads.
FLOAT32_MAX = float(np.finfo(np.float32).max)
NA_FIX = 'Impute or remove them, or pass na = "drop" to drop those rows.'
NOT_FINITE = "Inf, -Inf or values beyond float32's range (about 3.4e+38)"
NOT_FINITE_FIX = (
    "Training on them gives a NaN loss every epoch: replace or remove them, or rescale "
    "those columns."
)


# What a verb that hands R data over is told to check: NA too (True, or R's names of the
# columns and advice, ``{"columns": ..., "fix": ...}``, and with ``"na": "drop"`` the rows with
# NA dropped instead, ``"numpy"`` naming the parts R gave as NumPy arrays, ``"order"`` each
# input's training column names, ``array_source.in_order``), or infinities alone (False).
Checks = bool | Mapping[str, Any]


class BadValues(BadDataError):
    """A copy found NaN or an infinity (``array_source.host_array``): ``named`` raises the
    error that names them in its place."""


def _columns(
    parts: Mapping[str, object], names: Mapping[str, Any]
) -> Iterator[tuple[str, np.ndarray]]:
    """Each column of ``parts`` with its name, as a 1-D array of rows (or an array of rows
    by cells, for a part of more dimensions, named by the part)."""
    for name, part in parts.items():
        if part is None:
            continue
        if is_frame(part):
            for column, handed in part[FRAME]["columns"].items():  # type: ignore[index]
                yield f"{name}${column}", np.asarray(handed["values"]).reshape(-1)
        elif is_labels(part):
            yield name, np.asarray(part[LABELS]["values"]).reshape(-1)  # type: ignore[index]
        elif isinstance(part, dict):
            yield from _columns(part, names)
        else:
            array = np.asarray(part)
            if array.ndim != 2:
                yield name, array.reshape(len(array), -1) if array.ndim else array.reshape(-1)
                continue
            given = names.get(name)
            labels = [given] if isinstance(given, str) else [str(c) for c in given] if given else []
            if len(labels) != array.shape[1]:
                labels = [f"column {i + 1}" for i in range(array.shape[1])]
            for i, label in enumerate(labels):
                yield f"{name}${label}", array[:, i]


def _missing(values: np.ndarray) -> np.ndarray | None:
    """The cells of ``values`` holding NA (None where there can be none)."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype == np.int32:
        return values == R_NA_INTEGER
    return None


def _not_finite(values: np.ndarray) -> np.ndarray | None:
    """The cells of ``values`` the float32 copy makes infinite."""
    if values.dtype.kind != "f":
        return None
    with np.errstate(invalid="ignore"):
        return ~np.isnan(values) & (np.abs(values) > FLOAT32_MAX)


def _found(
    parts: Mapping[str, object], names: Mapping[str, Any], cells: Any
) -> tuple[np.ndarray | None, list[str]]:
    """The rows with a cell ``cells`` flags, and the columns (as R names them) with one."""
    rows: np.ndarray | None = None
    where: list[str] = []
    for name, values in _columns(parts, names):
        flagged = cells(values)
        if flagged is None or not flagged.any():
            continue
        flagged = flagged.reshape(len(flagged), -1).any(axis=1)
        rows = flagged if rows is None else rows | flagged
        if name not in where:
            where.append(name)
    return rows, where


def _error(what: str, rows: np.ndarray, where: list[str], fix: str, r_class: str) -> Exception:
    found = np.flatnonzero(rows) + 1
    return DataFieldsError(
        f"The data has {what} in {len(found)} row(s) (first: "
        f"{', '.join(map(str, found[:5]))}), in {', '.join(where[:10])}.",
        [fix],
        [r_class, "gpukeras_error_bad_data"],
        column=where,
        rows=[int(r) for r in found[:100]],
        n_rows=len(found),
    )


def check_rows(
    parts: Mapping[str, object],
    na: str = "error",
    columns: Mapping[str, Any] | None = None,
    fix: str | None = None,
    numpy: object = None,
) -> list[int] | None:
    """Check the rows of R data ``parts`` (see the module's notes; ``columns``: a matrix
    part's column names, by part): a DataFieldsError for values beyond float32's range
    (gpukeras_error_not_finite), and with ``na`` "error" for NA (gpukeras_error_missing_values,
    ``fix`` saying what to do). With ``na`` "drop", the rows without NA, counting from 1
    (None when every row is kept); a DataFieldsError (gpukeras_error_bad_data) when no row
    is, or when rows are to be dropped and ``numpy`` names parts given as NumPy arrays,
    whose rows R cannot take."""
    names = columns or {}
    missing, where = _found(parts, names, _missing)
    if missing is not None and na == "error":
        raise _error("NA/NaN", missing, where, fix or NA_FIX, "gpukeras_error_missing_values")
    infinite, where = _found(parts, names, _not_finite)
    if infinite is not None:
        raise _error(NOT_FINITE, infinite, where, NOT_FINITE_FIX, "gpukeras_error_not_finite")
    if missing is None:
        return None
    arrays = strings(numpy)
    if arrays:
        raise DataFieldsError(
            f'na = "drop" cannot drop rows of {", ".join(f"`{name}`" for name in arrays)}, '
            "a NumPy array.",
            ["Drop those rows before gpu_as_numpy(), or give R data."],
            ["gpukeras_error_bad_data"],
        )
    kept = np.flatnonzero(~missing) + 1
    if not len(kept):
        raise DataFieldsError(
            'Every row has an NA: nothing is left after na = "drop".',
            [],
            ["gpukeras_error_bad_data"],
        )
    return [int(row) for row in kept]


def _rows_of(part: object, rows: np.ndarray) -> object:
    """R data ``part`` as ``handover`` takes it (an array, a frame's columns, factor labels, a
    dict of them, or None) with its ``rows`` (0-based) alone."""
    if part is None:
        return None
    if is_frame(part) or is_labels(part):
        key = FRAME if is_frame(part) else LABELS
        given = part[key]  # type: ignore[index]
        if key == LABELS:
            return {key: {**given, "values": np.asarray(given["values"])[rows]}}
        columns = {
            name: {**column, "values": _rows_of(column["values"], rows)}
            for name, column in given["columns"].items()
        }
        return {key: {**given, "columns": columns}}
    if isinstance(part, dict):
        return {name: _rows_of(value, rows) for name, value in part.items()}
    return np.asarray(part)[rows]


def dropped(
    parts: Mapping[str, object], checks: Checks
) -> tuple[dict[str, object], np.ndarray | None, int]:
    """R data ``parts`` (see the module's notes) as the hand-over takes them: with
    ``checks`` saying ``"na": "drop"``, without the rows that hold NA (``check_rows``, whose
    errors it raises). Returns the parts, the rows kept (0-based; None when all are) and the
    rows given (0 where none are dropped)."""
    given: Mapping[str, Any] = checks if isinstance(checks, Mapping) else {}
    if given.get("na") != "drop":  # (counting would make a data.frame's indicator columns)
        return dict(parts), None, 0
    first = next(_columns(parts, {}), None)
    count = 0 if first is None else len(first[1])
    kept = check_rows(parts, "drop", given.get("columns"), given.get("fix"), given.get("numpy"))
    if kept is None:
        return dict(parts), None, count
    rows = np.asarray(kept, dtype=np.int64) - 1
    return {name: _rows_of(part, rows) for name, part in parts.items()}, rows, count


def has_na_codes(part: object) -> bool:
    """Whether R integers, logicals or factor labels in ``part`` (an array, factor labels
    or a dict of them) hold NA_integer_, which a float32 copy does not make a NaN."""
    if isinstance(part, dict) and not is_frame(part):
        if is_labels(part):
            part = part[LABELS]["values"]
        else:
            return any(has_na_codes(value) for value in part.values())
    if part is None or is_frame(part):
        return False  # a frame's codes become NaN in its matrix
    values = np.asarray(part)
    return values.dtype == np.int32 and values.size > 0 and int(values.min()) == R_NA_INTEGER


@contextmanager
def named(parts: Mapping[str, object], checks: Checks) -> Iterator[None]:
    """Hand ``parts`` over inside this block, each copy checked (``checks``: False, True,
    or R's ``{"columns": ..., "fix": ...}``, see ``check_rows``): NA and infinities the
    copies find (``BadValues``), and NA in R's integers (checked here first), are raised as
    ``check_rows`` names them."""
    given: Mapping[str, Any] = checks if isinstance(checks, Mapping) else {}
    if checks and any(has_na_codes(part) for part in parts.values()):
        check_rows(parts, "error", given.get("columns"), given.get("fix"))
    try:
        yield
    except BadValues:
        check_rows(parts, "error" if checks else "drop", given.get("columns"), given.get("fix"))
        raise


def check_numbers(values: object, name: str = "x") -> None:
    """gpu_as_numpy()'s check of R's numbers ``values`` (doubles, or integers with R's
    NA_integer_; R's column-major order): a DataFieldsError gpukeras_error_bad_data
    counting the NA and NaN, with the first one's position as R counts it (from 1)."""
    array = np.asarray(values)
    cells = _missing(array)
    if cells is None or not cells.any():
        return
    flagged = np.flatnonzero(cells.reshape(-1, order="F"))
    raise DataFieldsError(
        f"`{name}` has {len(flagged)} NA/NaN value(s), the first at position {flagged[0] + 1}. "
        "Remove or impute them first.",
        [],
        ["gpukeras_error_bad_data"],
    )


def as_numpy(values: object, dtype: str, codes: bool = False) -> np.ndarray:
    """gpu_as_numpy(): R's numbers ``values`` (doubles, or integers with R's NA_integer_, a
    logical as integers; R's column-major order, R's dimensions) checked (``check_numbers``)
    and copied once into a C-contiguous array of ``dtype``; with ``codes``, a factor's
    codes, 1-based in R, made 0-based as Keras' classes are.

    Raises DataFieldsError gpukeras_error_bad_data for NA, and gpukeras_error_bad_argument
    for a ``dtype`` NumPy does not know or cannot convert the values to."""
    check_numbers(values)
    array = np.asarray(values)
    if codes:
        array = array - 1
    try:
        return np.array(array, dtype=np.dtype(dtype), order="C")
    except (TypeError, ValueError) as error:
        raise DataFieldsError(
            f"`x` could not be converted to NumPy dtype '{dtype}': {error}",
            ['Use a NumPy dtype name such as "float32", "int32" or "float16".'],
            ["gpukeras_error_bad_argument"],
        ) from None
