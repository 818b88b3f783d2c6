"""Labels that do not suit the model's loss, caught before training with real Keras on the CPU."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from conftest import requires
from gpukeras import bridge
from gpukeras.core.errors import BadDataError
from gpukeras.data import labels, pipeline
from gpukeras.data.adapters import given
from gpukeras.train import fit


def classifier(loss: object, units: int = 3, activation: str = "softmax") -> keras.Model:
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(units, activation=activation)])
    model.compile(optimizer="adam", loss=loss)
    return model


def rows(n: int = 60) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(n, 4)).astype("float32")


CLASS_NUMBERS = np.arange(60, dtype="int32") % 3


@pytest.mark.parametrize(
    "loss",
    ["categorical_crossentropy", "CategoricalCrossentropy", keras.losses.CategoricalCrossentropy()],
)
def test_class_numbers_under_categorical_crossentropy_name_the_sparse_loss(loss: object) -> None:
    model = classifier(loss)
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(BadDataError, match="sparse_categorical_crossentropy") as raised:
        fit.fit(model, (rows(), CLASS_NUMBERS), verbose=0, monitor=False)
    assert "a column per class, 3 here" in str(raised.value)
    for kept, now in zip(before, model.get_weights()):  # refused before training
        np.testing.assert_array_equal(kept, now)


def test_a_gpu_dataset_of_class_numbers_is_refused_the_same_way() -> None:
    requires("tensorflow")  # a gpu_dataset() is tf.data
    built = pipeline.from_arrays(rows(), CLASS_NUMBERS, batch_size=16, seed=1)
    with pytest.raises(BadDataError, match="sparse_categorical_crossentropy"):
        fit.fit(classifier("categorical_crossentropy"), built["dataset"], verbose=0, monitor=False)


def test_one_hot_labels_and_the_sparse_loss_train() -> None:
    one_hot = np.eye(3, dtype="float32")[CLASS_NUMBERS]
    result = fit.fit(classifier("categorical_crossentropy"), (rows(), one_hot), verbose=0)
    assert result["warnings"] == []
    result = fit.fit(
        classifier("sparse_categorical_crossentropy"), (rows(), CLASS_NUMBERS), verbose=0
    )
    assert result["warnings"] == []


def test_binary_crossentropy_on_labels_outside_0_1_trains_with_a_warning() -> None:
    model = classifier("binary_crossentropy", units=1, activation="sigmoid")
    result = fit.fit(model, (rows(), CLASS_NUMBERS + 1), verbose=0, monitor=False)
    assert len(result["history"]["loss"]) == 1  # it trained
    [warning] = result["warnings"]
    assert warning["class"] == "labels"
    assert "range from 1 to 3" in warning["message"]
    assert "sparse_categorical_crossentropy" in warning["message"]
    # 0/1 labels, or labels in [0, 1], are what it takes
    zero_one = (CLASS_NUMBERS == 1).astype("float32")
    assert labels.check(model, given((rows(), zero_one))) is None
    assert labels.check(model, given((rows(), zero_one * 0.5))) is None
    # a gpu_dataset() of rows in memory is read the same way
    requires("tensorflow")  # a gpu_dataset() is tf.data
    built = pipeline.from_arrays(rows(), CLASS_NUMBERS + 1, batch_size=16, seed=1)
    assert "range from 1 to 3" in str(labels.check(model, given(built["dataset"])))


def test_the_bridge_returns_the_refusal_as_bad_data() -> None:
    answer = bridge.call(
        "fit",
        {
            "model": classifier("categorical_crossentropy"),
            "data": (rows(), CLASS_NUMBERS),
            "request": {"verbose": 0, "monitor": False},
        },
    )
    assert not answer["ok"]
    assert answer["r_class"] == "gpukeras_error_bad_data"
