"""gpu_scaling() (issue #27, item 3): the same global batch timed on one device and on two
logical CPU devices, the efficiency that follows from the two, and advice below 0.8."""

from __future__ import annotations

import pytest

from conftest import CoreRun, run_setup
from gpukeras.tools import scaling

pytestmark = pytest.mark.slow  # fits in a fresh process per backend


@pytest.fixture(scope="module", params=["tensorflow", "jax"])
def measured(request: pytest.FixtureRequest) -> CoreRun:
    # the logical CPUs, also where a GPU would be the default devices
    hidden = {"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": "-1"}
    run = run_setup(request.param, {"cpu_devices": 2}, "import scaling_run", env=hidden)
    assert "answer" in run.readback, run.stderr[-3000:]
    return run


def test_efficiency_is_the_two_device_throughput_over_twice_one_device(measured: CoreRun) -> None:
    answer = measured.readback["answer"]
    assert answer["ok"], answer
    value = answer["value"]
    assert value["replicas"] == 2
    assert value["devices"] == ["CPU:0", "CPU:1"]
    runs = value["runs"]
    assert [(run["devices"], run["round"]) for run in runs] == [(1, 1), (2, 1), (1, 2), (2, 2)]
    best = {
        side: max(run["samples_per_second"] for run in runs if run["devices"] == side)
        for side in (1, 2)
    }
    assert value["speedup"] == pytest.approx(best[2] / best[1])
    assert value["efficiency"] == pytest.approx(best[2] / (2 * best[1]))
    assert value["batch_size"] == 64
    assert value["per_replica_batch_size"] == 32
    # Advice exactly when the efficiency is under 0.8.
    assert bool(value["advice"]) == (value["efficiency"] < scaling.GOOD_EFFICIENCY)
    assert measured.readback["unchanged"]  # copies trained, not the user's model


def test_one_device_is_refused_with_how_to_get_several(measured: CoreRun) -> None:
    one = measured.readback["one_device"]
    assert not one["ok"]
    assert one["r_class"] == "gpukeras_error_bad_argument"
    assert "gpu_setup(cpu_devices = 2)" in one["message"]


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (
            (0.4, 2, 64, 1, 0.0, "tensorflow"),
            [
                "larger global batch (batch_size = 256",
                "steps_per_execution = 8",
                "Stay on one device",
            ],
        ),
        ((0.7, 2, 1024, 8, 0.3, "jax"), ["waits for input 30%"]),
        ((0.25, 4, 2048, 4, None, "jax"), ["Stay on one device: 4 train 1.00x"]),
        ((0.55, 4, 2048, 4, None, "jax"), ["reach 55% of 4 times", "batch_size = 4096"]),
    ],
)
def test_advice_names_what_to_change(arguments: tuple, words: list[str]) -> None:
    found = " ".join(scaling.advice(*arguments))
    for word in words:
        assert word in found


def test_no_advice_when_it_scales() -> None:
    assert scaling.advice(0.85, 2, 64, 1, 0.5, "tensorflow") == []
