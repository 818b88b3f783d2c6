"""Keras' image backbones with a new head, and their fine-tuning (train/backbone.py).

Real keras.applications backbones with random weights (``weights=None``, or a weights file
the test writes) on 32x32 images, and a tiny KerasHub image classifier preset that
save_to_preset() writes: no download.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import keras_outputs, low_precision, onnx_under, requires, run_core
from gpukeras.core.errors import BadArgumentError, MissingFilesError
from gpukeras.core.runtime import config
from gpukeras.data.encoding import image_encoding
from gpukeras.data.source_files import tensorflow
from gpukeras.serve import export, scoring
from gpukeras.train import backbone, pretrained


def images(count: int, seed: int = 0, size: int = 32) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 255, (count, size, size, 3)).astype("float32")


@pytest.fixture(scope="module")
def small() -> dict:
    return backbone.image_backbone("MobileNetV3Small", 3, (32, 32), weights=None)


def test_the_backbone_is_frozen_and_only_the_head_trains(small: dict) -> None:
    model = small["model"]
    head = model.get_layer("head")
    assert small["trainable"] == head.count_params() == (576 + 1) * 3
    assert small["parameters"] == model.count_params()
    frozen = [w.numpy().copy() for w in model.get_layer(backbone.BACKBONE_LAYER).weights]
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    model.fit(images(8), labels, epochs=1, batch_size=4, verbose=0)
    after = model.get_layer(backbone.BACKBONE_LAYER).weights
    # the BatchNormalization statistics too: the backbone runs in inference mode
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(frozen, after))
    predicted = model.predict(images(2, seed=1), verbose=0)
    np.testing.assert_allclose(predicted.sum(axis=1), 1, rtol=1e-5)


def test_the_backbones_own_preprocessing_is_the_models_first_operation(tmp_path: Path) -> None:
    keras = config.keras()
    built = backbone.image_backbone("MobileNetV2", 2, (32, 32), weights=None, dropout=0.0)
    model = built["model"]
    x = images(2)
    # MobileNetV2's: pixels to [-1, 1]; then the backbone and the head
    features = model.get_layer(backbone.BACKBONE_LAYER)(
        keras.applications.mobilenet_v2.preprocess_input(x.copy()), training=False
    )
    # float32: under mixed precision (a GPU's "auto") the head called alone gives bfloat16
    by_hand = keras.ops.convert_to_numpy(model.get_layer("head")(features)).astype("float32")
    np.testing.assert_allclose(model.predict(x, verbose=0), by_hand, rtol=1e-4, atol=1e-6)
    # saved with the model: a loaded copy predicts the same
    path = tmp_path / "mobilenet.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), by_hand, rtol=1e-4, atol=1e-6)


def test_unfreeze_opens_the_top_layers_but_batch_normalization(small: dict) -> None:
    keras = config.keras()
    model = small["model"]
    opened = backbone.unfreeze(model, 10, learning_rate=1e-5)
    base = model.get_layer(backbone.BACKBONE_LAYER)
    top = base.layers[-10:]
    for layer in base.layers:
        wanted = any(layer is t for t in top) and not isinstance(
            layer, keras.layers.BatchNormalization
        )
        assert layer.trainable == wanted, layer.name
    assert opened["unfrozen"] == [t.name for t in top if t.trainable and t.weights]
    assert opened["unfrozen"]  # some of the top ten have weights
    head = model.get_layer("head").count_params()
    assert opened["trainable"] == head + sum(
        base.get_layer(n).count_params() for n in opened["unfrozen"]
    )
    assert float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)) == pytest.approx(1e-5)
    before = {w.path: w.numpy().copy() for w in base.weights}
    model.fit(images(8), np.array([0, 1, 2, 0, 1, 2, 0, 1]), epochs=1, batch_size=4, verbose=0)
    changed = {w.path for w in base.weights if not np.array_equal(before[w.path], w.numpy())}
    trainable = {w.path for w in base.trainable_weights}
    assert changed and changed <= trainable


def test_a_weights_file_is_loaded_and_a_missing_one_refused(tmp_path: Path) -> None:
    keras = config.keras()
    source = keras.applications.MobileNetV3Small(
        include_top=False, weights=None, input_shape=(32, 32, 3), pooling="avg"
    )
    path = tmp_path / "small.weights.h5"
    source.save_weights(path)
    built = backbone.image_backbone("MobileNetV3Small", 2, (32, 32), weights=str(path))
    base = built["model"].get_layer(backbone.BACKBONE_LAYER)
    for got, want in zip(base.weights, source.weights):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(MissingFilesError, match="does not exist"):
        backbone.image_backbone("MobileNetV3Small", 2, (32, 32), weights=str(tmp_path / "no.h5"))


def test_an_unknown_backbone_is_refused_with_the_closest_name() -> None:
    with pytest.raises(BadArgumentError, match='Did you mean "ResNet50"'):
        backbone.image_backbone("Resnet50", 2, (32, 32), weights=None)
    with pytest.raises(BadArgumentError, match="could not be built"):
        backbone.image_backbone("ResNet50", 2, (8, 8), weights=None)


def test_every_backbone_has_a_family_with_its_preprocessing() -> None:
    keras = config.keras()
    names = backbone.backbone_names()
    assert {"ResNet50", "EfficientNetV2S", "ResNet50V2", "VGG16", "ConvNeXtTiny"} <= set(names)
    for name in names:
        assert callable(getattr(keras.applications, backbone._family(name)).preprocess_input)


def test_a_model_without_a_backbone_is_refused() -> None:
    keras = config.keras()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(BadArgumentError, match="no backbone"):
        backbone.unfreeze(model, 3)


# A KerasHub image classifier preset (tests/testthat/python/tiny_preset.py: a one-block ResNet
# with random weights, whose image converter resizes to 24x24 and scales to [0, 1]).
@pytest.fixture(scope="module")
def hub_preset(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("keras_hub")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "testthat" / "python"))
    from tiny_preset import save_tiny_image_preset

    return save_tiny_image_preset(str(tmp_path_factory.mktemp("hub") / "tiny-image"))


def image_dataset(count: int, size: int = 40) -> Any:
    """Images of ``size`` pixels in [0, 255], the class the brighter ones' (as gpu_dataset()
    reads an image folder), in batches of 4."""
    tf = tensorflow()
    x = images(count, size=size)
    labels = (x.mean(axis=(1, 2, 3)) > 127.5).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, labels)).batch(4)


@pytest.mark.slow
def test_a_kerashub_preset_trains_its_head_then_its_top_layers(hub_preset: str) -> None:
    import keras_hub

    keras = config.keras()
    built = backbone.image_backbone(hub_preset, 2, (40, 40), dropout=0.1, learning_rate=1e-2)
    model = built["model"]
    assert isinstance(model, keras_hub.models.ResNetImageClassifier)
    assert built["backbone"] == hub_preset
    assert not model.backbone.trainable
    # only the new head (64 features, 2 classes) trains
    assert built["trainable"] == 64 * 2 + 2
    assert built["parameters"] == model.count_params() == 76224 + 130
    frozen = [w.numpy().copy() for w in model.backbone.weights]
    model.fit(image_dataset(8), epochs=1, verbose=0)
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(frozen, model.backbone.weights))

    # the preset's converter runs in the pipeline, as KerasHub's predict() applies it: on
    # images of any size, resized to 24x24 and scaled, the model itself takes its output
    x = images(3, size=40)
    converted = model.preprocessor.image_converter(x)
    assert tuple(converted.shape) == (3, 24, 24, 3)
    logits = keras.ops.convert_to_numpy(model(converted, training=False))
    predicted = scoring.predict(model, x)
    np.testing.assert_allclose(predicted, pretrained.probabilities(model, logits), rtol=1e-5)
    np.testing.assert_allclose(predicted.sum(axis=1), 1, rtol=1e-5)

    opened = backbone.unfreeze(model, 4, learning_rate=1e-5)
    top = model.backbone.layers[-4:]
    for layer in model.backbone.layers:
        wanted = any(layer is t for t in top) and not isinstance(
            layer, keras.layers.BatchNormalization
        )
        assert layer.trainable == wanted, layer.name
    assert opened["unfrozen"] and opened["trainable"] > built["trainable"]
    assert float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)) == pytest.approx(1e-5)
    before = {w.path: w.numpy().copy() for w in model.backbone.weights}
    model.fit(image_dataset(8), epochs=1, verbose=0)
    changed = {p for p, w in before.items() if not np.array_equal(w, _by_path(model, p))}
    assert changed and changed <= {w.path for w in model.backbone.trainable_weights}


def _by_path(model: Any, path: str) -> np.ndarray:
    return next(w.numpy() for w in model.backbone.weights if w.path == path)


@pytest.fixture(scope="module")
def hub_fit(hub_preset: str) -> Any:
    """The preset's classifier, its head trained an epoch, which tests save or export (neither
    changes it)."""
    model = backbone.image_backbone(hub_preset, 2, (40, 40), learning_rate=1e-2)["model"]
    model.fit(image_dataset(8), epochs=1, verbose=0)
    return model


@pytest.mark.slow
def test_a_saved_preset_classifier_predicts_the_same_in_a_fresh_python(
    hub_fit: Any, tmp_path: Path
) -> None:
    model = hub_fit
    x = images(3, size=40)
    expected = scoring.predict(model, x)
    path = str(tmp_path / "images.keras")
    pretrained.save_model(model, path)
    run = run_core(
        "load_model",
        {"path": path},
        after=(
            "import numpy as np\n"
            "from gpukeras.serve import scoring\n"
            "model = result['value']['model']\n"
            "x = np.random.default_rng(0).uniform(0, 255, (3, 40, 40, 3)).astype('float32')\n"
            "readback['predicted'] = scoring.predict(model, x).tolist()\n"
            "readback['compiled'] = model.compiled\n"
            "readback['frozen'] = not model.backbone.trainable\n"
            "result = {'ok': result['ok'], 'warnings': result.get('warnings')}"
        ),
    )
    assert run.result == {"ok": True, "warnings": None}
    assert run.readback["compiled"] and run.readback["frozen"]
    np.testing.assert_allclose(np.array(run.readback["predicted"]), expected, rtol=1e-5)


# The image folder's encoding gpu_fit() records for the 40x40 images (gpu_dataset()).
IMAGE_ENCODING = image_encoding(["dark", "light"], [40, 40], 3, "rgb", None)


def served(path: str, x: np.ndarray, signature: str = "serving_default") -> dict[str, Any]:
    """The SavedModel at ``path`` as a server loads it (TensorFlow alone): ``signature``'s
    outputs for the images ``x``."""
    tf = tensorflow()
    answer = tf.saved_model.load(path).signatures[signature](x=tf.constant(x))
    return {name: value.numpy() for name, value in answer.items()}


@pytest.mark.slow
def test_an_exported_preset_classifier_scores_raw_images_as_predict_does(
    hub_fit: Any, tmp_path: Path
) -> None:
    requires("tensorflow")  # a SavedModel is written by TensorFlow
    model = hub_fit
    x = images(3, seed=5, size=40)
    expected = scoring.predict(model, x)
    path = str(tmp_path / "served")
    written = export.export(model, path, "savedmodel", IMAGE_ENCODING)
    assert [i["shape"] for i in written["inputs"]] == [[40, 40, 3]]
    got = served(path, x)
    # the preset's converter (24x24, [0, 1]) and the softmax of the logits, as predict()
    np.testing.assert_allclose(got["output"], expected, atol=1e-5)
    np.testing.assert_allclose(got["light"], expected[:, 1], atol=1e-5)
    assert got["class"].tolist() == [[b"dark", b"light"][i] for i in expected.argmax(axis=1)]
    # ``encoded`` is the model's own function: the converted images in, its logits out (in
    # bfloat16, the simulated-GPU run's, eager and graph differ in the last bit)
    converted = config.keras().ops.convert_to_numpy(model.preprocessor.image_converter(x))
    logits = keras_outputs(config.keras().ops.convert_to_numpy(model(converted, training=False)))
    encoded = served(path, converted, "encoded")
    tolerance = 1e-2 if low_precision() else 1e-5
    np.testing.assert_allclose(keras_outputs(next(iter(encoded.values()))), logits, atol=tolerance)
    about = json.loads((tmp_path / "served" / "assets.extra" / "gpukeras.json").read_text())
    assert about["preprocessing"] == {
        "image_size": [24, 24],
        "scale": pytest.approx(1 / 255),
        "offset": None,
        "crop_to_aspect_ratio": True,
        "interpolation": "bilinear",
        "antialias": False,
        "activation": "softmax",
    }


@pytest.mark.slow
def test_a_preset_trains_predicts_and_exports_on_jax(hub_preset: str, tmp_path: Path) -> None:
    """On JAX: the head, then the top layers, train; predict() gives probabilities; the
    SavedModel scores raw images as predict() does (its converter and softmax inside)."""
    requires("jax")
    path = str(tmp_path / "jax")
    run = run_core(
        "image_backbone",
        {"backbone": hub_preset, "num_classes": 2, "image_size": [40, 40]},
        env={"KERAS_BACKEND": "jax"},
        after=(
            "import numpy as np\n"
            "from gpukeras.data.encoding import image_encoding\n"
            "from gpukeras.data.source_files import tensorflow\n"
            "from gpukeras.serve import export, scoring\n"
            "from gpukeras.train import backbone\n"
            "tf = tensorflow()\n"
            "model = result['value']['model']\n"
            "x = np.random.default_rng(0).uniform(0, 255, (8, 40, 40, 3)).astype('float32')\n"
            "data = tf.data.Dataset.from_tensor_slices((x, np.arange(8) % 2)).batch(4)\n"
            "model.fit(data, epochs=1, verbose=0)\n"
            "readback['head'] = backbone.unfreeze(model, 4)['trainable']\n"
            "model.fit(data, epochs=1, verbose=0)\n"
            "readback['sums'] = scoring.predict(model, x).sum(axis=1).tolist()\n"
            "x = np.random.default_rng(5).uniform(0, 255, (3, 40, 40, 3)).astype('float32')\n"
            "encoding = image_encoding(['dark', 'light'], [40, 40], 3, 'rgb', None)\n"
            f"export.export(model, {path!r}, 'savedmodel', encoding)\n"
            "readback['predicted'] = scoring.predict(model, x).tolist()\n"
            "readback['backend'] = __import__('keras').backend.backend()\n"
            "result = {'ok': result['ok']}"
        ),
        timeout=240,
    )
    assert run.result == {"ok": True}
    assert run.readback["backend"] == "jax"
    assert run.readback["head"] > 130
    np.testing.assert_allclose(run.readback["sums"], 1, rtol=1e-5)
    x = np.random.default_rng(5).uniform(0, 255, (3, 40, 40, 3)).astype("float32")
    got = served(path, x)
    np.testing.assert_allclose(got["output"], np.array(run.readback["predicted"]), atol=1e-5)


@pytest.mark.slow
def test_onnx_of_a_mixed_precision_preset_classifier_gives_its_logits_in_float32(
    hub_preset: str, tmp_path: Path
) -> None:
    """gpu_setup()'s choice on a GPU (mixed_bfloat16): the ONNX file is a float32 copy's,
    which was built from the model's input shape, whose height and width a KerasHub image
    model leaves open ("'NoneType' object cannot be interpreted as an integer"). The graph
    takes the converted images and gives the logits, which the JSON's ``preprocessing``
    makes predict()'s probabilities."""
    with onnx_under("mixed_bfloat16") as keras:
        model = backbone.image_backbone(hub_preset, 2, (40, 40), learning_rate=1e-2)["model"]
    model.fit(image_dataset(8), epochs=1, verbose=0)
    assert model.backbone.layers[-1].compute_dtype == "bfloat16"
    path = tmp_path / "images.onnx"
    export.export(model, str(path), "onnx", IMAGE_ENCODING)
    about = json.loads(export.onnx_encoding_path(str(path)).read_text())
    assert about["preprocessing"]["image_size"] == [24, 24]
    assert about["preprocessing"]["activation"] == "softmax"
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == about["onnx"]["inputs"]
    x = images(3, seed=5, size=40)
    converted = keras.ops.convert_to_numpy(model.preprocessor.image_converter(x))
    got = session.run(None, {about["onnx"]["inputs"][0]: converted.astype("float32")})[0]
    assert got.dtype == np.float32 and got.shape == (3, 2)
    logits = keras_outputs(keras.ops.convert_to_numpy(model(converted, training=False)))
    np.testing.assert_allclose(got, logits, atol=5e-2)  # bfloat16's rounding, not float32's
    probabilities = np.exp(got) / np.exp(got).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probabilities, scoring.predict(model, x), atol=2e-2)
    assert model.backbone.layers[-1].compute_dtype == "bfloat16"  # the user's model as it was


@pytest.mark.slow
def test_a_preset_that_is_no_image_classifier_is_refused_naming_the_argument(
    hub_preset: str, tmp_path: Path
) -> None:
    from tiny_preset import save_tiny_preset

    text = save_tiny_preset(str(tmp_path / "text"))
    with pytest.raises(pretrained.BadPresetError, match=r"`backbone`: .* as an image classifier"):
        backbone.image_backbone(text, 2, (40, 40))
    with pytest.raises(pretrained.BadPresetError, match=r"`backbone`: .* not a KerasHub preset"):
        backbone.image_backbone(str(tmp_path), 2, (40, 40))
