"""Copies of the user's model, for the verbs that must never change it.

gpu_batch_size(), gpu_quantize() and gpu_lr_find() try things on a model the
user will train afterwards: they work on a clone (``keras.models.clone_model``,
which Keras compiles as the model was when it is compiled), so the user's
weights, optimizer state and compile settings stay as they were.
"""

from __future__ import annotations

from types import ModuleType

from gpukeras import failures
from gpukeras.errors import BadModelError
from gpukeras.handles import Model


def clone(keras: ModuleType, model: Model, caller: str, *, weights: bool, hint: str = "") -> Model:
    """A compiled clone of ``model``; with the model's weights when ``weights``, else new ones.

    Args:
        caller: the R function that needs the copy, for the error messages.
        hint: what else the user can do, added to the error when the model cannot be cloned.

    Raises:
        BadModelError: a model Keras cannot clone (a subclassed model without
            get_config(), unregistered custom objects) or cannot compile the same way.
    """
    try:
        copy = keras.models.clone_model(model)
        if weights:
            copy.set_weights(model.get_weights())
    except Exception as error:
        raise BadModelError(
            f"{caller} works on a copy made with clone_model(), which failed for this model "
            f"({type(error).__name__}: {failures.error_message(error).split('. ')[0]}). "
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
