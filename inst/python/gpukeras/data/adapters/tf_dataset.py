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
from gpukeras.data import weights
from gpukeras.data.adapters.base import DataAdapter, Rows


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
                class_weight=class_weight,
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
            class_weight=class_weight,
        )

    def build(self, model: Model) -> None:
        """Build ``model`` from the element spec of the dataset Keras gets (``build_from_spec``)."""
        build_from_spec(model, self.fit_args["x"])


class ArrayDatasetAdapter(TFDatasetAdapter):
    """Rows in memory made into a seeded gpu_dataset() pipeline (``pipeline.from_arrays``, which
    the factory calls: ``dataset``)."""

    kind = "arrays"
    given_dataset = False

    def __init__(self, dataset: Dataset, rows: Rows) -> None:
        super().__init__(dataset, rows.batch_size, rows=rows.count)


def static_batch_size(dataset: Dataset) -> int | None:
    """A dataset's batch size where it is fixed in its spec or its batch step; else None."""
    tf = sys.modules["tensorflow"]
    for spec in tf.nest.flatten(dataset.element_spec):
        if spec.shape.rank and spec.shape[0] is not None:
            return int(spec.shape[0])
        break
    return compat.static_batch_size(dataset)


# Datasets meeting the model ---------------------------------------------------------
def build_from_spec(model: Model, dataset: Dataset) -> bool:
    """Build the model, its compiled loss and metrics and its optimizer from a (batched, see
    ``check_batched``) dataset's element spec, so Keras need not peek at a batch through an
    iterator of its own (see the module's notes). Returns whether it did; where it cannot,
    Keras peeks."""
    try:
        compat.symbolic_build(model, dataset.element_spec)
    except Exception:  # a model Keras cannot build symbolically: it builds on a batch
        return False
    return True
