"""Training data as ``model.fit()`` arguments: one adapter per kind of data, chosen by a factory.

gpu_fit() takes a tf.data dataset, arrays as ``(x, y)``, or anything else
Keras' ``fit()`` reads (a PyDataset, a generator). ``get_data_adapter``
chooses the adapter for the data in its final form (on the device, Keras'
arrays, or tf.data), once what it depends on is decided (a ``FeedContext``),
as Keras' own data adapters do (its ``keras.src.trainers.data_adapters``); the
adapter knows what ``model.fit()`` gets (``fit_args`` and ``validation``) and
what resuming needs to know: the dataset whose iterators count epochs, the
batch size, the batches per epoch. ``gpukeras.data.feed`` calls it, and the
training loops (``gpukeras.train.fit``, ``gpukeras.train.multiworker``'s own,
gpu_tune()'s trials) ask the adapter, never the kind of data.

Data order, and why a resumed run ends with the same weights. A resumed run
redoes nothing and skips nothing only if epoch e's batches come in the same
order in a fresh process as in the run that was killed:

- NumPy arrays become a gpu_dataset() pipeline (``pipeline.from_arrays``, the
  same one R data goes through) on the TensorFlow backend
  (``ArrayDatasetAdapter``). Seeded tf.data shuffling (``Dataset.random`` /
  ``shuffle`` with a seed, reshuffling every iteration) draws a new order
  each time an iterator is made on the dataset, counted from the dataset's
  creation: measured here, the k-th iterator of a fresh dataset always gives
  the same order. Keras 3.15 makes two iterators per epoch of a finite
  dataset on TensorFlow (one it drops at the epoch's end), one on JAX, and on
  JAX one more to peek at a batch while the metrics are not built. So
  ``gpukeras.train.fit`` builds the model and its metrics from the dataset's
  element spec first (``build_from_spec``, no peek), and Keras gets
  ``dataset.repeat()`` with ``steps_per_epoch``: Keras keeps one iterator for
  the whole fit (its documented way with endless data), and tf.data starts
  every epoch inside it by iterating the dataset once more. Epoch e is then
  the dataset's (e + 1)-th iteration, and before resuming at epoch e the
  adapter makes e throwaway iterators (``skip_epochs``), so the resumed
  epoch's order is the one the killed run had. (The peek mattered for more
  than order: on JAX its iterator stays alive beside training, and measured
  with TF 2.21, tf.data's in-memory cache then skipped a corrupt element
  without an error.)
- On JAX, arrays that fit on the device train there (``ResidentAdapter``,
  ``adapters/resident.py``): each epoch's order is a permutation drawn from
  (seed, epoch) (on a GPU by ``jax.random`` on the device, on the CPU by NumPy),
  so a resumed epoch has the order the killed run had. Otherwise (with or
  without TensorFlow installed) arrays go to Keras as they are
  (``ArrayAdapter``) unless this process is one of several
  (``jax_cluster``), where Keras shards only a tf.data dataset and arrays
  become the pipeline above. Keras shuffles arrays with NumPy's global
  generator when an epoch's first batch is drawn, so with a seed the
  training loop reseeds NumPy at every epoch's start from (seed, epoch).
- A tf.data dataset given directly (``TFDatasetAdapter``) is handled the same
  way when its number of batches is known; its order is only reproducible
  if its shuffling was seeded (gpu_dataset(seed = )) and it was made in the
  same way in both runs. A dataset of unknown length (a filter; a file
  source split by a hash) goes to Keras as it is: a resumed run continues at
  the right epoch and batch, but in the order its iterators happen to give.
- Other inputs (PyDataset, generators; ``KerasDataAdapter``) resume at the
  right epoch and batch, but their order is their own.

TensorFlow is never imported here: a dataset can only exist in a process
that has imported it, and arrays need it only where it is installed.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpukeras.core.errors import BadDataError
from gpukeras.core.handles import Strategy
from gpukeras.data import pipeline, weights
from gpukeras.data.adapters.arrays import ArrayAdapter
from gpukeras.data.adapters.base import (
    DEFAULT_BATCH_SIZE,
    DataAdapter,
    Decision,
    Given,
    Rows,
    StrategyPlan,
    as_arrays,
    check_batched,
    describe_dataset,
    given,
    is_tf_dataset,
    row_count,
    tensorflow_available,
)
from gpukeras.data.adapters.keras_data import KerasDataAdapter
from gpukeras.data.adapters.resident import ResidentAdapter, decide
from gpukeras.data.adapters.tf_dataset import (
    ArrayDatasetAdapter,
    TFDatasetAdapter,
    build_from_spec,
    static_batch_size,
)
from gpukeras.data.array_source import MADE
from gpukeras.data.indicators import FrameCodes, host_form

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "ArrayAdapter",
    "ArrayDatasetAdapter",
    "DataAdapter",
    "Decision",
    "FeedContext",
    "Given",
    "KerasDataAdapter",
    "ResidentAdapter",
    "Rows",
    "StrategyPlan",
    "TFDatasetAdapter",
    "as_arrays",
    "build_from_spec",
    "check_batched",
    "describe_dataset",
    "get_data_adapter",
    "given",
    "is_tf_dataset",
    "row_count",
    "static_batch_size",
    "tensorflow_available",
    "validation_args",
]


@dataclass(frozen=True)
class FeedContext:
    """What is decided before the data is built, passed down to it.

    Attributes:
        backend: the Keras backend.
        batch_size: rows per batch for rows in memory (the micro-batch with gradient
            accumulation; None: ``DEFAULT_BATCH_SIZE``); other data makes its own.
        seed: the seed of the rows' shuffling.
        class_weight: {class number: weight} for the training rows, as Keras' fit()
            takes it (``gpukeras.data.weights``), or None.
        shuffle: whether rows in memory are shuffled every epoch.
        plan: the strategy's plan, or None for one device: the data is laid out as it
            says (``DataAdapter.follow``).
        distribution: the JAX distribution the model trains under, or None.
        jit_compile: whether the model's step is XLA-compiled as it trains (rows go on
            the device only then).
        several_processes: this process trains with others (JAX's multi-process
            distribution, which shards only a tf.data dataset).
        tf_data_only: the loop reads tf.data alone (the multi-worker loop): arrays
            become a pipeline, validation arrays too, and nothing goes on the device.
    """

    backend: str
    batch_size: int | None = None
    seed: int | None = None
    class_weight: dict[int, float] | None = None
    shuffle: bool = True
    plan: StrategyPlan | None = None
    distribution: Strategy | None = None
    jit_compile: bool = False
    several_processes: bool = False
    tf_data_only: bool = False


def _arrays_in(*parts: object) -> list[object]:
    """The arrays in ``parts`` (arrays, dicts of them by input, or None)."""
    return [
        leaf
        for part in parts
        if part is not None
        for leaf in (part.values() if isinstance(part, dict) else [part])
    ]


def core_made(*parts: object) -> bool:
    """Whether every array in ``parts`` (arrays, dicts of them by input, or None) is one the
    core made from R data (``array_source.MADE``), which a pipeline may share, not copy."""
    leaves = _arrays_in(*parts)
    return bool(leaves) and all(MADE.get(id(leaf)) is leaf for leaf in leaves)


def get_data_adapter(given: Given, validation: Given, context: FeedContext) -> DataAdapter:
    """The adapter for gpu_fit()'s data in its final form, with its validation data (see the
    module's notes): rows in memory that fit on the device as a ``ResidentAdapter``
    (``decision`` says which and why), anything else as it streams.

    Args:
        given: the training data as given (``given``): a tf.data dataset, arrays as
            ``(x, y)``, ``(x, y, sample_weight)`` or ``(x,)`` (``x`` may be a dict of
            arrays), or anything else Keras' ``fit()`` takes.
        validation: the validation data as given (``given(data, training = False)``).
        context: what was decided before (``FeedContext``).

    Raises:
        BadDataError: a dataset without batches; (``tf_data_only``) data that is neither
            arrays nor a dataset.
        BadArgumentError: weights the data cannot take (``weights``), a batch the plan
            cannot split.
    """
    devices = _devices(context)
    rows, validation_rows = _rows(given, validation, context, bool(devices))
    adapter: DataAdapter
    if rows is not None and devices:
        decision = decide(
            context.backend, context.jit_compile, rows, validation_rows, devices,
            context.several_processes,
        )  # fmt: skip
    else:
        recorded = pipeline.made_here(given.data) if given.dataset else None
        from_arrays = recorded is not None and recorded.source == "arrays"
        decision = Decision(False, _streams_because(given.dataset, from_arrays, context))
    if decision.resident:
        assert rows is not None  # decided from them
        adapter = ResidentAdapter(rows, validation_rows, context.distribution, decision)
    elif given.dataset:
        size = static_batch_size(given.data)
        adapter = TFDatasetAdapter(given.data, size, class_weight=context.class_weight)
    elif rows is not None and _on_tf_data(context):
        # R data goes through the same seeded pipeline as gpu_dataset()'s, sharing the
        # arrays the core made of it (copying only arrays someone else holds)
        built = pipeline.from_arrays(
            rows.x, rows.y, sample_weight=rows.sample_weight, batch_size=rows.batch_size,
            shuffle=rows.shuffle, seed=rows.seed,
            copy=not rows.shared,
        )  # fmt: skip
        adapter = ArrayDatasetAdapter(built["dataset"], rows)
    elif rows is not None:
        adapter = ArrayAdapter(rows)
    elif context.tf_data_only:
        raise BadDataError(
            "Multi-worker training takes data as arrays (x, y) or a tf.data dataset "
            f"(gpu_dataset()), not {type(given.data).__name__}."
        )
    else:
        adapter = KerasDataAdapter(given.data, context.class_weight)
    adapter.decision = decision
    if context.plan is not None:
        adapter.follow(context.plan)
    # validation that is not rows on the device streams, in Keras' own test steps
    adapter.validation = adapter.validation or validation_args(
        validation, adapter.batch_size, context.plan, context.tf_data_only
    )
    return adapter


def _rows(
    given: Given, validation: Given, context: FeedContext, may_go_on_device: bool
) -> tuple[Rows | None, tuple | None]:
    """The training rows in memory (arrays, or where they may go on the device a gpu_dataset()
    that batches rows as they are), and the validation rows that could go with them on the
    device; None for data that streams as it is.

    A dataset's class weights are Keras' map's where it streams; rows in memory have them
    in their sample weights (``weights.row_weights``)."""
    made = pipeline.in_memory(given.data) if given.dataset and may_go_on_device else None
    held = pipeline.in_memory(validation.data) if validation.dataset and may_go_on_device else None
    if given.arrays is not None:
        x, y, sample_weight = given.arrays
        count, size, seed = given.count or 0, context.batch_size or DEFAULT_BATCH_SIZE, context.seed
        shuffle, drop_remainder = context.shuffle, False
    elif made is not None:
        x, y, sample_weight = made.arrays()
        count, size, seed = row_count(x), made.batch_size, made.seed
        shuffle, drop_remainder = made.shuffle, made.drop_remainder
    else:
        return None, None
    on_device = None
    if may_go_on_device and validation.arrays is not None:
        on_device = tuple(part for part in validation.arrays if part is not None)
    elif held is not None and held.batch_size == size:
        on_device = tuple(part for part in held.arrays() if part is not None)
    # a weight weights.row_weights() makes is the core's own too
    shared = core_made(x, y, sample_weight)
    weights_of_rows = weights.row_weights(y, sample_weight, context.class_weight, count)
    rows = Rows(x, y, count, size, seed, shuffle, drop_remainder, weights_of_rows, shared)
    return rows, on_device


def _on_tf_data(context: FeedContext) -> bool:
    """Whether rows that stream go through tf.data: it feeds TensorFlow's own graphs; on JAX,
    Keras' NumPy batches are faster, but with several processes Keras shards only a tf.data
    dataset.

    Raises:
        BadDataError: several processes on JAX without TensorFlow.
    """
    several = context.several_processes or context.tf_data_only
    if several and not tensorflow_available():
        raise BadDataError(
            "Multi-worker training on JAX reads arrays through a tf.data pipeline, which "
            "needs TensorFlow: install it (the CPU build is enough) in gpukeras' Python."
        )
    return tensorflow_available() and (context.backend == "tensorflow" or several)


def _devices(context: FeedContext) -> list[object]:
    """The JAX devices rows in memory would be put on: the distribution's, or the default
    device; none where rows cannot go on the device (another backend, tf.data alone)."""
    if context.backend != "jax" or context.tf_data_only:
        return []
    import jax

    if context.distribution is not None:
        return list(context.distribution.device_mesh.devices.flat)
    return [jax.devices()[0]]


def _streams_because(dataset: bool, from_arrays: bool, context: FeedContext) -> str:
    """Why data that is not rows on the device streams from host memory: a ``dataset``
    (``from_arrays``: a gpu_dataset() of rows in memory that maps or augments them), or
    other data."""
    if context.backend != "jax":
        return f"data streams from host memory on {context.backend}"
    if context.tf_data_only:
        return "with several processes Keras reads a sharded tf.data pipeline"
    if dataset and from_arrays:
        return (
            "this gpu_dataset() maps or augments its rows in tf.data on the host, so its "
            "batches stream from host memory"
        )
    if dataset:
        return "a tf.data dataset streams its batches from host memory"
    return "this data makes its batches on the host, so they stream from host memory"


def validation_args(
    validation: Given,
    batch_size: int | None,
    plan: StrategyPlan | None = None,
    tf_data_only: bool = False,
) -> dict[str, object]:
    """``model.fit()`` arguments for the validation data as given (``given``; not shuffled): a
    dataset sharded as the strategy's ``plan`` says; arrays as they are, or (``tf_data_only``)
    as a gpu_dataset() pipeline of them in order.

    Raises:
        BadDataError: ``tf_data_only`` and validation data that is neither.
    """
    data = validation.data
    if data is None:
        return {}
    if validation.dataset:
        return {"validation_data": data if plan is None else plan.shard(data)}
    size = batch_size or DEFAULT_BATCH_SIZE
    if validation.arrays is not None:
        parts = tuple(part for part in validation.arrays if part is not None)
        if any(isinstance(leaf, FrameCodes) for leaf in _arrays_in(*parts)):
            parts = tuple(host_form(part) for part in parts)  # Keras reads them on the host
        if not tf_data_only:
            return {"validation_data": parts, "validation_batch_size": size}
        x, y, sample_weight = validation.arrays
        made = pipeline.from_arrays(
            x, y, sample_weight=sample_weight, batch_size=size, shuffle=False
        )
        return {"validation_data": made["dataset"]}
    if tf_data_only:
        raise BadDataError(
            "Multi-worker training takes validation_data as arrays (x, y) or a tf.data "
            f"dataset (gpu_dataset()), not {type(data).__name__}."
        )
    return {"validation_data": data}
