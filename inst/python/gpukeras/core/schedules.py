"""Learning-rate schedules from plain spec dicts, built on ``keras.optimizers.schedules``.

R's ``lr_warmup_cosine()``, ``lr_exponential()`` and ``lr_cyclical()`` return a
spec such as ``{"schedule": "warmup_cosine", "peak": 1e-3, "warmup_steps":
100, "decay_steps": 1000, "alpha": 0}``; ``build`` turns it into a Keras
``LearningRateSchedule``. Steps are optimizer steps (batches), counted by the
optimizer's ``iterations``, so a schedule continues where it was when training
resumes from a backup (the optimizer's state is part of it).

- ``warmup_cosine``: linear warmup from 0 to ``peak`` over ``warmup_steps``,
  then cosine decay to ``alpha * peak`` over ``decay_steps`` (Keras'
  ``CosineDecay`` with ``warmup_target``; without warmup, plain ``CosineDecay``).
- ``exponential``: ``initial * decay_rate ** (step / decay_steps)``, the
  exponent floored with ``staircase`` (Keras' ``ExponentialDecay``).
- ``cyclical``: Smith's (2017) triangular cyclical rate between ``low`` and
  ``high``, half a cycle every ``step_size`` steps; ``triangular2`` halves the
  height each cycle. Keras has none, so ``cyclical_schedule_class()`` makes a
  small ``LearningRateSchedule`` subclass (serialisable, with ``get_config``).

Keras is imported only when a schedule is built, never at import time.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any, TypeGuard

from gpukeras.core.errors import BadArgumentError
from gpukeras.core.handles import Tensor
from gpukeras.core.r_words import big, r_number
from gpukeras.core.runtime import config

CYCLICAL_MODES = ("triangular", "triangular2")

# Each schedule's parameters: name -> (kind, default); kind is "rate" (> 0),
# "share" (in [0, 1]), "steps" (whole, >= 1), "steps0" (whole, >= 0),
# "factor" (in (0, 1]), "flag" or "mode". No default means required.
_REQUIRED = object()
PARAMETERS: dict[str, dict[str, tuple[str, object]]] = {
    "warmup_cosine": {
        "peak": ("rate", _REQUIRED),
        "warmup_steps": ("steps0", 0),
        "decay_steps": ("steps", _REQUIRED),
        "alpha": ("share", 0.0),
    },
    "exponential": {
        "initial": ("rate", _REQUIRED),
        "decay_steps": ("steps", _REQUIRED),
        "decay_rate": ("factor", _REQUIRED),
        "staircase": ("flag", False),
    },
    "cyclical": {
        "low": ("rate", _REQUIRED),
        "high": ("rate", _REQUIRED),
        "step_size": ("steps", _REQUIRED),
        "mode": ("mode", "triangular"),
    },
}
_HELPERS = {
    "warmup_cosine": "lr_warmup_cosine()",
    "exponential": "lr_exponential()",
    "cyclical": "lr_cyclical()",
}


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _checked(schedule: str, name: str, kind: str, value: object) -> object:
    """One parameter, converted to its Python type, or a BadArgumentError saying what it must be."""
    helper = _HELPERS[schedule]

    def bad(what: str) -> BadArgumentError:
        return BadArgumentError(f"{helper}: `{name}` must be {what}, not {value!r}.")

    if kind == "flag":
        if not isinstance(value, bool):
            raise bad("TRUE or FALSE")
        return value
    if kind == "mode":
        if value not in CYCLICAL_MODES:
            raise bad(" or ".join(f'"{mode}"' for mode in CYCLICAL_MODES))
        return value
    if not _number(value) or not math.isfinite(value):
        raise bad("a finite number")
    number = float(value)
    if kind in ("steps", "steps0"):
        minimum = 1 if kind == "steps" else 0
        if number != round(number) or number < minimum:
            raise bad(f"a whole number of steps >= {minimum}")
        return int(number)
    if kind == "rate" and number <= 0:
        raise bad("a positive number")
    if kind == "share" and not 0 <= number <= 1:
        raise bad("a number in [0, 1]")
    if kind == "factor" and not 0 < number <= 1:
        raise bad("a number in (0, 1]")
    return number


def check_spec(spec: object) -> dict[str, Any]:
    """A complete, checked copy of a schedule spec, with defaults filled in.

    Raises:
        BadArgumentError: not a dict, an unknown schedule, a missing, unknown
            or out-of-range parameter.
    """
    if not isinstance(spec, dict) or "schedule" not in spec:
        raise BadArgumentError(
            "A learning-rate schedule must be a spec {'schedule': name, ...}, as made by "
            f"{', '.join(_HELPERS.values())}; got {spec!r}."
        )
    name = spec["schedule"]
    if name not in PARAMETERS:
        raise BadArgumentError(
            f"Unknown learning-rate schedule {name!r}. Schedules: "
            f"{', '.join(repr(known) for known in PARAMETERS)}."
        )
    parameters = PARAMETERS[name]
    unknown = sorted(set(spec) - set(parameters) - {"schedule"})
    if unknown:
        raise BadArgumentError(
            f"{_HELPERS[name]} has no parameter(s) {', '.join(unknown)}; "
            f"it takes {', '.join(parameters)}."
        )
    checked: dict[str, Any] = {"schedule": name}
    for parameter, (kind, default) in parameters.items():
        if parameter not in spec or spec[parameter] is None:
            if default is _REQUIRED:
                raise BadArgumentError(f"{_HELPERS[name]} needs `{parameter}`.")
            checked[parameter] = default
        else:
            checked[parameter] = _checked(name, parameter, kind, spec[parameter])
    if name == "cyclical" and checked["high"] <= checked["low"]:
        raise BadArgumentError(
            f"lr_cyclical(): `high` ({checked['high']}) must be greater than `low` "
            f"({checked['low']})."
        )
    return checked


@functools.cache
def cyclical_schedule_class() -> type:
    """The ``CyclicalLearningRate`` schedule class (made on first use, so Keras loads late).

    Registered as ``gpukeras>CyclicalLearningRate`` so a model saved with it
    loads again once gpukeras has made the class.
    """
    keras = config.keras()

    schedule_base: Any = keras.optimizers.schedules.LearningRateSchedule  # Keras has no types

    @keras.saving.register_keras_serializable(package="gpukeras")
    class CyclicalLearningRate(schedule_base):
        """Triangular cyclical learning rate (Smith 2017, "Cyclical Learning Rates").

        ``lr(step) = low + (high - low) * max(0, 1 - x) * scale`` with
        ``cycle = floor(1 + step / (2 * step_size))``,
        ``x = |step / step_size - 2 * cycle + 1|`` and ``scale`` 1
        (``triangular``) or ``1 / 2 ** (cycle - 1)`` (``triangular2``).
        """

        def __init__(
            self,
            low: float,
            high: float,
            step_size: int,
            mode: str = "triangular",
            name: str = "CyclicalLearningRate",
        ) -> None:
            super().__init__()
            self.low = low
            self.high = high
            self.step_size = step_size
            self.mode = mode
            self.name = name

        def __call__(self, step: Tensor) -> Tensor:
            ops = keras.ops
            step = ops.cast(step, "float32")
            size = float(self.step_size)
            cycle = ops.floor(1.0 + step / (2.0 * size))
            x = ops.abs(step / size - 2.0 * cycle + 1.0)
            height = (self.high - self.low) * ops.maximum(0.0, 1.0 - x)
            if self.mode == "triangular2":
                height = height / ops.power(2.0, cycle - 1.0)
            return self.low + height

        def get_config(self) -> dict[str, object]:
            return {
                "low": self.low,
                "high": self.high,
                "step_size": self.step_size,
                "mode": self.mode,
                "name": self.name,
            }

    return CyclicalLearningRate


def build(spec: dict[str, Any]) -> Any:
    """The Keras ``LearningRateSchedule`` for a spec (checked first, see ``check_spec``)."""
    spec = check_spec(spec)
    schedules = config.keras().optimizers.schedules
    name = spec["schedule"]
    if name == "warmup_cosine":
        if spec["warmup_steps"] == 0:
            return schedules.CosineDecay(
                spec["peak"], decay_steps=spec["decay_steps"], alpha=spec["alpha"]
            )
        return schedules.CosineDecay(
            0.0,
            decay_steps=spec["decay_steps"],
            alpha=spec["alpha"],
            warmup_target=spec["peak"],
            warmup_steps=spec["warmup_steps"],
        )
    if name == "exponential":
        return schedules.ExponentialDecay(
            spec["initial"],
            decay_steps=spec["decay_steps"],
            decay_rate=spec["decay_rate"],
            staircase=spec["staircase"],
        )
    return cyclical_schedule_class()(
        spec["low"], spec["high"], step_size=spec["step_size"], mode=spec["mode"]
    )


def values(spec: dict[str, Any], steps: list[int]) -> list[float]:
    """The learning rate a spec gives at each of ``steps`` (for tests, printing and plots)."""
    schedule = build(spec)
    ops = config.keras().ops
    return [float(ops.convert_to_numpy(schedule(step))) for step in steps]


def describe(learning_rate: object) -> object:
    """What an optimizer's learning rate is, as plain data.

    A number for a constant rate; for a schedule, a dict with ``schedule``
    (the gpukeras name where it is one of ours, else the class name) and its
    config.
    """
    keras = config.keras()
    if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        try:
            details = dict(learning_rate.get_config())
        except NotImplementedError:
            details = {}
        return {"schedule": type(learning_rate).__name__, **details}
    if callable(learning_rate) and not hasattr(learning_rate, "numpy"):
        return {"schedule": getattr(learning_rate, "__name__", "callable")}
    return float(keras.ops.convert_to_numpy(learning_rate))


def line(spec: dict[str, Any], arrow: str = "->") -> str:
    """print() of R's lr_*() spec: what the rate does, in one line (rates as R's ``format(x,
    digits = 4)`` writes them, steps with commas); another spec's fields as they are."""
    kind = spec["schedule"]

    def rate(value: float) -> str:
        return r_number(value, 4)

    def steps(n: int) -> str:
        return f"{big(n)} step{'' if n == 1 else 's'}"

    if kind == "warmup_cosine":
        start = (
            f"linear warmup 0 {arrow} {rate(spec['peak'])} over {steps(spec['warmup_steps'])},"
            if spec["warmup_steps"] > 0
            else f"starts at {rate(spec['peak'])},"
        )
        end = rate(spec["alpha"] * spec["peak"])
        detail = f"{start} then cosine decay to {end} over {steps(spec['decay_steps'])}"
    elif kind == "exponential":
        staircase = ", in whole steps (staircase)" if spec.get("staircase") is True else ""
        detail = (
            f"{rate(spec['initial'])} x {rate(spec['decay_rate'])}^(step / "
            f"{big(spec['decay_steps'])}){staircase}"
        )
    elif kind == "cyclical":
        halved = " (each cycle half as high)" if spec["mode"] == "triangular2" else ""
        detail = (
            f"{spec['mode']} between {rate(spec['low'])} and {rate(spec['high'])}, half a cycle "
            f"every {steps(spec['step_size'])}{halved}"
        )
    else:
        detail = ", ".join(f"{k} = {r_number(v)}" for k, v in spec.items() if k != "schedule")
    return f"<gpukeras lr schedule> {kind}: {detail}"
