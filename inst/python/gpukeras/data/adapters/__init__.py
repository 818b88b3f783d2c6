"""Training data as ``model.fit()`` arguments: one adapter per kind of data, chosen by a factory.

gpu_fit() takes a tf.data dataset, arrays as ``(x, y)``, or anything else
Keras' ``fit()`` reads (a PyDataset, a generator). ``get_data_adapter``
chooses the adapter for the data, as Keras' own data adapters do (its
``keras.src.trainers.data_adapters``), and the adapter knows what
``model.fit()`` gets (``fit_args``) and what resuming
needs to know: the dataset whose iterators count epochs, the batch size, the
batches per epoch. The training loops (``gpukeras.train.fit``, and
``gpukeras.train.multiworker``'s own) ask the adapter, never the kind of data.

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
  ``adapters/resident.py``): each epoch's order is a permutation drawn on the
  device from (seed, epoch), so a resumed epoch has the order the killed run
  had. Otherwise (with or without TensorFlow installed) arrays go to Keras as
  they are (``ArrayAdapter``) unless this process is one of several
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

from gpukeras.core.backend import configured_backend
from gpukeras.core.errors import BadDataError
from gpukeras.core.handles import Model, Strategy
from gpukeras.data import pipeline, weights
from gpukeras.data.adapters.arrays import ArrayAdapter
from gpukeras.data.adapters.base import (
    DEFAULT_BATCH_SIZE,
    DataAdapter,
    Decision,
    StrategyPlan,
    as_arrays,
    is_tf_dataset,
    row_count,
    tensorflow_available,
)
from gpukeras.data.adapters.keras_data import KerasDataAdapter
from gpukeras.data.adapters.resident import InMemoryRows, ResidentAdapter, decide
from gpukeras.data.adapters.tf_dataset import (
    ArrayDatasetAdapter,
    TFDatasetAdapter,
    build_from_spec,
    check_batched,
    describe_dataset,
    static_batch_size,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "ArrayAdapter",
    "ArrayDatasetAdapter",
    "DataAdapter",
    "Decision",
    "KerasDataAdapter",
    "ResidentAdapter",
    "StrategyPlan",
    "TFDatasetAdapter",
    "as_arrays",
    "build_from_spec",
    "check_batched",
    "describe_dataset",
    "get_data_adapter",
    "is_tf_dataset",
    "on_device",
    "row_count",
    "tensorflow_available",
    "validation_args",
]


def get_data_adapter(
    data: object,
    batch_size: int | None,
    seed: int | None,
    several_processes: bool = False,
    plan: StrategyPlan | None = None,
    class_weight: dict[int, float] | None = None,
) -> DataAdapter:
    """The adapter for gpu_fit()'s ``data`` (see the module's notes).

    Args:
        data: a tf.data dataset, arrays as ``(x, y)``, ``(x, y, sample_weight)`` or
            ``(x,)`` (``x`` may be a dict of arrays), or anything else Keras' ``fit()``
            takes.
        batch_size: rows per batch for arrays (None: ``DEFAULT_BATCH_SIZE``); other
            data makes its own batches (gpu_fit() refuses a batch size for it).
        seed: the seed of the arrays' shuffling.
        several_processes: this process trains with others (JAX's multi-process
            distribution, which shards only a tf.data dataset).
        plan: the strategy's plan, or None for one device: the adapter lays its data
            out as the plan says (``DataAdapter.follow``).
        class_weight: {class number: weight} for the training rows, as Keras' fit()
            takes it (``gpukeras.data.weights``), or None.

    Raises:
        BadDataError: data without rows or batches, or of a type nothing reads.
        BadArgumentError: weights the data cannot take (``weights``).
    """
    adapter = _adapter_for(data, batch_size, seed, several_processes, class_weight)
    if plan is not None:
        adapter.follow(plan)
    return adapter


def _adapter_for(
    data: object,
    batch_size: int | None,
    seed: int | None,
    several_processes: bool,
    class_weight: dict[int, float] | None,
) -> DataAdapter:
    if is_tf_dataset(data):
        return TFDatasetAdapter(data, static_batch_size(data), class_weight=class_weight)
    if isinstance(data, (tuple, list)) and len(data) in (1, 2, 3):
        x = as_arrays(data[0])
        y = as_arrays(data[1]) if len(data) >= 2 and data[1] is not None else None
        rows = row_count(x)
        if rows == 0:
            raise BadDataError("The training data has no rows.")
        sample_weight = weights.row_weights(
            y, data[2] if len(data) == 3 else None, class_weight, rows
        )
        size = batch_size or DEFAULT_BATCH_SIZE
        # tf.data feeds TensorFlow's own graphs; on JAX, Keras' NumPy batches are faster,
        # but with several processes Keras shards only a tf.data dataset.
        several = several_processes
        if several and not tensorflow_available():
            raise BadDataError(
                "Multi-worker training on JAX reads arrays through a tf.data pipeline, which "
                "needs TensorFlow: install it (the CPU build is enough) in gpukeras' Python."
            )
        on_tf_data = tensorflow_available() and (configured_backend() == "tensorflow" or several)
        adapter = ArrayDatasetAdapter if on_tf_data else ArrayAdapter
        return adapter(x, y, size, seed, sample_weight)
    if isinstance(data, (str, bytes, dict, int, float)) or data is None:
        raise BadDataError(
            f"data cannot be {type(data).__name__}: give a tf.data dataset (gpu_dataset()) "
            "or arrays as (x, y)."
        )
    return KerasDataAdapter(data, class_weight)


def on_device(
    adapter: DataAdapter,
    model: Model,
    validation_data: object,
    distribution: Strategy | None,
    backend: str,
    several_processes: bool = False,
) -> DataAdapter:
    """The adapter training reads: rows in memory (arrays, or a gpu_dataset() of them that
    batches them as they are) that fit on the device as a ``ResidentAdapter``, anything else
    as it is; ``decision`` says which and why.

    Args:
        adapter: what ``get_data_adapter`` chose.
        model: the compiled model, as it will train.
        validation_data: gpu_fit()'s validation data (rows in memory go on the device too,
            a gpu_dataset() of them where its batches are the training's size).
        distribution: the JAX distribution the model trains under, or None.
        backend: the Keras backend.
        several_processes: this process trains with others.
    """
    rows = _in_memory_rows(adapter)
    if rows is None:
        adapter.decision = Decision(False, _streams_because(adapter, backend))
        return adapter
    validation = _validation_rows(validation_data, rows.batch_size)
    adapter.decision = decide(
        backend,
        model,
        rows.x,
        rows.y,
        validation,
        _devices(distribution) if backend == "jax" else [],
        several_processes=several_processes,
    )
    if not adapter.decision.resident:
        return adapter
    return ResidentAdapter(rows, model, validation, distribution, adapter.decision)


def _in_memory_rows(adapter: DataAdapter) -> InMemoryRows | None:
    """The rows in memory an adapter reads, where they can go on the device; else None."""
    if isinstance(adapter, ArrayAdapter):
        size = adapter.batch_size or DEFAULT_BATCH_SIZE
        args = adapter.fit_args
        return InMemoryRows(
            args["x"], args["y"], size, adapter.seed, sample_weight=args.get("sample_weight")
        )
    made = pipeline.in_memory(adapter.dataset) if adapter.dataset is not None else None
    if made is None:
        return None
    x, y, sample_weight = made.arrays()
    if adapter.class_weight is not None:  # the streamed dataset has them by Keras' map
        sample_weight = weights.row_weights(y, sample_weight, adapter.class_weight, row_count(x))
    return InMemoryRows(
        x, y, made.batch_size, made.seed, made.shuffle, made.drop_remainder, sample_weight
    )


def _streams_because(adapter: DataAdapter, backend: str) -> str:
    """Why data that is not rows in memory streams from host memory."""
    if backend != "jax":
        return f"data streams from host memory on {backend}"
    made = pipeline.made_here(adapter.dataset) if adapter.dataset is not None else None
    if made is not None and made.source == "arrays":
        return (
            "this gpu_dataset() maps or augments its rows in tf.data on the host, so its "
            "batches stream from host memory"
        )
    if adapter.tf_dataset is not None:
        return "a tf.data dataset streams its batches from host memory"
    return "this data makes its batches on the host, so they stream from host memory"


def _validation_rows(validation_data: object, batch_size: int) -> tuple | None:
    """Validation rows in memory, for the device; None where validation streams."""
    if isinstance(validation_data, (tuple, list)) and len(validation_data) in (1, 2, 3):
        return tuple(as_arrays(part) for part in validation_data if part is not None)
    made = pipeline.in_memory(validation_data) if is_tf_dataset(validation_data) else None
    if made is None or made.batch_size != batch_size:
        return None
    return tuple(part for part in made.arrays() if part is not None)


def _devices(distribution: Strategy | None) -> list[object]:
    """The JAX devices data is put on: the distribution's, or the default device."""
    import jax

    if distribution is not None:
        return list(distribution.device_mesh.devices.flat)
    return [jax.devices()[0]]


def validation_args(
    validation_data: object, batch_size: int | None, plan: StrategyPlan | None = None
) -> dict[str, object]:
    """``model.fit()`` arguments for the validation data (not shuffled), a dataset sharded as
    the strategy's ``plan`` says."""
    if validation_data is None:
        return {}
    if is_tf_dataset(validation_data):
        return {"validation_data": validation_data if plan is None else plan.shard(validation_data)}
    if isinstance(validation_data, (tuple, list)) and len(validation_data) in (1, 2, 3):
        parts = tuple(as_arrays(part) for part in validation_data if part is not None)
        return {
            "validation_data": parts,
            "validation_batch_size": batch_size or DEFAULT_BATCH_SIZE,
        }
    return {"validation_data": validation_data}
