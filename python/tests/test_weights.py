"""Class and sample weights (issue #28, item 5): gpu_fit() weighs rows as Keras' own fit()
does with the same weights, on every path a backend trains by (arrays, a gpu_dataset(),
one that maps its rows, two replicas; on JAX the device-resident loop and Keras' own), and
refuses weights the data cannot take."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import CoreRun, requires, run_setup
from gpukeras.core.errors import BadArgumentError, BadDataError
from gpukeras.data import adapters, weights
from gpukeras.data.adapters import given

pytestmark = pytest.mark.slow  # a fresh process per backend, two logical CPU devices


@pytest.fixture(scope="module", params=["tensorflow", "jax"])
def weighted(request: pytest.FixtureRequest) -> CoreRun:
    requires("tensorflow")  # two of the paths are gpu_dataset()s: tf.data, on JAX too
    run = run_setup(request.param, {"cpu_devices": 2}, "import weighted_fits")
    assert run.result["ok"], run.stderr[-3000:]
    assert "keras" in run.readback, run.stderr[-3000:]
    return run


def test_weighted_runs_end_where_keras_own_weighted_fit_ends(weighted: CoreRun) -> None:
    readback = weighted.readback
    assert readback["keras"] > 1e-2  # the weights change what Keras learns
    paths = [path for path in readback if path != "keras"]
    assert len(paths) >= 4
    for path in paths:
        for weighting in ("class", "sample", "equal"):
            found = readback[path][weighting]
            assert found["apart"] < 1e-5, (path, weighting, found)


def test_each_path_is_the_one_named(weighted: CoreRun) -> None:
    readback = weighted.readback
    jax = "keras_arrays" in readback
    expected = {
        "arrays": "device arrays" if jax else "arrays",
        "gpu_dataset": "device arrays" if jax else "dataset",
        "gpu_dataset_map": "dataset",
    }
    for path, kind in expected.items():
        assert {run["data"] for run in readback[path].values()} == {kind}, path
    if jax:
        assert readback["keras_arrays"]["class"]["data"] == "keras arrays"


# What the weights refuse --------------------------------------------------------------
Y = np.array([0, 1, 1, 0])


def test_class_weight_becomes_keras_sample_weights() -> None:
    made = weights.row_weights(Y, None, {1: 3.0}, 4)
    assert made.dtype == np.float32
    np.testing.assert_array_equal(made, [1.0, 3.0, 3.0, 1.0])
    one_hot = np.eye(2)[Y]
    np.testing.assert_array_equal(weights.row_weights(one_hot, None, {0: 2.0}, 4), [2, 1, 1, 2])
    assert weights.row_weights(Y, None, None, 4) is None


@pytest.mark.parametrize(
    ("y", "given", "class_weight", "error", "words"),
    [
        (Y, np.ones(4), {1: 2.0}, BadArgumentError, "not both"),
        (None, None, {1: 2.0}, BadArgumentError, "has none"),
        ({"a": Y, "b": Y}, None, {1: 2.0}, BadArgumentError, "one output"),
        (Y, np.ones(3), None, BadDataError, "one number per row"),
        (None, np.ones(4), None, BadDataError, "no labels"),
    ],
)
def test_weights_the_data_cannot_take_are_refused(y, given, class_weight, error, words) -> None:
    with pytest.raises(error, match=words):
        weights.row_weights(y, given, class_weight, 4)


def test_the_adapter_gives_keras_the_weights_with_the_arrays() -> None:
    x = np.zeros((4, 2), "float32")
    context = adapters.FeedContext("tensorflow", batch_size=2, seed=1, class_weight={0: 0.5})
    adapter = adapters.get_data_adapter(
        adapters.given((x, Y)), adapters.given(None, False), context
    )
    assert adapter.rows == 4
    with pytest.raises(BadArgumentError, match="not both"):
        adapters.get_data_adapter(
            adapters.given((x, Y, np.ones(4))), adapters.given(None, False), context
        )


# Which losses the weights reach, as gpu_fit()'s settings say (issue #32, item 8) --------
def test_the_settings_say_which_losses_are_weighted() -> None:
    x, w = np.zeros((4, 2), "float32"), np.ones(4, "float32")
    assert given((x, Y, w)).weighted and not given((x, Y)).weighted
    assert weights.describe(False, False, None) is None
    by_class = weights.describe(False, False, {1: 3.0})
    assert by_class is not None
    assert by_class["training"] == "class_weight" and by_class["validation"] == "none"
    assert by_class["class_weight"] == {"1": 3.0}
    assert "Keras applies class_weight to training only" in by_class["note"]  # type: ignore[operator]
    both = weights.describe(True, True, None)
    assert both is not None and both["validation"] == "sample_weight"
    assert "validation rows' own sample weights" in both["note"]  # type: ignore[operator]
    alone = weights.describe(True, False, None)
    assert alone is not None and "the validation data has none" in alone["note"]  # type: ignore[operator]
    unvalidated = weights.describe(True, None, None)
    assert unvalidated is not None and unvalidated["validation"] is None
    for described in (by_class, both, alone, unvalidated):
        assert "compile(metrics = ) are not weighted" in described["note"]  # type: ignore[operator]


def test_a_split_gpu_dataset_keeps_the_weights_on_both_sides() -> None:
    # gpu_dataset(sample_weight = , validation_split = ) splits the weights with the rows,
    # as Keras' own validation_split does: the validation loss is weighted too.
    pytest.importorskip("tensorflow")
    from gpukeras.data import pipeline

    x = np.arange(20, dtype="float32").reshape(10, 2)
    y = np.arange(10, dtype="float32")
    made = pipeline.from_arrays(
        x, y, sample_weight=np.linspace(0, 1, 10), batch_size=2, validation_split=0.2, seed=1
    )
    described = weights.describe(
        given(made["dataset"]).weighted, given(made["validation"]).weighted, None
    )
    assert described is not None
    assert (described["training"], described["validation"]) == ("sample_weight", "sample_weight")


def test_keras_weighs_the_validation_loss_exactly_when_the_note_says() -> None:
    # The note's claim, checked on Keras itself: validation (x, y, w) gives the weighted
    # loss evaluate() gives with those weights; class_weight leaves validation unweighted.
    from gpukeras.core.runtime import config
    from gpukeras.train import fit

    keras = config.keras()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    w = np.where(y == 1, 5.0, 0.5).astype("float32")

    def model() -> object:
        keras.utils.set_random_seed(1)
        made = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])
        made.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
        return made

    weighted = model()
    found = fit.fit(
        weighted, (x, y, w), (x, y, w), epochs=1, batch_size=16, verbose=0, monitor=False
    )
    val_loss = found["history"]["val_loss"][-1]  # type: ignore[index]
    assert val_loss == pytest.approx(weighted.evaluate(x, y, sample_weight=w, verbose=0), rel=1e-5)
    assert found["settings"]["weights"]["validation"] == "sample_weight"  # type: ignore[index]

    by_class = model()
    found = fit.fit(
        by_class,
        (x, y),
        (x, y),
        epochs=1,
        batch_size=16,
        verbose=0,
        monitor=False,
        class_weight={1: 5.0, 0: 0.5},
    )
    val_loss = found["history"]["val_loss"][-1]  # type: ignore[index]
    assert val_loss == pytest.approx(by_class.evaluate(x, y, verbose=0), rel=1e-5)
    assert found["settings"]["weights"]["validation"] == "none"  # type: ignore[index]
