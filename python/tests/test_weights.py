"""Class and sample weights (issue #28, item 5): gpu_fit() weighs rows as Keras' own fit()
does with the same weights, on every path a backend trains by (arrays, a gpu_dataset(),
one that maps its rows, two replicas; on JAX the device-resident loop and Keras' own), and
refuses weights the data cannot take."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import CoreRun, run_setup
from gpukeras.core.errors import BadArgumentError, BadDataError
from gpukeras.data import adapters, weights

pytestmark = pytest.mark.slow  # a fresh process per backend, two logical CPU devices


@pytest.fixture(scope="module", params=["tensorflow", "jax"])
def weighted(request: pytest.FixtureRequest) -> CoreRun:
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
    adapter = adapters.get_data_adapter((x, Y), 2, 1, class_weight={0: 0.5})
    assert adapter.rows == 4
    with pytest.raises(BadArgumentError, match="not both"):
        adapters.get_data_adapter((x, Y, np.ones(4)), 2, 1, class_weight={0: 0.5})
