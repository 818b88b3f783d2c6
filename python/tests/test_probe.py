"""probe: a short real Keras training run."""

from __future__ import annotations

import pytest

from conftest import first_gpu
from gpukeras.tools import probe


def test_training_probe_on_the_cpu() -> None:
    result = probe.run_training_probe("CPU:0", seconds=0.5)
    assert result["device"] == "CPU:0"
    assert result["weights_device"] == "CPU:0"
    assert result["steps"] > 1
    assert result["batch_size"] == probe.PROBE_SHAPES["CPU"]["batch_size"]
    assert result["seconds"] >= 0.5
    assert result["samples_per_second"] > 0
    assert result["samples_per_second"] == pytest.approx(
        (result["steps"] - 1) * result["batch_size"] / result["seconds"]
    )
    assert result["gpus"] == []
    assert result["nvml_reason"] == "no GPU to watch"


@pytest.mark.gpu
def test_training_probe_keeps_the_gpu_busy() -> None:
    gpu = first_gpu()  # CUDA's GPU:0, where the probe trains; NVML's index 0 need not be it
    if gpu.is_mig:
        pytest.skip("a MIG instance: NVML measures no utilization there (test_check covers it)")
    index = gpu.index
    result = probe.run_training_probe("GPU:0", seconds=2, nvml_indices=[index])
    assert result["weights_device"] == "GPU:0"
    assert result["steps"] > 1
    assert result["nvml_reason"] is None
    (gpu,) = result["gpus"]
    assert gpu["nvml_index"] == index
    assert gpu["sample_hz"] >= 5
    assert gpu["utilization_max"] > 0
    assert gpu["memory_used_max_mib"] > 0
