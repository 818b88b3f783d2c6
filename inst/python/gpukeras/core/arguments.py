"""Checks of the arguments the training functions share, each raising the classed error.

gpu_fit(), gpu_batch_size(), gpu_profile(), gpu_audit(), gpu_quantize() and
multi-worker training take the same kinds of argument (a compiled Keras 3
model, counts, positive numbers, callbacks, a learning rate). Checking them
in one place gives every function the same rules and the same messages, and
each check runs before anything is changed.

An argument is checked on one side. What needs no Python (a count, a positive number, a
seed, a choice) R checks before Python starts, in R's words (R/utils-check.R), and sends
the checked value in the type the verb's signature declares; the core takes it as it is.
What needs Python (a model, a callback, a schedule object) is checked here alone, its
classed error reaching R through the bridge; so are the few numbers only the core is given
(a ``gpu_dataset()`` option object's batch size, a cluster's index and timeouts). Numbers
may arrive as floats (an R double 3 as 3.0), so whole numbers are accepted as floats too.
"""

from __future__ import annotations

import math
import numbers
from typing import TypeGuard

from gpukeras.core import schedules
from gpukeras.core.errors import BadArgumentError, BadModelError, ModelNotCompiledError
from gpukeras.core.handles import Callback, Keras

# The largest count: a count beyond a million is a mistake (a batch, a number of steps).
MAX_COUNT = 1_000_000


def whole(value: object) -> TypeGuard[numbers.Real]:
    """Whether ``value`` is a finite whole number (3 or 3.0; not True, not 3.5)."""
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and float(value) == math.trunc(value)
    )


def count(name: str, value: object, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """``value`` as an int; BadArgumentError unless it is a whole number from ``minimum``
    to ``maximum``."""
    number = int(float(value)) if whole(value) else None  # float(value) is exact there
    if number is None or not minimum <= number <= maximum:
        over = number is not None and number > maximum
        raise BadArgumentError(
            f"`{name}` must be one whole number >= {minimum}, not {value!r}"
            + (f" (at most {maximum})." if over else ".")
        )
    return number


def positive(name: str, value: object) -> float | None:
    """``value`` as a float (None stays None); BadArgumentError unless it is a positive number."""
    if value is None:
        return None
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise BadArgumentError(f"`{name}` must be one positive number, not {value!r}.")
    return float(value)


def check_keras_model(keras: Keras, model: object) -> None:
    """Raise BadModelError unless ``model`` is a Keras 3 model (saying so for a Keras 2 one)."""
    if not isinstance(model, keras.Model):
        kind = f"{type(model).__module__}.{type(model).__name__}"
        hint = (
            " It looks like a Keras 2 (tf.keras) model: build it with Keras 3 "
            "(keras3 in R, or gpu_keras())."
            if "tf_keras" in kind or "tensorflow.python.keras" in kind
            else ""
        )
        raise BadModelError(f"model must be a Keras 3 model (keras.Model), not {kind}.{hint}")


def check_compiled_model(keras: Keras, model: object) -> None:
    """Raise BadModelError unless ``model`` is a Keras 3 model, ModelNotCompiledError unless
    it is compiled (training needs its loss and optimizer)."""
    check_keras_model(keras, model)
    if not getattr(model, "compiled", False) or getattr(model, "optimizer", None) is None:
        raise ModelNotCompiledError(
            "The model is not compiled: compile it first, e.g. "
            'model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", '
            'metrics = list("accuracy")), or compile(model, ...) with keras3. gpu_fit() then '
            "applies the speed options (steps_per_execution, jit_compile) itself."
        )


def check_callbacks(keras: Keras, callbacks: object) -> list[Callback]:
    """Keras callbacks as a list (one callback or None allowed); BadArgumentError for others."""
    if callbacks is None:
        return []
    if not isinstance(callbacks, (list, tuple)):
        callbacks = [callbacks]
    wrong = [c for c in callbacks if not isinstance(c, keras.callbacks.Callback)]
    if wrong:
        raise BadArgumentError(
            "`callbacks` must be a Keras callback or a list of them (keras.callbacks.Callback), "
            f"not {', '.join(type(c).__name__ for c in wrong)}."
        )
    return list(callbacks)


def check_learning_rate(keras: Keras, learning_rate: object) -> object:
    """A number, a checked schedule spec, or a Keras schedule object, as given."""
    if learning_rate is None:
        return None
    if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        return learning_rate
    if isinstance(learning_rate, dict):
        return schedules.check_spec(learning_rate)
    if isinstance(learning_rate, numbers.Real) and not isinstance(learning_rate, bool):
        return positive("learning_rate", learning_rate)
    raise BadArgumentError(
        f"`learning_rate` must be one positive number or a schedule, not {learning_rate!r}. "
        "Schedules: lr_warmup_cosine(), lr_exponential(), lr_cyclical()."
    )
