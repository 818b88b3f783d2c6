"""In-memory arrays as the start of a pipeline: one copy into tensors, batches gathered by index.

R data reaches the core as reticulate's views of R's memory (column-major,
no copy); ``host_array`` makes the one copy it goes through, and the tensors
share that copy. Batches are gathered from those tensors by a shuffled index,
several at a time, as Keras does with arrays, instead of row by row.
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any, NamedTuple, overload

import numpy as np

from gpukeras.core.handles import HANDOVER, Dataset, Tensor
from gpukeras.core.r_words import strings
from gpukeras.data.augment import apply_to_features, augment_error, augmenter, chunk_presets
from gpukeras.data.bad_rows import BadValues, Checks, dropped, named
from gpukeras.data.encoding import (
    FRAME,
    LABELS,
    encode_frame,
    frame_codes,
    is_frame,
    is_labels,
    label_codes,
)
from gpukeras.data.indicators import FrameCodes, aligned_empty
from gpukeras.data.pipeline_options import PipelineOptions, Started

# In-memory arrays are gathered several batches at a time (see gathered_batches),
# at most this many and about this many bytes per gather.
GATHER_CHUNK_BATCHES = 32
GATHER_CHUNK_BYTES = 16 * 2**20
# TensorFlow's CPU kernels assume tensor memory aligned to Eigen's widest vector
# (64 bytes with AVX-512): a tensor sharing unaligned NumPy memory aborts the
# process in its first strided slice. NumPy's own large arrays are 16-aligned.
TENSOR_ALIGNMENT = 64
# host_array() copies blocks of about this many bytes: a block's rows span few
# pages (a copy that turns column-major into row-major touches every page of
# its span per column), its NaN check reads it while it is in cache, and the
# temporary NumPy makes when it takes chosen rows stays small.
COPY_BLOCK_BYTES = 4 * 2**20
# Arrays from this size on are copied by several threads (NumPy releases the
# GIL while it copies); below it, starting them costs more than they save.
PARALLEL_COPY_BYTES = 16 * 2**20
COPY_THREADS = min(4, os.cpu_count() or 1)


# The arrays this module made (host_array, features_array), by id: a pipeline may share them
# rather than copy them again, for nobody else holds them to change (the adapters' factory
# reads it, ``adapters.core_made``, without a call into this module: the data's walk).
MADE: weakref.WeakValueDictionary[int, np.ndarray | FrameCodes] = weakref.WeakValueDictionary()


@overload
def _made(array: np.ndarray) -> np.ndarray: ...
@overload
def _made(array: FrameCodes) -> FrameCodes: ...
@overload
def _made(array: np.ndarray | FrameCodes) -> np.ndarray | FrameCodes: ...
def _made(array: np.ndarray | FrameCodes) -> np.ndarray | FrameCodes:
    MADE[id(array)] = array
    return array


def host_array(
    array: object,
    dtype: str | None = None,
    rows: np.ndarray | None = None,
    check_missing: bool = False,
) -> np.ndarray:
    """One copy of ``array`` (of its ``rows`` when given) as a C-contiguous array of
    ``dtype`` (default: its own), aligned so that a tensor can share it (see ``tensor_of``).

    From R, ``array`` is reticulate's view of an R array (column-major, no copy), so
    this is the one copy R data goes through on its way into a pipeline: the cast to
    float32 and the change to row-major order happen in it together, block by block,
    on several threads for large arrays. A floating-point copy holding an infinity raises
    BadValues naming the first rows (``Inf``, ``-Inf``, and finite values beyond the
    dtype's range, which the cast makes infinite: float32's ends near 3.4e38; training on
    them gives a NaN loss every epoch), which ``bad_rows.named`` names as R does. With
    ``check_missing``, so does one holding a NaN (R's NA among them).
    """
    source = np.asarray(array)
    target = source.dtype if dtype is None else np.dtype(dtype)
    count = len(source) if rows is None else len(rows)
    shape = (count, *source.shape[1:])
    size = math.prod(shape) * target.itemsize
    copy = aligned_empty(shape, target)
    floating = target.kind == "f"
    row_bytes = max(1, size // max(1, count))
    block_rows = max(1, COPY_BLOCK_BYTES // row_bytes)

    def copy_block(begin: int) -> tuple[bool, bool]:
        """Copy rows begin.. of the block; whether they hold a NaN and an infinity."""
        block = slice(begin, begin + block_rows)
        # R's NA is a signalling NaN: its cast to float32 sets NumPy's "invalid" flag, and
        # a value beyond float32's range its "overflow" flag: warnings about data that is
        # reported below (or that the caller keeps).
        with np.errstate(invalid="ignore", over="ignore"):
            copy[block] = source[block] if rows is None else source[rows[block]]
        return _bad_values(copy[block]) if floating else (False, False)

    starts = range(0, count, block_rows)
    if size < PARALLEL_COPY_BYTES or COPY_THREADS < 2:
        found = [copy_block(begin) for begin in starts]
    else:
        with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="gpukeras-copy") as pool:
            found = list(pool.map(copy_block, starts))
    if check_missing and any(nan for nan, _ in found):
        raise BadValues(_missing_message(copy))
    if any(inf for _, inf in found):
        raise BadValues(_infinite_message(copy))
    return _made(copy)


def _bad_values(block: np.ndarray) -> tuple[bool, bool]:
    """Whether ``block`` holds a NaN, and an infinity. One pass, allocating nothing where
    all is finite: a float64 sum is finite exactly then (float32 values cannot overflow
    it), and only a block whose sum is not is searched."""
    if not block.size or np.isfinite(block.sum(dtype=np.float64)):
        return False, False
    return bool(np.isnan(block).any()), bool(np.isinf(block).any())


def check_values(array: np.ndarray | FrameCodes, check_missing: bool) -> None:
    """What ``host_array`` checks in its copy, for a floating-point ``array`` used as it is
    (or a data.frame's ``FrameCodes``: its dense columns, and its factors' NA): BadValues
    naming the first rows for an infinity, and with ``check_missing`` for a NaN (R's NA
    among them)."""
    if isinstance(array, FrameCodes):
        if check_missing and array.missing_rows().any():
            raise BadValues(_missing_rows_message(array.missing_rows()))
        check_values(array.dense, False)
        return
    if array.dtype.kind != "f":
        return
    nan, inf = _bad_values(array)
    if check_missing and nan:
        raise BadValues(_missing_message(array))
    if inf:
        raise BadValues(_infinite_message(array))


def _first_rows(rows: np.ndarray) -> str:
    return ", ".join(str(row + 1) for row in np.flatnonzero(rows)[:5])


def _missing_message(copy: np.ndarray) -> str:
    """Where the NaN values of ``copy`` are, and what to do about them."""
    return _missing_rows_message(np.isnan(copy.reshape(len(copy), -1)).any(axis=1))


def _missing_rows_message(missing: np.ndarray) -> str:
    """What to do about the ``missing`` rows (a mask), naming the first."""
    return (
        f"The data has NA/NaN in {int(missing.sum())} row(s) (first, counting from 1: "
        f"{_first_rows(missing)}). Impute or remove them first."
    )


def _infinite_message(copy: np.ndarray) -> str:
    """Where the infinite values of ``copy`` are, and what to do about them."""
    infinite = np.isinf(copy.reshape(len(copy), -1)).any(axis=1)
    return (
        f"The data has Inf, -Inf or values beyond {copy.dtype.name}'s range (about "
        f"{float(np.finfo(copy.dtype).max):.1e}) in {int(infinite.sum())} row(s) (first, counting "
        f"from 1: {_first_rows(infinite)}): training on them gives a NaN loss. Replace or "
        "remove them, or rescale the columns."
    )


class HostArrays:
    """Arrays the core made, for R to keep as they are: ``x`` (an array, or a dict of them
    for several inputs, named in ``inputs``), ``y`` and ``sample_weight`` (arrays or None).

    The bridge turns a NumPy array it returns into an R array (a copy back into R), but
    gives R any object it does not know as a Python object; R reads the arrays out of
    this one with ``reticulate::py_get_attr()``, which does not convert them. With R's
    ``na = "drop"``, ``kept`` says which of the ``rows`` given they hold (0-based; None when
    they hold all).
    """

    def __init__(
        self,
        x: object,
        y: object | None,
        sample_weight: object | None = None,
        kept: np.ndarray | None = None,
        rows: int = 0,
    ) -> None:
        self.x = x
        self.y = y
        self.sample_weight = sample_weight
        self.inputs = list(x) if isinstance(x, dict) else None
        # with R's na = "drop", the rows kept (0-based) of the ``rows`` given (None: all kept)
        self.kept = kept
        self.rows = rows


def handover(
    x: object,
    y: object | None = None,
    y_dtype: str | None = None,
    check_missing: Checks = False,
    sample_weight: object | None = None,
    codes: bool = False,
) -> HostArrays:
    """R data as the NumPy arrays Keras reads: features (an array, a data.frame R handed over
    as its columns, or a dict of them) and sample weights as float32, labels as ``y_dtype``
    (R's by default as ``r_labels_dtype`` says), each one ``host_array`` copy, a data.frame
    the matrix ``encoding.encode_frame`` makes of it, checked as a copy is, factor labels R
    handed over their codes among the training levels (``encoding.label_codes``, which
    raises for levels training did not have); with ``codes``, a data.frame with one-hot
    factors as its ``indicators.FrameCodes`` (its indicator columns made where its rows are
    trained, ``np.asarray`` of it that matrix). Infinities, and with ``check_missing`` NA,
    are the classed errors ``bad_rows.named`` raises (``check_missing``: True, or R's names
    of the columns and advice; with ``"na": "drop"`` the rows holding NA are dropped first,
    ``bad_rows.dropped``). The arrays are the caller's alone, so a pipeline may share them."""
    check = bool(check_missing)
    given = r_given(x, y, sample_weight, y_dtype, check_missing)
    x, y, sample_weight = given.x, given.parts["y"], given.parts["sample_weight"]
    with named(given.parts, check_missing):
        features = (
            {name: features_array(part, check, codes) for name, part in x.items()}
            if isinstance(x, dict) and not is_frame(x)
            else features_array(x, check, codes)
        )
        labels = None if y is None else host_array(r_encoded(y), given.y_dtype, check_missing=check)
        weights = (
            host_array(sample_weight, "float32", check_missing=check)
            if sample_weight is not None
            else None
        )
    return HostArrays(features, labels, weights, given.kept, given.rows)


class Given(NamedTuple):
    """R's data as the hand-over reads it (``r_given``): ``parts`` (``x``, ``y``,
    ``sample_weight``) with R's na = "drop" applied, their features ``x`` in the model's
    order (``in_order``), the labels' dtype, the rows kept (0-based; None: all) and the rows
    given (``bad_rows.dropped``)."""

    parts: dict[str, object]
    x: object
    y_dtype: str | None
    kept: np.ndarray | None
    rows: int


def r_given(
    x: object, y: object | None, sample_weight: object | None, y_dtype: str | None, checks: Checks
) -> Given:
    """What every hand-over of R data (``handover``, ``pipeline.from_arrays``) reads first,
    R's ``checks`` saying how: with na = "drop" the rows holding NA dropped
    (``bad_rows.dropped``), a matrix's columns in training's order (``in_order``), the
    labels' dtype ``y_dtype`` or R's (``r_labels_dtype``)."""
    parts, kept, rows = dropped({"x": x, "y": y, "sample_weight": sample_weight}, checks)
    dtype = y_dtype or r_labels_dtype(parts["y"], checks)
    return Given(parts, in_order(parts["x"], checks), dtype, kept, rows)


def in_order(x: object, checks: Checks) -> object:
    """R's features ``x`` (an input, or a dict of them by name) as the model reads them, R's
    ``checks`` (see ``bad_rows.Checks``) saying how: a matrix whose columns R named
    (``columns``) with the training columns (``order``: each input's training column names,
    the encoding's; ``encoding.check_new_data`` found them all) in that order, a data.frame
    given for such a matrix (R handed over those columns, without a spec) read as those
    columns' numbers, a vector as one column, as the encoding records it; NumPy arrays R
    holds as they are (``numpy``), and all of them without R's checks."""
    if not isinstance(checks, Mapping):
        return x
    if isinstance(x, dict) and not is_frame(x):
        return {name: _in_order(part, name, checks) for name, part in x.items()}
    return _in_order(x, "x", checks)


def r_labels_dtype(y: object, checks: Checks) -> str | None:
    """The dtype R's labels ``y`` are copied as, told by R's ``checks`` (None for other
    data: their own): int32 where they are codes (factor labels, R's integers), else
    float32 (a NumPy array R holds among them)."""
    if y is None or not isinstance(checks, Mapping):
        return None
    if is_labels(y):
        return "int32"
    r_integers = "y" not in strings(checks.get("numpy")) and np.asarray(y).dtype == np.int32
    return "int32" if r_integers else "float32"


def _in_order(part: Any, name: str, checks: Mapping[str, Any]) -> object:
    wanted = strings((checks.get("order") or {}).get(name))
    if is_frame(part) and wanted and part[FRAME]["spec"] is None:
        frame = part[FRAME]
        return {FRAME: {**frame, "spec": {column: {"type": "numeric"} for column in wanted}}}
    if not isinstance(part, np.ndarray) or name in strings(checks.get("numpy")):
        return part
    if part.ndim == 1:
        return part.reshape(-1, 1)
    have = strings((checks.get("columns") or {}).get(name))
    if wanted and have and have != wanted:
        return part[:, [have.index(column) for column in wanted]]
    return part


def features_array(
    part: object, check_missing: bool = False, codes: bool = False
) -> np.ndarray | FrameCodes:
    """One input's features as float32: a data.frame R handed over encoded
    (``encoding.encode_frame``; with ``codes``, ``encoding.frame_codes``: its one-hot
    factors as codes), an array copied (``host_array``); either checked for infinities,
    and with ``check_missing`` for NaN."""
    if is_frame(part):
        frame = part[FRAME]  # type: ignore[index]
        matrix = frame_codes(frame) if codes else encode_frame(frame)
        check_values(matrix, check_missing)
        return _made(matrix)
    return host_array(part, "float32", check_missing=check_missing)


def r_encoded(x: object, codes: bool = False) -> object:
    """Features ``x`` (an array, a handed-over data.frame, or a dict of them) with each
    data.frame as its float32 matrix (``encoding.encode_frame``, unchecked: the caller
    checks what it uses; with ``codes``, ``encoding.frame_codes``: its one-hot factors as
    codes), arrays as they are; factor labels R handed over as their codes
    (``encoding.label_codes``)."""
    if is_frame(x):
        frame = x[FRAME]  # type: ignore[index]
        return frame_codes(frame) if codes else encode_frame(frame)
    if is_labels(x):
        return label_codes(x[LABELS])  # type: ignore[index]
    if isinstance(x, dict):
        return {name: r_encoded(part, codes) for name, part in x.items()}
    return x


def received(value: object, codes: bool = False) -> object:
    """An argument of a verb as the verb takes it: R data sent to be handed over
    (``{HANDOVER: {"x", "y", "y_dtype", "check_missing"[, "sample_weight"]}}``, R's
    ``handover_arg()``) as the ``(x, y)`` or ``(x, y, sample_weight)`` arrays ``handover``
    makes of it (``codes``: a data.frame's one-hot factors as codes); anything else as it
    is."""
    if isinstance(value, dict) and list(value) == [HANDOVER]:
        arrays = handover(**value[HANDOVER], codes=codes)
        if arrays.sample_weight is None:
            return (arrays.x, arrays.y)
        return (arrays.x, arrays.y, arrays.sample_weight)
    return value


def shareable(array: np.ndarray) -> bool:
    """Whether a tensor may share ``array``'s memory: C order, aligned, and writable
    (NumPy exports no read-only array through DLPack)."""
    return (
        array.flags.c_contiguous
        and array.flags.writeable
        and array.ctypes.data % TENSOR_ALIGNMENT == 0
    )


def tensor_of(tf: ModuleType, array: object, rows: np.ndarray | None = None) -> object:
    """A tensor of ``array`` (of its ``rows`` when given) that shares memory where it can.

    ``tf.constant`` always copies a NumPy array (0.12 s for 60,000 x 784 floats
    here); a DLPack hand-over makes a tensor that shares it instead. So the tensor
    shares ``array`` itself when it can (see ``shareable``), which must then never
    change; chosen rows, and an array it cannot share, are copied once first
    (``host_array``).
    """
    source = np.asarray(array)
    if source.dtype.kind not in "biufc":  # strings: DLPack carries numbers only
        return tf.convert_to_tensor(source if rows is None else source[rows])
    if rows is not None or not shareable(source):
        source = host_array(source, rows=rows)
    return tf.experimental.dlpack.from_dlpack(source.__dlpack__())


def gather_chunk(tensors: Tensor, rows: int, batch_size: int) -> int:
    """Batches per gather: up to GATHER_CHUNK_BATCHES, within GATHER_CHUNK_BYTES."""
    row_bytes = sum(t.dtype.size * int(np.prod(t.shape[1:])) for t in tensors)
    batch_bytes = max(1, row_bytes * min(batch_size, rows))
    return max(1, min(GATHER_CHUNK_BATCHES, GATHER_CHUNK_BYTES // batch_bytes))


def gathered_batches(
    tf: ModuleType,
    tensors: Tensor,
    rows: int,
    options: PipelineOptions,
    finish: Callable[[object], object] | None = None,
) -> Started:
    """Batches of in-memory tensors, gathered by a shuffled index per epoch, each chunk of
    them ``finish``-ed when given (a data.frame's codes made its indicator columns; no preset
    then).

    Shuffling row indices and gathering whole batches is several times faster
    than shuffling and batching rows one by one (measured here: 7,100 vs 1,700
    batches/s of 256 x 20 floats on 2 cores), and it is what Keras does with
    arrays. The permutation is new every epoch and reproducible with a seed.

    The batches are gathered a chunk of several at a time (one gather of up
    to 32 batches, at most 16 MiB) and then unbatched: tf.data's cost per
    element of a parallel map is paid once per chunk instead of once per
    batch. Measured here (``bench/pipeline.R``'s MLP, 256 x 20 floats per
    batch): 102 -> 59 CPU microseconds per batch, CPU time that on a
    CPU-only machine the model's own step would otherwise have had.

    Augment presets drawn image by image (all but crop) run on the whole
    chunk, inside the same parallel call, for the same reason: measured on
    the digits CNN's batches (128 x 8 x 8 x 1, flip and rotation), 331 -> 230
    CPU microseconds per batch. Returns the dataset, the steps done, and the
    presets run.

    tf.data's default graph rewrites are turned off: to rewrite, it serializes the
    pipeline, the tensors its functions capture included, each time an iterator
    is made (measured here for 60,000 x 784 floats: 0.24 s and a transient copy
    of all 179 MiB, at every epoch of Keras' own fit()). They find nothing to do
    in this pipeline, parallel and prefetched already: the same time per batch
    with and without them.
    """
    # These functions have no Python control flow on tensors, so tf.data traces them
    # as they are: AutoGraph's conversion was a third of building the pipeline.
    plain = tf.autograph.experimental.do_not_convert
    order = tf.range(rows, dtype=tf.int64)
    if not options.shuffle:
        permutations = tf.data.Dataset.from_tensors(order)
    elif options.seed is None:
        permutations = tf.data.Dataset.range(1).map(plain(lambda _: tf.random.shuffle(order)))
    else:
        seed = tf.constant(options.seed, tf.int64)
        permutations = (
            tf.data.Dataset.random(seed=options.seed, rerandomize_each_iteration=True)
            .take(1)
            .map(
                plain(
                    lambda draw: tf.random.experimental.stateless_shuffle(
                        order, tf.stack([draw, seed])
                    )
                )
            )
        )
    size = options.batch_size
    full = rows // size * size
    remainder = rows - full if not options.drop_remainder else 0
    # a chunk's bytes as it is gathered, finished
    row = tensors if finish is None else finish(tf.nest.map_structure(lambda t: t[:1], tensors))
    chunk = gather_chunk(tf.nest.flatten(row), rows, size)

    def chunks_of(permutation: Tensor) -> Dataset:
        # A reshape cuts all full batches at once, faster than batching index by index.
        batched = tf.data.Dataset.from_tensor_slices(tf.reshape(permutation[:full], [-1, size]))
        chunks = batched.batch(chunk)
        if remainder:
            chunks = chunks.concatenate(tf.data.Dataset.from_tensors(permutation[None, full:]))
        return chunks

    presets = chunk_presets(options)
    augment = augmenter(options, presets) if presets else None
    on_features = apply_to_features(augment) if augment is not None else None

    def gather(indices: object) -> object:
        if on_features is None:
            gathered = tf.nest.map_structure(lambda tensor: tf.gather(tensor, indices), tensors)
            return gathered if finish is None else finish(gathered)
        # The chunk's rows as one batch of images for the presets, then cut back into batches.
        gathered = tf.nest.map_structure(
            lambda tensor: tf.gather(tensor, tf.reshape(indices, [-1])), tensors
        )
        gathered = on_features(*gathered) if isinstance(gathered, tuple) else on_features(gathered)
        batch_rows = tf.shape(indices)[1]
        return tf.nest.map_structure(
            lambda tensor: tf.reshape(tensor, [-1, batch_rows, *tensor.shape[1:]]), gathered
        )

    try:
        chunks = permutations.flat_map(plain(chunks_of)).map(
            plain(gather), num_parallel_calls=tf.data.AUTOTUNE, deterministic=options.deterministic
        )
    except Exception as error:  # a preset on data that is not N x H x W x C
        if augment is None:
            raise
        spec = tf.nest.map_structure(
            lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), tensors
        )
        raise augment_error(options, spec, error) from error
    dataset = chunks.unbatch().apply(
        tf.data.experimental.assert_cardinality(full // size + (1 if remainder else 0))
    )
    no_rewrites = tf.data.Options()
    no_rewrites.experimental_optimization.apply_default_optimizations = False
    dataset = dataset.with_options(no_rewrites)
    steps = [
        "shuffle rows each epoch" if options.shuffle else "rows in order",
        f"gather batches ({size}, parallel)",
    ]
    if presets:
        steps.append(f"augment ({', '.join(presets)}, parallel)")
    return dataset, steps, presets
