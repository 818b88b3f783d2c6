"""TFRecord files of tf.train.Example records as a gpu_dataset() source.

The features, their dtypes and lengths are read from the first record, and
every record is parsed with them, in batches (``tf.io.parse_example``).
"""

from __future__ import annotations

import os
from types import ModuleType

from gpukeras.core.errors import BadArgumentError, BadDataError
from gpukeras.core.handles import Tensor
from gpukeras.data.source_files import Source, match_files, quoted, tensorflow

TFRECORD_PARSE_BATCH = 256


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
    files = match_files(pattern, ("*.tfrecord", "*.tfrecords", "*.tfrec", "*.gz"), "TFRecord")
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
            f"{quoted(list(spec))}."
        )
    if label is not None and len(spec) == 1:
        raise BadArgumentError(
            f"No features left: \"{label}\" is the only feature of '{first_file}'."
        )

    def parse(records: Tensor) -> object:
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
