"""Keras' image backbones (``keras.applications``) with a new head, and their fine-tuning.

``image_backbone`` builds the model the Keras transfer-learning guide builds: the
backbone without its top, frozen and run in inference mode (its BatchNormalization
layers keep their statistics, then and after ``unfreeze``), global average pooling,
dropout and a softmax head of one unit per class, compiled with Adam. ``unfreeze``
then opens the backbone's top layers (BatchNormalization layers stay frozen) and
compiles the model again at a lower learning rate, the guide's second stage.

The backbone's own preprocessing (``keras.applications.<family>.preprocess_input``:
caffe's mean subtraction for ResNet50 and VGG, [-1, 1] for MobileNetV2 and
Xception, nothing for the families that carry it as layers) is the model's first
operation, so the model takes pixels in [0, 255] as gpu_dataset() reads an image
folder (without ``rescale``), and every path that scores with it (predict(),
predictions to a file, the prediction service, an export) applies it alike, with no
second copy of the rule. Keras saves those operations with the model.

A KerasHub image classifier preset (a name such as "resnet_50_imagenet", or a folder
``save_to_preset()`` wrote) takes the same two stages: KerasHub's own ``ImageClassifier``
loaded with a new head (its pooling, dropout and a Dense layer giving logits), its backbone
frozen. Its preprocessing is the preset's ``ImageConverter`` (resizing to the preset's size,
scaling and offset), applied as KerasHub applies it: by the task's preprocessor, mapped over
the batches in the input pipeline of its ``fit()``, ``evaluate()``, ``predict()`` and
``predict_on_batch()`` (so by every way gpukeras scores with it), not inside the model
itself; gpu_save() keeps the preprocessor with the model.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Sequence
from typing import Any

from gpukeras.core.errors import BadArgumentError, MissingFilesError
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.train import pretrained

# Each backbone family's public module in keras.applications (where its preprocess_input
# lives), by the prefix of the backbones' names; the longest prefix that matches wins.
FAMILIES = {
    "ConvNeXt": "convnext",
    "DenseNet": "densenet",
    "EfficientNetV2": "efficientnet_v2",
    "EfficientNet": "efficientnet",
    "InceptionResNetV2": "inception_resnet_v2",
    "InceptionV3": "inception_v3",
    "MobileNetV2": "mobilenet_v2",
    "MobileNetV3": "mobilenet_v3",
    "MobileNet": "mobilenet",
    "NASNet": "nasnet",
    "ResNet50": "resnet50",
    "ResNet101": "resnet",
    "ResNet152": "resnet",
    "VGG16": "vgg16",
    "VGG19": "vgg19",
    "Xception": "xception",
}
# The name of the backbone's layer in the model (the model's own layers are an input,
# the preprocessing, pooling, dropout and "head").
BACKBONE_LAYER = "backbone"


def _family(name: str) -> str:
    """The keras.applications module of backbone ``name`` (a V2 ResNet's is resnet_v2)."""
    if name.startswith("ResNet") and name.endswith("V2"):
        return "resnet_v2"
    prefix = max((p for p in FAMILIES if name.startswith(p)), key=len)
    return FAMILIES[prefix]


def backbone_names() -> list[str]:
    """The backbones keras.applications has (class-like names, e.g. "ResNet50")."""
    keras = config.keras()
    return sorted(
        name
        for name in dir(keras.applications)
        if name[:1].isupper() and any(name.startswith(p) for p in FAMILIES)
    )


def _is_preset(name: str) -> bool:
    """Whether backbone ``name`` is a KerasHub preset, not one of keras.applications'
    backbones: a folder, a URL ("kaggle://...", "hf://..."), or a name without capitals, as
    KerasHub's preset names are ("resnet_50_imagenet")."""
    if name in backbone_names():
        return False
    return pretrained.looks_like_path(name) or "://" in name or name == name.lower()


def _check_backbone(name: str) -> None:
    names = backbone_names()
    if name in names:
        return
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f' Did you mean "{close[0]}"?' if close else ""
    raise BadArgumentError(
        f'`backbone`: "{name}" is not one of keras.applications\' backbones.{hint} '
        f"They are: {', '.join(names)}. A KerasHub image classifier preset is a folder "
        'save_to_preset() wrote or a preset name in lower case, e.g. "resnet_50_imagenet".'
    )


def _weights(weights: str | None) -> str | None:
    """``weights`` as keras.applications takes them: "imagenet", None, or a weights file
    that exists (MissingFilesError otherwise)."""
    if weights is None or weights == "imagenet":
        return weights
    path = os.path.expanduser(weights)
    if not os.path.isfile(path):
        raise MissingFilesError(
            f"`weights`: the file '{weights}' does not exist. Give \"imagenet\" (downloaded "
            "once, as Keras does), NULL for random weights, or the path of a weights file "
            "saved from the same backbone without its top (model$save_weights())."
        )
    return path


def image_backbone(
    backbone: str,
    num_classes: int,
    image_size: Sequence[int],
    weights: str | None = "imagenet",
    dropout: float = 0.2,
    learning_rate: float = 1e-3,
) -> Record:
    """Build and compile ``backbone`` with a new head of ``num_classes`` (see the module).

    Args:
        backbone: a keras.applications backbone's name, e.g. "ResNet50", "EfficientNetV2S";
            or a KerasHub image classifier preset (``_is_preset``), loaded as KerasHub's
            ``ImageClassifier.from_preset()`` loads it (a name downloads once).
        num_classes: the number of classes (an image folder's class sub-folders).
        image_size: the images' (height, width), as gpu_dataset() reads them; RGB. A
            preset's image converter resizes them to its own size.
        weights: "imagenet" (Keras downloads them once), None (random), or the path of a
            weights file of the backbone without its top. A preset has its own weights:
            not used.
        dropout: the dropout rate before the head.
        learning_rate: Adam's learning rate for the head.

    Returns:
        ``model`` (compiled: sparse categorical cross-entropy, accuracy; on a preset's
        logits), ``backbone`` (its name), ``trainable`` (the trainable weights' count: the
        head's) and ``parameters`` (all weights' count).

    Raises:
        BadArgumentError: an unknown backbone, or an image size or weights it does not take.
        MissingFilesError: a weights file that does not exist.
        pretrained.KerasHubMissingError: a preset, without KerasHub.
        pretrained.BadPresetError: a preset that is not an image classifier's (or no folder
            save_to_preset() wrote), naming ``backbone``.
    """
    keras = config.keras()
    if _is_preset(backbone):
        return _preset_classifier(backbone, num_classes, dropout, learning_rate)
    _check_backbone(backbone)
    height, width = (int(v) for v in image_size)
    make = getattr(keras.applications, backbone)
    try:
        base = make(
            include_top=False,
            weights=_weights(weights),
            input_shape=(height, width, 3),
            pooling="avg",
            name=BACKBONE_LAYER,
        )
    except ValueError as error:
        raise BadArgumentError(f"`backbone` {backbone} could not be built: {error}") from error
    base.trainable = False
    preprocess = getattr(keras.applications, _family(backbone)).preprocess_input
    inputs = keras.Input((height, width, 3), name="pixels")
    features = base(preprocess(inputs), training=False)
    features = keras.layers.Dropout(float(dropout))(features)
    outputs = keras.layers.Dense(int(num_classes), activation="softmax", name="head")(features)
    model = keras.Model(inputs, outputs, name=f"{backbone}_classifier")
    _compile(model, learning_rate)
    return _summary(model, backbone=backbone)


def _preset_classifier(
    preset: str, num_classes: int, dropout: float, learning_rate: float
) -> Record:
    """KerasHub's image classifier of ``preset`` with a new head of ``num_classes`` after
    ``dropout``, its backbone frozen, compiled for its logits (``image_backbone``'s result)."""
    model = pretrained.load_task(
        "ImageClassifier",
        preset,
        arg="backbone",
        example="resnet_50_imagenet",
        num_classes=int(num_classes),
        dropout=dropout,
    )
    model.backbone.trainable = False
    _compile(model, learning_rate)
    return _summary(model, backbone=preset)


def unfreeze(model: Model, layers: int, learning_rate: float = 1e-5) -> Record:
    """Open the top ``layers`` layers of ``model``'s backbone to training (BatchNormalization
    layers stay frozen, as the Keras guide says) and compile it again with Adam at
    ``learning_rate``, its loss and metrics as ``image_backbone`` compiled them.

    Returns:
        ``model``, ``unfrozen`` (the layers opened, by name), ``trainable`` and ``parameters``.

    Raises:
        BadArgumentError: a model ``image_backbone`` did not build (``layers``, a count of
            at least 1, is checked in R).
    """
    keras = config.keras()
    base = _backbone_of(model)
    base.trainable = True
    opened = []
    top = base.layers[-int(layers) :]
    for layer in base.layers:
        layer.trainable = any(layer is t for t in top) and not isinstance(
            layer, keras.layers.BatchNormalization
        )
        if layer.trainable and layer.weights:
            opened.append(layer.name)
    _compile(model, learning_rate)
    return _summary(model, unfrozen=opened)


def _backbone_of(model: Model) -> Any:
    """``model``'s backbone: a KerasHub image classifier's own, or the layer
    ``image_backbone`` named so."""
    if type(model).__module__.startswith("keras_hub.") and hasattr(model, "backbone"):
        return model.backbone
    try:
        return model.get_layer(BACKBONE_LAYER)
    except ValueError as error:
        raise BadArgumentError(
            "This model has no backbone to unfreeze: gpu_fine_tune() takes a model "
            "gpu_image_backbone() built (or a gpu_fit() of one)."
        ) from error


def _compile(model: Model, learning_rate: float) -> None:
    optimizer = config.keras().optimizers.Adam(learning_rate=float(learning_rate))
    pretrained.compile_classifier(model, optimizer)


def _summary(model: Model, **more: object) -> Record:
    def count(weights: list[Any]) -> int:
        return int(sum(math.prod(w.shape) for w in weights))

    return {
        "model": model,
        "trainable": count(model.trainable_weights),
        "parameters": count(model.weights),
        **more,
    }
