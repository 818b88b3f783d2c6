"""File sources for gpu_dataset(): CSV files, an image folder, TFRecord files, streamed.

Each source is an *unbatched* ``tf.data.Dataset`` that reads its files as it
is iterated, so data larger than memory trains without ever calling back into
R; ``pipeline`` then maps, caches, shuffles, batches and prefetches it.
Everything that can be checked cheaply is checked when the source is made
(files exist, CSV headers agree, column types, image magic bytes, the first
TFRecord), so a user mistake is a classed error with the fix before training
starts, not a TensorFlow error in the middle of an epoch.

tf.data needs TensorFlow whatever the Keras backend; TensorFlow is imported
only when a source is made, never when this module is imported.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import os
import re
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from gpukeras.errors import (
    BadArgumentError,
    BadDataError,
    BadImageError,
    MissingFilesError,
    TensorflowMissingError,
)
from gpukeras.runtime import _native_stderr_silenced, config
from gpukeras.stack import INSTALL_HINT

if TYPE_CHECKING:
    import tensorflow as tf

# Rows of the first CSV file read to tell numeric from text columns.
CSV_SAMPLE_ROWS = 100
# Fields read as missing (NaN): empty, and R's write.csv() spelling of NA.
CSV_NA = ("", "NA")
# Lines decoded per decode_csv call: one vectorised op per batch, not per line.
CSV_DECODE_BATCH = 1024
TFRECORD_PARSE_BATCH = 256
INTEGER = re.compile(r"\s*[+-]?\d+\s*")
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
# The formats tf.io.decode_image reads, by the bytes their files start with.
IMAGE_MAGIC = {
    "PNG": (b"\x89PNG\r\n\x1a\n",),
    "JPEG": (b"\xff\xd8\xff",),
    "GIF": (b"GIF87a", b"GIF89a"),
    "BMP": (b"BM",),
}
COLOR_MODES = {"grayscale": 1, "rgb": 3, "rgba": 4}
IMAGE_LAYOUT = "folder/class_a/image1.png, folder/class_b/image2.jpg, ..."


@dataclass
class Source:
    """A streamed file source, before batching.

    Attributes:
        dataset: an unbatched ``tf.data.Dataset``; each element is
            ``(features, label)``, or the features alone when there is no label.
        kind: "csv", "image_folder" or "tfrecord".
        info: plain data for printing: ``files`` (count), ``rows`` (None when
            unknown without reading every file), ``label``, and per kind the
            columns, class names or features.
    """

    dataset: tf.data.Dataset
    kind: str
    info: dict[str, object]


def tensorflow() -> ModuleType:
    """TensorFlow for tf.data, which needs it whatever the Keras backend.

    On the TensorFlow backend it is started through ``config`` (stack checked,
    start-up log hidden). On another backend TensorFlow only reads files, so
    its GPUs are hidden from it before it starts: otherwise its first op would
    reserve most of the GPU memory the backend that trains needs.
    """
    if config.backend == "tensorflow":
        return config.backend_module()
    # As config.keras() does; its own start may have set the level already, and
    # only a user who asked for TensorFlow's info lines (level 0) sees them.
    if config.quiet:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    quiet = config.quiet and os.environ["TF_CPP_MIN_LOG_LEVEL"] != "0"
    try:
        with _native_stderr_silenced() if quiet else contextlib.nullcontext():
            import tensorflow as tf
    except ImportError as error:
        raise TensorflowMissingError(
            "gpu_dataset() builds tf.data pipelines, which need TensorFlow (also when "
            f"the Keras backend is {config.backend}), and TensorFlow is not installed in the "
            f"Python at {sys.executable}. {INSTALL_HINT}, or `pip install tensorflow-cpu` "
            "in that environment."
        ) from error
    # Once TensorFlow has started its devices can no longer change: RuntimeError.
    with contextlib.suppress(RuntimeError):
        tf.config.set_visible_devices([], "GPU")
    return tf


def _expand(path: str) -> str:
    """``~`` expanded, as R users write paths."""
    return os.path.expanduser(str(path))


def _match_files(pattern: str, directory_patterns: tuple[str, ...], what: str) -> list[str]:
    """Files matching a glob, a single file, or a directory's files matching ``directory_patterns``.

    Raises:
        MissingFilesError: when nothing matches.
    """
    expanded = _expand(pattern)
    if os.path.isdir(expanded):
        found = {
            path
            for name in directory_patterns
            for path in glob.glob(os.path.join(glob.escape(expanded), name))
        }
        where = f"in the folder '{pattern}' (looked for {', '.join(directory_patterns)})"
    elif os.path.isfile(expanded):
        found = {expanded}
        where = ""
    else:
        found = set(glob.glob(expanded, recursive=True))
        where = f"match '{pattern}'"
    files = sorted(path for path in found if os.path.isfile(path))
    if not files:
        raise MissingFilesError(
            f"No {what} files {where}. Check the path or glob pattern (a relative path "
            f'starts at the working directory, {os.getcwd()}), e.g. "data/*.csv".'
        )
    return files


# CSV -------------------------------------------------------------------------------------------


def _read_csv_head(path: str, rows: int) -> tuple[list[str], list[list[str]]]:
    """The header and up to ``rows`` non-blank data rows of a CSV file, read with Python's csv."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            sample = []
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


def _quoted(names: list[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _csv_layout(files: list[str]) -> tuple[list[str], list[list[str]]]:
    """The header all ``files`` share, and the first file's sample rows, checked."""
    header, sample = _read_csv_head(files[0], CSV_SAMPLE_ROWS)
    for path in files[1:]:
        other, _ = _read_csv_head(path, 0)
        if other != header:
            raise BadDataError(
                f"'{path}' has the header {_quoted(other)}, but '{files[0]}' has "
                f"{_quoted(header)}. All files of one dataset need the same columns in the "
                "same order: fix or move that file, or choose files with a narrower pattern."
            )
    duplicated = sorted({name for name in header if header.count(name) > 1})
    if duplicated:
        raise BadDataError(
            f"The header of '{files[0]}' repeats the column name(s) {_quoted(duplicated)}. "
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
            f"label = \"{label}\" is not a column of '{file}'. Columns: {_quoted(header)}."
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
            f"columns {_quoted(unknown)} not found in '{file}'. Columns: {_quoted(header)}."
        )
    if len(set(columns)) != len(columns):
        raise BadArgumentError(f"columns names a column more than once: {_quoted(columns)}.")
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
        keep = f"columns = c({_quoted(numeric)})" if numeric else "columns"
        raise BadDataError(
            f"Column(s) {_quoted(text)} of '{file}' hold text (e.g. \"{text_in(text[0])}\"); "
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
    files = _match_files(pattern, ("*.csv", "*.CSV"), "CSV")
    header, sample = _csv_layout(files)
    features = _csv_features(header, label, _as_names(columns), files[0])
    label_dtype = _csv_label_dtype(header, sample, features, label, files[0])

    tf = tensorflow()
    feature_positions = [header.index(name) for name in features]
    label_position = None if label is None else header.index(label)
    selected = sorted({*feature_positions, *([] if label is None else [label_position])})
    missing_as_nan = tf.constant(np.nan, tf.float32)
    required = tf.constant([], tf.int32 if label_dtype == "int32" else tf.float32)
    defaults = [required if position == label_position else missing_as_nan for position in selected]

    def decode(lines: tf.Tensor) -> object:
        # Blank lines are dropped here, per batch: a per-line filter costs ten times more.
        lines = tf.boolean_mask(lines, tf.strings.length(tf.strings.strip(lines)) > 0)
        decoded = tf.io.decode_csv(lines, defaults, select_cols=selected, na_value=CSV_NA[1])
        fields = dict(zip(selected, decoded))
        stacked = tf.stack([fields[position] for position in feature_positions], axis=-1)
        return stacked if label is None else (stacked, fields[label_position])

    def lines_of(path: tf.Tensor) -> tf.data.Dataset:
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


# Image folder ----------------------------------------------------------------------------------


def _image_format(path: str) -> str | None:
    """'PNG', 'JPEG', 'GIF' or 'BMP' from a file's first bytes; None for anything else."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError:
        return None  # unreadable: reported with the files that are not images
    for name, starts in IMAGE_MAGIC.items():
        if head.startswith(starts):
            return name
    return None


def _check_image_size(image_size: object) -> tuple[int, int]:
    try:
        height, width = (int(side) for side in image_size)  # type: ignore[attr-defined]
        whole = all(float(side) == int(side) for side in image_size)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        height, width, whole = 0, 0, False
    if not whole or height < 1 or width < 1:
        raise BadArgumentError(
            f"image_size must be two whole numbers >= 1, c(height, width), not {image_size!r}."
        )
    return height, width


def _to_channels(tf: ModuleType, image: tf.Tensor, channels: int) -> tf.Tensor:
    """A float image of 1 (gray), 2 (gray, alpha), 3 (RGB) or 4 (RGBA) channels as ``channels``.

    Gray becomes RGB by repeating it, RGB becomes gray by luma weights
    (tf.image.rgb_to_grayscale), a missing alpha channel is opaque (255).
    """
    count = tf.shape(image)[-1]
    has_color = count >= 3
    if channels == 1:
        return tf.cond(
            has_color, lambda: tf.image.rgb_to_grayscale(image[..., :3]), lambda: image[..., :1]
        )
    rgb = tf.cond(
        has_color, lambda: image[..., :3], lambda: tf.image.grayscale_to_rgb(image[..., :1])
    )
    if channels == 3:
        return rgb
    alpha = tf.cond(
        tf.equal(count % 2, 0),
        lambda: image[..., -1:],
        lambda: tf.fill(tf.shape(image[..., :1]), 255.0),
    )
    return tf.concat([rgb, alpha], axis=-1)


def image_folder_source(
    path: str, image_size: tuple[int, int] = (64, 64), color_mode: str = "rgb"
) -> Source:
    """Stream labelled images from a folder with one sub-folder per class.

    Class names are the sub-folders sorted by name, and a label is its class's
    index (int32). Images are found by extension (png, jpg, jpeg, bmp, gif, any
    case, also in nested folders), other files are skipped, and the file list
    is sorted: shuffling is the pipeline's job. Each file's first bytes are
    checked here, so a file that is not an image fails now, not mid-epoch.

    Each image is decoded, resized (bilinear) to ``image_size`` and returned as
    float32 in [0, 255], shape (height, width, channels): scaling to [0, 1] is
    left to a map or a Rescaling layer, so it happens once, where the user sees it.
    Animated GIFs give their first frame.

    Args:
        path: the folder.
        image_size: (height, width) every image is resized to.
        color_mode: "rgb" (3 channels), "grayscale" (1) or "rgba" (4).

    Returns:
        A Source whose info holds path, files, rows, class_names, class_counts,
        image_size, color_mode, channels and skipped_files (not images by name).
    """
    size = _check_image_size(image_size)
    if color_mode not in COLOR_MODES:
        raise BadArgumentError(
            f'color_mode must be "rgb", "grayscale" or "rgba", not "{color_mode}".'
        )
    root = _expand(path)
    if not os.path.exists(root):
        raise MissingFilesError(
            f"The image folder '{path}' does not exist (a relative path starts at the "
            f"working directory, {os.getcwd()}). Expected one sub-folder per class: "
            f"{IMAGE_LAYOUT}"
        )
    if not os.path.isdir(root):
        raise MissingFilesError(
            f"'{path}' is a file, not a folder. Give the folder that holds one sub-folder "
            f"per class: {IMAGE_LAYOUT}"
        )
    class_names = sorted(
        entry.name
        for entry in os.scandir(root)
        if entry.is_dir() and not entry.name.startswith(".")
    )
    if not class_names:
        raise MissingFilesError(
            f"The image folder '{path}' has no sub-folders; each class needs its own: "
            f"{IMAGE_LAYOUT}"
        )
    paths: list[str] = []
    labels: list[int] = []
    counts: list[int] = []
    skipped = 0
    for class_index, name in enumerate(class_names):
        found = []
        for folder, subfolders, names in os.walk(os.path.join(root, name), followlinks=True):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
            for file_name in sorted(names):
                if file_name.startswith("."):
                    continue
                if file_name.lower().endswith(IMAGE_EXTENSIONS):
                    found.append(os.path.join(folder, file_name))
                else:
                    skipped += 1
        paths.extend(found)
        labels.extend([class_index] * len(found))
        counts.append(len(found))
    if not paths:
        raise MissingFilesError(
            f"No images ({', '.join(IMAGE_EXTENSIONS)}) in the class folders of '{path}' "
            f"({_quoted(class_names)}). Expected: {IMAGE_LAYOUT}"
        )
    bad = [file for file in paths if _image_format(file) is None]
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise BadImageError(
            f"{len(bad)} file(s) in '{path}' are not PNG, JPEG, GIF or BMP images (or cannot be "
            f"read), whatever their names say: {', '.join(map(repr, bad[:5]))}{more}. "
            "Remove them from the folder, or convert them to PNG or JPEG."
        )

    tf = tensorflow()
    channels = COLOR_MODES[color_mode]

    def load(file: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        # Decoded with the file's own channels (1 to 4), then converted here:
        # decode_image cannot convert every format (a BMP to 1 channel, a JPEG to 4).
        image = tf.io.decode_image(tf.io.read_file(file), expand_animations=False)
        image = tf.image.resize(_to_channels(tf, tf.cast(image, tf.float32), channels), size)
        image.set_shape((*size, channels))
        return image, label

    dataset = tf.data.Dataset.from_tensor_slices((paths, np.asarray(labels, dtype=np.int32))).map(
        load, num_parallel_calls=tf.data.AUTOTUNE
    )
    return Source(
        dataset,
        "image_folder",
        {
            "path": path,
            "files": len(paths),
            "rows": len(paths),
            "label": "class",
            "class_names": class_names,
            "class_counts": counts,
            "image_size": list(size),
            "color_mode": color_mode,
            "channels": channels,
            "skipped_files": skipped,
        },
    )


# TFRecord --------------------------------------------------------------------------------------


def _first_record(tf: ModuleType, files: list[str], compression: str) -> tuple[bytes, str]:
    """The first serialized record of the first non-empty file, and that file."""
    for path in files:
        try:
            for record in tf.data.TFRecordDataset(path, compression_type=compression).take(1):
                return record.numpy(), path
        except tf.errors.OpError as error:
            raise BadDataError(
                f"Could not read a record from '{path}': {error.message.strip()}. Is it a "
                "TFRecord file (written with tf.io.TFRecordWriter)? GZIP-compressed files "
                "must end in .gz."
            ) from error
    raise BadDataError(
        f"The {len(files)} TFRecord file(s) starting with '{files[0]}' hold no records."
    )


def tfrecord_source(pattern: str, label: str | None = None) -> Source:
    """Stream ``tf.train.Example`` records from TFRecord files.

    The features and their lengths are read from the first record; every record
    must have the same. float_list gives float32, int64_list int32 (values must
    fit), bytes_list a string (e.g. an encoded image, for a map to decode).
    Numeric features keep their length as shape (n,), also for n = 1, the feature
    axis a Keras Input expects; a single bytes value is a scalar string, what
    tf.io decoders take; a label of one value is a scalar. Features that are
    empty in the first record have no length to infer and are left out
    (``skipped_features``). Files ending in .gz are read as GZIP-compressed.

    Args:
        pattern: a glob ("data/train-*.tfrecord"), one file, or a folder (its
            *.tfrecord, *.tfrecords, *.tfrec and *.gz files).
        label: the feature used as label. None: elements are the feature dict alone.

    Returns:
        A Source whose elements are ``(dict of features without the label,
        label)`` or a dict of features, and whose info holds files, features
        (name, dtype, shape each), label, rows (None) and skipped_features.
    """
    files = _match_files(pattern, ("*.tfrecord", "*.tfrecords", "*.tfrec", "*.gz"), "TFRecord")
    compressed = [file.endswith(".gz") for file in files]
    if any(compressed) and not all(compressed):
        raise BadDataError(
            f"'{pattern}' matches both GZIP-compressed (.gz) and plain TFRecord files; "
            "choose files of one kind with a narrower pattern."
        )
    compression = "GZIP" if all(compressed) else ""
    tf = tensorflow()
    serialized, first_file = _first_record(tf, files, compression)
    try:
        example = tf.train.Example.FromString(serialized)
    except Exception as error:  # protobuf's DecodeError; its module path varies by version
        raise BadDataError(
            f"The first record of '{first_file}' is not a tf.train.Example ({error}); "
            "gpu_dataset() reads TFRecord files of tf.train.Example records."
        ) from error
    kinds = {"float_list": tf.float32, "int64_list": tf.int64, "bytes_list": tf.string}
    spec: dict[str, object] = {}
    features: list[dict[str, object]] = []
    skipped: list[str] = []
    for name in sorted(example.features.feature):
        feature = example.features.feature[name]
        kind = feature.WhichOneof("kind")
        length = len(getattr(feature, kind).value) if kind else 0
        if length == 0:
            skipped.append(name)
            continue
        dtype = kinds[kind]
        scalar = length == 1 and (name == label or dtype == tf.string)
        shape = [] if scalar else [length]
        spec[name] = tf.io.FixedLenFeature(shape, dtype)
        out = "int32" if dtype == tf.int64 else dtype.name
        features.append({"name": name, "dtype": out, "shape": shape})
    if not spec:
        raise BadDataError(
            f"The first record of '{first_file}' has no non-empty features; gpu_dataset() "
            "reads TFRecord files of tf.train.Example records with features."
        )
    if label is not None and label not in spec:
        why = " (it is empty in the first record)" if label in skipped else ""
        raise BadArgumentError(
            f"label = \"{label}\" is not a feature of '{first_file}'{why}. Features: "
            f"{_quoted(list(spec))}."
        )
    if label is not None and len(spec) == 1:
        raise BadArgumentError(
            f"No features left: \"{label}\" is the only feature of '{first_file}'."
        )

    def parse(records: tf.Tensor) -> object:
        parsed = tf.io.parse_example(records, spec)
        values = {
            name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in parsed.items()
        }
        if label is None:
            return values
        target = values.pop(label)
        return values, target

    dataset = (
        tf.data.TFRecordDataset(
            files,
            compression_type=compression,
            num_parallel_reads=min(len(files), os.cpu_count() or 1) if len(files) > 1 else None,
        )
        .batch(TFRECORD_PARSE_BATCH)
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
    )
    return Source(
        dataset,
        "tfrecord",
        {
            "pattern": pattern,
            "files": len(files),
            "features": [feature for feature in features if feature["name"] != label],
            "label": label,
            "label_dtype": next(
                (feature["dtype"] for feature in features if feature["name"] == label), None
            ),
            "rows": None,
            "compression": compression or None,
            "skipped_features": skipped,
        },
    )
