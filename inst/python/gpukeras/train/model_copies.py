"""Copies of the user's model, for the verbs that must never change it.

gpu_batch_size(), gpu_quantize() and gpu_lr_find() try things on a model the
user will train afterwards: they work on a clone (``keras.models.clone_model``,
which Keras compiles as the model was when it is compiled), so the user's
weights, optimizer state and compile settings stay as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import ModuleType

from gpukeras.core import messages
from gpukeras.core.errors import BadModelError
from gpukeras.core.handles import Layer, Model
from gpukeras.gpu import precision


@contextlib.contextmanager
def _global_policy(keras: ModuleType, policy: str | None) -> Iterator[None]:
    if policy is None:
        yield
        return
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(before)


def _rebuild_under(
    keras: ModuleType, model: Model, policy: str, every_layer: bool = False
) -> Callable[[Layer], Layer]:
    """A ``clone_function`` giving each layer ``policy``, except layers the user set apart
    (unless ``every_layer``).

    Layers whose policy differs from the model's own were given one on
    purpose and keep it; so does an output layer computing a softmax or
    sigmoid, which must stay float32 (see ``gpukeras.gpu.precision``).
    """

    def rebuild(layer: Layer) -> Layer:
        config = layer.get_config()
        if every_layer or not precision.set_apart(keras, model, layer):
            config["dtype"] = policy
        return type(layer).from_config(config)

    return rebuild


def clone(
    keras: ModuleType,
    model: Model,
    caller: str,
    *,
    weights: bool,
    hint: str = "",
    policy: str | None = None,
    every_layer: bool = False,
) -> Model:
    """A compiled clone of ``model``; with the model's weights when ``weights``, else new ones.

    Args:
        caller: the R function that needs the copy, for the error messages.
        hint: what else the user can do, added to the error when the model cannot be cloned.
        policy: a Keras dtype policy to rebuild the copy under (see the module's
            notes); None keeps the model's.
        every_layer: give every layer ``policy``, those the user set apart too.

    Raises:
        BadModelError: a model Keras cannot clone (a subclassed model without
            get_config(), unregistered custom objects) or cannot compile the same way.
    """
    try:
        with _global_policy(keras, policy):
            rebuild = None if policy is None else _rebuild_under(keras, model, policy, every_layer)
            copy = keras.models.clone_model(model, clone_function=rebuild)
        if weights:
            copy.set_weights(model.get_weights())
    except Exception as error:
        raise BadModelError(
            f"{caller} works on a copy made with clone_model(), which failed for this model "
            f"({type(error).__name__}: {messages.error_message(error).split('. ')[0]}). "
            "Register custom layers, losses and metrics with "
            "keras.saving.register_keras_serializable(), and give a subclassed model "
            f"get_config() and from_config().{hint}"
        ) from error
    if getattr(model, "compiled", False) and not getattr(copy, "compiled", False):
        raise BadModelError(
            f"{caller} works on a copy of the model, but the copy could not be compiled the "
            "way the model was: a model that overrides compile() must also override "
            "get_compile_config() and compile_from_config()."
        )
    return copy
