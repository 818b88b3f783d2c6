"""``KerasDataAdapter``: data Keras reads as it is (a PyDataset, a generator), making its own
batches; a resumed run continues at the right epoch and batch.

The order is not the data's own alone: Keras 3.15's ``fit()`` shuffles the batches of a
PyDataset every epoch (``shuffle=True`` by default) with Python's ``random`` module,
which gpu_fit() does not seed, so a resumed epoch has the same batches in another order.
"""

from __future__ import annotations

import numpy as np

from conftest import NotingPlan
from gpukeras.core.runtime import config
from gpukeras.data import adapters
from scripts.trained_batches import numbered_rows, trained_batches

# 10 rows in batches of 4: two whole batches and a last one of 2.
ROWS, BATCH = 10, 4


def batches_of_rows() -> object:
    """A PyDataset of the numbered rows, in batches of 4, in order."""
    keras = config.keras()
    x, y = numbered_rows(ROWS)

    class Rows(keras.utils.PyDataset):  # type: ignore[name-defined,misc]
        def __len__(self) -> int:
            return -(-ROWS // BATCH)

        def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
            rows = slice(index * BATCH, (index + 1) * BATCH)
            return x[rows], y[rows]

    return Rows()


def test_keras_reads_the_data_as_it_is_and_shuffles_its_batches() -> None:
    data = batches_of_rows()
    made = adapters.KerasDataAdapter(data)
    assert made.kind == "other" and not made.given_dataset and not made.reseed_numpy
    assert made.fit_args == {"x": data}
    assert made.dataset is None and made.tf_dataset is None
    assert (made.batch_size, made.steps_per_epoch, made.rows) == (None, None, None)
    assert made.gpu_dataset() is None and made.pipeline_steps() is None
    own = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]  # the last batch partial, as the data has it
    batches = trained_batches(made.fit_args, epochs=2)
    assert sorted(batches[0]) == sorted(batches[1]) == own


def test_a_resumed_run_starts_at_its_epoch_with_the_same_batches() -> None:
    """Nothing counts the data's epochs (``skip_epochs`` does nothing); the resumed epoch
    has the unbroken run's batches, in an order Keras drew (see the module's notes)."""
    unbroken = trained_batches(adapters.KerasDataAdapter(batches_of_rows()).fit_args, epochs=2)
    made = adapters.KerasDataAdapter(batches_of_rows())
    made.skip_epochs(1)
    resumed = trained_batches(made.fit_args, epochs=2, initial_epoch=1)
    assert list(resumed) == [1]
    assert sorted(resumed[1]) == sorted(unbroken[1])


def test_a_plan_is_asked_about_batches_it_cannot_know_and_shards_nothing() -> None:
    plan = NotingPlan(workers=2)
    data = batches_of_rows()
    made = adapters.KerasDataAdapter(data)
    made.follow(plan)
    assert plan.checked == [(None, None)] and plan.sharded == []
    assert made.fit_args == {"x": data}


def test_validation_data_keras_reads_goes_to_it_as_it_is() -> None:
    data = batches_of_rows()
    assert adapters.validation_args(adapters.given(data, training=False), BATCH) == {
        "validation_data": data
    }
