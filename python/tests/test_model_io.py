"""model_io: a model's inputs and outputs, named as its layers name them, with their shapes."""

from __future__ import annotations

from gpukeras import bridge
from gpukeras.core.runtime import config


def test_a_sequential_model_names_its_output_by_its_last_layer() -> None:
    keras = config.keras()
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(3, name="scores", activation="softmax")]
    )
    result = bridge.call("model_io", {"model": model})
    assert result["ok"], result
    described = result["value"]
    assert described["outputs"] == [{"name": "scores", "shape": [None, 3]}]
    assert [part["shape"] for part in described["inputs"]] == [[None, 4]]


def test_a_functional_model_names_each_output() -> None:
    keras = config.keras()
    inputs = keras.Input((2, 5), name="rows")
    flat = keras.layers.Flatten()(inputs)
    model = keras.Model(
        inputs,
        [keras.layers.Dense(1, name="price")(flat), keras.layers.Dense(4, name="kind")(flat)],
    )
    described = bridge.call("model_io", {"model": model})["value"]
    assert [(o["name"], o["shape"]) for o in described["outputs"]] == [
        ("price", [None, 1]),
        ("kind", [None, 4]),
    ]
    assert described["inputs"] == [{"name": "rows", "shape": [None, 2, 5]}]


def test_a_subclassed_model_not_built_has_none() -> None:
    keras = config.keras()

    class Scorer(keras.Model):  # type: ignore[misc,name-defined]
        def call(self, x: object) -> object:
            return x

    described = bridge.call("model_io", {"model": Scorer()})["value"]
    assert described == {"inputs": [], "outputs": []}


def test_several_inputs_each_by_name_a_size_not_fixed_none() -> None:
    """R's checks of a data.frame's width against a model read the inputs' shapes here."""
    keras = config.keras()
    first = keras.Input((3,), name="first")
    second = keras.Input((None,), name="second")
    joined = keras.layers.Concatenate()([first, keras.ops.sum(second, axis=1, keepdims=True)])
    model = keras.Model([first, second], keras.layers.Dense(1, name="score")(joined))
    described = bridge.call("model_io", {"model": model})["value"]
    assert described["inputs"] == [
        {"name": "first", "shape": [None, 3]},
        {"name": "second", "shape": [None, None]},
    ]
    assert described["outputs"] == [{"name": "score", "shape": [None, 1]}]
