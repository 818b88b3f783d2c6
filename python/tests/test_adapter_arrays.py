"""``ArrayAdapter``: arrays Keras batches and shuffles itself (on JAX, or without TensorFlow).

Keras' NumPy iterators (JAX's, PyTorch's) draw an epoch's order of arrays from
NumPy's global generator when the epoch starts; with a seed, the adapter asks
the training loop to reseed it at every epoch's start (``reseed_numpy``),
which a resumed epoch's order rests on. The order is read in a fresh Python
on JAX (``scripts/trained_batches.py``): on TensorFlow, Keras shuffles arrays
in tf.data instead, and gpu_fit() gives it a seeded pipeline there
(test_adapter_tf_dataset.py).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import numpy as np

from conftest import NotingPlan, child_pythonpath, requires
from gpukeras.data import adapters
from scripts import trained_batches
from scripts.trained_batches import numbered_rows

# 10 rows in batches of 4: two whole batches and a last one of 2.
ROWS, BATCH = 10, 4


def adapter(seed: int | None = 7) -> adapters.ArrayAdapter:
    return adapters.ArrayAdapter(adapters.Rows(*numbered_rows(ROWS), ROWS, BATCH, seed))


@functools.cache
def on_jax() -> list[dict[int, list[list[int]]]]:
    """The batches of three fits on JAX: 3 epochs, the same again, and from epoch 1 on."""
    requires("jax")
    spec = {
        "rows": ROWS,
        "batch_size": BATCH,
        "seed": 7,
        "runs": [{"epochs": 3}, {"epochs": 3}, {"epochs": 3, "initial_epoch": 1}],
    }
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": child_pythonpath()}
    done = subprocess.run(
        [sys.executable, trained_batches.__file__, json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    return [{int(epoch): batches for epoch, batches in run.items()} for run in runs]


def test_keras_gets_the_arrays_to_batch_and_shuffle_itself() -> None:
    made = adapter()
    x, y = numbered_rows(ROWS)
    assert made.kind == "keras arrays"
    assert made.fit_args.keys() == {"x", "y", "batch_size", "shuffle"}
    np.testing.assert_array_equal(made.fit_args["x"], x)
    np.testing.assert_array_equal(made.fit_args["y"], y)
    assert made.fit_args["batch_size"] == BATCH and made.fit_args["shuffle"] is True
    assert (made.batch_size, made.steps_per_epoch, made.rows) == (BATCH, 3, ROWS)
    assert made.dataset is None and made.tf_dataset is None  # no iterators count epochs
    assert made.reseed_numpy and not adapter(seed=None).reseed_numpy
    # The advice knows the rows are in memory: nothing to cache, no map to speed up.
    assert made.gpu_dataset() == {"source": "arrays", "cache": False, "user_map": False}


def test_each_epoch_is_every_row_once_in_a_new_order_the_last_batch_partial() -> None:
    batches, again, _ = on_jax()
    for epoch in range(3):
        assert [len(batch) for batch in batches[epoch]] == [4, 4, 2]
        assert sorted(row for batch in batches[epoch] for row in batch) == list(range(ROWS))
    assert batches[0] != batches[1] != batches[2]
    assert again == batches  # the same seeds, the same order


def test_a_resumed_epoch_trains_on_the_batches_of_the_unbroken_run() -> None:
    """Resumed at epoch 1 after k of its batches: the first k go by again untrained
    (``gpukeras.train.backup``), and the rest are those the unbroken run trained on."""
    unbroken, _, resumed = on_jax()
    k = 2
    assert resumed[1][k:] == unbroken[1][k:]
    assert resumed[2] == unbroken[2]


def test_a_plan_checks_the_batches_and_leaves_arrays_to_keras() -> None:
    """Keras shards no arrays: a plan of several workers is asked about the batches alone."""
    plan = NotingPlan(workers=2)
    made = adapter()
    made.follow(plan)
    assert plan.checked == [(BATCH, ROWS)] and plan.sharded == []
    np.testing.assert_array_equal(made.fit_args["x"], numbered_rows(ROWS)[0])


def test_validation_arrays_are_batched_at_the_training_batch_size() -> None:
    x, y = numbered_rows(6)
    args = adapters.validation_args(adapters.given((x, y)), BATCH)
    assert args.keys() == {"validation_data", "validation_batch_size"}
    assert args["validation_batch_size"] == BATCH
    np.testing.assert_array_equal(args["validation_data"][0], x)
    only_x = adapters.validation_args(adapters.given([x, None]), None)
    assert len(only_x["validation_data"]) == 1
    assert only_x["validation_batch_size"] == adapters.DEFAULT_BATCH_SIZE
    assert adapters.validation_args(adapters.given(None, training=False), BATCH) == {}
