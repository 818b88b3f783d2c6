"""A tiny KerasHub text classifier preset, saved with KerasHub's own save_to_preset(): a
2-layer BERT with random weights and a 16-word vocabulary, for tests that cannot download one.

Used by python/tests/test_pretrained.py and tests/testthat/test-pretrained.R.
"""

from __future__ import annotations

import keras
import keras_hub

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCABULARY += [
    "good",
    "great",
    "fine",
    "nice",
    "bad",
    "awful",
    "poor",
    "sad",
    "the",
    "movie",
    "was",
]


def save_tiny_preset(folder: str, seed: int = 1) -> str:
    """Write the preset into ``folder`` (created) and return it."""
    keras.utils.set_random_seed(seed)
    tokenizer = keras_hub.tokenizers.BertTokenizer(vocabulary=VOCABULARY)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCABULARY),
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=8,
    )
    classifier = keras_hub.models.BertTextClassifier(
        backbone, num_classes=2, preprocessor=preprocessor
    )
    classifier.save_to_preset(folder)
    return folder
