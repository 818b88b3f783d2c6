"""KerasHub presets loaded for a task (train/pretrained.py), on a tiny preset this test saves.

Real KerasHub: a 2-layer BERT with random weights written by its own save_to_preset(),
loaded back, fine-tuned (fully and with LoRA) and asked to predict. Importing KerasHub
costs 15 s (TensorFlow through tensorflow-text): the tests are slow ones.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import run_core
from gpukeras.train import pretrained

pytest.importorskip("keras_hub")
pytestmark = pytest.mark.slow

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "testthat" / "python"))
from tiny_preset import save_tiny_preset  # noqa: E402


@pytest.fixture(scope="module")
def preset(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_preset(str(tmp_path_factory.mktemp("hub") / "tiny"))


def test_text_classifier_fine_tunes_and_predicts(preset: str) -> None:
    loaded = pretrained.text_classifier(preset, num_classes=2, learning_rate=1e-2)
    model = loaded["model"]
    assert loaded["task"] == "BertTextClassifier"
    assert loaded["trainable"] == loaded["parameters"]
    texts = ["good movie", "great movie", "nice movie", "fine movie"] * 4 + [
        "bad movie",
        "awful movie",
        "poor movie",
        "sad movie",
    ] * 4
    labels = [1] * 16 + [0] * 16
    data = pretrained.text_dataset(texts, labels, batch_size=8, shuffle=True, seed=1)
    model.fit(data, epochs=15, verbose=0)
    scores = model.predict(pretrained.text_dataset(texts, batch_size=8), verbose=0)
    assert scores.shape == (32, 2)
    assert np.mean(np.argmax(scores, axis=1) == np.array(labels)) > 0.9


def test_lora_trains_only_the_adapters_kerashub_adds(preset: str) -> None:
    import keras_hub

    loaded = pretrained.text_classifier(preset, num_classes=3, lora_rank=2)
    reference = keras_hub.models.TextClassifier.from_preset(preset, num_classes=3)
    reference.backbone.enable_lora(rank=2)
    count = pretrained._count
    assert loaded["trainable"] == count(reference.trainable_weights)
    assert count(loaded["model"].backbone.trainable_weights) == count(
        reference.backbone.trainable_weights
    )
    assert loaded["trainable"] < loaded["parameters"] / 4


def test_sequence_length_is_the_preprocessors(preset: str) -> None:
    loaded = pretrained.text_classifier(preset, num_classes=2, sequence_length=6)
    assert loaded["model"].preprocessor.sequence_length == 6


def test_a_folder_that_is_not_a_preset_is_refused(tmp_path: Path) -> None:
    with pytest.raises(pretrained.BadPresetError, match="not a KerasHub preset folder"):
        pretrained.text_classifier(str(tmp_path), num_classes=2)
    with pytest.raises(pretrained.BadPresetError, match="not a KerasHub preset folder"):
        pretrained.text_classifier(str(tmp_path / "none"), num_classes=2)


def test_without_keras_hub_the_error_says_how_to_install_it() -> None:
    run = run_core(
        "text_classifier",
        {"preset": "bert_tiny_en_uncased", "num_classes": 2},
        setup="sys.modules['keras_hub'] = None",
    )
    assert run.result["r_class"] == "gpukeras_error_keras_hub_missing"
    assert "keras-hub is not installed" in run.result["message"]
    assert 'install_gpukeras(extras = "hub")' in run.result["message"]
