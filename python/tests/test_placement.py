"""placement: the matmul that shows where work really runs."""

from __future__ import annotations

import pytest

from conftest import requires, run_core
from gpukeras.gpu import placement


def _assert_cpu_only(result: dict) -> None:
    (run,) = result["runs"]
    assert run["requested"] == "CPU:0"
    assert run["actual"] == "CPU:0"
    assert run["median_ms"] > 0
    assert run["gflops"] > 0
    assert run["gflops"] == pytest.approx(2 * run["size"] ** 3 / run["median_ms"] / 1e6)
    assert result["speedup"] is None
    assert result["on_gpu"] is False


def test_cpu_only_placement_in_this_process() -> None:
    result = placement.measure_placement([], size=128, repeats=3, warmup=1)
    assert result["size"] == 128
    _assert_cpu_only(result)


def test_cpu_only_placement_on_jax() -> None:
    requires("jax")
    run = run_core(
        "gpu.placement:measure_placement", {"gpus": [], "size": 128}, env={"KERAS_BACKEND": "jax"}
    )
    _assert_cpu_only(run.value)
    assert "tensorflow" not in run.loaded


def test_cpu_only_placement_on_tensorflow() -> None:
    requires("tensorflow")
    run = run_core(
        "gpu.placement:measure_placement",
        {"gpus": [], "size": 128},
        env={"KERAS_BACKEND": "tensorflow"},
    )
    _assert_cpu_only(run.value)


def test_each_device_s_matmul_grows_until_one_multiply_takes_the_target_time() -> None:
    """Doubling from 32: a CPU needs a few doublings for 5 ms, and stops there (however
    busy the machine, a slower multiply only stops it sooner)."""
    result = placement.measure_placement([], size=32, repeats=3, warmup=1)
    (run,) = result["runs"]
    assert result["size"] == 32
    assert run["size"] > 32
    assert run["size"] in [32 * 2**k for k in range(10)] or run["size"] == placement.MAX_SIZE
    assert run["median_ms"] >= placement.TARGET_MS or run["size"] == placement.MAX_SIZE
    assert run["size"] <= 4096  # a CPU stays quick: far below the largest side


def test_target_zero_keeps_the_size_given() -> None:
    result = placement.measure_placement([], size=48, repeats=1, warmup=0, target_ms=0)
    assert [run["size"] for run in result["runs"]] == [48]


@pytest.mark.gpu
def test_matmul_asked_for_the_gpu_runs_there() -> None:
    result = placement.measure_placement(["GPU:0"], size=2048, repeats=5, warmup=2)
    gpu, cpu = result["runs"]
    assert gpu["requested"] == "GPU:0"
    assert gpu["actual"] == "GPU:0"
    assert cpu["actual"] == "CPU:0"
    assert result["on_gpu"] is True
    assert result["speedup"] == pytest.approx(gpu["gflops"] / cpu["gflops"])
    assert result["speedup"] > 1


@pytest.mark.gpu
def test_on_a_gpu_the_matmul_is_sized_so_dispatch_does_not_dominate() -> None:
    """gpu_check()'s start (1024): on an H100 such a multiply takes microseconds, so the
    side must grow until one takes the target time; the CPU stays small."""
    result = placement.measure_placement(["GPU:0"], size=1024)
    gpu, cpu = result["runs"]
    assert gpu["median_ms"] >= placement.TARGET_MS or gpu["size"] == placement.MAX_SIZE
    assert gpu["size"] > 1024
    assert cpu["size"] < gpu["size"]
    assert result["speedup"] == pytest.approx(gpu["gflops"] / cpu["gflops"])
