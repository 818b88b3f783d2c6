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
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeGuard

import numpy as np

from gpukeras.core import compat
from gpukeras.core.handles import Dataset
from gpukeras.data import pipeline

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


# The adapters ---------------------------------------------------------------------
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
    """

    kind: ClassVar[str] = "other"
    given_dataset: ClassVar[bool] = False
    reseed_numpy = False
    # Whether the data trains on the device, and why (``resident.decide``); None where
    # the question does not arise (data that is not arrays).
    decision: Decision | None = None
    # {class number: weight} where Keras' map adds them to a dataset's batches (rows in
    # memory have theirs as sample weights instead).
    class_weight: dict[int, float] | None = None

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

    def follow(self, plan: StrategyPlan) -> None:
        """Lay the data out as the strategy's ``plan`` says: a global batch it can split, and
        a tf.data dataset sharded its way."""
        plan.check_batch(self.batch_size, self.rows)
        for key, value in self.fit_args.items():
            if is_tf_dataset(value):
                self.fit_args[key] = plan.shard(value)

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
