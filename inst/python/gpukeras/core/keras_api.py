"""Keras' Python API as R reaches it through gpu_keras(): whole numbers where Keras wants them.

reticulate gives an R number such as ``64`` to Python as the float ``64.0``, and
Keras refuses floats where it wants integers (``Dense(64.0)``: "expected a positive
integer"; ``Input(shape=64.0)``: "Cannot convert '64.0' to a shape"). The keras3
R package converts them in its R wrappers; ``KerasNamespace`` does the same for
the ``keras`` module itself: a call through it converts a whole-number float to
``int`` for an argument Keras declares with an integer default (``strides=1``,
``patience=0``, ``axis=-1``) or names in ``INTEGER_ARGUMENTS`` (``units``,
``filters``), and a shape (a number or a list) to a tuple of ints. Floats with a
fraction, and arguments Keras declares with a float default (``rate``,
``learning_rate``), are left as they are. Everything else is Keras' own object: a
class whose constructor takes no such argument (``Layer``, ``Model``,
``Callback``) comes back itself, so R can subclass it.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

from gpukeras.core.runtime import config

# Arguments Keras wants as integers that have no default to say so.
INTEGER_ARGUMENTS = frozenset(
    {
        "units",
        "filters",
        "kernel_size",
        "pool_size",
        "strides",
        "dilation_rate",
        "input_dim",
        "output_dim",
        "num_heads",
        "key_dim",
        "value_dim",
        "num_classes",
        "num_tokens",
        "max_tokens",
        "n",
        "seed",
        "size",
        "cropping",
        "padding",
        "axis",
        "repeats",
        "decay_steps",
        "batch_size",
        "epochs",
        "steps_per_epoch",
    }
)
# Arguments that are shapes: a tuple of ints (or None), one number included.
SHAPE_ARGUMENTS = frozenset(
    {"shape", "batch_shape", "input_shape", "target_shape", "dims", "noise_shape"}
)


def _whole(value: object) -> object:
    """``value`` with whole-number floats as ints, in a list or tuple too (the same type)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_whole(item) for item in value)
    return value


def _shape(value: object) -> object:
    """A shape as Keras takes it: a number or list of whole numbers becomes a tuple of ints
    (R's ``3L`` is a Python int, which Keras' ``Input(shape=3)`` refuses as ``3.0``)."""
    if isinstance(value, float) and value.is_integer():
        return (int(value),)
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list):
        return tuple(_whole(item) for item in value)
    return _whole(value)


def _converted(signature: inspect.Signature) -> dict[str, Callable[[object], object]]:
    """The conversion each convertible argument of ``signature`` gets, by name."""
    found: dict[str, Callable[[object], object]] = {}
    for name, parameter in signature.parameters.items():
        default = parameter.default
        int_default = isinstance(default, int) and not isinstance(default, bool)
        int_tuple = isinstance(default, tuple) and bool(default)
        int_tuple = int_tuple and all(isinstance(item, int) for item in default)
        if name in SHAPE_ARGUMENTS:
            found[name] = _shape
        elif name in INTEGER_ARGUMENTS or int_default or int_tuple:
            found[name] = _whole
    return found


class WholeNumbers:
    """A Keras class or function called with whole-number floats made ints (see the module).

    Attributes of the class (``from_config``) are the class's; Python subclassing goes to
    the class (``__mro_entries__``).
    """

    __slots__ = ("_conversions", "_signature", "_target")

    def __init__(
        self,
        target: Callable[..., Any],
        signature: inspect.Signature,
        conversions: dict[str, Callable[[object], object]],
    ) -> None:
        self._target = target
        self._signature = signature
        self._conversions = conversions

    def __call__(self, *args: object, **kwargs: object) -> Any:
        try:
            bound = self._signature.bind_partial(*args, **kwargs)
        except TypeError:  # Keras' own call says what is wrong
            return self._target(*args, **kwargs)
        for name, value in list(bound.arguments.items()):
            parameter = self._signature.parameters[name]
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                bound.arguments[name] = {
                    key: _shape(item) if key in SHAPE_ARGUMENTS else item
                    for key, item in value.items()
                }
            elif name in self._conversions:
                bound.arguments[name] = self._conversions[name](value)
        return self._target(*bound.args, **bound.kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)

    def __mro_entries__(self, bases: tuple[object, ...]) -> tuple[object, ...]:
        return (self._target,)

    def __repr__(self) -> str:
        return repr(self._target)


class KerasNamespace:
    """The ``keras`` module (or one of its modules) with its calls through ``WholeNumbers``."""

    __slots__ = ("_module",)

    def __init__(self, module: types.ModuleType) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return _through(getattr(self._module, name))

    def __dir__(self) -> list[str]:
        return dir(self._module)

    def __repr__(self) -> str:
        return f"{self._module.__name__} (through gpukeras: whole numbers as Keras wants them)"


@functools.lru_cache(maxsize=4096)
def _wrapped(value: Any) -> Any:
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # no signature to read: as it is
        return value
    conversions = _converted(signature)
    return WholeNumbers(value, signature, conversions) if conversions else value


def _through(value: Any) -> Any:
    """``value`` as R gets it: a module as a namespace, a callable that takes integers wrapped."""
    if isinstance(value, types.ModuleType):
        return KerasNamespace(value)
    if callable(value):
        try:
            return _wrapped(value)
        except TypeError:  # not hashable: as it is
            return value
    return value


def keras_api() -> KerasNamespace:
    """The ``keras`` module as gpu_keras() gives it to R (see the module's notes)."""
    return KerasNamespace(config.keras())
