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
from gpukeras.tools.check import NOT_ON_MIG, builds, check_lines


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
        "lines",
    }
    assert set(check_result["lines"]) == {"stack", "devices", "placement", "probe"}
    assert check_result["stack"]["tensorflow_build"]
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


# The evidence in words ------------------------------------------------------------------
def stack_of(**versions: object) -> dict[str, object]:
    """A collect_stack() record on Linux with ``versions``, its builds in words."""
    found: dict[str, object] = {
        "r": "4.5.1",
        "reticulate": "1.43.0",
        "python": "3.12.3",
        "python_executable": "/env/bin/python",
        "keras": "3.15.1",
        "keras_backend": "jax",
        "tensorflow": None,
        "tensorflow_distribution": None,
        "is_cuda_build": None,
        "cuda_version": None,
        "cudnn_version": None,
        "jax": "0.7.1",
        "jax_cuda_plugin": "jax-cuda12-plugin 0.7.1",
        "keras_hub": None,
        "tensorflow_text": None,
        "nvidia_driver": "580.65",
        "cuda_driver_version": "13.0",
        "cuda_visible_devices": None,
        "os": "Linux",
        "os_release": "6.8",
        "machine": "x86_64",
        **versions,
    }
    return {**found, **builds(found)}


CPU_ROW = {"device": "CPU:0", "name": "Xeon", "memory_total_mib": 2048, "memory_free_mib": 1024}
CPU_RUN = {"requested": "CPU:0", "actual": "CPU:0", "size": 1024, "median_ms": 10, "gflops": 214.7}


def test_the_words_of_a_check_on_a_gpu_it_uses() -> None:
    gpu = {
        "device": "GPU:0",
        "name": "NVIDIA H100",
        "compute_capability": "9.0",
        "memory_total_mib": 81559,
        "memory_free_mib": 80000,
    }
    gpu_run = {"requested": "GPU:0", "actual": "GPU:0", "size": 8192, "median_ms": 0.05}
    lines = check_lines(
        {
            "stack": stack_of(),
            "nvml": {"available": True, "reason": None, "devices": []},
            "devices": [CPU_ROW, gpu],
            "placement": {"runs": [{**gpu_run, "gflops": 42949.7}, CPU_RUN], "speedup": 200},
            "utilization": {
                "device": "GPU:0",
                "weights_device": "GPU:0",
                "steps": 300,
                "batch_size": 2048,
                "seconds": 3.01,
                "samples_per_second": 204000,
                "gpus": [
                    {
                        "nvml_index": 0,
                        "samples": 30,
                        "sample_hz": 9.9,
                        "utilization_mean": 87.4,
                        "utilization_max": 100,
                        "memory_used_max_mib": 2100,
                    }
                ],
                "processes": {
                    "pid": 1234,
                    "own_memory_mib": 2048,
                    "own_sm_max": 80,
                    "others": [{"pid": 4242, "memory_mib": 20480, "sm_max": 40}],
                    "notes": [],
                },
            },
        },
        bullet="*",
        arrow="->",
    )
    assert lines == {
        "stack": [
            "R 4.5.1 * reticulate 1.43.0 * Python 3.12.3 * Keras 3.15.1 on jax",
            "JAX 0.7.1 (jax-cuda12-plugin 0.7.1)",
            "Python: /env/bin/python (chosen by unknown)",
            "NVIDIA driver: 580.65 (CUDA 13.0) * CUDA_VISIBLE_DEVICES: unset * Linux 6.8 x86_64",
        ],
        "devices": [
            "CPU:0  Xeon, 2.0 GiB total, 1.0 GiB free",
            "GPU:0  NVIDIA H100 (compute 9.0), 79.6 GiB total, 78.1 GiB free",
        ],
        "placement": [
            "GPU:0  -> GPU:0  n = 8192      0.05 ms  42949.7 GFLOP/s",
            "CPU:0  -> CPU:0  n = 1024     10.00 ms    214.7 GFLOP/s",
            "GPU speed-up over CPU: 200.0x",
        ],
        "probe": [
            "300 steps of batch 2048 on GPU:0 in 3.0 s: 204,000 samples/s; weights on GPU:0",
            "GPU 0 (whole GPU): utilization mean 87%, max 100%; memory used up to 2.1 GiB "
            "(30 samples at 9.9 Hz)",
            "this process (pid 1234): SM up to 80%, memory 2.0 GiB",
            "other process (pid 4242): SM up to 40%, memory 20.0 GiB",
        ],
    }


def test_the_words_name_the_gpus_the_driver_sees_that_the_backend_does_not_use() -> None:
    """A working driver, a CPU-only TensorFlow; a GPU NVML cannot read; no probe."""
    lines = check_lines(
        {
            "stack": stack_of(
                keras_backend="tensorflow",
                tensorflow="2.21.0",
                tensorflow_distribution="tensorflow-cpu",
                is_cuda_build=False,
                nvidia_driver="580.95.05",
                python_chosen_by="GPUKERAS_PYTHON",
            ),
            "nvml": {"devices": []},
            "devices": [CPU_ROW],
            "placement": {"runs": [CPU_RUN], "speedup": None},
            "utilization": None,
        }
    )
    assert lines["probe"] == ["not run (probe = FALSE)"]
    assert lines["placement"][-1] == "GPU speed-up over CPU: n/a (no GPU run)"
    assert lines["stack"][1:3] == [
        "TensorFlow 2.21.0 (tensorflow-cpu, CPU-only build)",
        "Python: /env/bin/python (chosen by GPUKERAS_PYTHON)",
    ]
    unread = "NVML has no permission to read this GPU"
    devices = check_lines(
        {
            "stack": stack_of(keras_backend="tensorflow"),
            "nvml": {
                "devices": [
                    {
                        "index": 0,
                        "name": "NVIDIA H100 80GB HBM3",
                        "memory_total_mib": 81559,
                        "visible": True,
                    },
                    {
                        "index": 1,
                        "name": "GPU 1 (not readable)",
                        "memory_total_mib": None,
                        "visible": True,
                        "error": unread,
                    },
                    {
                        "index": 2,
                        "name": "NVIDIA A100",
                        "memory_total_mib": 40960,
                        "visible": False,
                    },
                ]
            },
            "devices": [CPU_ROW],
            "placement": {"runs": [], "speedup": None},
            "utilization": None,
        }
    )["devices"]
    assert devices == [
        "CPU:0  Xeon, 2.0 GiB total, 1.0 GiB free",
        "NVML 0 NVIDIA H100 80GB HBM3: 79.6 GiB total; the driver sees it, "
        "tensorflow does not use it",
        f"NVML 1 GPU 1 (not readable): not readable: {unread}",
        "NVML 2 NVIDIA A100: 40.0 GiB total; hidden by CUDA_VISIBLE_DEVICES",
    ]


def test_the_words_show_a_mig_instance_as_itself_and_what_nvml_cannot_tell() -> None:
    mig = {
        "device": "GPU:0",
        "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
        "compute_capability": "9.0",
        "memory_total_mib": 40192,
        "memory_free_mib": 40000,
        "mig_parent": 0,
    }
    parent = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559}
    lines = check_lines(
        {
            "stack": stack_of(),
            "nvml": {"available": True, "reason": None, "devices": [{**parent, "in_use": True}]},
            "devices": [CPU_ROW, mig],
            "placement": {"runs": [], "speedup": None},
            "utilization": {
                "device": "GPU:0",
                "weights_device": "GPU:0",
                "steps": 30,
                "batch_size": 2048,
                "seconds": 3,
                "samples_per_second": 20000,
                "gpus": [],
                "nvml_reason": NOT_ON_MIG,
                "processes": {
                    "pid": 1234,
                    "own_memory_mib": 2048,
                    "own_sm_max": None,
                    "others": [],
                    "notes": ["per-process utilization: not available on MIG"],
                },
            },
        }
    )
    assert lines["devices"] == [
        "CPU:0  Xeon, 2.0 GiB total, 1.0 GiB free",
        "GPU:0  NVIDIA H100 80GB HBM3 MIG 3g.40gb (compute 9.0), 39.2 GiB total, 39.1 GiB free "
        "[MIG instance of nvidia-smi's GPU 0]",
    ]
    assert lines["probe"][1:] == [
        f"GPU utilization: {NOT_ON_MIG}",
        "this process (pid 1234): SM up to n/a, memory 2.0 GiB",
        "note: per-process utilization: not available on MIG",
    ]
    other_gpu = [{**parent, "visible": True, "mig_instances": 2}]
    assert check_lines(
        {
            "stack": stack_of(),
            "nvml": {"available": False, "reason": "no driver", "devices": other_gpu},
            "devices": [CPU_ROW],
            "placement": {"runs": [], "speedup": None},
            "utilization": {
                **lines_probe_without_gpus(),
                "processes": {"notes": ["no GPU to watch"]},
            },
        }
    )["devices"][1:] == [
        "NVML 0 NVIDIA H100 80GB HBM3: 79.6 GiB total, MIG mode with 2 instance(s); "
        "the driver sees it, jax does not use it",
    ]


def lines_probe_without_gpus() -> dict[str, object]:
    return {
        "device": "CPU:0",
        "weights_device": "CPU:0",
        "steps": 3,
        "batch_size": 32,
        "seconds": 1,
        "samples_per_second": None,
        "gpus": [],
    }


def test_a_probe_nvml_could_not_watch_says_why() -> None:
    probe = check_lines(
        {
            "stack": stack_of(),
            "nvml": {"available": False, "reason": "nvidia-ml-py is not installed", "devices": []},
            "devices": [CPU_ROW],
            "placement": {"runs": [], "speedup": None},
            "utilization": {
                **lines_probe_without_gpus(),
                "processes": {"notes": ["no GPU to watch"]},
            },
        }
    )["probe"]
    assert probe == [
        "3 steps of batch 32 on CPU:0 in 1.0 s: NA samples/s; weights on CPU:0",
        "GPU utilization: not measured (nvidia-ml-py is not installed)",
    ]


def test_the_builds_in_words() -> None:
    assert stack_of()["keras_hub_build"] is None
    no_hub = {"stack": stack_of(), "nvml": {"devices": []}, "devices": [], "utilization": None}
    no_hub["placement"] = {"runs": [], "speedup": None}
    assert not any("KerasHub" in line for line in check_lines(no_hub)["stack"])
    assert stack_of(jax=None)["jax_build"] is None
    assert stack_of()["tensorflow_build"] == "not installed"
    assert (
        stack_of(keras_hub="0.32.0")["keras_hub_build"] == "0.32.0 (tensorflow-text not installed)"
    )
    hub = stack_of(keras_hub="0.32.0", tensorflow_text="2.21.1")
    assert hub["keras_hub_build"] == "0.32.0 (tensorflow-text 2.21.1)"
    assert (
        "KerasHub 0.32.0 (tensorflow-text 2.21.1)"
        in check_lines(
            {
                "stack": hub,
                "nvml": {"devices": []},
                "devices": [],
                "placement": {"runs": [], "speedup": None},
                "utilization": None,
            }
        )["stack"]
    )
    cuda = stack_of(
        tensorflow="2.21.0",
        tensorflow_distribution="tensorflow",
        is_cuda_build=True,
        cuda_version="12.5.1",
        cudnn_version=None,
    )
    assert cuda["tensorflow_build"] == "2.21.0 (tensorflow, CUDA 12.5.1, cuDNN none)"
