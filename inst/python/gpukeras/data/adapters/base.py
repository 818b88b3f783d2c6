"""What every data adapter is: ``DataAdapter``, the base class, and what they share.

An adapter knows what ``model.fit()`` gets from gpu_fit()'s data
(``fit_args``), and what resuming needs to know about it: the dataset whose
iterators count epochs, the batch size, the batches per epoch (see the notes in
``gpukeras.data.adapters`` on data order). One adapter per kind of data, each
in its own module; ``gpukeras.data.adapters.get_data_adapter`` chooses.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeGuard

import numpy as np

from gpukeras.core import compat
from gpukeras.core.errors import BadDataError
from gpukeras.core.handles import Dataset, Model
from gpukeras.data import pipeline
from gpukeras.data.indicators import FrameCodes

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
    """A part of the data (x or y: an array, or a dict of them by input name) as NumPy arrays,
    a data.frame's ``FrameCodes`` as it is (its indicator columns made where it is trained)."""
    if isinstance(part, dict):
        return {str(name): as_arrays(value) for name, value in part.items()}
    return part if isinstance(part, FrameCodes) else np.asarray(part)


def row_count(x: object) -> int:
    """The rows of ``x``: an array, or a dict of arrays (the first one's rows)."""
    first: Any = next(iter(x.values())) if isinstance(x, dict) else x
    return len(first)


@dataclass
class Given:
    """gpu_fit()'s data (or validation data) as it was given, looked at once (``given``), so that
    what follows reads what it is instead of asking again.

    Attributes:
        data: the object given.
        dataset: whether it is a tf.data dataset.
        arrays: arrays in memory given as ``(x, y, sample_weight)``: NumPy arrays (``x``
            and ``y`` may be dicts of them by name; ``y`` and ``sample_weight`` None where
            not given); None for other data.
        count: the rows of ``arrays`` (None for other data).
        info: a dataset described (``describe_dataset``); None for other data.
        weighted: whether it brings its own sample weights (arrays as ``(x, y, w)``, or a
            dataset of ``(x, y, sample_weight)`` elements, as gpu_dataset(sample_weight = )
            makes).
    """

    data: object
    dataset: bool = False
    arrays: tuple[object, object, object] | None = None
    count: int | None = None
    info: dict[str, object] | None = None
    weighted: bool = False


def given(data: object, training: bool = True) -> Given:
    """``data`` as given (see ``Given``); ``training``: it is the training data, which must
    have rows, where validation data may be None.

    Raises:
        BadDataError: training data without rows, or of a type nothing reads.
    """
    if is_tf_dataset(data):
        spec = data.element_spec
        weighted = isinstance(spec, tuple) and len(spec) == 3
        return Given(data, dataset=True, info=describe_dataset(data), weighted=weighted)
    if isinstance(data, (tuple, list)) and len(data) in (1, 2, 3):
        parts = (*data, None, None)[:3]
        x = as_arrays(parts[0])
        y = as_arrays(parts[1]) if parts[1] is not None else None
        count = row_count(x)
        if training and count == 0:
            raise BadDataError("The training data has no rows.")
        arrays = (x, y, np.asarray(parts[2]) if parts[2] is not None else None)
        return Given(data, arrays=arrays, count=count, weighted=parts[2] is not None)
    if training and (isinstance(data, (str, bytes, dict, int, float)) or data is None):
        raise BadDataError(
            f"data cannot be {type(data).__name__}: give a tf.data dataset (gpu_dataset()) "
            "or arrays as (x, y)."
        )
    return Given(data)


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


@dataclass
class Rows:
    """Rows in memory, as every in-memory form of training data holds them: R or NumPy arrays
    (``x`` may be a dict of arrays by input name), or a gpu_dataset() of them that batches them
    as they are (``pipeline.in_memory``): ``count`` of them. ``sample_weight`` has the class
    weights in it (one weight per row, ``gpukeras.data.weights``). ``shared``: the core made
    them all from R data, so a pipeline may share them rather than copy them."""

    x: object
    y: object | None
    count: int
    batch_size: int
    seed: int | None
    shuffle: bool = True
    drop_remainder: bool = False
    sample_weight: object | None = None
    shared: bool = False


@dataclass
class Decision:
    """Whether the data trains on the device, and why (for the fit report).

    Attributes:
        resident: True when the data goes on the device.
        why: one sentence, for the report.
        data_bytes: the bytes the data (with validation) takes.
        free_bytes: the free memory of the device it was compared with (None
            when not known).
    """

    resident: bool
    why: str
    data_bytes: int = 0
    free_bytes: int | None = None


class StrategyPlan(Protocol):
    """A strategy's plan as the data reads it (``gpukeras.distribute.strategies.StrategyPlan``,
    passed down): whether a batch splits over its replicas, and how a dataset is sharded."""

    def check_batch(self, batch_size: int | None, rows: int | None) -> None: ...

    def shard(self, dataset: Dataset) -> object: ...


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


# The adapters ---------------------------------------------------------------------
@dataclass
class DataAdapter:
    """What ``model.fit()`` gets from gpu_fit()'s data, and what resuming needs to know about it.

    Not Keras' own ``DataAdapter``, which yields batches: this one gives ``model.fit()`` its
    arguments (``fit_args``), of which Keras then makes its own. The training loops call it
    ``adapter``.

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
        decision: whether the data trains on the device, and why (``resident.decide``).
        class_weight: {class number: weight} where Keras' map adds them to a dataset's
            batches (rows in memory have theirs as sample weights instead).
        validation: ``model.fit()``'s validation arguments (``validation_data`` and
            its batch size; empty without validation data).
        description: the data for gpu_fit()'s report (``data_info``,
            ``validation_data_info``, ``weights``, ``data_path``), set by ``feed``.
        warnings: what to say about the labels (``class``, ``message``), set by ``feed``.
    """

    kind: ClassVar[str] = "other"
    given_dataset: ClassVar[bool] = False

    fit_args: dict[str, object]
    dataset: Dataset | None = None
    tf_dataset: Dataset | None = None
    batch_size: int | None = None
    steps_per_epoch: int | None = None
    rows: int | None = None
    reseed_numpy: bool = False
    decision: Decision | None = None
    class_weight: dict[int, float] | None = None
    validation: dict[str, object] = field(default_factory=dict)
    description: dict[str, object] = field(default_factory=dict)
    warnings: list[dict[str, str]] = field(default_factory=list)

    def follow(self, plan: StrategyPlan) -> None:
        """Lay the data out as the strategy's ``plan`` says: a global batch it can split, and
        a tf.data dataset sharded its way."""
        plan.check_batch(self.batch_size, self.rows)
        for key, value in self.fit_args.items():
            if is_tf_dataset(value):
                self.fit_args[key] = plan.shard(value)

    def build(self, model: Model) -> None:
        """Build ``model`` (its layers, compiled loss and metrics, optimizer) from the data,
        before Keras' loop meets it, where the adapter can without reading a batch (see the
        notes on data order in ``gpukeras.data.adapters``); Keras builds the rest on a batch."""

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
