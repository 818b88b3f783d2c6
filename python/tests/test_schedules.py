"""schedules: learning-rate schedules from spec dicts, read back at given optimizer steps."""

from __future__ import annotations

import math

import pytest

from gpukeras.core import schedules
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.runtime import config


def test_warmup_cosine_values() -> None:
    spec = {"schedule": "warmup_cosine", "peak": 1.0, "warmup_steps": 10, "decay_steps": 100}
    spec["alpha"] = 0.1
    got = schedules.values(spec, [0, 5, 10, 60, 110, 500])
    cosine_half = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5))
    assert got == pytest.approx([0.0, 0.5, 1.0, cosine_half, 0.1, 0.1], abs=1e-6)


def test_warmup_cosine_without_warmup_starts_at_the_peak() -> None:
    spec = {"schedule": "warmup_cosine", "peak": 0.2, "warmup_steps": 0, "decay_steps": 10}
    assert schedules.values(spec, [0, 5, 10]) == pytest.approx([0.2, 0.1, 0.0], abs=1e-6)


def test_exponential_values_smooth_and_staircase() -> None:
    spec = {"schedule": "exponential", "initial": 0.1, "decay_steps": 10, "decay_rate": 0.5}
    assert schedules.values(spec, [0, 10, 15]) == pytest.approx([0.1, 0.05, 0.1 * 0.5**1.5])
    stairs = {**spec, "staircase": True}
    assert schedules.values(stairs, [9, 15, 20]) == pytest.approx([0.1, 0.05, 0.025])


def test_cyclical_values() -> None:
    spec = {"schedule": "cyclical", "low": 1.0, "high": 3.0, "step_size": 10}
    steps = [0, 5, 10, 15, 20, 30, 40]
    assert schedules.values(spec, steps) == pytest.approx([1, 2, 3, 2, 1, 3, 1])
    halving = {**spec, "mode": "triangular2"}
    # The second cycle (steps 20-40) peaks at half the height, the third at a quarter.
    assert schedules.values(halving, [10, 30, 50]) == pytest.approx([3.0, 2.0, 1.5])


def test_cyclical_schedule_serialises() -> None:
    keras = config.keras()
    schedule = schedules.build(
        {"schedule": "cyclical", "low": 0.01, "high": 0.1, "step_size": 4, "mode": "triangular2"}
    )
    again = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert type(again) is type(schedule)
    assert again.get_config() == schedule.get_config()
    assert float(keras.ops.convert_to_numpy(again(6))) == pytest.approx(0.055)


def test_spec_defaults_are_filled_in() -> None:
    checked = schedules.check_spec(
        {"schedule": "warmup_cosine", "peak": 1e-3, "warmup_steps": 5.0, "decay_steps": 50}
    )
    assert checked == {
        "schedule": "warmup_cosine",
        "peak": 1e-3,
        "warmup_steps": 5,
        "decay_steps": 50,
        "alpha": 0.0,
    }
    assert isinstance(checked["warmup_steps"], int)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (0.1, "must be a spec"),
        ({"peak": 1}, "must be a spec"),
        ({"schedule": "linear"}, "Unknown learning-rate schedule 'linear'"),
        ({"schedule": "warmup_cosine", "peak": 1}, "needs `decay_steps`"),
        (
            {"schedule": "warmup_cosine", "peak": 1, "decay_steps": 10, "warmup": 3},
            "no parameter(s) warmup",
        ),
        ({"schedule": "warmup_cosine", "peak": -1, "decay_steps": 10}, "a positive number"),
        ({"schedule": "warmup_cosine", "peak": 1, "decay_steps": 2.5}, "whole number of steps"),
        (
            {"schedule": "warmup_cosine", "peak": 1, "decay_steps": 5, "alpha": 2},
            "in [0, 1]",
        ),
        (
            {"schedule": "exponential", "initial": 1, "decay_steps": 5, "decay_rate": 1.5},
            "in (0, 1]",
        ),
        (
            {"schedule": "exponential", "initial": 1, "decay_steps": 5, "decay_rate": 0.5}
            | {"staircase": "yes"},
            "TRUE or FALSE",
        ),
        ({"schedule": "cyclical", "low": 2, "high": 1, "step_size": 5}, "must be greater"),
        (
            {"schedule": "cyclical", "low": 1, "high": 2, "step_size": 5, "mode": "exp"},
            '"triangular" or "triangular2"',
        ),
    ],
)
def test_bad_specs_are_classed_errors(spec: object, message: str) -> None:
    with pytest.raises(BadArgumentError) as caught:
        schedules.check_spec(spec)
    assert message in str(caught.value)
    assert caught.value.r_class == "gpukeras_error_bad_argument"


def test_describe_numbers_and_schedules() -> None:
    keras = config.keras()
    assert schedules.describe(keras.Variable(0.5)) == pytest.approx(0.5)
    described = schedules.describe(keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9))
    assert described["schedule"] == "ExponentialDecay"
    assert described["decay_rate"] == 0.9


def test_a_spec_prints_as_one_line_in_rs_words() -> None:
    cosine = {"schedule": "warmup_cosine", "peak": 1e-3, "warmup_steps": 100, "decay_steps": 1000}
    assert schedules.line({**cosine, "alpha": 0.1}, arrow="->") == (
        "<gpukeras lr schedule> warmup_cosine: linear warmup 0 -> 0.001 over 100 steps, then "
        "cosine decay to 1e-04 over 1,000 steps"
    )
    assert schedules.line({**cosine, "warmup_steps": 0, "decay_steps": 1, "alpha": 0.0}) == (
        "<gpukeras lr schedule> warmup_cosine: starts at 0.001, then cosine decay to 0 over 1 step"
    )
    cyclical = {"schedule": "cyclical", "low": 1e-4, "high": 0.01, "step_size": 200}
    assert schedules.line({**cyclical, "mode": "triangular2"}).endswith(
        "triangular2 between 1e-04 and 0.01, half a cycle every 200 steps (each cycle half as high)"
    )
