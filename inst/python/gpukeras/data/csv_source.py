"""CSV files as a gpu_dataset() source: every file shares one header, columns typed from a sample.

The header and the first ``CSV_SAMPLE_ROWS`` rows of the first file are
read with Python's csv module, to tell numeric from text columns and check
the label; TensorFlow then decodes the lines in batches
(``tf.io.decode_csv``), so the files are streamed, never loaded whole.
"""

from __future__ import annotations

import csv
import os
import re

import numpy as np

from gpukeras.core.errors import BadArgumentError, BadDataError
from gpukeras.core.handles import Dataset, Tensor
from gpukeras.data.source_files import Source, match_files, quoted, tensorflow

# Rows of the first CSV file read to tell numeric from text columns.
CSV_SAMPLE_ROWS = 100
# Fields read as missing (NaN): empty, and R's write.csv() spelling of NA.
CSV_NA = ("", "NA")
# Lines decoded per decode_csv call: one vectorised op per batch, not per line.
CSV_DECODE_BATCH = 1024
INTEGER = re.compile(r"\s*[+-]?\d+\s*")


def _read_csv_head(path: str, rows: int) -> tuple[list[str], list[list[str]]]:
    """The header and up to ``rows`` non-blank data rows of a CSV file, read with Python's csv."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            sample: list[list[str]] = []
            for row in reader:
                if len(sample) >= rows:
                    break
                if row:
                    sample.append(row)
    except UnicodeDecodeError as error:
        raise BadDataError(
            f"'{path}' is not UTF-8 text ({error.reason} at byte {error.start}). Save it as "
            "UTF-8 CSV, e.g. write.csv(df, file, row.names = FALSE, fileEncoding = 'UTF-8')."
        ) from error
    if not header:
        raise BadDataError(
            f"'{path}' is empty: gpu_dataset() needs a header line naming the columns."
        )
    return header, sample


def _is_number(value: str) -> bool:
    if value.strip() in CSV_NA:
        return True
    try:
        float(value)
    except ValueError:
        return False
    return "_" not in value  # Python accepts 1_000; TensorFlow's parser does not


def _as_names(names: str | list[str] | tuple[str, ...] | None) -> list[str] | None:
    """A column selection as a list (R passes a length-1 character vector as a string)."""
    if names is None:
        return None
    return [names] if isinstance(names, str) else [str(name) for name in names]


def _csv_layout(files: list[str]) -> tuple[list[str], list[list[str]]]:
    """The header all ``files`` share, and the first file's sample rows, checked."""
    header, sample = _read_csv_head(files[0], CSV_SAMPLE_ROWS)
    for path in files[1:]:
        other, _ = _read_csv_head(path, 0)
        if other != header:
            raise BadDataError(
                f"'{path}' has the header {quoted(other)}, but '{files[0]}' has "
                f"{quoted(header)}. All files of one dataset need the same columns in the "
                "same order: fix or move that file, or choose files with a narrower pattern."
            )
    duplicated = sorted({name for name in header if header.count(name) > 1})
    if duplicated:
        raise BadDataError(
            f"The header of '{files[0]}' repeats the column name(s) {quoted(duplicated)}. "
            "Give every column its own name."
        )
    for number, row in enumerate(sample, start=1):
        if len(row) != len(header):
            raise BadDataError(
                f"Row {number} after the header of '{files[0]}' has {len(row)} fields, but "
                f"the header has {len(header)}. Every row needs one field per column (quote "
                "text that holds commas)."
            )
    return header, sample


def _csv_features(
    header: list[str], label: str | None, columns: list[str] | None, file: str
) -> list[str]:
    """The feature columns: ``columns`` checked against the header, or all but the label."""
    if label is not None and label not in header:
        raise BadArgumentError(
            f"label = \"{label}\" is not a column of '{file}'. Columns: {quoted(header)}."
        )
    if columns is None:
        if "" in header:
            raise BadDataError(
                f"Column {header.index('') + 1} of '{file}' has no name; R's write.csv() "
                "writes row names there. Write the file with row.names = FALSE, or choose "
                "the feature columns with columns = c(...)."
            )
        columns = [name for name in header if name != label]
    unknown = [name for name in columns if name not in header]
    if unknown:
        raise BadArgumentError(
            f"columns {quoted(unknown)} not found in '{file}'. Columns: {quoted(header)}."
        )
    if len(set(columns)) != len(columns):
        raise BadArgumentError(f"columns names a column more than once: {quoted(columns)}.")
    if label in columns:
        raise BadArgumentError(
            f'"{label}" is the label; leave it out of columns, or the model would see '
            "the answer among its inputs."
        )
    if not columns:
        raise BadArgumentError(f"No feature columns: '{file}' has only the label \"{label}\".")
    return columns


def _csv_label_dtype(
    header: list[str], sample: list[list[str]], features: list[str], label: str | None, file: str
) -> str | None:
    """The label's dtype from the sample rows, after checking no chosen column holds text."""
    index = {name: position for position, name in enumerate(header)}

    def text_in(name: str) -> str | None:
        return next((row[index[name]] for row in sample if not _is_number(row[index[name]])), None)

    text = [name for name in features if text_in(name) is not None]
    if text:
        numeric = [name for name in features if name not in text]
        keep = f"columns = c({quoted(numeric)})" if numeric else "columns"
        raise BadDataError(
            f"Column(s) {quoted(text)} of '{file}' hold text (e.g. \"{text_in(text[0])}\"); "
            f"streamed CSV features must be numbers. Leave them out with {keep}, or load "
            "the file with read.csv() and pass the data.frame to gpu_dataset(), which "
            "encodes text columns."
        )
    if label is None:
        return None
    example = text_in(label)
    if example is not None:
        raise BadDataError(
            f'The label column "{label}" of \'{file}\' holds text (e.g. "{example}"); '
            "streamed CSV labels must be numbers. Write class ids (0, 1, ...) into the "
            "files, or load the file with read.csv() and pass the data.frame to "
            "gpu_dataset(), which encodes text labels."
        )
    present = [row[index[label]] for row in sample if row[index[label]].strip() not in CSV_NA]
    whole = present and all(INTEGER.fullmatch(value) for value in present)
    return "int32" if whole else "float32"


def csv_source(
    pattern: str, label: str | None = None, columns: str | list[str] | None = None
) -> Source:
    """Stream rows of CSV files as ``(features, label)``.

    Every file must start with the same header line. Features are one float32
    vector per row: the ``columns`` in the order given, or else every column
    but the label in header order. An empty or ``NA`` feature field reads as
    NaN (as R's NA, never as a silent 0); a row without its label, or with text
    in a numeric column, stops iteration with TensorFlow's InvalidArgumentError.
    Column types are judged from the first 100 rows of the first file.

    Args:
        pattern: a glob ("data/*.csv"), one file, or a folder (its ``*.csv``).
        label: the label column; int32 when the first rows hold whole numbers
            written as such ("3"), else float32. None: features only.
        columns: the feature columns; None for all but the label. Text columns
            cannot be streamed: leave them out here.

    Returns:
        A Source whose info holds pattern, files, columns, label, label_dtype,
        rows (None: counting them would read every file) and sampled_rows.
    """
    files = match_files(pattern, ("*.csv", "*.CSV"), "CSV")
    header, sample = _csv_layout(files)
    features = _csv_features(header, label, _as_names(columns), files[0])
    label_dtype = _csv_label_dtype(header, sample, features, label, files[0])

    tf = tensorflow()
    feature_positions = [header.index(name) for name in features]
    label_position = None if label is None else header.index(label)
    selected = sorted({*feature_positions, *([] if label_position is None else [label_position])})
    missing_as_nan = tf.constant(np.nan, tf.float32)
    required = tf.constant([], tf.int32 if label_dtype == "int32" else tf.float32)
    defaults = [required if position == label_position else missing_as_nan for position in selected]

    def decode(lines: Tensor) -> object:
        # Blank lines are dropped here, per batch: a per-line filter costs ten times more.
        lines = tf.boolean_mask(lines, tf.strings.length(tf.strings.strip(lines)) > 0)
        decoded = tf.io.decode_csv(lines, defaults, select_cols=selected, na_value=CSV_NA[1])
        fields = dict(zip(selected, decoded))
        stacked = tf.stack([fields[position] for position in feature_positions], axis=-1)
        return stacked if label_position is None else (stacked, fields[label_position])

    def lines_of(path: Tensor) -> Dataset:
        return tf.data.TextLineDataset(path).skip(1)

    dataset = (
        tf.data.Dataset.from_tensor_slices(files)
        .interleave(
            lines_of,
            cycle_length=min(len(files), os.cpu_count() or 1),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        .batch(CSV_DECODE_BATCH)
        .map(decode, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
    )
    return Source(
        dataset,
        "csv",
        {
            "pattern": pattern,
            "files": len(files),
            "columns": features,
            "label": label,
            "label_dtype": label_dtype,
            "rows": None,
            "sampled_rows": len(sample),
        },
    )
