"""tf.data input pipelines from in-memory arrays and file sources, fast by default.

The order of steps follows TensorFlow's tf.data performance guide: expensive
deterministic maps (in parallel), then cache, then shuffle, then batch, then
random augmentation on whole batches (in parallel), then prefetch. Nothing in
a built pipeline calls back into R: a user map function is traced once into
the graph, on the calling thread, when the pipeline is built.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from gpukeras.core import arguments
from gpukeras.core.errors import BadArgumentError, MapFunctionError
from gpukeras.core.handles import Dataset, Record
from gpukeras.core.messages import last_line
from gpukeras.data import sources
from gpukeras.data.array_source import (
    HostArrays,
    check_values,
    gathered_batches,
    host_array,
    r_encoded,
    r_given,
    shareable,
    tensor_of,
)
from gpukeras.data.augment import (
    apply_to_features,
    augment_error,
    augmenter,
    check_presets,
)
from gpukeras.data.bad_rows import Checks, named
from gpukeras.data.batch_rules import batch_over_rows, batch_within_rows
from gpukeras.data.encoding import vocabulary
from gpukeras.data.indicators import FrameCodes, expand_inputs, is_coded, split_codes
from gpukeras.data.pipeline_facts import describe
from gpukeras.data.pipeline_options import PipelineOptions, Started
from gpukeras.gpu.devices import host_memory_mib
from gpukeras.gpu.scope import check_device

SHUFFLE_BUFFER_LIMIT = 100_000
SHUFFLE_BUFFER_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Made:
    """What gpu_dataset() made a dataset from: the facts its training advice rests on.

    Attributes:
        source: 'arrays' (in memory) or the kind of files ('csv', 'images', 'tfrecord').
        cache: the dataset's ``cache`` option (True, False or a file) as applied.
        user_map: whether the user gave a ``map`` function.
        cache_declined: why ``cache = TRUE`` was not applied (``_cache_for_source``);
            None when it was, or was not asked.
    """

    source: str
    cache: bool | str
    user_map: bool
    cache_declined: str | None = None


@dataclass(frozen=True)
class InMemory:
    """The rows in memory a gpu_dataset() batches as they are (no map, no augmentation):
    what training them on the device needs (``data.adapters.resident``).

    Attributes:
        x: the arrays (an array, or a dict of them by input name), all rows.
        y: the labels, or None.
        picked: the rows of this dataset (train or validation), None for all.
        batch_size, shuffle, seed, drop_remainder: as gpu_dataset() was given them.
        sample_weight: the rows' weights, or None.
    """

    x: object
    y: object | None
    picked: np.ndarray | None
    batch_size: int
    shuffle: bool
    seed: int | None
    drop_remainder: bool
    sample_weight: object | None = None

    def arrays(self) -> tuple[object, object | None, object | None]:
        """This dataset's rows, as NumPy arrays (a copy when it holds some of them): x, y and
        the sample weights (None where there are none)."""

        def part(array: object) -> object:
            if array is None:
                return None
            return array if self.picked is None else np.asarray(array)[self.picked]

        x = {k: part(v) for k, v in self.x.items()} if isinstance(self.x, dict) else part(self.x)
        return x, part(self.y), part(self.sample_weight)


# The datasets gpu_dataset() made, while they live (a dataset tf.data gives R
# is the same Python object when it comes back to gpu_fit()).
_MADE: weakref.WeakKeyDictionary[object, Made] = weakref.WeakKeyDictionary()
_IN_MEMORY: weakref.WeakKeyDictionary[object, InMemory] = weakref.WeakKeyDictionary()
# Their rows (train or validation part), where known before reading: arrays, image folders.
_ROWS: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()


def made_here(dataset: Dataset) -> Made | None:
    """How gpu_dataset() made ``dataset``; None for a dataset made elsewhere (tfdatasets)."""
    try:
        return _MADE.get(dataset)
    except TypeError:  # not a dataset gpu_dataset() could have made
        return None


def in_memory(dataset: Dataset) -> InMemory | None:
    """The rows a gpu_dataset() of arrays batches as they are; None for any other dataset."""
    try:
        return _IN_MEMORY.get(dataset)
    except TypeError:
        return None


def rows_in(dataset: Dataset) -> int | None:
    """The rows (elements before batching) a gpu_dataset() holds, where known; else None."""
    try:
        return _ROWS.get(dataset)
    except TypeError:
        return None


def _check(options: PipelineOptions) -> None:
    options.batch_size = arguments.count("batch_size", options.batch_size)
    if not 0 <= options.validation_split < 1:
        raise BadArgumentError(
            f"validation_split must be in [0, 1), not {options.validation_split}."
        )
    check_presets(options.augment)


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


def _split_counted(
    tf: ModuleType, indexed: Dataset, rows: int, split: float, seed: int
) -> tuple[Dataset, Dataset, tuple[int, int]]:
    """Train and validation parts of ``rows`` indexed elements, by a seeded permutation as
    arrays are split, each told its length: a dataset of unknown length makes Keras end
    every epoch with "Your input ran out of data" when validating."""
    n_validation = round(rows * split)
    if not 0 < n_validation < rows:
        raise BadArgumentError(
            f"validation_split = {split} of {rows} files leaves no training or no validation files."
        )
    in_validation = np.zeros(rows, dtype=bool)
    in_validation[np.random.default_rng(seed).permutation(rows)[:n_validation]] = True
    chosen = tf.constant(in_validation)

    def part(validation: bool, count: int) -> Dataset:
        keep = lambda index, element: tf.equal(tf.gather(chosen, index), validation)  # noqa: E731
        return indexed.filter(keep).apply(tf.data.experimental.assert_cardinality(count))

    counts = (rows - n_validation, n_validation)
    return part(False, counts[0]), part(True, counts[1]), counts


def _shuffle_buffer(tf: ModuleType, dataset: Dataset, rows: int | None) -> int:
    """All rows when they are known and few; else as many as fit in SHUFFLE_BUFFER_BYTES."""
    element = _element_bytes(tf, dataset.element_spec)
    by_memory = SHUFFLE_BUFFER_BYTES // element if element else 10_000
    return max(1, min(rows or SHUFFLE_BUFFER_LIMIT, SHUFFLE_BUFFER_LIMIT, by_memory))


def _element_steps(
    tf: ModuleType, dataset: Dataset, options: PipelineOptions, rows: int | None
) -> tuple[Dataset, list[str]]:
    """Map (in parallel), cache, shuffle and batch an unbatched dataset, in that order."""
    autotune = tf.data.AUTOTUNE
    steps: list[str] = []
    if options.map is not None:
        try:
            dataset = dataset.map(
                _traced_map(options.map),
                num_parallel_calls=autotune,
                deterministic=options.deterministic,
            )
        except Exception as error:  # the user's function failed while tf.data traced it
            raise MapFunctionError(
                f"The map function failed when tf.data traced it into a graph: "
                f"{last_line(error)}. It runs once, on symbolic tensors, "
                "so it must use TensorFlow ops (from R: tf <- reticulate::import('tensorflow'); "
                "function(x, y) list(tf$multiply(x, 2), y)) and return the new element."
            ) from error
        steps.append("map (parallel)")
    if options.cache:
        dataset = dataset.cache() if options.cache is True else dataset.cache(str(options.cache))
        steps.append("cache" if options.cache is True else f"cache ({options.cache})")
    if options.shuffle:
        buffer = _shuffle_buffer(tf, dataset, rows)
        dataset = dataset.shuffle(buffer, seed=options.seed, reshuffle_each_iteration=True)
        steps.append(f"shuffle (buffer {buffer})")
    dataset = dataset.batch(
        options.batch_size,
        drop_remainder=options.drop_remainder,
        num_parallel_calls=autotune,
        deterministic=options.deterministic,
    )
    steps.append(f"batch ({options.batch_size})")
    return dataset, steps


def build(
    tf: ModuleType,
    dataset: Dataset,
    options: PipelineOptions,
    rows: int | None,
    steps: list[str] | None = None,
    augmented: list[str] | None = None,
) -> tuple[Dataset, dict[str, object]]:
    """Apply map, cache, shuffle, batch, augment and prefetch to a dataset.

    ``steps`` names the steps already done when ``dataset`` comes batched
    (from ``array_source.gathered_batches``); then only augmentation and prefetching remain,
    of it the presets not in ``augmented``.
    """
    autotune = tf.data.AUTOTUNE
    if steps is None:
        dataset, steps = _element_steps(tf, dataset, options, rows)
    else:
        steps = list(steps)
    remaining = [name for name in options.augment or {} if name not in (augmented or [])]
    augment = augmenter(options, remaining)
    if augment is not None:
        try:
            dataset = dataset.map(
                apply_to_features(augment),
                num_parallel_calls=autotune,
                deterministic=options.deterministic,
            )
        except Exception as error:  # e.g. an image preset on data that is not N x H x W x C
            raise augment_error(options, dataset.element_spec, error) from error
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
    return dataset.with_options(_without_autotune_thread(tf)), {"steps": steps}


def _without_autotune_thread(tf: ModuleType) -> object:
    """Options that keep tf.data from starting its autotuning thread in an iterator.

    Dropping an iterator (Keras does at the end of fit()) joins that thread, which
    sleeps between optimizations for a period that doubles up to a minute. Its
    wake-up on cancellation races with the flag it then reads (TensorFlow sets
    ``is_cancelled`` only after running the cancellation callbacks), and when it
    loses, the drop waits out the rest of the period: measured with TF 2.21, fit()
    returned 1.6-8.7 s after training ended in 3 of 10 rounds with the thread, within
    0.02 s in all 10 without it (``bench/stall.py``). Without the thread, AUTOTUNE
    parallelism is one call per core and an AUTOTUNE prefetch buffer grows while its
    consumer waits: training was no slower (``bench/stall.py``, ``bench/pipeline.R``);
    the pipeline alone gave 0.91 of its batches/s in the median (rounds 0.48-1.17),
    still far more than a training step takes.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return options


def _to_device_choice(options: PipelineOptions) -> str:
    """'auto' keeps batches on the host: under Keras' eager fit(), TensorFlow's
    prefetch_to_device copies back to the CPU or does not overlap (tensorflow#30929,
    #43905), and Keras already copies each batch to the GPU inside its train step."""
    if options.to_device in ("auto", "none"):
        return "none"
    return check_device(options.to_device)


def from_arrays(
    x: object,
    y: object | None = None,
    copy: bool = True,
    x_dtype: str | None = None,
    y_dtype: str | None = None,
    check_missing: Checks = False,
    sample_weight: object | None = None,
    encoding: Record | None = None,
    **options: object,
) -> dict[str, object]:
    """A pipeline over in-memory arrays (NumPy, or a dict of them for multi-input models).

    ``encoding``: how R data became these arrays (the plain form, ``encoding.data_encoding``);
    its factors' levels are the info's ``vocabulary``.

    With ``sample_weight`` (one number per row; it needs labels), each element is
    ``(x, y, sample_weight)``, as Keras' fit() reads weighted data, and a ``map``
    function gets all three.

    Rows are split into train and validation by a seeded permutation, so the two
    never overlap; validation data is neither shuffled nor augmented.

    Features become ``x_dtype`` and labels ``y_dtype`` (default: their own; R's as
    ``array_source.r_labels_dtype`` says). The
    pipeline's tensors hold one copy of the arrays, made in that dtype (from R:
    reticulate's views of R's memory, cast and reordered in the one copy). With
    ``copy=False`` they share an array already in its dtype instead where they can
    (one ``array_source.host_array`` made), which must then never change. With
    ``check_missing`` (True, or R's names of the columns and advice), data holding NA is
    the classed error ``bad_rows.named`` raises, as is any holding an infinity,
    raised before TensorFlow is imported: bad data leaves the runtime unstarted; with
    ``"na": "drop"`` in it, the rows holding NA are dropped first (``bad_rows.dropped``),
    the info's ``dropped_rows`` counting them.

    Returns:
        ``dataset`` (train), ``validation`` (None without a split), ``info`` and
        ``validation_info`` (plain data: rows, steps of the pipeline, element spec
        as text), and ``arrays``: the whole data in the pipeline's dtypes
        (``array_source.HostArrays``; the arrays a background fit carries).
    """
    opts = PipelineOptions(**options)  # type: ignore[arg-type]
    _check(opts)
    # In-memory rows need no cache unless a map computes something worth keeping.
    opts.cache = opts.cache if opts.map is not None else False
    # R's na = "drop": the rows with NA left out first; a matrix's columns in training's order
    # (``array_source.r_given``). A data.frame R handed over as its columns becomes its number
    # columns and one-hot factors' codes here, once (factor labels their codes).
    given = r_given(x, y, sample_weight, y_dtype, check_missing)
    x, y, sample_weight = (
        r_encoded(given.x, codes=True),
        r_encoded(given.parts["y"]),
        given.parts["sample_weight"],
    )
    y_dtype = given.y_dtype
    features = x if isinstance(x, dict) else {"": x}
    # a data.frame's one-hot factors as codes (gpu_fit()'s): they travel as they are, their
    # indicator columns made as each chunk of batches is gathered (``indicators.expand_inputs``),
    # unless a map or a preset reads the model's columns: then made here, once
    coded = is_coded(x)
    if coded and (opts.map is not None or opts.augment or x_dtype not in (None, "float32")):
        features, coded = {name: np.asarray(part) for name, part in features.items()}, False
    rows = {name: len(array) for name, array in features.items()}  # type: ignore[arg-type]
    if y is not None:
        rows["y"] = len(y)  # type: ignore[arg-type]
    if sample_weight is not None:
        if y is None:
            raise BadArgumentError("Sample weights weigh each row's loss: give labels too.")
        rows["sample_weight"] = len(sample_weight)  # type: ignore[arg-type]
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
    split = n_validation > 0

    def whole(array: object, dtype: str | None) -> np.ndarray:
        # A split copies each part's rows anyway: the caller's array serves as it is
        # when it has the dtype; without a split only copy=False lets it be shared.
        source = np.asarray(array)
        if source.dtype.kind not in "biufc" or (
            source.dtype == np.dtype(dtype or source.dtype)
            and (split or (not copy and shareable(source)))
        ):
            check_values(source, bool(check_missing))
            return source
        return host_array(source, dtype, check_missing=bool(check_missing))

    def features_of(array: object) -> np.ndarray | FrameCodes:
        # a data.frame's codes (gpu_fit()'s) serve as they are: the core made them
        if not isinstance(array, FrameCodes):
            return whole(array, x_dtype)
        check_values(array, bool(check_missing))
        return array

    with named(given.parts, check_missing):
        data_x = {name: features_of(array) for name, array in features.items()}
        data_y = whole(y, y_dtype) if y is not None else None
        data_w = whole(sample_weight, "float32") if sample_weight is not None else None
    tf = sources.tensorflow()
    opts.to_device = _to_device_choice(opts)
    kept_x, expansion = split_codes(data_x) if coded else (data_x, None)
    single = "" in data_x

    def subset(index: np.ndarray | None) -> object:
        picked = None if index is None else np.sort(index)

        def part(array: np.ndarray) -> object:
            return tensor_of(tf, array, picked)

        tensors = tf.nest.map_structure(part, kept_x)
        part_x = tensors.get("", tensors)
        if data_y is None:
            return part_x
        return (part_x, part(data_y), *((part(data_w),) if data_w is not None else ()))

    def expanded(element: object) -> object:
        """A gathered element with its features the model's columns."""
        x = element[0] if data_y is not None else element  # type: ignore[index]
        named = expand_inputs({"": x} if single else x, expansion, tf.experimental.numpy)
        x = named[""] if single else named
        return (x, *element[1:]) if data_y is not None else x  # type: ignore[index]

    def start(data: object, options: PipelineOptions, rows: int | None) -> Started:
        # Without a per-row map, gather whole batches by index; with one, go row by row.
        if options.map is None:
            assert rows is not None  # arrays know their rows
            finish = expanded if expansion is not None else None
            return gathered_batches(tf, data, rows, options, finish)
        return tf.data.Dataset.from_tensor_slices(data), None, []

    built = _pipelines(
        tf,
        subset(order[n_validation:] if split else None),
        subset(order[:n_validation]) if split else None,
        opts,
        {
            "source": "arrays",
            "rows": count - n_validation,
            "validation_rows": n_validation,
            "dropped_rows": 0 if given.kept is None else given.rows - len(given.kept),
            **({"vocabulary": vocabulary(encoding)} if encoding is not None else {}),
        },
        start,
    )
    if opts.map is None and not opts.augment:
        for name, picked, shuffled in (
            ("dataset", order[n_validation:] if split else None, opts.shuffle),
            ("validation", order[:n_validation] if split else None, False),
        ):
            if built[name] is not None:
                _IN_MEMORY[built[name]] = InMemory(
                    data_x.get("", data_x),
                    data_y,
                    None if picked is None else np.sort(picked),
                    opts.batch_size,
                    shuffled,
                    opts.seed,
                    opts.drop_remainder,
                    data_w,
                )
    return {**built, "arrays": HostArrays(data_x.get("", data_x), data_y, data_w)}


def _count(value: object) -> int | None:
    """A row count from a source's info (None where it is not known)."""
    return None if value is None else int(value)  # type: ignore[call-overload]


def _pipelines(
    tf: ModuleType,
    train: object,
    validation: object | None,
    opts: PipelineOptions,
    info: Record,
    start: Callable[[object, PipelineOptions, int | None], Started],
) -> dict[str, object]:
    """Build the train pipeline, and the validation one without shuffling or random augmentation.

    ``start`` turns ``train`` / ``validation`` into a dataset (see ``Started``).
    """

    def pipeline(part: object, options: PipelineOptions, rows: int | None) -> tuple[object, dict]:
        dataset, done, augmented = start(part, options, rows)
        return build(tf, dataset, options, rows, done, augmented)

    # The source's warnings come first (an image folder's class folders without images).
    # A batch larger than the training rows is the rows (tf.data and Keras' fit() on arrays
    # make one partial batch of them): said so. Only drop_remainder needs the size changed,
    # else it would drop that batch and leave epochs empty; elsewhere the pipeline (and its
    # batch shape, unknown as for any partial batch) stays as it was.
    warnings: list[Record] = list(info.pop("warnings", []))
    rows = _count(info.get("rows"))
    if rows is not None and opts.batch_size > rows:
        noun = "images" if info.get("source") == "image_folder" else "rows"
        message = batch_over_rows(opts.batch_size, rows, _count(info.get("validation_rows")), noun)
        warnings.append({"class": "batch_size", "message": message})
        if opts.drop_remainder:
            opts.batch_size = batch_within_rows(opts.batch_size, rows)
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
    declined = info.get("cache_declined")
    made = Made(
        str(info.get("source")),
        opts.cache,
        opts.map is not None,
        str(declined) if declined else None,
    )
    for built, counted in (
        (dataset, rows),
        (validation, _count(info.get("validation_rows"))),
    ):
        if built is not None:
            _MADE[built] = made
            if counted is not None:
                _ROWS[built] = counted
    info = {**info, "to_device": opts.to_device}
    return {
        "dataset": dataset,
        "validation": validation,
        "info": describe(dataset, {**info, **steps}),
        "validation_info": describe(
            validation,
            {**info, **validation_steps, "rows": info.get("validation_rows")},
        )
        if validation is not None
        else None,
        "warnings": warnings,
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
    tf: ModuleType, dataset: Dataset, rows: int | None, opts: PipelineOptions
) -> tuple[bool | str, str | None]:
    """cache = TRUE on a file source caches in memory only when it surely fits: the cache
    option to apply, and why ``cache = TRUE`` was not applied (None when it was).

    Files are streamed because they may be larger than memory: an in-memory cache
    is used when the decoded data is known to take under a quarter of the free
    host memory; a cache file (a path) is always honoured.
    """
    if opts.cache is not True:
        return opts.cache, None
    element = _element_bytes(tf, dataset.element_spec)
    available = host_memory_mib()[1]
    if rows is None or element is None:
        why = "the decoded size is not known before reading (TFRecord rows are not counted)"
        return False, why
    if available is None:
        return False, "the free host memory is not known here"
    needed = rows * element / 2**20
    if needed < available / 4:
        return True, None
    return False, (
        f"the decoded data (about {needed:,.0f} MiB) would take more than a quarter of the "
        f"free host memory ({available:,.0f} MiB)"
    )


def from_source(kind: str, source: dict[str, object], **options: object) -> dict[str, object]:
    """A pipeline streaming files: kind 'csv', 'image_folder', 'image_files' (unlabelled) or
    'tfrecord'.

    ``source`` holds the arguments of the matching ``sources`` function. With
    ``validation_split``, files counted up front (an image folder) are split by
    a seeded permutation of their positions, as arrays are, and both parts
    know their length; elements of a streamed source (CSV, TFRecord) go to
    train or validation by a seeded hash of their position. Either way the
    parts are disjoint and the same every epoch, and no buffer is needed.
    """
    tf = sources.tensorflow()
    opts = PipelineOptions(**options)  # type: ignore[arg-type]
    _check(opts)
    opts.to_device = _to_device_choice(opts)
    makers: dict[str, Callable[..., sources.Source]] = {
        "csv": sources.csv_source,
        "image_folder": sources.image_folder_source,
        "image_files": sources.image_files_source,
        "tfrecord": sources.tfrecord_source,
    }
    if kind not in makers:
        raise BadArgumentError(f"Unknown file source '{kind}'. Sources: {', '.join(makers)}.")
    found = makers[kind](**source)
    rows = found.info.get("rows")
    opts.cache, declined = _cache_for_source(tf, found.dataset, rows, opts)
    info = {"source": kind, **found.info}
    if declined:
        info["cache_declined"] = (
            f"cache = TRUE not applied: {declined}; a cache file keeps them "
            '(gpu_dataset(cache = "a/path/on/a/local/disk"))'
        )
    train, validation = found.dataset, None
    if opts.validation_split:
        seed = opts.seed or 0
        indexed = found.dataset.enumerate()
        drop_index = lambda index, element: element  # noqa: E731
        if rows is None:  # read as it streams: a seeded draw per element decides
            train = indexed.filter(_validation_filter(tf, opts.validation_split, seed, False))
            validation = indexed.filter(_validation_filter(tf, opts.validation_split, seed, True))
            info.update(rows=None, validation_rows=None)
        else:  # counted up front (an image folder): both parts know their length
            train, validation, counts = _split_counted(
                tf,
                indexed,
                int(rows),
                opts.validation_split,
                seed,
            )
            info.update(rows=counts[0], validation_rows=counts[1])
        train, validation = train.map(drop_index), validation.map(drop_index)
    return _pipelines(
        tf, train, validation, opts, info, lambda dataset, _o, _r: (dataset, None, [])
    )
