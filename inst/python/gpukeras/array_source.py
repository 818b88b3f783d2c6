"""In-memory arrays as the start of a pipeline: one copy into tensors, batches gathered by index.

R data reaches the pipeline as NumPy arrays (reticulate's views of R's
memory); ``host_array`` makes the one copy it goes through, and the tensors
share that copy. Batches are gathered from those tensors by a shuffled index,
several at a time, as Keras does with arrays, instead of row by row.
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np

from gpukeras.augment import apply_to_features, augment_error, augmenter, chunk_presets
from gpukeras.handles import Dataset, Tensor
from gpukeras.pipeline_options import PipelineOptions, Started

# In-memory arrays are gathered several batches at a time (see gathered_batches),
# at most this many and about this many bytes per gather.
GATHER_CHUNK_BATCHES = 32
GATHER_CHUNK_BYTES = 16 * 2**20
# TensorFlow's CPU kernels assume tensor memory aligned to Eigen's widest vector
# (64 bytes with AVX-512): a tensor sharing unaligned NumPy memory aborts the
# process in its first strided slice. NumPy's own large arrays are 16-aligned.
TENSOR_ALIGNMENT = 64
# host_array() copies this many rows at a time: the temporary that NumPy makes
# when it takes chosen rows stays a few MiB; whole arrays copy as fast in blocks.
COPY_BLOCK_ROWS = 4096


def host_array(
    array: object, dtype: str | None = None, rows: np.ndarray | None = None
) -> np.ndarray:
    """One copy of ``array`` (of its ``rows`` when given) as a C-contiguous array of
    ``dtype`` (default: its own), aligned so that a tensor can share it (see ``tensor_of``).

    From R, ``array`` is reticulate's view of an R array (column-major, no copy), so
    this is the one copy R data goes through on its way into a pipeline: the cast to
    float32 and the change to row-major order happen in it together.
    """
    source = np.asarray(array)
    target = source.dtype if dtype is None else np.dtype(dtype)
    count = len(source) if rows is None else len(rows)
    shape = (count, *source.shape[1:])
    size = math.prod(shape) * target.itemsize
    buffer = np.empty(size + TENSOR_ALIGNMENT, dtype=np.uint8)
    start = -buffer.ctypes.data % TENSOR_ALIGNMENT
    copy = buffer[start : start + size].view(target).reshape(shape)
    for begin in range(0, count, COPY_BLOCK_ROWS):
        block = slice(begin, begin + COPY_BLOCK_ROWS)
        copy[block] = source[block] if rows is None else source[rows[block]]
    return copy


def _shareable(array: np.ndarray) -> bool:
    """Whether a tensor may share ``array``'s memory: C order, aligned, and writable
    (NumPy exports no read-only array through DLPack)."""
    return (
        array.flags.c_contiguous
        and array.flags.writeable
        and array.ctypes.data % TENSOR_ALIGNMENT == 0
    )


def tensor_of(
    tf: ModuleType, array: object, rows: np.ndarray | None = None, copy: bool = True
) -> object:
    """A tensor of ``array`` (of its ``rows`` when given), with at most one copy.

    ``tf.constant`` always copies a NumPy array (0.12 s for 60,000 x 784 floats
    here); a DLPack hand-over makes a tensor that shares it instead. So the array
    is copied once by ``host_array`` (a snapshot: the caller may change its own
    array later) and the tensor shares that copy; with ``copy=False`` an array
    that is already shareable is shared as it is.
    """
    source = np.asarray(array)
    if source.dtype.kind not in "biufc":  # strings: DLPack carries numbers only
        return tf.convert_to_tensor(source if rows is None else source[rows])
    if copy or rows is not None or not _shareable(source):
        source = host_array(source, rows=rows)
    return tf.experimental.dlpack.from_dlpack(source.__dlpack__())


def gather_chunk(tensors: Tensor, rows: int, batch_size: int) -> int:
    """Batches per gather: up to GATHER_CHUNK_BATCHES, within GATHER_CHUNK_BYTES."""
    row_bytes = sum(t.dtype.size * int(np.prod(t.shape[1:])) for t in tensors)
    batch_bytes = max(1, row_bytes * min(batch_size, rows))
    return max(1, min(GATHER_CHUNK_BATCHES, GATHER_CHUNK_BYTES // batch_bytes))


def gathered_batches(
    tf: ModuleType, tensors: Tensor, rows: int, options: PipelineOptions
) -> Started:
    """Batches of in-memory tensors, gathered by a shuffled index per epoch.

    Shuffling row indices and gathering whole batches is several times faster
    than shuffling and batching rows one by one (measured here: 7,100 vs 1,700
    batches/s of 256 x 20 floats on 2 cores), and it is what Keras does with
    arrays. The permutation is new every epoch and reproducible with a seed.

    The batches are gathered a chunk of several at a time (one gather of up
    to 32 batches, at most 16 MiB) and then sliced apart: tf.data's cost per
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
    order = tf.range(rows, dtype=tf.int64)
    if not options.shuffle:
        permutations = tf.data.Dataset.from_tensors(order)
    elif options.seed is None:
        permutations = tf.data.Dataset.range(1).map(lambda _: tf.random.shuffle(order))
    else:
        seed = tf.constant(options.seed, tf.int64)
        permutations = (
            tf.data.Dataset.random(seed=options.seed, rerandomize_each_iteration=True)
            .take(1)
            .map(
                lambda draw: tf.random.experimental.stateless_shuffle(order, tf.stack([draw, seed]))
            )
        )
    size = options.batch_size
    full = rows // size * size
    remainder = rows - full if not options.drop_remainder else 0
    chunk = gather_chunk(tf.nest.flatten(tensors), rows, size)

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
            return tf.nest.map_structure(lambda tensor: tf.gather(tensor, indices), tensors)
        # The chunk's rows as one batch of images for the presets, then cut back into batches.
        gathered = tf.nest.map_structure(
            lambda tensor: tf.gather(tensor, tf.reshape(indices, [-1])), tensors
        )
        gathered = on_features(*gathered) if isinstance(gathered, tuple) else on_features(gathered)
        batch_rows = tf.shape(indices)[1]
        return tf.nest.map_structure(
            lambda tensor: tf.reshape(tensor, [-1, batch_rows, *tensor.shape[1:]]), gathered
        )

    def slices(*gathered: object) -> object:
        return tf.data.Dataset.from_tensor_slices(gathered[0] if len(gathered) == 1 else gathered)

    try:
        chunks = permutations.flat_map(chunks_of).map(
            gather, num_parallel_calls=tf.data.AUTOTUNE, deterministic=options.deterministic
        )
    except Exception as error:  # a preset on data that is not N x H x W x C
        if augment is None:
            raise
        spec = tf.nest.map_structure(
            lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), tensors
        )
        raise augment_error(options, spec, error) from error
    dataset = chunks.flat_map(slices).apply(
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
