"""placement: the matmul that shows where work really runs."""

from __future__ import annotations

import pytest

from conftest import requires, run_core
from gpukeras import placement


def _assert_cpu_only(result: dict) -> None:
    (run,) = result["runs"]
    assert run["requested"] == "CPU:0"
    assert run["actual"] == "CPU:0"
    assert run["median_ms"] > 0
    assert run["gflops"] > 0
    assert run["gflops"] == pytest.approx(2 * result["size"] ** 3 / run["median_ms"] / 1e6)
    assert result["speedup"] is None
    assert result["on_gpu"] is False


def test_cpu_only_placement_in_this_process() -> None:
    result = placement.measure_placement([], size=128, repeats=3, warmup=1)
    assert result["size"] == 128
    _assert_cpu_only(result)


def test_cpu_only_placement_on_jax() -> None:
    requires("jax")
    run = run_core(
        "placement.measure_placement", {"gpus": [], "size": 128}, env={"KERAS_BACKEND": "jax"}
    )
    _assert_cpu_only(run.value)
    assert "tensorflow" not in run.loaded


def test_cpu_only_placement_on_tensorflow() -> None:
    requires("tensorflow")
    run = run_core(
        "placement.measure_placement",
        {"gpus": [], "size": 128},
        env={"KERAS_BACKEND": "tensorflow"},
    )
    _assert_cpu_only(run.value)


@pytest.mark.gpu
def test_matmul_asked_for_the_gpu_runs_there() -> None:
    result = placement.measure_placement(["GPU:0"], size=2048, repeats=5, warmup=2)
    gpu, cpu = result["runs"]
    assert gpu["requested"] == "GPU:0"
    assert gpu["actual"] == "GPU:0"
    assert cpu["actual"] == "CPU:0"
    assert result["on_gpu"] is True
    assert result["speedup"] == pytest.approx(cpu["median_ms"] / gpu["median_ms"])
    assert result["speedup"] > 1
