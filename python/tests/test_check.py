"""check: gpu_check() end to end, on this machine and in fresh processes."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest

from conftest import CoreRun, run_core
from gpukeras import bridge
from gpukeras.gpu import nvml


def test_result_has_every_part(check_result: dict) -> None:
    assert set(check_result) == {
        "stack",
        "nvml",
        "devices",
        "setup",
        "placement",
        "utilization",
        "verdict",
        "reasons",
        "advice",
        "repairs",
        "timings",
    }
    assert set(check_result["timings"]) == {"start_runtime", "inspect", "placement", "probe"}
    assert all(seconds >= 0 for seconds in check_result["timings"].values())
    assert check_result["timings"]["probe"] >= 1
    assert check_result["devices"][0]["device"] == "CPU:0"
    assert check_result["placement"]["runs"][-1]["actual"] == "CPU:0"
    assert check_result["utilization"]["steps"] > 1
    assert check_result["reasons"]


def test_nvml_part_matches_a_fresh_query(check_result: dict) -> None:
    report = nvml.query()
    part = check_result["nvml"]
    assert (part["available"], part["reason"], part["gpus"]) == (
        report.available,
        report.reason,
        len(report.devices),
    )
    # every GPU the driver sees, readable or not
    assert [(d["index"], d["name"], d["error"]) for d in part["devices"]] == [
        (d.index, d.name, d.error) for d in report.devices
    ]
    assert check_result["stack"]["nvidia_driver"] == report.driver_version


def test_no_gpu_verdict_in_this_process(check_result: dict, no_gpu: None) -> None:
    assert check_result["verdict"] == "no_gpu"
    assert [row["type"] for row in check_result["devices"]] == ["CPU"]
    (run,) = check_result["placement"]["runs"]
    assert run["actual"] == "CPU:0"
    assert check_result["utilization"]["device"] == "CPU:0"
    assert check_result["utilization"]["weights_device"] == "CPU:0"
    assert check_result["utilization"]["gpus"] == []
    if not check_result["nvml"]["available"]:
        no_driver = f"no usable NVIDIA driver: {check_result['nvml']['reason']}"
        assert no_driver in check_result["reasons"]


def test_tensorflow_cpu_build_is_named(tensorflow_check: dict) -> None:
    software = tensorflow_check["stack"]
    assert software["keras_backend"] == "tensorflow"
    if software["is_cuda_build"] is not False:
        pytest.skip("this TensorFlow is a CUDA build")
    assert tensorflow_check["verdict"] == "no_gpu"
    assert any(
        reason.startswith("CPU-only TensorFlow build") for reason in tensorflow_check["reasons"]
    )
    assert "install_gpukeras(gpu = TRUE)" in tensorflow_check["advice"][0]
    (run,) = tensorflow_check["placement"]["runs"]
    assert run["actual"] == "CPU:0"


def test_jax_check_runs_without_tensorflow(jax_run: CoreRun) -> None:
    assert jax_run.value["stack"]["keras_backend"] == "jax"
    assert jax_run.value["stack"]["is_cuda_build"] is None
    assert "jax" in jax_run.loaded
    assert "tensorflow" not in jax_run.loaded
    assert jax_run.value["utilization"]["steps"] > 1


def test_cpu_only_jax_is_named(jax_run: CoreRun) -> None:
    result = jax_run.value
    if result["stack"]["jax_cuda_plugin"] is not None:
        pytest.skip(f"{result['stack']['jax_cuda_plugin']} is installed")
    assert result["verdict"] == "no_gpu"
    assert "CPU-only JAX: no jax CUDA plugin is installed" in result["reasons"]
    assert not any("mismatch" in reason for reason in result["reasons"])
    (run,) = result["placement"]["runs"]
    assert run["actual"] == "CPU:0"


def test_cuda_visible_devices_hiding_every_gpu() -> None:
    run = run_core(
        "check",
        {"probe_training": False, "matmul_size": 64},
        env={"CUDA_VISIBLE_DEVICES": "-1"},
    )
    result = run.value
    assert result["verdict"] == "no_gpu"
    assert result["stack"]["cuda_visible_devices"] == "-1"
    assert "CUDA_VISIBLE_DEVICES='-1' hides every GPU" in result["reasons"]
    assert any("Sys.unsetenv('CUDA_VISIBLE_DEVICES')" in advice for advice in result["advice"])
    assert result["utilization"] is None
    assert "probe" not in result["timings"]
    assert [row["type"] for row in result["devices"]] == ["CPU"]


@pytest.mark.parametrize(
    "kwargs",
    [{"probe_seconds": 0}, {"probe_seconds": -1}, {"probe_seconds": math.nan}, {"matmul_size": 0}],
)
def test_bad_arguments_are_a_classed_error(kwargs: dict) -> None:
    answer = bridge.call("check", kwargs)
    assert answer["ok"] is False
    assert answer["r_class"] == "gpukeras_error_bad_argument"
    assert "must be positive" in answer["message"]
    assert answer["traceback"] is None


@pytest.mark.gpu
def test_gpu_is_used(check_result: dict) -> None:
    assert check_result["verdict"] == "gpu_used", check_result["reasons"]
    assert check_result["advice"] == []
    gpu_run = check_result["placement"]["runs"][0]
    assert gpu_run["requested"] == "GPU:0"
    assert gpu_run["actual"] == "GPU:0"
    assert check_result["placement"]["on_gpu"] is True
    assert check_result["placement"]["speedup"] > 0
    utilization = check_result["utilization"]
    assert utilization["device"] == "GPU:0"
    assert utilization["weights_device"] == "GPU:0"
    assert utilization["nvml_reason"] is None
    watched = utilization["gpus"][0]
    assert watched["nvml_index"] == check_result["devices"][1]["nvml_index"]
    assert watched["utilization_max"] > 0
    assert watched["sample_hz"] >= 5
    assert any(reason.startswith("NVML measured") for reason in check_result["reasons"])


@pytest.mark.gpu
def test_gpu_rows_in_the_check(check_result: dict) -> None:
    gpu = check_result["devices"][1]
    assert gpu["device"] == "GPU:0"
    assert gpu["type"] == "GPU"
    assert re.fullmatch(r"\d+\.\d+", gpu["compute_capability"])
    assert gpu["memory_total_mib"] > 0
    assert 0 <= gpu["memory_free_mib"] <= gpu["memory_total_mib"]
    assert check_result["nvml"]["available"] is True
    assert check_result["stack"]["nvidia_driver"]
    if check_result["stack"]["keras_backend"] == "jax":
        assert check_result["stack"]["jax_cuda_plugin"].startswith("jax")


def test_a_gpu_in_mig_mode_next_to_a_cpu_only_backend() -> None:
    """The driver shows an H100 split in MIG instances: CUDA would see the instances, named
    as such, and the backend (CPU-only here) uses none (issue #14, item 2)."""
    run = run_core(
        "check",
        {"probe_training": True, "probe_seconds": 0.2, "matmul_size": 64},
        # CPU-only also on a GPU machine: JAX kept off the GPU, the real driver hidden
        env={"CUDA_VISIBLE_DEVICES": None, "JAX_PLATFORMS": "cpu"},
        setup=f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from nvml_double import FakeGpu, fake_mig, fake_pynvml
from gpukeras.gpu import cuda_driver
def no_driver():
    raise cuda_driver.CudaDriverUnavailable("libcuda.so.1 hidden by the test")
cuda_driver.load = no_driver
parent = "GPU-0e0e0e0e-0000-0000-0000-000000000001"
sys.modules["pynvml"] = fake_pynvml(
    [FakeGpu(uuid=parent, migs=[fake_mig(parent, "3g.40gb"), fake_mig(parent, "4g.40gb")])]
)
""",
    )
    result = run.value
    (gpu,) = result["nvml"]["devices"]
    assert (gpu["mig_instances"], gpu["visible"], gpu["in_use"]) == (2, True, False)
    assert result["verdict"] == "gpu_available_not_used"
    assert any(
        "the driver sees 2 GPUs (NVIDIA H100 80GB HBM3 MIG 3g.40gb, NVIDIA H100 80GB HBM3 MIG "
        "4g.40gb)" in reason
        for reason in result["reasons"]
    ), result["reasons"]
    assert result["utilization"]["processes"]["notes"] == ["no GPU to watch"]


@pytest.mark.gpu
def test_the_check_tells_this_process_from_others(check_result: dict) -> None:
    """On a real GPU: the probe's own memory shows under this process's pid."""
    processes = check_result["utilization"]["processes"]
    assert processes["pid"] == os.getpid()
    if processes["own_memory_mib"] is None:
        pytest.skip(f"NVML does not show this process: {processes['notes']}")
    assert processes["own_memory_mib"] > 0
    assert all(other["pid"] != os.getpid() for other in processes["others"])
