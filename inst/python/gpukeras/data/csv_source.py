"""CSV files as a gpu_dataset() source: every file shares one header, columns typed from a sample.

The header and the first ``CSV_SAMPLE_ROWS`` rows of the first file are
read with Python's csv module, to tell numeric from text columns and check
the label, and every row of every file once, to check its fields and count
the rows (measured: 4 s for 1,000,000 rows of 10 fields, 95 MB, on a busy
2-core machine); TensorFlow then decodes the lines in batches
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
    reader = None
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
        raise _not_utf8(path, error) from error
    except csv.Error as error:
        raise _unreadable(path, reader.line_num if reader else 1, error) from error
    if not header:
        raise BadDataError(
            f"'{path}' is empty: gpu_dataset() needs a header line naming the columns."
        )
    return header, sample


def _not_utf8(path: str, error: UnicodeDecodeError) -> BadDataError:
    return BadDataError(
        f"'{path}' is not UTF-8 text ({error.reason} at byte {error.start}). Save it as "
        "UTF-8 CSV, e.g. write.csv(df, file, row.names = FALSE, fileEncoding = 'UTF-8')."
    )


def _unreadable(path: str, line: int, error: csv.Error) -> BadDataError:
    """A line Python's csv reader refuses, said in words with what to do."""
    reason = str(error)
    if "field larger than field limit" in reason:
        fix = (
            f"a field is longer than {csv.field_size_limit():,} characters (a quote left "
            "open swallows the lines after it): close the quote, or shorten the field"
        )
    else:
        fix = f"{reason}: fix that line"
    return BadDataError(f"Line {line} of '{path}' cannot be read as CSV: {fix}.")


def scan_csv(path: str, width: int) -> int:
    """The data rows of the CSV file ``path`` (blank lines not counted), each one checked.

    TensorFlow reads one row per line, the fields it is asked for: a row with more
    fields than the header was read from its first ones, without a word. So every
    row is read once here, with Python's csv, before anything trains.

    Raises:
        BadDataError: naming the file and the line, for a row whose fields are not
            ``width`` (the header's), a quoted field over several lines, a NUL byte,
            a field beyond the csv module's limit, or text that is not UTF-8.
    """
    reader = None
    rows = 0
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            next(reader, None)  # the header, checked by _csv_layout
            last = reader.line_num
            for row in reader:
                if reader.line_num - last > 1 and row:
                    raise BadDataError(
                        f"Line {last + 1} of '{path}' starts a quoted field that goes on to "
                        f"line {reader.line_num}: gpu_dataset() reads one row per line. "
                        "Remove the line breaks inside quoted fields."
                    )
                last = reader.line_num
                if not row:
                    continue
                if len(row) != width:
                    raise BadDataError(
                        f"Line {reader.line_num} of '{path}' has {len(row)} fields, but the "
                        f"header has {width}. Every row needs one field per column (quote "
                        "fields that hold commas)."
                    )
                rows += 1
    except UnicodeDecodeError as error:
        raise _not_utf8(path, error) from error
    except csv.Error as error:
        raise _unreadable(path, reader.line_num if reader else 1, error) from error
    return rows


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


def _csv_layout(files: list[str]) -> tuple[list[str], list[list[str]], int]:
    """The header all ``files`` share, the first file's sample rows, and the rows of every
    file, all checked (``scan_csv``)."""
    for path in files:
        _check_no_nul(path)
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
    return header, sample, sum(scan_csv(path, len(header)) for path in files)


def _check_no_nul(path: str) -> None:
    """BadDataError naming the line of the first NUL byte in ``path``, if any: Python's csv
    reads it as a character (since 3.11), TensorFlow cuts the line there. Read in blocks,
    searched by bytes' own find (memchr)."""
    offset = 0
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            found = block.find(b"\x00")
            if found >= 0:
                handle.seek(0)
                line = handle.read(offset + found).count(b"\n") + 1
                raise BadDataError(
                    f"Line {line} of '{path}' cannot be read as CSV: it holds a NUL byte (a "
                    "binary file, or text saved as UTF-16?): save it as UTF-8 text."
                )
            offset += len(block)


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

    Every row of every file is read once first (``scan_csv``): a row that does not
    have one field per column is refused before training, and the rows are counted,
    so that the cache and a validation split know them.

    Returns:
        A Source whose info holds pattern, files, columns, label, label_dtype,
        rows and sampled_rows.
    """
    files = match_files(pattern, ("*.csv", "*.CSV"), "CSV")
    header, sample, rows = _csv_layout(files)
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
        # counted above: Keras then knows an epoch's steps (and the print its batches)
        .apply(tf.data.experimental.assert_cardinality(rows))
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
            "rows": rows,
            "sampled_rows": len(sample),
        },
    )
