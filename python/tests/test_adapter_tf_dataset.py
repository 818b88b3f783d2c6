"""``TFDatasetAdapter`` and ``ArrayDatasetAdapter``: a tf.data dataset, given or made from
arrays (the seeded gpu_dataset() pipeline), as one endless stream of epochs.

Epoch e is the dataset's (e + 1)-th iteration after those made before training
(see ``gpukeras.data.adapters``), so ``skip_epochs(e)`` in a fresh process gives
a resumed epoch the order the unbroken run had. The batches are read inside
Keras' train step (``scripts/trained_batches.py``).
"""

from __future__ import annotations

import pytest

from conftest import NotingPlan
from gpukeras.core.errors import BadDataError
from gpukeras.core.runtime import config
from gpukeras.data import adapters, pipeline
from scripts.trained_batches import numbered_rows, numbers, trained_batches

# 10 rows in batches of 4: two whole batches and a last one of 2.
ROWS, BATCH = 10, 4


@pytest.fixture(autouse=True)
def tensorflow() -> object:
    return pytest.importorskip("tensorflow")


def from_arrays(seed: int = 7) -> adapters.ArrayDatasetAdapter:
    rows = adapters.Rows(*numbered_rows(ROWS), ROWS, BATCH, seed)
    made = pipeline.from_arrays(rows.x, rows.y, batch_size=BATCH, shuffle=True, seed=seed)
    return adapters.ArrayDatasetAdapter(made["dataset"], rows)


def plain(tf: object, rows: int = ROWS) -> object:
    """A dataset made elsewhere (not by gpu_dataset()), unshuffled."""
    return tf.data.Dataset.from_tensor_slices(numbered_rows(rows)).batch(BATCH)


def test_keras_gets_the_dataset_repeated_and_the_batches_of_an_epoch(tensorflow: object) -> None:
    dataset = plain(tensorflow)
    made = adapters.TFDatasetAdapter(dataset, batch_size=BATCH)
    assert made.kind == "dataset" and made.given_dataset
    assert made.fit_args.keys() == {"x", "steps_per_epoch", "shuffle"}
    assert made.fit_args["steps_per_epoch"] == 3 and made.fit_args["shuffle"] is False
    assert made.fit_args["x"].cardinality() == tensorflow.data.INFINITE_CARDINALITY
    assert made.dataset is dataset and made.tf_dataset is dataset
    assert (made.batch_size, made.steps_per_epoch, made.rows) == (BATCH, 3, None)
    assert trained_batches(made.fit_args, epochs=2) == {
        0: [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]],
        1: [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]],
    }


def test_arrays_become_a_seeded_pipeline_every_epoch_in_a_new_order() -> None:
    made = from_arrays()
    assert made.kind == "arrays" and not made.given_dataset
    assert (made.batch_size, made.steps_per_epoch, made.rows) == (BATCH, 3, ROWS)
    batches = trained_batches(made.fit_args, epochs=3)
    for epoch in range(3):
        assert [len(batch) for batch in batches[epoch]] == [4, 4, 2]  # the last one partial
        assert sorted(row for batch in batches[epoch] for row in batch) == list(range(ROWS))
    assert batches[0] != batches[1] != batches[2]
    assert trained_batches(from_arrays().fit_args, epochs=3) == batches  # the same seed
    assert trained_batches(from_arrays(seed=8).fit_args, epochs=1)[0] != batches[0]


def test_a_resumed_epoch_trains_on_the_batches_of_the_unbroken_run() -> None:
    """Resumed at epoch 1 after k of its batches: the adapter draws epoch 0's order once
    (``skip_epochs``), the first k batches of epoch 1 go by again untrained
    (``gpukeras.train.backup``), and the rest are those the unbroken run trained on."""
    unbroken = trained_batches(from_arrays().fit_args, epochs=3)
    resumed = from_arrays()
    resumed.skip_epochs(1)
    batches = trained_batches(resumed.fit_args, epochs=3, initial_epoch=1)
    k = 2
    assert batches[1][k:] == unbroken[1][k:]
    assert batches[2] == unbroken[2]


# Keras' way of ending an epoch of a dataset whose length it does not know.
@pytest.mark.filterwarnings("ignore:Your input ran out of data")
def test_a_dataset_of_unknown_length_goes_to_keras_as_it_is(tensorflow: object) -> None:
    dataset = plain(tensorflow).filter(lambda x, y: True)
    made = adapters.TFDatasetAdapter(dataset)
    assert made.fit_args == {"x": dataset, "shuffle": False}
    assert made.dataset is None and made.tf_dataset is dataset
    assert made.steps_per_epoch is None
    made.skip_epochs(2)  # nothing counts its epochs: a resumed run takes its order as it comes
    assert trained_batches(made.fit_args, epochs=1)[0] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_an_endless_or_empty_dataset_is_refused(tensorflow: object) -> None:
    with pytest.raises(BadDataError, match="repeats forever"):
        adapters.TFDatasetAdapter(plain(tensorflow).repeat())
    with pytest.raises(BadDataError, match="is empty"):
        adapters.TFDatasetAdapter(plain(tensorflow).take(0))


def test_a_plan_of_two_workers_shards_the_stream_and_checks_the_batches(
    tensorflow: object,
) -> None:
    """Each worker reads the same stream and keeps its share of the batches; together they
    read every batch once."""
    shares = []
    for index in (0, 1):
        plan = NotingPlan(workers=2, index=index)
        made = from_arrays()
        stream = made.fit_args["x"]
        made.follow(plan)
        assert plan.checked == [(BATCH, ROWS)] and plan.sharded == [stream]
        shares.append([numbers(batch) for batch in made.fit_args["x"].take(3)])
    unsharded = [numbers(batch) for batch in from_arrays().fit_args["x"].take(6)]
    assert shares == [unsharded[0::2], unsharded[1::2]]


def test_the_strategys_plan_shards_by_data(tensorflow: object) -> None:
    from gpukeras.distribute.strategies import StrategyPlan

    made = from_arrays()
    plan = StrategyPlan("multi_worker", "tensorflow", "MultiWorkerMirroredStrategy", 2)
    made.follow(plan)
    policy = made.fit_args["x"].options().experimental_distribute.auto_shard_policy
    assert policy == tensorflow.data.experimental.AutoShardPolicy.DATA


def test_validation_datasets_are_sharded_as_the_plan_says(tensorflow: object) -> None:
    dataset = plain(tensorflow, 6)
    assert adapters.validation_args(adapters.given(dataset), None) == {"validation_data": dataset}
    plan = NotingPlan(workers=2)
    validation = adapters.validation_args(adapters.given(dataset), None, plan)["validation_data"]
    assert plan.sharded == [dataset]
    assert [numbers(batch) for batch in validation] == [[0, 1, 2, 3]]


def test_a_gpu_dataset_is_known_from_a_dataset_made_elsewhere(tensorflow: object) -> None:
    x, y = numbered_rows(ROWS)
    made = adapters.TFDatasetAdapter(
        pipeline.from_arrays(x, y, batch_size=BATCH, cache=False)["dataset"]
    )
    assert made.gpu_dataset() == {
        "source": "arrays",
        "cache": False,
        "user_map": False,
        "cache_declined": None,
    }
    elsewhere = adapters.TFDatasetAdapter(plain(tensorflow))
    assert elsewhere.gpu_dataset() is None
    assert elsewhere.pipeline_steps() == ["Batch", "TensorSlice"]
    # R data given to gpu_fit() becomes a gpu_dataset() pipeline too
    assert from_arrays().gpu_dataset()["source"] == "arrays"


def test_the_batch_size_is_read_from_the_spec_or_the_batch_step(tensorflow: object) -> None:
    rows = tensorflow.data.Dataset.from_tensor_slices(numbered_rows(ROWS))
    assert adapters.static_batch_size(rows.batch(BATCH, drop_remainder=True)) == BATCH
    assert adapters.static_batch_size(rows.batch(BATCH).prefetch(1)) == BATCH
    assert adapters.static_batch_size(tensorflow.data.Dataset.range(8)) is None


def test_a_dataset_meets_the_model_batched_and_builds_it_from_its_spec(
    tensorflow: object,
) -> None:
    keras = config.keras()
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    rows = tensorflow.data.Dataset.from_tensor_slices(numbered_rows(ROWS))
    with pytest.raises(BadDataError, match="gives single examples"):
        adapters.check_batched(model, rows)
    assert adapters.build_from_spec(model, rows.batch(BATCH))
    assert model.optimizer.built
    assert adapters.describe_dataset(rows.batch(BATCH)) == {
        "batches": 3,
        "element": "(None, 1) float32, (None,) float32",
    }
    assert adapters.describe_dataset(numbered_rows(ROWS)) is None
