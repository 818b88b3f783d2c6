"""predict(file = ): predictions written to a CSV file batch by batch, never held whole.

Keras' ``model.predict()`` keeps every batch's outputs until the end and then
joins them (keras-team/keras#21642): on data larger than memory it runs out of
it. Here each batch goes through ``model.predict_on_batch`` and its rows are
handed to a writer thread (at most two batches behind) that formats and writes
them while the model runs the next, so what is held is a few batches of inputs
and outputs (a gpu_dataset() of CSV files or images is streamed as it is; R data
was already in memory). The rows keep the input's order.

The file is written under a temporary name in its own folder
(``.<name>.tmp-<pid>-<random>``) and renamed to its name only when every row is
written: a failure part way (data that cannot be read, a batch the model
refuses, an interrupt) removes the temporary file and leaves no file under the
name, nor changes one that was there.
"""

from __future__ import annotations

import csv
import io
import os
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from gpukeras.core import arguments, files
from gpukeras.core.errors import BadArgumentError, BadDataError
from gpukeras.core.handles import Model, Record
from gpukeras.core.r_words import big, seconds
from gpukeras.core.runtime import config
from gpukeras.data import adapters, class_rule, failures
from gpukeras.data.array_source import handover
from gpukeras.data.bad_rows import Checks
from gpukeras.train import pretrained

# The digits a float32 needs to be read back as the same number.
NUMBER_FORMAT = "%.9g"


class _Unreadable(Exception):
    """A batch the data could not give (wraps the error from reading it)."""


def check_target(file: object, overwrite: bool) -> Path:
    """``file`` as a path that may be written: a string naming no folder, in a folder that
    exists, and not an existing file unless ``overwrite``; else BadArgumentError."""
    if not isinstance(file, str) or not file:
        raise BadArgumentError(f"`file` must be one file path, not {file!r}.")
    target = Path(file)
    if target.is_dir() and not target.is_symlink():  # a link is replaced, not followed
        raise BadArgumentError(f"`file`: {file!r} is a folder; give a file name in it.")
    if not target.parent.is_dir():
        raise BadArgumentError(
            f"`file`: the folder {str(target.parent)!r} does not exist; create it first."
        )
    if os.path.lexists(target) and not overwrite:
        raise BadArgumentError(
            f"`file`: {file!r} already exists. Give overwrite = TRUE to replace it, or "
            "another name."
        )
    return target


def _as_list(value: object) -> list[Any] | None:
    """An R vector as a list (R hands a length-1 vector over as a scalar)."""
    if value is None:
        return None
    if isinstance(value, (str, int, float)):
        return [value]
    return list(value)  # type: ignore[call-overload]


def _field(value: object) -> str:
    """One CSV field: quoted when it holds a comma, a quote, a line break or edge spaces."""
    text = str(value)
    if any(char in text for char in ',"\r\n') or text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def _batches(features: Any, batch: int) -> Iterator[Any]:
    """The model's inputs batch by batch: slices of arrays (or of a dict of them), or a
    dataset's batches as they come (labels dropped); reading errors as _Unreadable."""
    if not adapters.is_tf_dataset(features):
        first = next(iter(features.values())) if isinstance(features, dict) else features
        for start in range(0, len(first), batch):
            if isinstance(features, dict):
                yield {name: part[start : start + batch] for name, part in features.items()}
            else:
                yield features[start : start + batch]
        return
    # JAX's compiled step takes NumPy arrays, not TensorFlow tensors
    iterator = iter(features) if config.backend == "tensorflow" else features.as_numpy_iterator()
    while True:
        try:
            element = next(iterator)
        except StopIteration:
            return
        except Exception as error:
            raise _Unreadable(error) from error
        yield element[0] if isinstance(element, tuple) else element


def _outputs(predicted: object, names: list[str]) -> list[tuple[str, np.ndarray]]:
    """Each output of one batch as (name, rows x columns float64)."""
    if isinstance(predicted, dict):
        parts = list(predicted.items())
    elif isinstance(predicted, (list, tuple)):
        parts = [
            (names[i] if i < len(names) else f"output_{i + 1}", part)
            for i, part in enumerate(predicted)
        ]
    else:
        parts = [(names[0] if names else "prediction", predicted)]
    flat = []
    for name, part in parts:
        array = np.asarray(part, dtype="float64")
        flat.append((str(name), array.reshape(array.shape[0], -1)))
    return flat


def column_names(widths: list[tuple[str, int]], levels: list[str] | None) -> list[str]:
    """The prediction columns: one per class level named by the level where an output has
    one column per level; ``prediction`` for one output of one column (``prediction_<i>``
    for several); with several outputs, each output's name before its columns."""
    several = len(widths) > 1
    names: list[str] = []
    for output, width in widths:
        stem = output if several else "prediction"
        if levels is not None and width == len(levels) and width > 1:
            names += [f"{output}_{level}" if several else str(level) for level in levels]
        elif width == 1:
            names.append(stem)
        else:
            names += [f"{stem}_{i}" for i in range(1, width + 1)]
    return names


class _Rows:
    """Rows of predictions as CSV text, in the input's order: with ``kept`` (the input
    rows that were scored, 0-based), the rows left out (na = "drop") as NA rows between."""

    def __init__(
        self,
        handle: TextIO,
        width: int,
        row_names: list[str] | None,
        kept: np.ndarray | None,
        classes: list[str] | None,
    ) -> None:
        self.handle = handle
        self.row_names = None if row_names is None else [_field(name) for name in row_names]
        self.kept = kept
        self.classes = classes
        self.next_row = 0  # the next input row to write
        self.scored = 0  # predictions written
        self.numbers = ",".join([NUMBER_FORMAT] * width)
        self.missing = ",".join(["NA"] * (width + (classes is not None)))

    def write(self, values: np.ndarray, codes: np.ndarray | None) -> None:
        """Write one batch's predictions (rows x columns) and class codes."""
        count = values.shape[0]
        if self.kept is None:
            positions = np.arange(self.next_row, self.next_row + count)
        else:
            positions = self.kept[self.scored : self.scored + count]
        # runs of consecutive input rows, with the rows left out before each
        breaks = np.flatnonzero(np.diff(positions) != 1) + 1
        for start, end in zip([0, *breaks.tolist()], [*breaks.tolist(), count]):
            first = int(positions[start])
            self._missing(first)
            self._block(first, values[start:end], None if codes is None else codes[start:end])
            self.next_row = first + (end - start)
        self.scored += count

    def finish(self, rows: int | None) -> None:
        """The rows left out after the last one scored."""
        if rows is not None:
            self._missing(rows)

    def _missing(self, until: int) -> None:
        count = until - self.next_row
        if count <= 0:
            return
        if self.row_names is None:
            self.handle.write((self.missing + "\n") * count)
        else:
            names = self.row_names[self.next_row : until]
            self.handle.write("".join(f"{name},{self.missing}\n" for name in names))
        self.next_row = until

    def _block(self, first: int, values: np.ndarray, codes: np.ndarray | None) -> None:
        count = values.shape[0]
        if self.row_names is None and codes is None:
            # one format over the whole batch: no Python loop per row
            self.handle.write(((self.numbers + "\n") * count) % tuple(values.ravel().tolist()))
            return
        line = ("%s," if self.row_names is not None else "") + self.numbers
        line += ",%s" if codes is not None else ""
        cells = np.empty((count, line.count("%")), dtype=object)
        start = 0
        if self.row_names is not None:
            cells[:, 0] = self.row_names[first : first + count]
            start = 1
        cells[:, start : start + values.shape[1]] = values
        if codes is not None and self.classes is not None:
            cells[:, -1] = [self.classes[code] if code >= 0 else "NA" for code in codes.tolist()]
        self.handle.write(((line + "\n") * count) % tuple(cells.ravel().tolist()))


def _output_names(model: Model) -> list[str]:
    names = getattr(model, "output_names", None)
    return [str(name) for name in names] if names else []


def predict_file(
    model: Model,
    x: object,
    y: object | None = None,
    y_dtype: str | None = None,
    check_missing: Checks = False,
    batch_size: object = 32,
    verbose: int = 0,
    file: object = None,
    overwrite: bool = False,
    levels: object = None,
    classes: bool = False,
    row_names: object = None,
    row_name_column: str = "row",
) -> Record:
    """Write the model's outputs for ``x`` to the CSV file ``file``, batch by batch.

    The file has a header line and one line per input row, in the input's order:
    a first column ``row_name_column`` when ``row_names`` are given, then the
    outputs (see ``column_names``; numbers as ``%.9g``, read back as the same
    float32), then with ``classes`` a ``class`` column (the level, or the 0-based
    code without ``levels``). Nothing is held but one batch; nothing is left under
    ``file`` (nor under a temporary name) when writing fails part way.

    Args:
        model: a built Keras 3 model.
        x: R data as ``handover`` takes it, or a tf.data dataset (its batches as they
            are, labels ignored).
        y, y_dtype: not used (R hands data over the same way for every verb).
        check_missing: NA is an error too, named as R names it (``bad_rows.named``); with
            R's na = "drop", the rows holding NA are left out, NA rows in the file.
        batch_size: rows per batch for arrays.
        verbose: a progress bar when > 0.
        file: the CSV file to write; overwrite: whether an existing one may be replaced
            (atomically, at the end).
        levels: the training labels' levels (names for a classifier's columns).
        classes: also write the most likely class (a model with one output).
        row_names: one name per input row, written first.

    Returns:
        ``path`` (absolute), ``rows`` and ``columns`` written, and the seconds spent
        ``reading`` the data, in the ``model`` and ``writing``.
    """
    keras = config.keras()
    arguments.check_keras_model(keras, model)
    batch = arguments.count("batch_size", batch_size)
    target = check_target(file, bool(overwrite))
    names = _output_names(model)
    if classes and len(getattr(model, "outputs", None) or [None]) > 1:
        raise BadArgumentError(
            'type = "class" is for a model with one output; this one has several.'
        )
    level_list = _as_list(levels)
    name_list = _as_list(row_names)
    held = None if adapters.is_tf_dataset(x) else handover(x, None, None, check_missing)
    features = x if held is None else held.x
    positions, rows = (None, 0) if held is None else (held.kept, held.rows)

    timing = {"reading": 0.0, "model": 0.0, "writing": 0.0, "waiting_for_writer": 0.0}
    written = {"rows": 0, "columns": 0}

    def write(temp: str) -> None:
        with open(temp, "w", encoding="utf-8", newline="", buffering=1 << 20) as out:
            _write_rows(
                model, _batches(features, batch), out, names, level_list, classes,
                name_list, positions, rows, row_name_column, timing, written, verbose,
            )  # fmt: skip

    try:
        # as any new file is (the umask's permissions); an existing one replaced only with
        # overwrite (a file made there meanwhile is not replaced otherwise)
        files.write_atomic(target, write, mode=None, sync=True, replace=bool(overwrite))
    except FileExistsError as made:
        raise BadArgumentError(
            f"`file`: {str(target)!r} was created while the predictions were written; "
            "give overwrite = TRUE to replace it, or another name."
        ) from made
    except _Unreadable as wrapped:
        error = wrapped.__cause__ or wrapped
        said = failures.unreadable_batch(error)  # type: ignore[arg-type]
        raise BadDataError(
            f"Nothing was written to {str(target)!r}: "
            + (said if said is not None else f"reading the data failed: {error}")
        ) from error
    except (ValueError, TypeError) as error:
        refused = failures.refused_data(error, "predict from this data")
        if refused is None:
            raise
        raise BadDataError(f"Nothing was written to {str(target)!r}. {refused}") from error
    return {
        "path": str(target.resolve()),
        **written,
        **{f"{k}_seconds": v for k, v in timing.items()},
    }


class _Behind:
    """Calls ``write`` on each item in a thread of its own, at most ``depth`` items behind
    the caller: the lines of one batch are formatted and written while the model runs the
    next (TensorFlow and JAX let go of Python's lock while they compute, and tf.data reads
    in threads of its own). The thread runs Python only, never R."""

    def __init__(self, write: Any, depth: int = 2) -> None:
        self.items: queue.Queue[tuple[Any, ...] | None] = queue.Queue(maxsize=depth)
        self.error: BaseException | None = None
        self.seconds = 0.0  # spent writing
        self.thread = threading.Thread(target=self._run, args=(write,), daemon=True)
        self.thread.start()

    def _run(self, write: Any) -> None:
        while (item := self.items.get()) is not None:
            if self.error is None:  # after an error, the rest is taken and dropped
                clock = time.perf_counter()
                try:
                    write(*item)
                except BaseException as error:
                    self.error = error
                self.seconds += time.perf_counter() - clock

    def put(self, *item: Any) -> None:
        if self.error is not None:
            raise self.error
        self.items.put(item)

    def close(self) -> None:
        """Wait for the items given to be written; the writer's error, if it had one."""
        self.items.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error


def _write_rows(
    model: Model,
    batches: Iterator[Any],
    out: TextIO,
    names: list[str],
    levels: list[Any] | None,
    classes: bool,
    row_names: list[Any] | None,
    kept: np.ndarray | None,
    rows: int,
    row_name_column: str,
    timing: dict[str, float],
    written: dict[str, int],
    verbose: int,
) -> None:
    """The header and every batch's rows (see ``predict_file``)."""
    keras = config.keras()
    total = None if kept is None else len(kept)
    if total is None and row_names is not None:
        total = len(row_names)
    progress = keras.utils.Progbar(total) if int(verbose) > 0 else None
    writer: _Rows | None = None
    behind: _Behind | None = None
    class_names = None
    clock = time.perf_counter()
    try:
        for inputs in batches:
            timing["reading"] += time.perf_counter() - clock
            clock = time.perf_counter()
            try:
                predicted = pretrained.probabilities(model, model.predict_on_batch(inputs))
            except Exception as error:
                if type(error).__name__ == "InvalidArgumentError":
                    raise ValueError(str(error)) from error
                raise
            outputs = _outputs(predicted, names)
            values = np.concatenate([part for _, part in outputs], axis=1)
            codes = class_rule.class_codes(values) if classes else None
            timing["model"] += time.perf_counter() - clock
            if writer is None:
                columns = column_names([(name, part.shape[1]) for name, part in outputs], levels)
                if classes:
                    columns.append("class")
                    named = class_rule.class_names(values.shape[1], levels)
                    class_names = (
                        [_field(level) for level in named]
                        if named is not None
                        else [str(code) for code in range(class_rule.class_count(values.shape[1]))]
                    )
                if row_names is not None:
                    columns.insert(0, row_name_column)
                header = io.StringIO()
                csv.writer(header, lineterminator="\n").writerow(columns)
                out.write(header.getvalue())
                writer = _Rows(out, values.shape[1], row_names, kept, class_names)
                behind = _Behind(writer.write)
                written["columns"] = len(columns)
            clock = time.perf_counter()
            behind.put(values, codes)  # type: ignore[union-attr]
            timing["waiting_for_writer"] += time.perf_counter() - clock
            if progress is not None:
                progress.add(values.shape[0])
            clock = time.perf_counter()
        timing["reading"] += time.perf_counter() - clock
    except BaseException:
        if behind is not None:
            behind.items.put(None)  # the writer ends after what it was given
            behind.thread.join()
        raise
    if writer is None or behind is None:
        raise BadDataError("The data has no rows to predict: nothing was written.")
    clock = time.perf_counter()
    behind.close()
    timing["waiting_for_writer"] += time.perf_counter() - clock
    timing["writing"] = behind.seconds
    writer.finish(None if kept is None else rows)
    written["rows"] = writer.next_row


def written_lines(path: str, rows: int, columns: int, times: dict[str, float]) -> list[str]:
    """print() of predict(file = )'s result: the file, its rows and columns, the seconds
    ``times`` says (model, reading, writing), and how to read it back."""
    return [
        f"<gpukeras_predictions_file> {path}",
        f"  {big(rows)} rows x {columns} columns, written batch by batch (model "
        f"{seconds(times['model'])}, reading the data {seconds(times['reading'])}; writing "
        f"{seconds(times['writing'])}, beside them)",
        f'  read it with read.csv("{path}")',
    ]
