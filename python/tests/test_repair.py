"""repair: what gpu_check(fix = TRUE) would change, planned from the evidence, and from a
whole check in a fresh process with the NVML double as the driver."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from conftest import requires, run_core
from gpukeras.tools.diagnose import Evidence
from gpukeras.tools.repair import how, plan
from test_diagnose import NO_DRIVER, NOT_FOUND

# install_gpukeras()'s pins for a GPU machine, as R's gpukeras_requirements(gpu = TRUE) gives them.
PINS = [
    "tensorflow[and-cuda]==2.21.0",
    "keras==3.15.1",
    "nvidia-ml-py==13.615.71",
    "numpy==2.2.6",
]

# tensorflow-cpu 2.20.0 beside a driver that shows an H100.
CPU_BUILD = dataclasses.replace(
    NOT_FOUND,
    tensorflow="2.20.0",
    tensorflow_distribution="tensorflow-cpu",
    is_cuda_build=False,
    cuda_version=None,
    cudnn_version=None,
)


def _ids(ev: Evidence) -> list[str]:
    return [repair.id for repair in plan(ev, PINS)]


def test_a_cpu_build_beside_a_driver_gets_the_gpu_build_of_its_version() -> None:
    (repair,) = plan(CPU_BUILD, PINS)
    assert repair.id == "gpu_build"
    # the version installed, not the pin: Keras and the rest of the environment still fit
    assert repair.action == {
        "pip_uninstall": ["tensorflow-cpu"],
        "pip_install": ["tensorflow[and-cuda]==2.20.0"],
        # put back if the install fails
        "pip_restore": ["tensorflow-cpu==2.20.0"],
    }
    assert repair.needs_restart
    assert "tensorflow-cpu 2.20.0" in repair.what
    # in words, as a shell shows the commands: a word with brackets quoted
    assert how(repair, "/home/u/.Renviron") == (
        "pip uninstall -y tensorflow-cpu; pip install 'tensorflow[and-cuda]==2.20.0'"
    )


def test_no_gpu_build_repair_without_a_driver_or_off_linux() -> None:
    no_driver = dataclasses.replace(
        CPU_BUILD, nvml_available=False, nvml_reason=NO_DRIVER, nvml_gpus=0, nvml_visible_gpus=0
    )
    assert _ids(no_driver) == []
    hidden = dataclasses.replace(CPU_BUILD, nvml_visible_gpus=0, cuda_visible_devices="-1")
    assert _ids(hidden) == []
    # no GPU build of TensorFlow after 2.10 on native Windows
    assert _ids(dataclasses.replace(CPU_BUILD, os="Windows")) == []


def test_a_cuda_build_needs_no_gpu_build_repair() -> None:
    assert _ids(NOT_FOUND) == []


def test_missing_nvidia_ml_py_with_a_driver_installs_the_pin() -> None:
    missing = dataclasses.replace(
        NOT_FOUND,
        nvml_available=False,
        nvml_reason="nvidia-ml-py is not installed in this Python (pip install nvidia-ml-py)",
        pynvml_installed=False,
        driver_gpus=1,
    )
    (repair,) = plan(missing, PINS)
    assert (repair.id, repair.action, repair.needs_restart) == (
        "nvidia_ml_py",
        {"pip_install": ["nvidia-ml-py==13.615.71"]},
        False,
    )
    assert plan(missing)[0].action == {"pip_install": ["nvidia-ml-py"]}
    # nothing to watch: no repair
    assert _ids(dataclasses.replace(missing, driver_gpus=0)) == []


def test_jax_preallocating_after_memory_growth_was_asked() -> None:
    jax = dataclasses.replace(
        NOT_FOUND,
        keras_backend="jax",
        framework_gpus=1,
        jax_cuda_plugin="jax-cuda12-plugin 0.7.1",
        memory_growth_asked=True,
    )
    (repair,) = plan(jax, PINS)
    assert repair.id == "jax_memory_growth"
    assert repair.action == {"set_env": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}}
    assert repair.when is not None and "before Python starts" in repair.when
    assert (
        how(repair, "/home/u/.Renviron")
        == "XLA_PYTHON_CLIENT_PREALLOCATE=false in /home/u/.Renviron"
    )
    assert _ids(dataclasses.replace(jax, jax_preallocate="false")) == []
    assert _ids(dataclasses.replace(jax, memory_growth_asked=False)) == []
    assert _ids(dataclasses.replace(jax, memory_growth_asked=None)) == []


NVML_DOUBLE = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from nvml_double import FakeGpu, fake_pynvml
from gpukeras.gpu import cuda_driver
def no_driver():
    raise cuda_driver.CudaDriverUnavailable("libcuda.so.1 hidden by the test")
cuda_driver.load = no_driver
"""


def _check(setup: str) -> dict:
    return run_core(
        "check",
        {"probe_training": False, "matmul_size": 64, "requirements": PINS},
        env={"KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": None},
        setup=NVML_DOUBLE + setup,
    ).value


def test_a_check_of_tensorflow_cpu_beside_the_double_plans_the_gpu_build() -> None:
    requires("tensorflow")
    result = _check('sys.modules["pynvml"] = fake_pynvml([FakeGpu()])\n')
    if result["stack"]["is_cuda_build"] is not False:
        pytest.skip("this TensorFlow is a CUDA build")
    (repair,) = result["repairs"]
    assert repair["id"] == "gpu_build"
    version = result["stack"]["tensorflow"]
    assert repair["action"]["pip_install"] == [f"tensorflow[and-cuda]=={version}"]
    assert result["verdict"] == "gpu_available_not_used"


def test_a_check_without_nvidia_ml_py_beside_a_driver_plans_it() -> None:
    requires("tensorflow")
    result = _check(
        'sys.modules["pynvml"] = None\n'
        "from gpukeras.gpu import nvml\n"
        "nvml.kernel_driver_gpus = lambda folder='': 1\n"
    )
    assert result["nvml"]["available"] is False
    assert [repair["id"] for repair in result["repairs"]] == ["nvidia_ml_py"]
    assert result["repairs"][0]["action"] == {"pip_install": ["nvidia-ml-py==13.615.71"]}


def test_gpu_setup_records_the_memory_growth_asked_and_not_after_a_bad_argument() -> None:
    requires("tensorflow")
    # one fresh Python: the bad call first, then the one the user makes once it is fixed
    read = (
        "from gpukeras.core.runtime import config\n"
        "readback['bad'] = [result['ok'], config.setup.memory_growth_asked]\n"
        "fixed = bridge.call('setup', {'memory_growth': False})\n"
        "readback['fixed'] = [fixed['ok'], config.setup.memory_growth_asked]\n"
    )
    env: dict[str, str | None] = {"KERAS_BACKEND": "tensorflow"}
    run = run_core("setup", {"memory_growth": True, "devices": ["GPU:99"]}, env=env, after=read)
    assert run.readback["bad"] == [False, None]
    assert run.readback["fixed"] == [True, False]
