"""gpu_lr_find(): the learning-rate range test, on a copy of the model.

Smith's range test (2017, "Cyclical Learning Rates for Training Neural
Networks"), as fastai's ``lr_find`` and luz's ``lr_finder`` run it: train a
copy of the model for a few hundred batches while the learning rate grows
exponentially from ``min_lr`` to ``max_lr``, record the loss of each batch,
and stop once it diverges. The loss against the learning rate falls where the
rate starts to teach, flattens, then blows up; good rates lie on the descent.

The rate is the copy's optimizer's own schedule (Keras' ExponentialDecay with
a rate above 1), so it changes inside the compiled step on every backend. Each
batch is trained with ``train_on_batch``, whose loss is that batch's own
(Keras resets its metrics on each call), not an epoch's running mean.

Suggestions, all on the smoothed loss (an exponential moving average with
bias correction, as fastai's):

- ``valley``: fastai's default since 2.5: along the longest stretch where the
  loss keeps falling, the rate two thirds of the way down.
- ``steepest``: where the loss falls fastest per decade of rate, before its minimum.
- ``minimum``: a tenth of the rate at the lowest loss (the older rule of thumb).

A ramp whose loss never diverged (``stop_factor``) but rose after its lowest
(``turned_up``) gives its suggestions as usual: the curve has its descent and its
turn. One whose loss neither diverged nor turned up suggests nothing (all three are
None): every rule reads the curve against the point where it turns up, and without
it the lowest loss is only the last rates tried (``minimum`` would be about
``max_lr / 10``) and the descent may go on past ``max_lr``. The result says so
(``stopped``, ``advice``): run it again with a higher ``max_lr`` or more steps. fastai's
``lr_find`` reads its rules off whatever curve it got; here a rate read off half a
curve is withheld, since it would print as confidently as one read off a whole curve.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from gpukeras.core import arguments, compat
from gpukeras.core.errors import BadDataError, BadModelError
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import adapters, batch_rules
from gpukeras.tools import result_lines
from gpukeras.train import model_copies

# Steps at the start whose smoothed loss is not yet compared for divergence.
WARMUP_STEPS = 5
# A smoothed loss "turned up" when it fell by at least FALL_SHARE of its first value (a
# flat curve's noise is no descent), its lowest came before the last TAIL_SHARE of the
# steps, and it then rose by at least RISE_SHARE of what it fell.
FALL_SHARE = 0.05
TAIL_SHARE = 0.1
RISE_SHARE = 0.25
# A ramp that never turned up is advised one decade more of rates (this many times its
# max_lr), or this many times its steps (each rate trained longer, so a slow loss has
# the time to turn up).
HIGHER_MAX_LR = 10.0
MORE_STEPS = 2


def _batches(data: object, batch_size: int | None, seed: int | None) -> Iterator[Any]:
    """Endless training batches: a dataset's own, repeated; arrays shuffled by ``seed``."""
    if adapters.is_tf_dataset(data):  # (a batch size for it was refused by ``find``)
        yield from data.repeat().as_numpy_iterator()
        return
    if not isinstance(data, (tuple, list)) or len(data) not in (1, 2):
        raise BadDataError(
            f"data cannot be {type(data).__name__}: give a tf.data dataset (gpu_dataset()) "
            "or arrays as (x, y)."
        )
    parts = tuple(adapters.as_arrays(part) for part in data if part is not None)
    rows = adapters.row_count(parts[0])
    if rows == 0:
        raise BadDataError("The data has no rows to train on.")
    size = min(batch_size or adapters.DEFAULT_BATCH_SIZE, rows)
    keras = config.keras()
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(rows)
        for start in range(0, rows - size + 1, size):
            index = order[start : start + size]
            yield keras.tree.map_structure(lambda array, i=index: array[i], parts)


def _with_ramp(keras: Any, copy: Model, min_lr: float, max_lr: float, steps: int) -> None:
    """Compile ``copy`` again, its optimizer's learning rate an exponential ramp over ``steps``."""
    ramp = keras.optimizers.schedules.ExponentialDecay(
        initial_learning_rate=min_lr, decay_steps=max(1, steps - 1), decay_rate=max_lr / min_lr
    )
    given = copy.optimizer
    try:
        optimizer = type(given).from_config({**given.get_config(), "learning_rate": ramp})
    except Exception as error:
        raise BadModelError(
            f"gpu_lr_find() sets the learning rate of a copy of the optimizer "
            f"({type(given).__name__}), which could not be copied ({type(error).__name__}: "
            f"{error}). Compile the model with one of Keras' optimizers."
        ) from error
    copy.compile(optimizer=optimizer, loss=copy.loss, jit_compile=copy.jit_compile)


def smooth(losses: list[float], beta: float) -> list[float]:
    """The exponential moving average of ``losses``, bias-corrected (as fastai smooths)."""
    smoothed, average = [], 0.0
    for step, loss in enumerate(losses, start=1):
        average = beta * average + (1 - beta) * loss
        smoothed.append(average / (1 - beta**step))
    return smoothed


def valley(lrs: list[float], losses: list[float]) -> float | None:
    """fastai's valley: two thirds of the way down the longest run of falling loss."""
    n = len(losses)
    if n < 3:
        return None
    longest = [1] * n  # longest decreasing sequence ending at each step
    end = 0
    for i in range(1, n):
        for j in range(i):
            if losses[i] < losses[j] and longest[i] < longest[j] + 1:
                longest[i] = longest[j] + 1
        if longest[i] > longest[end]:
            end = i
    start = end - longest[end]
    if end <= 0 or start < 0:
        return None
    third = (end - start) / 3
    return lrs[start + int(third) + int(third / 2)]


def steepest(lrs: list[float], losses: list[float]) -> float | None:
    """The rate where the loss falls fastest per decade of rate, before its minimum."""
    lowest = int(np.argmin(losses))
    if lowest < 2:
        return None
    slopes = np.gradient(np.asarray(losses[: lowest + 1]), np.log10(lrs[: lowest + 1]))
    return lrs[int(np.argmin(slopes))]


def turned_up(smoothed: list[float]) -> bool:
    """Whether the smoothed loss fell, then rose after its lowest (see ``FALL_SHARE``,
    ``TAIL_SHARE``, ``RISE_SHARE``): a curve with a turn to read rates against, though it
    never diverged."""
    n = len(smoothed)
    if n < 3:
        return False
    lowest = int(np.argmin(smoothed))
    fell = smoothed[0] - smoothed[lowest]
    rose = smoothed[-1] - smoothed[lowest]
    descended = fell > 0 and fell >= FALL_SHARE * abs(smoothed[0])
    early = lowest < n - max(1, int(n * TAIL_SHARE))
    return descended and early and rose >= RISE_SHARE * fell


def no_divergence_advice(max_lr: float, steps: int) -> str:
    """What to do when the loss neither diverged nor turned up over a ramp to ``max_lr``."""
    return (
        f"The loss never diverged up to max_lr = {max_lr:g} and did not rise after its "
        "lowest, so the curve has no point where it turns up to read a rate against: no "
        "rate is suggested. Run it again "
        f"with a higher max_lr (e.g. max_lr = {max_lr * HIGHER_MAX_LR:g}) or more steps "
        f"(e.g. steps = {steps * MORE_STEPS})."
    )


def find(
    model: Model,
    data: object,
    min_lr: float = 1e-7,
    max_lr: float = 10.0,
    steps: int = 100,
    batch_size: int | None = None,
    stop_factor: float = 4.0,
    smoothing: float = 0.98,
    seed: int | None = None,
) -> Record:
    """Run the range test on a copy of ``model`` (see the module's notes).

    Args:
        model: a compiled Keras model; it is not changed.
        data: a batched tf.data dataset, or arrays as ``(x, y)``.
        min_lr, max_lr: the first and last learning rate of the ramp.
        steps: batches over which the rate goes from ``min_lr`` to ``max_lr``.
        batch_size: rows per batch for arrays (None: 32).
        stop_factor: stop once the smoothed loss exceeds this many times its lowest.
        smoothing: the moving average's weight of the past (0: no smoothing).
        seed: seeds Keras and the arrays' order.

    Returns:
        ``lr``, ``loss`` and ``smoothed`` per step trained; ``suggested``
        (``valley``, ``steepest``, ``minimum``: rates, None where the curve
        gives none, and all None when the loss neither diverged nor turned up);
        ``recommended`` (``valley``, else ``steepest``, else ``minimum``; None for none);
        ``stopped`` (why it stopped, and how the curve ended when it ran all steps);
        ``diverged`` (the loss blew up or became NaN/Inf before the last step);
        ``advice`` (what to change when no rate is suggested for want of a turn, else
        None), and the settings.
    """
    keras = config.keras()
    arguments.check_compiled_model(keras, model)
    batch_rules.check_batch_size_for(batch_size, data)
    if seed is not None:
        compat.set_random_seed(keras, seed, model)
    batches = _batches(data, batch_size, seed)
    copy = model_copies.clone(keras, model, "gpu_lr_find()", weights=True)
    _with_ramp(keras, copy, min_lr, max_lr, steps)

    lrs: list[float] = []
    losses: list[float] = []
    stopped = f"ran all {steps} steps"
    diverged = False
    average, best = 0.0, math.inf
    for step, batch in zip(range(steps), batches):
        parts = batch if isinstance(batch, (tuple, list)) else (batch,)
        logs = copy.train_on_batch(*parts, return_dict=True)
        loss = float(logs["loss"])
        lrs.append(min_lr * (max_lr / min_lr) ** (step / max(1, steps - 1)))
        losses.append(loss)
        if not math.isfinite(loss):
            stopped = f"the loss became {loss} at step {step + 1}"
            diverged = True
            break
        average = (
            smoothing * average + (1 - smoothing) * loss
        )  # as smooth() does, one step at a time
        smoothed_now = average / (1 - smoothing ** (step + 1))
        best = min(best, smoothed_now)
        if step >= WARMUP_STEPS and smoothed_now > stop_factor * best:
            stopped = f"the loss diverged at step {step + 1} ({stop_factor:g} x its lowest)"
            diverged = True
            break
    finite = [i for i, loss in enumerate(losses) if math.isfinite(loss)]
    kept_lrs = [lrs[i] for i in finite]
    smoothed = smooth([losses[i] for i in finite], smoothing)
    lowest = kept_lrs[int(np.argmin(smoothed))] / 10 if smoothed else None
    suggested: dict[str, float | None] = {
        "valley": valley(kept_lrs, smoothed),
        "steepest": steepest(kept_lrs, smoothed),
        "minimum": lowest,
    }
    advice = None
    if not diverged and turned_up(smoothed):
        stopped += f"; the loss rose after its lowest, short of diverging ({stop_factor:g} x it)"
    elif not diverged:
        stopped += "; the loss never diverged, nor rose after its lowest"
        suggested = {name: None for name in suggested}
        advice = no_divergence_advice(max_lr, steps)
    found: Record = {
        "lr": lrs,
        "loss": losses,
        "smoothed": smoothed + [math.nan] * (len(losses) - len(smoothed)),
        "suggested": suggested,
        # the rate recommended: valley, else steepest, else minimum (None: none suggested)
        "recommended": next((rate for rate in suggested.values() if rate is not None), None),
        "stopped": stopped,
        "diverged": diverged,
        "advice": advice,
        "settings": {
            "min_lr": min_lr,
            "max_lr": max_lr,
            "steps": steps,
            "batch_size": batch_size,
            "stop_factor": stop_factor,
            "smoothing": smoothing,
            "seed": seed,
            "optimizer": type(copy.optimizer).__name__,
            "backend": config.backend,
        },
    }
    found["lines"] = result_lines.lr_find_lines(found)
    return found
