"""Random augmentation of image batches in a pipeline: presets of Keras preprocessing layers.

The layers run inside tf.data whatever the Keras backend, on whole batches
(and, for presets drawn image by image, on whole gathered chunks of batches),
in parallel, after the batch step. Validation data gets only the presets that
change the shape, in a deterministic form, so it fits the same model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gpukeras.core.errors import BadArgumentError
from gpukeras.core.messages import last_line
from gpukeras.core.runtime import config
from gpukeras.data.pipeline_options import PipelineOptions

# Presets of random augmentation: Keras preprocessing layers, which run inside
# tf.data whatever the Keras backend. Values are (layer name, default arguments).
AUGMENT_PRESETS: dict[str, tuple[str, dict[str, object]]] = {
    "flip_horizontal": ("RandomFlip", {"mode": "horizontal"}),
    "flip_vertical": ("RandomFlip", {"mode": "vertical"}),
    "brightness": ("RandomBrightness", {"factor": 0.2}),
    "contrast": ("RandomContrast", {"factor": 0.2}),
    "crop": ("RandomCrop", {}),
    "rotation": ("RandomRotation", {"factor": 0.1}),
}
# Deterministic stand-ins for validation data, for presets that change the shape.
INFERENCE_PRESETS = {"crop": "CenterCrop"}
# Presets whose layers draw their randomness image by image, so running them on
# many batches at once is the same as batch by batch (RandomCrop draws one
# window per call: it stays per batch).
PER_IMAGE_PRESETS = frozenset(
    {"flip_horizontal", "flip_vertical", "brightness", "contrast", "rotation"}
)


def check_presets(augment: Mapping[str, object] | None) -> None:
    """Raise BadArgumentError for preset names that are not in ``AUGMENT_PRESETS``."""
    unknown = sorted(set(augment or {}) - set(AUGMENT_PRESETS))
    if unknown:
        raise BadArgumentError(
            f"Unknown augment preset(s): {', '.join(unknown)}. "
            f"Presets: {', '.join(AUGMENT_PRESETS)}."
        )


def augmenter(options: PipelineOptions, names: list[str] | None = None) -> Callable | None:
    """One function applying the asked-for presets (or those in ``names``) to a batch of images.

    Outside training (validation data) only the presets that change the shape
    run, in a deterministic form (a random crop becomes a centre crop), so
    validation batches fit the same model. A preset's seed is ``seed`` plus its
    position among all the presets asked for.
    """
    keras = config.keras()
    layers = []
    for position, (name, arguments) in enumerate((options.augment or {}).items()):
        if names is not None and name not in names:
            continue
        if options.training:
            layer_name, defaults = AUGMENT_PRESETS[name]
            defaults = {
                **defaults,
                "seed": None if options.seed is None else options.seed + position,
            }
        elif name in INFERENCE_PRESETS:
            layer_name, defaults = INFERENCE_PRESETS[name], {}
        else:
            continue
        try:
            layers.append(getattr(keras.layers, layer_name)(**{**defaults, **(arguments or {})}))
        except (TypeError, ValueError) as error:
            raise BadArgumentError(
                f"augment preset '{name}' ({layer_name}) rejected its parameters: {error}"
            ) from error
    if not layers:
        return None

    def augment(images: object) -> object:
        for layer in layers:
            images = layer(images, training=options.training)
        return images

    return augment


def augment_error(options: PipelineOptions, spec: object, error: Exception) -> BadArgumentError:
    """An augment preset could not be traced on these elements (e.g. not N x H x W x C)."""
    return BadArgumentError(
        f"augment ({', '.join(options.augment or {})}) cannot run on elements "
        f"{spec}: {last_line(error)}. The presets work on image batches, N x H x W x C."
    )


def chunk_presets(options: PipelineOptions) -> list[str]:
    """The leading per-image presets, which may run on a whole gathered chunk; in order."""
    if not options.training:
        return []
    names = list(options.augment or {})
    cut = next((i for i, name in enumerate(names) if name not in PER_IMAGE_PRESETS), len(names))
    return names[:cut]


def apply_to_features(function: Callable) -> Callable:
    """Lift a function of the features to elements that may carry a label."""

    def on_element(*element: object) -> object:
        if len(element) == 1:
            return function(element[0])
        return (function(element[0]), *element[1:])

    return on_element
