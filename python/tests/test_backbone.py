"""Keras' image backbones with a new head, and their fine-tuning (train/backbone.py).

Real keras.applications backbones with random weights (``weights=None``, or a weights file
the test writes) on 32x32 images: no download.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpukeras.core.errors import BadArgumentError, MissingFilesError
from gpukeras.core.runtime import config
from gpukeras.train import backbone


def images(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 255, (count, 32, 32, 3)).astype("float32")


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
    by_hand = keras.ops.convert_to_numpy(model.get_layer("head")(features))
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
