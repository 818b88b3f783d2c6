"""tf.data input pipelines from in-memory arrays and file sources, fast by default.

The order of steps follows TensorFlow's tf.data performance guide: expensive
deterministic maps (in parallel), then cache, then shuffle, then batch, then
random augmentation on whole batches (in parallel), then prefetch. Nothing in
a built pipeline calls back into R: a user map function is traced once into
the graph, on the calling thread, when the pipeline is built.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from gpukeras.errors import BadArgumentError, BadDataError, MapFunctionError
from gpukeras.scope import check_device
from gpukeras.sources import tensorflow

# Presets of random augmentation: Keras preprocessing layers, which run inside
# tf.data whatever the Keras backend. Values are (layer name, default arguments).
AUGMENT_PRESETS: dict[str, tuple[str, dict[str, object]]] = {
    "flip_horizontal": ("RandomFlip", {"mode": "horizontal"}),
    "flip_vertical": ("RandomFlip", {"mode": "vertical"}),
    "brightness": ("RandomBrightness", {"factor": 0.2}),
    "contrast": ("RandomContrast", {"factor": 0.2}),
    "crop": ("RandomCrop", {}),
    "rotation": ("RandomRotation", {"factor": 0.1}),
}
# Deterministic stand-ins for validation data, for presets that change the shape.
INFERENCE_PRESETS = {"crop": "CenterCrop"}
# Presets whose layers draw their randomness image by image, so running them on
# many batches at once is the same as batch by batch (RandomCrop draws one
# window per call: it stays per batch).
PER_IMAGE_PRESETS = frozenset(
    {"flip_horizontal", "flip_vertical", "brightness", "contrast", "rotation"}
)
SHUFFLE_BUFFER_LIMIT = 100_000
SHUFFLE_BUFFER_BYTES = 256 * 2**20
# In-memory arrays are gathered several batches at a time (see _gathered_batches),
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


@dataclass
class PipelineOptions:
    """How gpu_dataset() turns a source into batches; see ``build`` for each step."""

    batch_size: int = 32
    shuffle: bool = True
    seed: int | None = None
    cache: bool | str = True
    map: Callable | None = None
    augment: dict[str, dict[str, object]] | None = None
    validation_split: float = 0.0
    drop_remainder: bool = False
    deterministic: bool | None = None
    prefetch: str | int = "auto"
    to_device: str = "auto"
    training: bool = True


@dataclass(frozen=True)
class Made:
    """What gpu_dataset() made a dataset from: the facts its training advice rests on.

    Attributes:
        source: 'arrays' (in memory) or the kind of files ('csv', 'images', 'tfrecord').
        cache: the dataset's ``cache`` option (True, False or a file).
        user_map: whether the user gave a ``map`` function.
    """

    source: str
    cache: bool | str
    user_map: bool


# The datasets gpu_dataset() made, while they live (a dataset tf.data gives R
# is the same Python object when it comes back to gpu_fit()).
_MADE: weakref.WeakKeyDictionary[object, Made] = weakref.WeakKeyDictionary()


def made_here(dataset: object) -> Made | None:
    """How gpu_dataset() made ``dataset``; None for a dataset made elsewhere (tfdatasets)."""
    try:
        return _MADE.get(dataset)
    except TypeError:  # not a dataset gpu_dataset() could have made
        return None


# How a source starts a pipeline: the dataset, the steps it did when it comes
# batched already (None when not), and the augment presets it ran.
Started = tuple[object, "list[str] | None", "list[str]"]


def _check(options: PipelineOptions) -> None:
    if not isinstance(options.batch_size, int) or options.batch_size < 1:
        raise BadArgumentError(f"batch_size must be a whole number >= 1, not {options.batch_size}.")
    if not 0 <= options.validation_split < 1:
        raise BadArgumentError(
            f"validation_split must be in [0, 1), not {options.validation_split}."
        )
    unknown = sorted(set(options.augment or {}) - set(AUGMENT_PRESETS))
    if unknown:
        raise BadArgumentError(
            f"Unknown augment preset(s): {', '.join(unknown)}. "
            f"Presets: {', '.join(AUGMENT_PRESETS)}."
        )


def _augmenter(options: PipelineOptions, names: list[str] | None = None) -> Callable | None:
    """One function applying the asked-for presets (or those in ``names``) to a batch of images.

    Outside training (validation data) only the presets that change the shape
    run, in a deterministic form (a random crop becomes a centre crop), so
    validation batches fit the same model. A preset's seed is ``seed`` plus its
    position among all the presets asked for.
    """
    from gpukeras.runtime import config

    keras = config.keras()
    layers = []
    for position, (name, arguments) in enumerate((options.augment or {}).items()):
        if names is not None and name not in names:
            continue
        if options.training:
            layer_name, defaults = AUGMENT_PRESETS[name]
            defaults = {
                **defaults,
                "seed": None if options.seed is None else options.seed + position,
            }
        elif name in INFERENCE_PRESETS:
            layer_name, defaults = INFERENCE_PRESETS[name], {}
        else:
            continue
        try:
            layers.append(getattr(keras.layers, layer_name)(**{**defaults, **(arguments or {})}))
        except (TypeError, ValueError) as error:
            raise BadArgumentError(
                f"augment preset '{name}' ({layer_name}) rejected its parameters: {error}"
            ) from error
    if not layers:
        return None

    def augment(images: object) -> object:
        for layer in layers:
            images = layer(images, training=options.training)
        return images

    return augment


def _augment_error(options: PipelineOptions, spec: object, error: Exception) -> BadArgumentError:
    """An augment preset could not be traced on these elements (e.g. not N x H x W x C)."""
    return BadArgumentError(
        f"augment ({', '.join(options.augment or {})}) cannot run on elements "
        f"{spec}: {_last_line(error)}. The presets work on image batches, N x H x W x C."
    )


def _chunk_presets(options: PipelineOptions) -> list[str]:
    """The leading per-image presets, which may run on a whole gathered chunk; in order."""
    if not options.training:
        return []
    names = list(options.augment or {})
    cut = next((i for i, name in enumerate(names) if name not in PER_IMAGE_PRESETS), len(names))
    return names[:cut]


def _apply_to_features(function: Callable) -> Callable:
    """Lift a function of the features to elements that may carry a label."""

    def on_element(*element: object) -> object:
        if len(element) == 1:
            return function(element[0])
        return (function(element[0]), *element[1:])

    return on_element


def _last_line(error: Exception) -> str:
    """The last line of an error message: TensorFlow puts the cause there, after its trace."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _traced_map(function: Callable) -> Callable:
    """A user map (Python, or R through reticulate) returning a tuple tf.data accepts."""

    def mapped(*element: object) -> object:
        out = function(*element)
        return tuple(out) if isinstance(out, list) else out

    return mapped


def _validation_filter(tf: ModuleType, split: float, seed: int, validation: bool) -> Callable:
    """Assign each element, by its index, to train or validation, reproducibly and disjointly."""

    def keep(index: object, element: object) -> object:
        draw = tf.random.stateless_uniform([], seed=tf.stack([tf.cast(index, tf.int32), seed]))
        return draw < split if validation else draw >= split

    return keep


def _shuffle_buffer(tf: ModuleType, dataset: object, rows: int | None) -> int:
    """All rows when they are known and few; else as many as fit in SHUFFLE_BUFFER_BYTES."""
    element = _element_bytes(tf, dataset.element_spec)  # type: ignore[attr-defined]
    by_memory = SHUFFLE_BUFFER_BYTES // element if element else 10_000
    return max(1, min(rows or SHUFFLE_BUFFER_LIMIT, SHUFFLE_BUFFER_LIMIT, by_memory))


def _element_steps(
    tf: ModuleType, dataset: object, options: PipelineOptions, rows: int | None
) -> tuple[object, list[str]]:
    """Map (in parallel), cache, shuffle and batch an unbatched dataset, in that order."""
    autotune = tf.data.AUTOTUNE
    steps: list[str] = []
    if options.map is not None:
        try:
            dataset = dataset.map(  # type: ignore[attr-defined]
                _traced_map(options.map),
                num_parallel_calls=autotune,
                deterministic=options.deterministic,
            )
        except Exception as error:  # the user's function failed while tf.data traced it
            raise MapFunctionError(
                f"The map function failed when tf.data traced it into a graph: "
                f"{_last_line(error)}. It runs once, on symbolic tensors, "
                "so it must use TensorFlow ops (from R: tf <- reticulate::import('tensorflow'); "
                "function(x, y) list(tf$multiply(x, 2), y)) and return the new element."
            ) from error
        steps.append("map (parallel)")
    if options.cache:
        dataset = dataset.cache() if options.cache is True else dataset.cache(str(options.cache))  # type: ignore[attr-defined]
        steps.append("cache" if options.cache is True else f"cache ({options.cache})")
    if options.shuffle:
        buffer = _shuffle_buffer(tf, dataset, rows)
        dataset = dataset.shuffle(buffer, seed=options.seed, reshuffle_each_iteration=True)  # type: ignore[attr-defined]
        steps.append(f"shuffle (buffer {buffer})")
    dataset = dataset.batch(  # type: ignore[attr-defined]
        options.batch_size,
        drop_remainder=options.drop_remainder,
        num_parallel_calls=autotune,
        deterministic=options.deterministic,
    )
    steps.append(f"batch ({options.batch_size})")
    return dataset, steps


def host_array(
    array: object, dtype: str | None = None, rows: np.ndarray | None = None
) -> np.ndarray:
    """One copy of ``array`` (of its ``rows`` when given) as a C-contiguous array of
    ``dtype`` (default: its own), aligned so that a tensor can share it (see ``_tensor``).

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


def _tensor(
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


def _gather_chunk(tensors: object, rows: int, batch_size: int) -> int:
    """Batches per gather: up to GATHER_CHUNK_BATCHES, within GATHER_CHUNK_BYTES."""
    row_bytes = sum(t.dtype.size * int(np.prod(t.shape[1:])) for t in tensors)
    batch_bytes = max(1, row_bytes * min(batch_size, rows))
    return max(1, min(GATHER_CHUNK_BATCHES, GATHER_CHUNK_BYTES // batch_bytes))


def _gathered_batches(
    tf: ModuleType, tensors: object, rows: int, options: PipelineOptions
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
    chunk = _gather_chunk(tf.nest.flatten(tensors), rows, size)

    def chunks_of(permutation: object) -> object:
        # A reshape cuts all full batches at once, faster than batching index by index.
        batched = tf.data.Dataset.from_tensor_slices(tf.reshape(permutation[:full], [-1, size]))
        chunks = batched.batch(chunk)
        if remainder:
            chunks = chunks.concatenate(tf.data.Dataset.from_tensors(permutation[None, full:]))
        return chunks

    presets = _chunk_presets(options)
    augment = _augmenter(options, presets) if presets else None
    on_features = _apply_to_features(augment) if augment is not None else None

    def gather(indices: object) -> object:
        if on_features is None:
            return tf.nest.map_structure(lambda tensor: tf.gather(tensor, indices), tensors)
        # The chunk's rows as one batch of images for the presets, then cut back into batches.
        gathered = tf.nest.map_structure(
            lambda tensor: tf.gather(tensor, tf.reshape(indices, [-1])), tensors
        )
        gathered = on_features(*gathered) if isinstance(gathered, tuple) else on_features(gathered)
        batch_rows = tf.shape(indices)[1]  # type: ignore[index]
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
        raise _augment_error(options, spec, error) from error
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


def build(
    tf: ModuleType,
    dataset: object,
    options: PipelineOptions,
    rows: int | None,
    steps: list[str] | None = None,
    augmented: list[str] | None = None,
) -> tuple[object, dict[str, object]]:
    """Apply map, cache, shuffle, batch, augment and prefetch to a dataset.

    ``steps`` names the steps already done when ``dataset`` comes batched
    (from ``_gathered_batches``); then only augmentation and prefetching remain,
    of it the presets not in ``augmented``.
    """
    autotune = tf.data.AUTOTUNE
    if steps is None:
        dataset, steps = _element_steps(tf, dataset, options, rows)
    else:
        steps = list(steps)
    remaining = [name for name in options.augment or {} if name not in (augmented or [])]
    augment = _augmenter(options, remaining)
    if augment is not None:
        try:
            dataset = dataset.map(
                _apply_to_features(augment),
                num_parallel_calls=autotune,
                deterministic=options.deterministic,
            )
        except Exception as error:  # e.g. an image preset on data that is not N x H x W x C
            raise _augment_error(options, dataset.element_spec, error) from error
        if options.training:
            steps.append(f"augment ({', '.join(remaining)}, parallel)")
        else:
            steps.append("centre crop")
    if options.prefetch not in (0, "none"):
        buffer = autotune if options.prefetch == "auto" else int(options.prefetch)
        dataset = dataset.prefetch(buffer)
        steps.append(f"prefetch ({'autotune' if options.prefetch == 'auto' else buffer})")
    if options.to_device not in ("auto", "none"):
        dataset = dataset.apply(tf.data.experimental.prefetch_to_device(f"/{options.to_device}"))
        steps.append(f"prefetch to {options.to_device}")
    return dataset, {"steps": steps}


def _to_device_choice(options: PipelineOptions) -> str:
    """'auto' keeps batches on the host: under Keras' eager fit(), TensorFlow's
    prefetch_to_device copies back to the CPU or does not overlap (tensorflow#30929,
    #43905), and Keras already copies each batch to the GPU inside its train step."""
    if options.to_device in ("auto", "none"):
        return "none"
    return check_device(options.to_device)


def from_arrays(
    x: object, y: object | None = None, copy: bool = True, **options: object
) -> dict[str, object]:
    """A pipeline over in-memory arrays (NumPy, or a dict of them for multi-input models).

    Rows are split into train and validation by a seeded permutation, so the two
    never overlap; validation data is neither shuffled nor augmented.

    The pipeline's tensors hold one copy of the arrays. With ``copy=False`` they
    share the arrays' memory instead where they can (arrays made by
    ``host_array``), which must then never change: gpu_dataset() passes arrays
    made for the pipeline alone.

    Returns:
        ``dataset`` (train), ``validation`` (None without a split), and
        ``info`` and ``validation_info`` (plain data: rows, steps of the
        pipeline, element spec as text).
    """
    tf = tensorflow()
    opts = PipelineOptions(**options)  # type: ignore[arg-type]
    _check(opts)
    opts.to_device = _to_device_choice(opts)
    # In-memory rows need no cache unless a map computes something worth keeping.
    opts.cache = opts.cache if opts.map is not None else False
    features = x if isinstance(x, dict) else {"": x}
    rows = {name: len(array) for name, array in features.items()}  # type: ignore[arg-type]
    if y is not None:
        rows["y"] = len(y)  # type: ignore[arg-type]
    if len(set(rows.values())) != 1:
        counts = ", ".join(f"{name or 'x'} has {count}" for name, count in rows.items())
        raise BadArgumentError(f"x and y must have the same number of rows: {counts}.")
    count = next(iter(rows.values()))
    if count == 0:
        raise BadArgumentError("The data has no rows.")
    order = np.random.default_rng(opts.seed).permutation(count)
    n_validation = round(count * opts.validation_split)
    if opts.validation_split and not 0 < n_validation < count:
        raise BadArgumentError(
            f"validation_split = {opts.validation_split} of {count} rows leaves no "
            "training or no validation rows."
        )

    def subset(index: np.ndarray | None) -> object:
        picked = None if index is None else np.sort(index)
        part = {name: _tensor(tf, array, picked, copy) for name, array in features.items()}
        part_x = part.get("", part)
        if y is None:
            return part_x
        return (part_x, _tensor(tf, y, picked, copy))

    def start(data: object, options: PipelineOptions, rows: int) -> Started:
        # Without a per-row map, gather whole batches by index; with one, go row by row.
        if options.map is None:
            return _gathered_batches(tf, data, rows, options)
        return tf.data.Dataset.from_tensor_slices(data), None, []

    train_index = order[n_validation:] if n_validation else None
    return _pipelines(
        tf,
        subset(train_index),
        subset(order[:n_validation]) if n_validation else None,
        opts,
        {"source": "arrays", "rows": count - n_validation, "validation_rows": n_validation},
        start,
    )


def _pipelines(
    tf: ModuleType,
    train: object,
    validation: object | None,
    opts: PipelineOptions,
    info: dict[str, object],
    start: Callable[[object, PipelineOptions, int | None], Started],
) -> dict[str, object]:
    """Build the train pipeline, and the validation one without shuffling or random augmentation.

    ``start`` turns ``train`` / ``validation`` into a dataset (see ``Started``).
    """

    def pipeline(part: object, options: PipelineOptions, rows: object) -> tuple[object, dict]:
        dataset, done, augmented = start(part, options, rows)  # type: ignore[arg-type]
        return build(tf, dataset, options, rows, done, augmented)  # type: ignore[arg-type]

    dataset, steps = pipeline(train, opts, info.get("rows"))
    if validation is not None:
        plain = PipelineOptions(
            batch_size=opts.batch_size,
            shuffle=False,
            cache=opts.cache,
            map=opts.map,
            augment=opts.augment,
            prefetch=opts.prefetch,
            to_device=opts.to_device,
            training=False,
        )
        validation, validation_steps = pipeline(validation, plain, info.get("validation_rows"))
    made = Made(str(info.get("source")), opts.cache, opts.map is not None)
    for built in (dataset, validation):
        if built is not None:
            _MADE[built] = made
    info = {**info, "to_device": opts.to_device}
    return {
        "dataset": dataset,
        "validation": validation,
        "info": describe(dataset, {**info, **steps}),
        "validation_info": describe(
            validation, {**info, **validation_steps, "rows": info.get("validation_rows")}
        )
        if validation is not None
        else None,
    }


def _element_bytes(tf: ModuleType, spec: object) -> int | None:
    """Bytes of one element when every shape is known, else None."""
    total = 0
    for part in tf.nest.flatten(spec):
        if not part.shape.is_fully_defined() or part.dtype == tf.string:
            return None
        total += part.shape.num_elements() * part.dtype.size
    return total


def _cache_for_source(
    tf: ModuleType, dataset: object, rows: int | None, opts: PipelineOptions
) -> bool | str:
    """cache = TRUE on a file source caches in memory only when it surely fits.

    Files are streamed because they may be larger than memory: an in-memory cache
    is used when the decoded data is known to take under a quarter of the free
    host memory; a cache file (a path) is always honoured.
    """
    if opts.cache is not True:
        return opts.cache
    from gpukeras.devices import host_memory_mib

    element = _element_bytes(tf, dataset.element_spec)  # type: ignore[attr-defined]
    available = host_memory_mib()[1]
    if rows is None or element is None or available is None:
        return False
    return rows * element / 2**20 < available / 4


def from_source(kind: str, source: dict[str, object], **options: object) -> dict[str, object]:
    """A pipeline streaming files: kind 'csv', 'image_folder' or 'tfrecord'.

    ``source`` holds the arguments of the matching ``sources`` function. With
    ``validation_split``, each element goes to train or validation by a seeded
    hash of its position: disjoint, the same every epoch, no buffer needed.
    """
    from gpukeras import sources

    tf = tensorflow()
    opts = PipelineOptions(**options)  # type: ignore[arg-type]
    _check(opts)
    opts.to_device = _to_device_choice(opts)
    makers = {
        "csv": sources.csv_source,
        "image_folder": sources.image_folder_source,
        "tfrecord": sources.tfrecord_source,
    }
    if kind not in makers:
        raise BadArgumentError(f"Unknown file source '{kind}'. Sources: {', '.join(makers)}.")
    found = makers[kind](**source)
    rows = found.info.get("rows")
    opts.cache = _cache_for_source(tf, found.dataset, rows, opts)  # type: ignore[arg-type]
    info = {"source": kind, **found.info}
    train, validation = found.dataset, None
    if opts.validation_split:
        seed = opts.seed or 0
        indexed = found.dataset.enumerate()
        drop_index = lambda index, element: element  # noqa: E731
        train = indexed.filter(_validation_filter(tf, opts.validation_split, seed, False))
        validation = indexed.filter(_validation_filter(tf, opts.validation_split, seed, True))
        train, validation = train.map(drop_index), validation.map(drop_index)
        info.update(rows=None, validation_rows=None)
    return _pipelines(
        tf, train, validation, opts, info, lambda dataset, _o, _r: (dataset, None, [])
    )


def describe(dataset: object, info: dict[str, object] | None = None) -> dict[str, object]:
    """Plain facts about a dataset for printing: element spec, cardinality, and ``info``."""
    tf = tensorflow()
    cardinality = int(dataset.cardinality())  # type: ignore[attr-defined]
    known = cardinality >= 0
    return {
        **(info or {}),
        "element_spec": str(dataset.element_spec),  # type: ignore[attr-defined]
        "batches": cardinality if known else None,
        "cardinality": "infinite"
        if cardinality == tf.data.INFINITE_CARDINALITY
        else ("unknown" if not known else str(cardinality)),
    }


def benchmark(dataset: object, steps: int = 100, warmup: int = 5) -> dict[str, object]:
    """Batches/s and elements/s of the pipeline alone, no model.

    The first ``warmup`` batches (filling caches and buffers) are not timed.
    """
    tf = tensorflow()
    if not isinstance(dataset, tf.data.Dataset):
        raise BadArgumentError(
            f"dataset must be a gpu_dataset() or a tf.data.Dataset, not a {type(dataset).__name__}."
        )
    if steps < 1:
        raise BadArgumentError(f"steps must be >= 1, not {steps}.")
    iterator = iter(dataset.repeat())  # type: ignore[attr-defined]
    taken = 0
    try:
        for _ in range(warmup):
            next(iterator)
            taken += 1
        elements = 0
        started = time.perf_counter()
        for _ in range(steps):
            batch = next(iterator)
            taken += 1
            first = tf.nest.flatten(batch)[0]
            elements += int(first.shape[0]) if first.shape.rank else 1
        seconds = time.perf_counter() - started
    except tf.errors.OpError as error:
        from gpukeras.failures import unreadable_batch

        unreadable = unreadable_batch(error)
        if unreadable is None:
            raise
        raise BadDataError(f"The benchmark stopped at batch {taken + 1}: {unreadable}") from error
    return {
        "steps": steps,
        "seconds": seconds,
        "batches_per_second": steps / seconds,
        "elements_per_second": elements / seconds,
    }
