"""Training data as ``model.fit()`` arguments: one adapter per kind of data, chosen by a factory.

gpu_fit() takes a tf.data dataset, arrays as ``(x, y)``, or anything else
Keras' ``fit()`` reads (a PyDataset, a generator). ``get_data_adapter``
chooses the adapter for the data, as Keras' own ``data_adapters`` do, and the
adapter knows what ``model.fit()`` gets (``fit_args``) and what resuming
needs to know: the dataset whose iterators count epochs, the batch size, the
batches per epoch. The training loops (``gpukeras.fit``, and
``gpukeras.multiworker``'s own) ask the adapter, never the kind of data.

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
  ``gpukeras.fit`` builds the model and its metrics from the dataset's
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
  ``gpukeras.resident``): each epoch's order is a permutation drawn on the
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

import dataclasses
import importlib.util
import math
import sys
from typing import Any, ClassVar, TypeGuard

import numpy as np

from gpukeras import compat, failures, jax_cluster, pipeline, resident
from gpukeras.backend import configured_backend
from gpukeras.errors import BadArgumentError, BadDataError
from gpukeras.handles import Dataset, Model, Strategy

DEFAULT_BATCH_SIZE = 32


def is_tf_dataset(data: object) -> TypeGuard[Dataset]:
    """Whether ``data`` is a tf.data.Dataset, without importing TensorFlow."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(data, tf.data.Dataset)


def tensorflow_available() -> bool:
    """Whether TensorFlow can be imported (without importing it)."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"] is not None
    return importlib.util.find_spec("tensorflow") is not None


def as_arrays(part: object) -> object:
    """A part of the data (x or y: an array, or a dict of them by input name) as NumPy arrays."""
    if isinstance(part, dict):
        return {str(name): np.asarray(value) for name, value in part.items()}
    return np.asarray(part)


def row_count(x: object) -> int:
    """The rows of ``x``: an array, or a dict of arrays (the first one's rows)."""
    first: Any = next(iter(x.values())) if isinstance(x, dict) else x
    return len(first)


# The adapters ---------------------------------------------------------------------
class DataAdapter:
    """What ``model.fit()`` gets from gpu_fit()'s data, and what resuming needs to know about it.

    Attributes:
        kind: the name gpu_fit()'s settings give the data (``settings$data``).
        given_dataset: whether the data is a dataset the user made (one that a
            failed element may have changed, see ``failures.data_error``).
        reseed_numpy: whether the training loop reseeds NumPy at every epoch
            (Keras shuffles arrays with it).
        fit_args: keyword arguments for ``model.fit()`` (x, y, batch_size,
            steps_per_epoch, shuffle).
        dataset: the tf.data dataset whose iterators count epochs, if any.
        tf_dataset: the tf.data dataset training reads, one pass an epoch
            (None for data Keras reads itself).
        batch_size: rows per batch, where known.
        steps_per_epoch: batches per epoch, where known.
        rows: rows in all, where known.
    """

    kind: ClassVar[str] = "other"
    given_dataset: ClassVar[bool] = False
    reseed_numpy = False
    # Whether the data trains on the device, and why (``resident.decide``); None where
    # the question does not arise (data that is not arrays).
    decision: resident.Decision | None = None

    def __init__(
        self,
        fit_args: dict[str, object],
        *,
        dataset: Dataset | None = None,
        tf_dataset: Dataset | None = None,
        batch_size: int | None = None,
        steps_per_epoch: int | None = None,
        rows: int | None = None,
    ) -> None:
        self.fit_args = fit_args
        self.dataset = dataset
        self.tf_dataset = tf_dataset
        self.batch_size = batch_size
        self.steps_per_epoch = steps_per_epoch
        self.rows = rows

    def skip_epochs(self, epochs: int) -> None:
        """Make the next epoch draw the order epoch ``epochs`` had (see the module's notes)."""
        if self.dataset is not None:
            for _ in range(epochs):
                iter(self.dataset)

    def pipeline_steps(self) -> list[str] | None:
        """The transformations of the epoch-counting dataset, for the monitor's advice."""
        return compat.dataset_steps(self.dataset) if self.dataset is not None else None

    def gpu_dataset(self) -> dict[str, object] | None:
        """What gpu_dataset() made the dataset from (``pipeline.made_here``), for the advice."""
        made = pipeline.made_here(self.dataset) if self.dataset is not None else None
        return dataclasses.asdict(made) if made is not None else None


class TFDatasetAdapter(DataAdapter):
    """A batched tf.data dataset, given as one endless stream of epochs where its length is known.

    With a known number of batches per epoch, Keras gets ``dataset.repeat()``
    and ``steps_per_epoch``: Keras then keeps one iterator for the whole fit
    (its documented behaviour for endless data), and tf.data starts each epoch
    inside it by iterating the dataset once more. So epoch e is always the
    dataset's (e + 1)-th iteration after the ones made before training,
    whatever iterators Keras' epoch loop makes and drops.
    """

    kind = "dataset"
    given_dataset = True

    def __init__(
        self, dataset: Dataset, batch_size: int | None = None, rows: int | None = None
    ) -> None:
        tf = sys.modules["tensorflow"]
        batches = int(dataset.cardinality())
        if batches == tf.data.INFINITE_CARDINALITY:
            raise BadDataError(
                "The dataset repeats forever (dataset.repeat()): gpu_fit() needs a finite "
                "dataset, one pass of which is one epoch. Leave out the repeat()."
            )
        if batches == 0:
            raise BadDataError("The dataset is empty: it gives no batches to train on.")
        if batches < 0:  # not known (a filter, a file source split by a hash)
            super().__init__(
                {"x": dataset, "shuffle": False},
                tf_dataset=dataset,
                batch_size=batch_size,
                rows=rows,
            )
            return
        super().__init__(
            # shuffling is the dataset's own; Keras would only warn about it
            {"x": dataset.repeat(), "steps_per_epoch": batches, "shuffle": False},
            dataset=dataset,
            tf_dataset=dataset,
            batch_size=batch_size,
            steps_per_epoch=batches,
            rows=rows,
        )


class ArrayDatasetAdapter(TFDatasetAdapter):
    """Arrays made into a seeded gpu_dataset() pipeline (``pipeline.from_arrays``)."""

    kind = "arrays"
    given_dataset = False

    def __init__(self, x: object, y: object, batch_size: int, seed: int | None) -> None:
        built = pipeline.from_arrays(x, y, batch_size=batch_size, shuffle=True, seed=seed)
        super().__init__(built["dataset"], batch_size, rows=row_count(x))


class ArrayAdapter(DataAdapter):
    """Arrays Keras batches and shuffles itself: on JAX, or where TensorFlow is not installed.

    On JAX this is the fastest way for data already in memory: Keras slices
    NumPy batches and places each on the device, where a tf.data pipeline adds
    TensorFlow's per-batch work and a copy out of its tensors (issue #17, item 5).
    """

    kind = "keras arrays"

    def __init__(self, x: object, y: object, batch_size: int, seed: int | None) -> None:
        rows = row_count(x)
        super().__init__(
            {"x": x, "y": y, "batch_size": batch_size, "shuffle": True},
            batch_size=batch_size,
            steps_per_epoch=math.ceil(rows / batch_size),
            rows=rows,
        )
        self.reseed_numpy = seed is not None
        self.seed = seed

    def gpu_dataset(self) -> dict[str, object] | None:
        """In-memory rows, as gpu_dataset() from arrays has them: nothing to cache or map."""
        return {"source": "arrays", "cache": False, "user_map": False}


@dataclasses.dataclass
class InMemoryRows:
    """Rows in memory that may train on the device: R or NumPy arrays, or a gpu_dataset() of
    them that batches them as they are (``pipeline.in_memory``)."""

    x: object
    y: object | None
    batch_size: int
    seed: int | None
    shuffle: bool = True
    drop_remainder: bool = False


class ResidentAdapter(DataAdapter):
    """Rows put on the device once and trained there, k steps a dispatch (``resident``).

    ``model.fit()`` gets one token row per step, which it never copies to the
    device; ``install`` gives the model the functions that train on the device.
    """

    kind = "device arrays"

    def __init__(
        self,
        rows: InMemoryRows,
        model: Model,
        validation: tuple | None,
        distribution: Strategy | None,
        decision: resident.Decision,
    ) -> None:
        size = rows.batch_size
        # Keras would build the model from a batch of the tokens it gets: built from the data,
        # which is where data that does not fit the model meets it first.
        first = (rows.x, rows.y) if rows.y is not None else (rows.x,)
        try:
            compat.symbolic_build(model, tuple(_head(part, size) for part in first))
        except (ValueError, TypeError) as error:
            refused = failures.refused_data(error)
            assert refused is not None  # a ValueError or TypeError always is refused data
            raise refused from error
        self.training = resident.ResidentTraining(
            rows.x,
            rows.y,
            size,
            rows.seed,
            validation,
            distribution,
            shuffle=rows.shuffle,
            drop_remainder=rows.drop_remainder,
        )
        super().__init__(
            self.training.fit_args(),
            batch_size=size,
            steps_per_epoch=self.training.steps,
            rows=row_count(rows.x),
        )
        self.decision = decision

    def validation_args(self) -> dict[str, object]:
        """``model.fit()``'s validation arguments, the validation arrays being on the device."""
        return self.training.validation_args()

    def gpu_dataset(self) -> dict[str, object] | None:
        """In-memory rows on the device: nothing to cache, map or wait for."""
        return {"source": "arrays", "cache": False, "user_map": False, "on_device": True}


class KerasDataAdapter(DataAdapter):
    """Data Keras reads as it is (a PyDataset, a generator), making its own batches."""

    kind = "other"

    def __init__(self, data: object) -> None:
        super().__init__({"x": data})


def get_data_adapter(data: object, batch_size: int | None, seed: int | None) -> DataAdapter:
    """The adapter for gpu_fit()'s ``data`` (see the module's notes).

    Args:
        data: a tf.data dataset, arrays as ``(x, y)`` or ``(x,)`` (``x`` may
            be a dict of arrays), or anything else Keras' ``fit()`` takes.
        batch_size: rows per batch for arrays (None: 32); must be None for
            other data, which makes its own batches.
        seed: the seed of the arrays' shuffling.

    Raises:
        BadArgumentError: a batch size for data that is batched already.
        BadDataError: data without rows or batches, or of a type nothing reads.
    """
    if is_tf_dataset(data):
        if batch_size is not None:
            raise BadArgumentError(
                "batch_size is for arrays: this dataset is already batched. Set the batch "
                "size where the dataset is made (gpu_dataset(batch_size = )) and leave "
                "batch_size NULL here."
            )
        return TFDatasetAdapter(data, _static_batch_size(data))
    if isinstance(data, (tuple, list)) and len(data) in (1, 2):
        x = as_arrays(data[0])
        y = as_arrays(data[1]) if len(data) == 2 and data[1] is not None else None
        if row_count(x) == 0:
            raise BadDataError("The training data has no rows.")
        size = batch_size or DEFAULT_BATCH_SIZE
        # tf.data feeds TensorFlow's own graphs; on JAX, Keras' NumPy batches are faster,
        # but with several processes Keras shards only a tf.data dataset (jax_cluster).
        several = jax_cluster.multi_process()
        if several and not tensorflow_available():
            raise BadDataError(
                "Multi-worker training on JAX reads arrays through a tf.data pipeline, which "
                "needs TensorFlow: install it (the CPU build is enough) in gpukeras' Python."
            )
        on_tf_data = tensorflow_available() and (configured_backend() == "tensorflow" or several)
        adapter = ArrayDatasetAdapter if on_tf_data else ArrayAdapter
        return adapter(x, y, size, seed)
    if batch_size is not None:
        raise BadArgumentError(
            f"batch_size is for arrays, not for {type(data).__name__} data, which makes its "
            "own batches."
        )
    if isinstance(data, (str, bytes, dict, int, float)) or data is None:
        raise BadDataError(
            f"data cannot be {type(data).__name__}: give a tf.data dataset (gpu_dataset()) "
            "or arrays as (x, y)."
        )
    return KerasDataAdapter(data)


def on_device(
    source: DataAdapter,
    model: Model,
    validation_data: object,
    distribution: Strategy | None,
    backend: str,
) -> DataAdapter:
    """The adapter training reads: rows in memory (arrays, or a gpu_dataset() of them that
    batches them as they are) that fit on the device as a ``ResidentAdapter``, anything else
    as it is; ``decision`` says which and why.

    Args:
        source: what ``get_data_adapter`` chose.
        model: the compiled model, as it will train.
        validation_data: gpu_fit()'s validation data (rows in memory go on the device too,
            a gpu_dataset() of them where its batches are the training's size).
        distribution: the JAX distribution the model trains under, or None.
        backend: the Keras backend.
    """
    rows = _in_memory_rows(source)
    if rows is None:
        source.decision = resident.Decision(False, _streams_because(source, backend))
        return source
    validation = _validation_rows(validation_data, rows.batch_size)
    source.decision = resident.decide(
        backend,
        model,
        rows.x,
        rows.y,
        validation,
        _devices(distribution) if backend == "jax" else [],
        several_processes=jax_cluster.multi_process(),
    )
    if not source.decision.resident:
        return source
    return ResidentAdapter(rows, model, validation, distribution, source.decision)


def _in_memory_rows(source: DataAdapter) -> InMemoryRows | None:
    """The rows in memory an adapter reads, where they can go on the device; else None."""
    if isinstance(source, ArrayAdapter):
        size = source.batch_size or DEFAULT_BATCH_SIZE
        return InMemoryRows(source.fit_args["x"], source.fit_args["y"], size, source.seed)
    made = pipeline.in_memory(source.dataset) if source.dataset is not None else None
    if made is None:
        return None
    x, y = made.arrays()
    return InMemoryRows(x, y, made.batch_size, made.seed, made.shuffle, made.drop_remainder)


def _streams_because(source: DataAdapter, backend: str) -> str:
    """Why data that is not rows in memory streams from host memory."""
    if backend != "jax":
        return f"data streams from host memory on {backend}"
    made = pipeline.made_here(source.dataset) if source.dataset is not None else None
    if made is not None and made.source == "arrays":
        return (
            "this gpu_dataset() maps or augments its rows in tf.data on the host, so its "
            "batches stream from host memory"
        )
    if source.tf_dataset is not None:
        return "a tf.data dataset streams its batches from host memory"
    return "this data makes its batches on the host, so they stream from host memory"


def _validation_rows(validation_data: object, batch_size: int) -> tuple | None:
    """Validation rows in memory, for the device; None where validation streams."""
    if isinstance(validation_data, (tuple, list)) and len(validation_data) in (1, 2):
        return tuple(as_arrays(part) for part in validation_data if part is not None)
    made = pipeline.in_memory(validation_data) if is_tf_dataset(validation_data) else None
    if made is None or made.batch_size != batch_size:
        return None
    x, y = made.arrays()
    return (x,) if y is None else (x, y)


def _head(part: object, rows: int) -> object:
    """The first ``rows`` rows of an array, or of each array of a dict."""
    if isinstance(part, dict):
        return {name: value[:rows] for name, value in part.items()}
    return part[:rows]  # type: ignore[index]


def _devices(distribution: Strategy | None) -> list[object]:
    """The JAX devices data is put on: the distribution's, or the default device."""
    import jax

    if distribution is not None:
        return list(distribution.device_mesh.devices.flat)
    return [jax.devices()[0]]


def _static_batch_size(dataset: Dataset) -> int | None:
    """A dataset's batch size where it is fixed in its spec or its batch step; else None."""
    tf = sys.modules["tensorflow"]
    for spec in tf.nest.flatten(dataset.element_spec):
        if spec.shape.rank and spec.shape[0] is not None:
            return int(spec.shape[0])
        break
    return compat.static_batch_size(dataset)


def validation_args(validation_data: object, batch_size: int | None) -> dict[str, object]:
    """``model.fit()`` arguments for the validation data (not shuffled)."""
    if validation_data is None:
        return {}
    if is_tf_dataset(validation_data):
        return {"validation_data": validation_data}
    if isinstance(validation_data, (tuple, list)) and len(validation_data) in (1, 2):
        parts = tuple(as_arrays(part) for part in validation_data if part is not None)
        return {
            "validation_data": parts,
            "validation_batch_size": batch_size or DEFAULT_BATCH_SIZE,
        }
    return {"validation_data": validation_data}


# Datasets meeting the model ---------------------------------------------------------
def describe_dataset(data: object) -> dict[str, object] | None:
    """A tf.data dataset given to gpu_fit() (e.g. from tfdatasets) in plain data.

    Returns:
        None for data that is not a tf.data dataset; else ``batches`` per pass
        (None when not known) and ``element``, its parts' shapes and dtypes.
    """
    if not is_tf_dataset(data):
        return None
    tf = sys.modules["tensorflow"]
    cardinality = int(data.cardinality())
    leaves = tf.nest.flatten(data.element_spec)
    return {
        "batches": cardinality if cardinality >= 0 else None,
        "element": ", ".join(f"{tuple(leaf.shape)} {leaf.dtype.name}" for leaf in leaves),
    }


def check_batched(model: Model, dataset: Dataset, arg: str = "data") -> None:
    """Raise BadDataError when a dataset gives single examples to a model that takes batches.

    Keras' own error for it ("Expected shape (None, 20), but input has an
    incompatible shape (20,)") does not say what to do. Only a model whose
    inputs are known can be compared with; others are left to Keras.
    """
    try:
        inputs = list(model.inputs)
    except (AttributeError, ValueError, TypeError):  # a subclassed or unbuilt model
        return
    tf = sys.modules["tensorflow"]
    spec = dataset.element_spec
    features = tf.nest.flatten(spec[0] if isinstance(spec, tuple) else spec)
    if not inputs or len(features) != len(inputs):
        return
    unbatched = all(
        feature.shape.rank is not None and feature.shape.rank == len(given.shape) - 1
        for feature, given in zip(features, inputs)
    )
    if unbatched:
        raise BadDataError(
            f"`{arg}` gives single examples (shape {tuple(features[0].shape)}), but the model "
            f"takes batches (shape {tuple(inputs[0].shape)}): batch the dataset first, e.g. "
            "dataset_batch(dataset, 32) with tfdatasets, dataset.batch(32) in Python, or make "
            "it with gpu_dataset(batch_size = )."
        )


def build_from_spec(model: Model, dataset: Dataset) -> bool:
    """Build the model, its compiled loss and metrics and its optimizer from a dataset's
    element spec, so Keras need not peek at a batch through an iterator of its own
    (see the module's notes). Returns whether it did; where it cannot, Keras peeks.

    Raises:
        BadDataError: the dataset is not batched (``check_batched``).
    """
    check_batched(model, dataset)
    try:
        compat.symbolic_build(model, dataset.element_spec)
    except Exception:  # a model Keras cannot build symbolically: it builds on a batch
        return False
    return True
