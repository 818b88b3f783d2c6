"""diagnose: every verdict rule, including systems this machine is not."""

from __future__ import annotations

import dataclasses

import pytest

from gpukeras.tools.diagnose import GPU_AVAILABLE_NOT_USED, GPU_USED, NO_GPU, Evidence, diagnose

# Each advice line must name something the user can do or type.
ACTIONS = (
    "install_gpukeras(",
    "Sys.unsetenv(",
    "pip install",
    "nvidia-smi",
    "WSL2",
    "keras.device",
    "device scope",
    "LD_LIBRARY_PATH",
)

NO_DRIVER = "libnvidia-ml.so.1 (NVML) not found, so no NVIDIA driver is installed"

# A Linux machine with one H100, a CUDA build of TensorFlow, and Keras training on it.
WORKING = Evidence(
    os="Linux",
    keras_backend="tensorflow",
    framework_gpus=1,
    tensorflow="2.21.0",
    tensorflow_distribution="tensorflow",
    is_cuda_build=True,
    cuda_version="12.5.1",
    cudnn_version="9",
    nvml_available=True,
    nvml_gpus=1,
    nvml_visible_gpus=1,
    driver_version="580.65.06",
    cuda_driver_version="13.0",
    placement_on_gpu=True,
    placement_actual=["GPU:0"],
    speedup=41.5,
    probe_ran=True,
    probe_weights_device="GPU:0",
    probe_utilization_mean=83.2,
    probe_utilization_max=97.0,
)

# The same machine's software where the framework found no GPU.
NOT_FOUND = dataclasses.replace(
    WORKING,
    framework_gpus=0,
    placement_on_gpu=False,
    placement_actual=[],
    speedup=None,
    probe_weights_device="CPU:0",
    probe_utilization_mean=None,
    probe_utilization_max=None,
)

# A machine without an NVIDIA driver.
NO_NVIDIA = dataclasses.replace(
    NOT_FOUND,
    nvml_available=False,
    nvml_reason=NO_DRIVER,
    nvml_gpus=0,
    nvml_visible_gpus=0,
    driver_version=None,
    cuda_driver_version=None,
)

JAX_NOT_FOUND = dataclasses.replace(
    NOT_FOUND,
    keras_backend="jax",
    tensorflow=None,
    tensorflow_distribution=None,
    is_cuda_build=None,
    cuda_version=None,
    cudnn_version=None,
    jax_cuda_plugin="jax-cuda13-plugin 0.8.0",
)

SCENARIOS = {
    "working": WORKING,
    "cpu_tensorflow": dataclasses.replace(
        NO_NVIDIA, tensorflow_distribution="tensorflow-cpu", is_cuda_build=False
    ),
    "cpu_jax": dataclasses.replace(JAX_NOT_FOUND, jax_cuda_plugin=None),
    "cpu_jax_no_driver": dataclasses.replace(
        JAX_NOT_FOUND,
        jax_cuda_plugin=None,
        nvml_available=False,
        nvml_reason=NO_DRIVER,
        nvml_gpus=0,
        nvml_visible_gpus=0,
    ),
    "hidden": dataclasses.replace(NOT_FOUND, cuda_visible_devices="-1", nvml_visible_gpus=0),
    "hidden_empty": dataclasses.replace(NOT_FOUND, cuda_visible_devices="", nvml_visible_gpus=0),
    "hidden_no_driver": dataclasses.replace(NO_NVIDIA, cuda_visible_devices="-1"),
    "no_driver": NO_NVIDIA,
    "macos": dataclasses.replace(
        NO_NVIDIA,
        os="Darwin",
        tensorflow_distribution="tensorflow-macos",
        is_cuda_build=False,
        nvml_reason="nvml missing",
    ),
    "windows_2_15": dataclasses.replace(
        NO_NVIDIA, os="Windows", tensorflow="2.15.0", is_cuda_build=None
    ),
    "windows_2_10": dataclasses.replace(
        NOT_FOUND, os="Windows", tensorflow="2.10.1", is_cuda_build=None
    ),
    "mismatch": NOT_FOUND,
    "jax_mismatch": JAX_NOT_FOUND,
    "nothing_found": dataclasses.replace(NOT_FOUND, nvml_gpus=0, nvml_visible_gpus=0),
    "placed_on_cpu": dataclasses.replace(
        WORKING, placement_on_gpu=False, placement_actual=["CPU:0"]
    ),
    "weights_on_cpu": dataclasses.replace(WORKING, probe_weights_device="CPU:0"),
    "idle_gpu": dataclasses.replace(WORKING, probe_utilization_mean=0.0, probe_utilization_max=0.0),
    "not_measured": dataclasses.replace(
        WORKING,
        nvml_reason="NVML stopped sampling: Not Supported",
        probe_utilization_mean=None,
        probe_utilization_max=None,
    ),
    "no_probe": dataclasses.replace(
        WORKING, probe_ran=False, probe_weights_device=None, probe_utilization_max=None
    ),
}


def _text(diagnosis: object) -> str:
    return "\n".join([*diagnosis.reasons, *diagnosis.advice])


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_advice_line_is_a_concrete_action(name: str) -> None:
    diagnosis = diagnose(SCENARIOS[name])
    assert diagnosis.reasons
    for advice in diagnosis.advice:
        assert any(action in advice for action in ACTIONS), advice
    assert len(set(diagnosis.advice)) == len(diagnosis.advice)
    assert "None" not in _text(diagnosis)


def test_gpu_used_with_utilization() -> None:
    diagnosis = diagnose(WORKING)
    assert diagnosis.verdict == GPU_USED
    assert diagnosis.reasons == [
        "a matmul ran on the GPU (GPU:0), 41.5x the CPU's speed",
        "NVML measured 83% mean, 97% max GPU utilization while Keras trained",
    ]
    assert diagnosis.advice == []


def test_gpu_used_without_a_probe_rests_on_the_matmul() -> None:
    diagnosis = diagnose(SCENARIOS["no_probe"])
    assert diagnosis.verdict == GPU_USED
    assert diagnosis.reasons == ["a matmul ran on the GPU (GPU:0), 41.5x the CPU's speed"]


def test_cpu_only_tensorflow_build() -> None:
    diagnosis = diagnose(SCENARIOS["cpu_tensorflow"])
    assert diagnosis.verdict == NO_GPU
    assert diagnosis.reasons[0] == (
        "CPU-only TensorFlow build (tensorflow-cpu 2.21.0 was built without CUDA)"
    )
    assert "install_gpukeras(gpu = TRUE)" in diagnosis.advice[0]
    assert not any("mismatch" in reason for reason in diagnosis.reasons)


def test_cpu_only_jax() -> None:
    diagnosis = diagnose(SCENARIOS["cpu_jax"])
    # the driver sees a GPU this process may use: present, and unused
    assert diagnosis.verdict == GPU_AVAILABLE_NOT_USED
    assert diagnosis.reasons == [
        "the driver sees 1 GPU(s) (driver 580.65.06), but JAX is CPU-only: no jax CUDA "
        "plugin is installed"
    ]
    assert diagnosis.advice == [
        "pip install 'jax[cuda12]' (or cuda13) in the gpukeras env, then restart R."
    ]


def test_cpu_only_tensorflow_next_to_a_working_driver_names_the_gpu() -> None:
    """The case behind most "R Keras does not use my GPU" reports (issue #14, item 10)."""
    evidence = dataclasses.replace(
        NOT_FOUND,
        tensorflow_distribution="tensorflow-cpu",
        is_cuda_build=False,
        nvml_gpu_names=["NVIDIA H100 80GB HBM3"],
        driver_version="580.95.05",
    )
    diagnosis = diagnose(evidence)
    assert diagnosis.verdict == GPU_AVAILABLE_NOT_USED
    assert diagnosis.reasons == [
        "the driver sees NVIDIA H100 80GB HBM3 (driver 580.95.05), but TensorFlow is the "
        "CPU-only build (tensorflow-cpu 2.21.0 was built without CUDA)"
    ]
    assert diagnosis.advice == [
        "Reinstall with GPU support: install_gpukeras(gpu = TRUE), then restart R."
    ]
    two = dataclasses.replace(evidence, nvml_visible_gpus=2, nvml_gpu_names=["A100", "A100"])
    assert diagnose(two).reasons[0].startswith("the driver sees 2 GPUs (A100, A100) (driver")


def test_cpu_only_jax_without_a_driver() -> None:
    diagnosis = diagnose(SCENARIOS["cpu_jax_no_driver"])
    assert diagnosis.verdict == NO_GPU
    assert diagnosis.reasons == [
        "CPU-only JAX: no jax CUDA plugin is installed",
        f"no usable NVIDIA driver: {NO_DRIVER}",
    ]


@pytest.mark.parametrize("name", ["hidden", "hidden_empty", "hidden_no_driver"])
def test_cuda_visible_devices_hiding_every_gpu(name: str) -> None:
    evidence = SCENARIOS[name]
    diagnosis = diagnose(evidence)
    assert diagnosis.verdict == NO_GPU
    assert f"CUDA_VISIBLE_DEVICES='{evidence.cuda_visible_devices}' hides every GPU" in (
        diagnosis.reasons
    )
    assert any("Sys.unsetenv('CUDA_VISIBLE_DEVICES')" in advice for advice in diagnosis.advice)
    assert not any("mismatch" in reason for reason in diagnosis.reasons)


@pytest.mark.parametrize(
    ("jax_platforms", "blamed"),
    [("cpu", True), (" CPU ", True), ("cpu,tpu", True), ("cuda,cpu", False), ("", False)],
)
def test_jax_platforms_keeping_jax_off_the_gpu_is_named_not_called_a_mismatch(
    jax_platforms: str, blamed: bool
) -> None:
    """Seen on an H100: JAX_PLATFORMS=cpu with the CUDA plugin installed read as a mismatch."""
    diagnosis = diagnose(dataclasses.replace(JAX_NOT_FOUND, jax_platforms=jax_platforms))
    kept_off = f"JAX_PLATFORMS='{jax_platforms}' keeps JAX off the GPU"
    named = any(reason.endswith(f"but {kept_off}") for reason in diagnosis.reasons)
    assert named is blamed, diagnosis.reasons
    assert any("mismatch" in reason for reason in diagnosis.reasons) is not blamed
    assert any("Sys.unsetenv('JAX_PLATFORMS')" in a for a in diagnosis.advice) is blamed
    assert diagnosis.verdict == GPU_AVAILABLE_NOT_USED


def test_cuda_visible_devices_naming_a_missing_gpu_without_a_driver_is_not_blamed() -> None:
    diagnosis = diagnose(dataclasses.replace(NO_NVIDIA, cuda_visible_devices="0"))
    assert not any("CUDA_VISIBLE_DEVICES" in reason for reason in diagnosis.reasons)
    assert any(reason.startswith("no usable NVIDIA driver") for reason in diagnosis.reasons)


def test_no_driver() -> None:
    diagnosis = diagnose(NO_NVIDIA)
    assert diagnosis.verdict == NO_GPU
    assert diagnosis.reasons == [f"no usable NVIDIA driver: {NO_DRIVER}"]
    assert "nvidia-smi" in diagnosis.advice[0]
    assert "Install the NVIDIA driver" in diagnosis.advice[0]


def test_macos() -> None:
    diagnosis = diagnose(SCENARIOS["macos"])
    assert diagnosis.verdict == NO_GPU
    assert diagnosis.reasons[0].startswith("macOS: there is no CUDA")
    assert "tensorflow-metal" in diagnosis.advice[0]
    assert not any("NVIDIA driver" in reason for reason in diagnosis.reasons)


def test_native_windows_with_tensorflow_after_2_10() -> None:
    diagnosis = diagnose(SCENARIOS["windows_2_15"])
    assert diagnosis.verdict == NO_GPU
    assert diagnosis.reasons[0].startswith("native Windows with TensorFlow 2.15.0")
    assert "WSL2" in diagnosis.advice[0]
    assert "install_gpukeras(gpu = TRUE)" in diagnosis.advice[0]


def test_native_windows_with_tensorflow_2_10_is_not_blamed_on_windows() -> None:
    diagnosis = diagnose(SCENARIOS["windows_2_10"])
    assert diagnosis.verdict == GPU_AVAILABLE_NOT_USED  # the driver sees a GPU
    assert not any("Windows" in reason for reason in diagnosis.reasons)


def test_windows_on_jax_is_not_blamed_on_tensorflow() -> None:
    evidence = dataclasses.replace(SCENARIOS["cpu_jax"], os="Windows")
    assert not any("Windows" in reason for reason in diagnose(evidence).reasons)


def test_library_mismatch_names_the_versions() -> None:
    diagnosis = diagnose(NOT_FOUND)
    assert diagnosis.verdict == GPU_AVAILABLE_NOT_USED
    (reason,) = diagnosis.reasons
    assert "the driver sees 1 GPU(s)" in reason
    assert "driver 580.65.06" in reason
    assert "CUDA 13.0" in reason
    assert "built for CUDA 12.5.1, cuDNN 9" in reason
    assert "library mismatch" in reason
    assert "install_gpukeras(gpu = TRUE)" in diagnosis.advice[0]
    assert "supports up to 13.0" in diagnosis.advice[0]


def test_library_mismatch_on_jax_names_the_plugin() -> None:
    diagnosis = diagnose(JAX_NOT_FOUND)
    (reason,) = diagnosis.reasons
    assert "jax (with jax-cuda13-plugin 0.8.0) finds none" in reason


def test_cpu_only_jax_is_not_called_a_library_mismatch() -> None:
    diagnosis = diagnose(SCENARIOS["cpu_jax"])
    assert not any("mismatch" in reason for reason in diagnosis.reasons)


def test_nothing_else_to_blame() -> None:
    diagnosis = diagnose(SCENARIOS["nothing_found"])
    assert diagnosis.verdict == NO_GPU
    assert diagnosis.reasons == ["tensorflow sees no GPU"]
    assert "nvidia-smi" in diagnosis.advice[0]


def test_matmul_placed_on_the_cpu() -> None:
    diagnosis = diagnose(SCENARIOS["placed_on_cpu"])
    assert diagnosis.verdict == GPU_AVAILABLE_NOT_USED
    assert diagnosis.reasons[0] == "a matmul asked for the GPU ran on CPU:0"
    assert "device scope" in diagnosis.advice[0]


def test_probe_weights_on_the_cpu() -> None:
    diagnosis = diagnose(SCENARIOS["weights_on_cpu"])
    assert diagnosis.verdict == GPU_AVAILABLE_NOT_USED
    assert "the probe model's weights were placed on CPU:0" in diagnosis.reasons
    assert "Build and train the model outside any CPU device scope." in diagnosis.advice


def test_zero_utilization_while_training() -> None:
    diagnosis = diagnose(SCENARIOS["idle_gpu"])
    assert diagnosis.verdict == GPU_AVAILABLE_NOT_USED
    assert "NVML measured 0% GPU utilization while the probe trained" in diagnosis.reasons
    assert any("keras.device" in advice for advice in diagnosis.advice)


def test_utilization_not_measured_is_a_note_not_a_verdict() -> None:
    diagnosis = diagnose(SCENARIOS["not_measured"])
    assert diagnosis.verdict == GPU_USED
    assert "GPU utilization not measured: NVML stopped sampling: Not Supported" in diagnosis.reasons
    assert diagnosis.advice == [
        "pip install nvidia-ml-py in the gpukeras env to monitor utilization."
    ]


def test_utilization_not_measured_without_a_reason() -> None:
    evidence = dataclasses.replace(SCENARIOS["not_measured"], nvml_reason=None)
    assert "GPU utilization not measured: no NVML samples" in diagnose(evidence).reasons


# This process's own figures, apart from other processes' (issue #14, item 7) -------------
OTHER_JOB = [{"pid": 4242, "memory_mib": 20480.0, "sm_max": 95.0}]


def test_another_process_busy_on_the_gpu_is_not_this_process_using_it() -> None:
    """The whole GPU was 97% busy, all of it another job's: this process did not use it."""
    evidence = dataclasses.replace(
        WORKING, own_utilization_max=0.0, own_memory_mib=300.0, other_processes=OTHER_JOB
    )
    diagnosis = diagnose(evidence)
    assert diagnosis.verdict == GPU_AVAILABLE_NOT_USED
    assert (
        "NVML measured no SM use by this process while the probe trained (the whole GPU: "
        "mean 83%, max 97%: other processes' work)" in diagnosis.reasons
    )
    assert "other processes on this GPU: pid 4242 (20480 MiB, SM up to 95%)" in diagnosis.reasons


def test_this_process_own_use_is_the_evidence() -> None:
    evidence = dataclasses.replace(WORKING, own_utilization_max=88.0, other_processes=OTHER_JOB)
    diagnosis = diagnose(evidence)
    assert diagnosis.verdict == GPU_USED
    assert (
        "NVML measured up to 88% SM use by this process while Keras trained "
        "(the whole GPU: mean 83%, max 97%)" in diagnosis.reasons
    )


def test_a_whole_gpu_figure_says_others_count_too() -> None:
    """No per-process figures (e.g. a container's process ids): the whole GPU's, labelled so."""
    diagnosis = diagnose(dataclasses.replace(WORKING, other_processes=OTHER_JOB))
    assert diagnosis.verdict == GPU_USED
    assert (
        "NVML measured 83% mean, 97% max GPU utilization while Keras trained (a whole-GPU "
        "figure: other processes' work counts too)" in diagnosis.reasons
    )


def test_utilization_on_a_mig_instance_is_not_available_not_missing() -> None:
    """NVML measures no utilization on MIG: no advice to install nvidia-ml-py (item 2)."""
    evidence = dataclasses.replace(
        SCENARIOS["not_measured"],
        probe_on_mig=True,
        nvml_reason="no GPU to watch",
        own_memory_mib=2048.0,
    )
    diagnosis = diagnose(evidence)
    assert diagnosis.verdict == GPU_USED
    assert (
        "GPU utilization: not available on MIG (NVML does not measure a MIG instance's "
        "utilization), so the verdict rests on where the work ran; this process held 2048 MiB "
        "of the instance's memory" in diagnosis.reasons
    )
    assert diagnosis.advice == []
    assert not any("not measured" in reason for reason in diagnosis.reasons)
