"""gpu_step(ema = ): training with an exponential moving average of the weights, validated and
saved with the average.

Keras' optimizers keep the average themselves (``use_ema``, ``ema_momentum``): after each
update, ``average = momentum * average + (1 - momentum) * weights`` (the first update
starts it at the weights), and at the end of ``fit()`` the model's weights become the
average (``finalize_variable_values``). ``averaging`` turns it on for a fit (on an
optimizer built without it, the averages are made from the weights as they are) and
leaves it on, as a model compiled with ``use_ema = True`` has it, so that the model saved
afterwards loads with its optimizer's state. The averages are optimizer variables, so a
backup holds them and a resumed fit goes on with exactly those of the killed one.

Keras validates with the raw weights; ``callback`` swaps the averages in around each
validation (``on_test_begin``/``on_test_end``: on JAX the trained state is in the
variables then), so ``val_`` logs, and the best models kept by ``gpukeras.train.backup``
(saved inside ``averaged``), are the average's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from gpukeras.core import compat
from gpukeras.core.handles import Keras, Model
from gpukeras.train import fit_request


def averaging(model: Model, momentum: float) -> None:
    """Keras' EMA on the model's optimizer (its inner one under loss scaling), at
    ``momentum``."""
    optimizer = fit_request.inner_optimizer(model)
    optimizer.use_ema = True  # type: ignore[attr-defined]
    optimizer.ema_momentum = float(momentum)  # type: ignore[attr-defined]
    optimizer.ema_overwrite_frequency = None  # type: ignore[attr-defined]
    if optimizer.built and not compat.ema_averages(optimizer):  # type: ignore[attr-defined]
        compat.start_ema(optimizer, list(model.trainable_variables))


def _swap(model: Model) -> bool:
    """Exchange the trainable weights and their averages; False where there are none."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or not getattr(fit_request.inner_optimizer(model), "use_ema", False):
        return False
    averages = compat.ema_averages(fit_request.inner_optimizer(model))
    variables = list(model.trainable_variables)
    if not averages or len(averages) != len(variables):
        return False
    for variable, average in zip(variables, averages):
        if average is None:
            continue
        value = variable.numpy() if hasattr(variable, "numpy") else variable.value
        variable.assign(average.value)
        average.assign(value)
    return True


@contextlib.contextmanager
def averaged(model: Model) -> Iterator[None]:
    """The averaged weights in the model for the block (to save it), the trained ones after."""
    swapped = _swap(model)
    try:
        yield
    finally:
        if swapped:
            _swap(model)


def callback(keras: Keras) -> object:
    """The callback that validates with the averaged weights."""

    class AveragedValidation(keras.callbacks.Callback):
        """Each validation with the averaged weights (Keras' own uses the trained ones)."""

        def __init__(self) -> None:
            super().__init__()
            self.swapped = False

        def on_test_begin(self, logs: dict | None = None) -> None:
            self.swapped = _swap(self.model)

        def on_test_end(self, logs: dict | None = None) -> None:
            if self.swapped:
                _swap(self.model)
                self.swapped = False

    return AveragedValidation()
