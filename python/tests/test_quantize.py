"""quantize: a smaller copy for inference, its size and accuracy change, the original untouched."""

from __future__ import annotations

import numpy as np
import pytest

from gpukeras import bridge
from gpukeras.core.runtime import config
from gpukeras.data import adapters


@pytest.fixture(scope="module")
def trained() -> tuple[object, np.ndarray, np.ndarray]:
    """A small classifier trained for a few epochs on a learnable rule, and its data."""
    keras = config.keras()
    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(512, 16)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int32") + (x[:, 2] > 1).astype("int32")
    model = keras.Sequential(
        [
            keras.Input((16,)),
            keras.layers.Dense(64, activation="relu", name="hidden"),
            keras.layers.BatchNormalization(name="norm"),
            keras.layers.Dense(3, activation="softmax", name="out"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=8, batch_size=64, verbose=0)
    return model, x, y


def quantize(**kwargs: object) -> dict:
    answer = bridge.call("quantize", kwargs)
    assert answer["ok"], answer
    return answer["value"]


def test_int8_shrinks_dense_kernels_about_4x_and_keeps_predictions_close(trained: tuple) -> None:
    model, x, y = trained
    before = [w.copy() for w in model.get_weights()]
    report = quantize(model=model, mode="int8", data=[x, y], batch_size=128)
    layers = {row["layer"]: row for row in report["layers"]}
    assert {name: row["quantized"] for name, row in layers.items()} == {
        "hidden": True,
        "norm": False,
        "out": True,
    }
    assert (report["layers_quantized"], report["layers_kept"]) == (2, 1)
    # hidden: a 16 x 64 float32 kernel + bias -> int8 kernel + float32 scale + bias.
    hidden = layers["hidden"]
    assert hidden["bytes_before"] == (16 * 64 + 64) * 4
    assert hidden["bytes_after"] == 16 * 64 + 64 * 4 + 64 * 4
    kernel_ratio = (16 * 64 * 4) / (16 * 64 + 64 * 4)
    assert kernel_ratio > 3
    assert layers["norm"]["bytes_before"] == layers["norm"]["bytes_after"] == 4 * 64 * 4
    assert report["size_before"] == {"float32": report["bytes_before"]}
    assert report["size_after"]["int8"] == 16 * 64 + 64 * 3
    assert report["bytes_after"] < report["bytes_before"] / 2
    # Accuracy: outputs close, metrics before and after with their change.
    assert report["output_max_abs_diff"] < 0.05
    assert report["output_mean_abs_diff"] < 0.01
    metrics = {row["metric"]: row for row in report["metrics"]}
    assert set(metrics) == {"accuracy", "loss"}
    assert metrics["accuracy"]["before"] > 0.6  # it learned something
    loss = metrics["loss"]
    assert loss["change"] == pytest.approx(loss["after"] - loss["before"])
    assert abs(metrics["accuracy"]["change"]) < 0.05
    # The copy is a working model; the original is untouched.
    quantized = report["model"]
    assert quantized is not model
    assert [layer.dtype_policy.name for layer in quantized.layers] == [
        "int8_from_float32",
        "float32",
        "int8_from_float32",
    ]
    assert str(quantized.layers[0].kernel.dtype) == "int8"
    assert quantized.predict(x[:4], verbose=0).shape == (4, 3)
    assert [layer.dtype_policy.name for layer in model.layers] == ["float32"] * 3
    assert str(model.layers[0].kernel.dtype) == "float32"
    for old, new in zip(before, model.get_weights()):
        np.testing.assert_array_equal(old, new)


def test_int4_is_smaller_still_and_labels_are_optional(trained: tuple) -> None:
    model, x, _ = trained
    int8 = quantize(model=model, mode="int8")
    int4 = quantize(model=model, mode="int4", data=[x])
    assert int4["bytes_after"] < int8["bytes_after"] < int8["bytes_before"]
    assert int8["output_max_abs_diff"] is None and int8["metrics"] is None
    # Without labels: only the outputs are compared.
    assert int4["metrics"] is None
    assert 0 < int4["output_mean_abs_diff"] < 0.05


def test_an_uncompiled_model_is_compared_by_its_outputs() -> None:
    keras = config.keras()
    model = keras.Sequential([keras.Input((8,)), keras.layers.Embedding(20, 8)])
    tokens = np.arange(40, dtype="int32").reshape(5, 8) % 20
    report = quantize(model=model, data=[tokens, np.zeros((5, 8, 8), "float32")])
    assert report["layers"][0]["layer_class"] == "Embedding" and report["layers_quantized"] == 1
    assert report["metrics"] is None
    assert report["output_max_abs_diff"] < 0.01
    assert not model.compiled


def test_a_tf_dataset_is_evaluated_as_it_is(trained: tuple) -> None:
    if not adapters.tensorflow_available():
        pytest.skip("tf.data needs TensorFlow")
    import tensorflow as tf

    model, x, y = trained
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(100)
    report = quantize(model=model, data=dataset)
    before = {row["metric"]: row["before"] for row in report["metrics"]}
    assert before == pytest.approx(model.evaluate(dataset, verbose=0, return_dict=True))


@pytest.mark.parametrize(
    ("mode", "text"),
    [
        ("float8", "for training with FP8 Tensor Cores"),
        ("gptq", "needs calibration data"),
        ("awq", "needs calibration data"),
        ("int2", "'int2' is not a Keras quantization mode"),
    ],
)
def test_modes_that_make_no_smaller_inference_model_are_refused(
    trained: tuple, mode: str, text: str
) -> None:
    answer = bridge.call("quantize", {"model": trained[0], "mode": mode})
    assert (answer["ok"], answer["r_class"]) == (False, "gpukeras_error_bad_argument")
    assert answer["message"].startswith("mode must be 'int8' or 'int4' (for inference).")
    assert text in answer["message"]


def test_models_that_cannot_be_quantized_give_classed_errors() -> None:
    keras = config.keras()

    class Subclassed(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.dense = keras.layers.Dense(4)

        def call(self, inputs: object) -> object:
            return self.dense(inputs)

    subclassed = Subclassed()
    subclassed(np.zeros((1, 3), "float32"))
    cases = [
        (3, "model must be a Keras 3 model (keras.Model), not builtins.int."),
        (keras.Sequential([keras.layers.Dense(2)]), "The model is not built"),
        (
            keras.Sequential([keras.Input((6, 6, 3)), keras.layers.Conv2D(4, 3)]),
            "has no layer Keras can quantize",
        ),
        (
            keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, dtype="mixed_float16")]),
            "Keras refuses int8 for layers that compute in float16",
        ),
        (subclassed, "works on a copy made with clone_model(), which failed"),
    ]
    for model, text in cases:
        answer = bridge.call("quantize", {"model": model})
        assert (answer["ok"], answer["r_class"]) == (False, "gpukeras_error_bad_model"), answer
        assert text in answer["message"]
    half = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, dtype="mixed_float16")])
    assert quantize(model=half, mode="int4")["layers_quantized"] == 1  # as the message says
