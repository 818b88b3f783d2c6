"""gpu_lr_find(): the learning-rate range test on a copy of the model, with real training."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import keras
import numpy as np
import pytest

from gpukeras import bridge
from gpukeras.tools import lr_find

pytestmark = pytest.mark.slow  # whole range tests

DIGITS = Path(__file__).parents[2] / "inst" / "extdata" / "digits.csv.gz"


def digits() -> tuple[np.ndarray, np.ndarray]:
    """The shipped UCI digits as 8 x 8 x 1 images in [0, 1], and their labels."""
    with gzip.open(DIGITS, "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.float32)
    return (table[:, :64] / 16).reshape(-1, 8, 8, 1), table[:, 64].astype(np.int32)


def digits_cnn(learning_rate: float = 1e-3) -> keras.Model:
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def test_the_suggestion_lies_in_the_range_and_the_digits_cnn_converges_at_it() -> None:
    x, y = digits()
    model = digits_cnn()
    before = [w.copy() for w in model.get_weights()]
    found = lr_find.find(model, (x, y), min_lr=1e-6, max_lr=10, steps=150, seed=1)
    lrs, losses = found["lr"], found["loss"]
    assert len(lrs) == len(losses) == len(found["smoothed"]) >= 20
    assert lrs[0] == pytest.approx(1e-6) and all(b > a for a, b in zip(lrs, lrs[1:]))
    valley = found["suggested"]["valley"]
    assert valley is not None and 1e-6 <= valley <= 10
    for name in ("steepest", "minimum"):
        suggested = found["suggested"][name]
        assert suggested is None or 1e-7 <= suggested <= 10
    # The copy trained, the user's model did not: same weights, optimizer untouched.
    for kept, now in zip(before, model.get_weights()):
        np.testing.assert_array_equal(kept, now)
    assert int(model.optimizer.iterations) == 0
    assert found["settings"]["optimizer"] == "Adam"

    trained = digits_cnn(learning_rate=valley)
    history = trained.fit(x, y, epochs=5, batch_size=32, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    assert history["accuracy"][-1] > 0.9


def linear_regression() -> tuple:
    """A one-Dense model under SGD and 256 rows of a linear target with a little noise.

    The noise keeps the loss off zero: on a noiseless target SGD at a rate near its
    best can fit the rows exactly, the gradients become 0 and no rate diverges after.
    """
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 4)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32"))[:, None]
    y += rng.normal(scale=0.1, size=y.shape).astype("float32")
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model, x, y


def test_a_ramp_into_divergence_stops_early_and_says_why() -> None:
    model, x, y = linear_regression()
    found = lr_find.find(model, (x, y), min_lr=1e-4, max_lr=1e4, steps=200, batch_size=32)
    assert len(found["loss"]) < 200
    assert found["stopped"].startswith(("the loss diverged", "the loss became"))
    assert found["diverged"] is True and found["advice"] is None
    assert found["lr"][-1] < 1e4


def test_valley_and_steepest_on_a_known_curve() -> None:
    lrs = list(np.logspace(-5, 0, 51))
    # Flat, then falling from 1e-4 to 1e-2, then blowing up.
    losses = [2.0 if lr < 1e-4 else 2.0 - math.log10(lr / 1e-4) for lr in lrs]
    losses = [
        loss if lr <= 1e-2 else 0.0 + 10 * math.log10(lr / 1e-2) for lr, loss in zip(lrs, losses)
    ]
    suggested = lr_find.valley(lrs, losses)
    assert suggested is not None and 1e-4 <= suggested <= 1e-2
    steep = lr_find.steepest(lrs, losses)
    assert steep is not None and 1e-4 <= steep <= 1e-2
    assert lr_find.smooth([1.0, 1.0, 1.0], 0.9) == pytest.approx([1.0, 1.0, 1.0])


def test_a_curve_turned_up_when_it_rose_after_its_lowest() -> None:
    # Fell from 2 to 1 by the middle, then rose back to 1.5: a turn to read rates against
    # (the digits CNN's ramp to 10 ends so, short of 4 x its lowest).
    assert lr_find.turned_up([2.0 - i / 10 for i in range(10)] + [1.0 + i / 20 for i in range(11)])
    still_falling = [2.0 - i / 20 for i in range(20)]
    assert not lr_find.turned_up(still_falling)
    # lowest in the last tenth: the ramp ended on its way down
    assert not lr_find.turned_up([*still_falling, still_falling[-1] + 0.01])
    # a flat end that rose by less than a quarter of the fall is no turn
    assert not lr_find.turned_up(still_falling[:10] + [1.5] * 5 + [1.55] * 5)
    # nor is noise on a flat curve (rates too small to teach)
    assert not lr_find.turned_up([2.0, 1.99, 1.995, 2.0, 2.01, 2.005, 2.0, 2.02, 2.03, 2.03, 2.04])


def test_data_the_core_cannot_read_is_refused_before_training() -> None:
    answer = bridge.call("lr_find", {"model": digits_cnn(), "data": "x.csv"})
    assert not answer["ok"]
    assert answer["r_class"] == "gpukeras_error_bad_data"
    assert "data cannot be str" in answer["message"]


def test_a_ramp_that_never_diverges_suggests_nothing_and_says_what_to_change() -> None:
    # issue #32, item 8: rates read off a curve that never turned up are withheld.
    model, x, y = linear_regression()
    # every step trains on all 256 rows: the loss moves only by what rates this small teach
    found = lr_find.find(model, (x, y), min_lr=1e-7, max_lr=1e-4, steps=12, batch_size=256, seed=1)
    assert len(found["loss"]) == 12
    assert found["diverged"] is False
    assert found["stopped"] == (
        "ran all 12 steps; the loss never diverged, nor rose after its lowest"
    )
    assert found["suggested"] == {"valley": None, "steepest": None, "minimum": None}
    assert "higher max_lr (e.g. max_lr = 0.001)" in found["advice"]
    assert "more steps (e.g. steps = 24)" in found["advice"]


def test_a_batch_size_for_a_dataset_is_refused_by_the_batch_rule() -> None:
    tf = pytest.importorskip("tensorflow")
    model, x, y = linear_regression()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    answer = bridge.call("lr_find", {"model": model, "data": dataset, "batch_size": 16})
    assert not answer["ok"]
    assert answer["r_class"] == "gpukeras_error_bad_argument"
    assert answer["message"] == "`batch_size` is for R data: a dataset makes its own batches."
