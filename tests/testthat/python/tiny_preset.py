"""Tiny KerasHub presets, saved with KerasHub's own save_to_preset(): a text classifier (a
2-layer BERT with random weights and a 16-word vocabulary) and causal language models (a
2-layer Gemma and GPT-2) and an image classifier (a one-block ResNet), for tests that cannot
download one.

Used by python/tests/test_pretrained.py, python/tests/test_backbone.py and
tests/testthat/test-pretrained.R, tests/testthat/test-backbone.R.
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


# Every tiny backbone's size.
SIZE = {"num_layers": 2, "hidden_dim": 16, "intermediate_dim": 32}


def save_tiny_preset(folder: str, seed: int = 1, dropout: float = 0.1) -> str:
    """Write the preset into ``folder`` (created) and return it; ``dropout``: the backbone's
    and the classifier's (KerasHub's default; 0 trains without randomness of its own)."""
    keras.utils.set_random_seed(seed)
    tokenizer = keras_hub.tokenizers.BertTokenizer(vocabulary=VOCABULARY)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCABULARY), num_heads=2, max_sequence_length=8, dropout=dropout, **SIZE
    )
    classifier = keras_hub.models.BertTextClassifier(
        backbone, num_classes=2, preprocessor=preprocessor, dropout=dropout
    )
    classifier.save_to_preset(folder)
    return folder


WORDS = ["the", "movie", "was", "good", "bad", "fine", "great", "awful"]


def save_tiny_causal_lm_preset(folder: str, seed: int = 1) -> str:
    """Write a tiny GPT-2 causal language model preset into ``folder`` (created) and return
    it: 2 layers, random weights, a byte-pair vocabulary of ``WORDS`` (each spelled by its
    own merges, then joined to the leading space), training sequences of 8 tokens and a
    backbone that takes 16."""
    keras.utils.set_random_seed(seed)
    vocabulary = {"<|endoftext|>": 0, "\u0120": 1}
    merges: list[str] = []
    for character in sorted(set("".join(WORDS))):
        vocabulary[character] = len(vocabulary)
    for word in WORDS:
        spelled = word[0]
        for character in word[1:]:
            merges.append(f"{spelled} {character}")
            spelled += character
            vocabulary.setdefault(spelled, len(vocabulary))
        merges.append(f"\u0120 {word}")
        vocabulary["\u0120" + word] = len(vocabulary)
    merges = list(dict.fromkeys(merges))
    tokenizer = keras_hub.tokenizers.GPT2Tokenizer(vocabulary=vocabulary, merges=merges)
    preprocessor = keras_hub.models.GPT2CausalLMPreprocessor(tokenizer, sequence_length=8)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=len(vocabulary), num_heads=2, max_sequence_length=16, **SIZE
    )
    keras_hub.models.GPT2CausalLM(backbone, preprocessor=preprocessor).save_to_preset(folder)
    return folder


def save_tiny_gemma_preset(folder: str, seed: int = 1) -> str:
    """Write a tiny Gemma causal language model preset into ``folder`` (created) and return
    it: 2 layers, random weights, a sentencepiece model of whole words trained here on a few
    sentences (its tokenizer, unlike GPT-2's byte pairs, is fast enough to fine-tune with in
    a test), training sequences of 8 tokens."""
    import io

    import sentencepiece

    keras.utils.set_random_seed(seed)
    model = io.BytesIO()
    sentences = ["the movie was good", "the movie was bad", "a great movie", "an awful movie"]
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences * 4 + ["the film was fine"]),
        model_writer=model,
        vocab_size=15,
        model_type="word",
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        pad_piece="<pad>",
        bos_piece="<bos>",
        eos_piece="<eos>",
        unk_piece="<unk>",
        minloglevel=2,
    )
    tokenizer = keras_hub.tokenizers.GemmaTokenizer(proto=model.getvalue())
    preprocessor = keras_hub.models.GemmaCausalLMPreprocessor(tokenizer, sequence_length=8)
    backbone = keras_hub.models.GemmaBackbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_query_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        **SIZE,
    )
    keras_hub.models.GemmaCausalLM(backbone, preprocessor=preprocessor).save_to_preset(folder)
    return folder


def save_tiny_image_preset(folder: str, seed: int = 1) -> str:
    """Write a tiny ResNet image classifier preset into ``folder`` (created) and return it:
    a 3x3 stem and one basic block of 64 filters (76,224 random weights; KerasHub's ResNet
    takes no fewer), 3 classes, and the preset's image converter, which resizes images to
    24x24 and scales their pixels of 0 to 255 to [0, 1]. Saved in float32, as published
    presets are, whatever the session's policy: KerasHub loads no preset saved under a mixed
    policy ("Invalid dtype: mixed_bfloat16")."""
    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.ResNetBackbone(
        dtype="float32",
        input_conv_filters=[64],
        input_conv_kernel_sizes=[3],
        stackwise_num_filters=[64],
        stackwise_num_blocks=[1],
        stackwise_num_strides=[1],
        block_type="basic_block",
        use_pre_activation=False,
        image_shape=(None, None, 3),
    )
    converter = keras_hub.layers.ResNetImageConverter(
        image_size=(24, 24), scale=1 / 255, dtype="float32"
    )
    preprocessor = keras_hub.models.ResNetImageClassifierPreprocessor(
        image_converter=converter, dtype="float32"
    )
    classifier = keras_hub.models.ResNetImageClassifier(
        backbone, num_classes=3, preprocessor=preprocessor, dtype="float32"
    )
    classifier.save_to_preset(folder)
    return folder
