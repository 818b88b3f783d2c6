"""tf.data datasets as training data: one given by the user, or one made from arrays.

``TFDatasetAdapter`` gives Keras ``dataset.repeat()`` with ``steps_per_epoch``
where the number of batches is known, so that epoch e is always the dataset's
(e + 1)-th iteration (see the notes in ``gpukeras.data.adapters``); also the
checks and the build a dataset needs before training meets it.
"""

from __future__ import annotations

import sys

from gpukeras.core import compat
from gpukeras.core.errors import BadDataError
from gpukeras.core.handles import Dataset, Model
from gpukeras.data import pipeline, weights
from gpukeras.data.adapters.base import DataAdapter, is_tf_dataset, row_count


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
        self,
        dataset: Dataset,
        batch_size: int | None = None,
        rows: int | None = None,
        class_weight: dict[int, float] | None = None,
    ) -> None:
        tf = sys.modules["tensorflow"]
        # Keras' own map adds the class weights to each batch; ``dataset`` itself still
        # counts the epochs (its iterators are the map's).
        trained = dataset
        if class_weight is not None:
            trained = weights.weighted_dataset(dataset, class_weight)
        self.class_weight = class_weight
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
                {"x": trained, "shuffle": False},
                tf_dataset=trained,
                batch_size=batch_size,
                rows=rows,
            )
            return
        super().__init__(
            # shuffling is the dataset's own; Keras would only warn about it
            {"x": trained.repeat(), "steps_per_epoch": batches, "shuffle": False},
            dataset=dataset,
            tf_dataset=trained,
            batch_size=batch_size,
            steps_per_epoch=batches,
            rows=rows,
        )


class ArrayDatasetAdapter(TFDatasetAdapter):
    """Arrays made into a seeded gpu_dataset() pipeline (``pipeline.from_arrays``)."""

    kind = "arrays"
    given_dataset = False

    def __init__(
        self,
        x: object,
        y: object,
        batch_size: int,
        seed: int | None,
        sample_weight: object = None,
    ) -> None:
        built = pipeline.from_arrays(
            x, y, sample_weight=sample_weight, batch_size=batch_size, shuffle=True, seed=seed
        )
        super().__init__(built["dataset"], batch_size, rows=row_count(x))


def static_batch_size(dataset: Dataset) -> int | None:
    """A dataset's batch size where it is fixed in its spec or its batch step; else None."""
    tf = sys.modules["tensorflow"]
    for spec in tf.nest.flatten(dataset.element_spec):
        if spec.shape.rank and spec.shape[0] is not None:
            return int(spec.shape[0])
        break
    return compat.static_batch_size(dataset)


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
