"""monitor: the NVML utilization sampler thread."""

from __future__ import annotations

import threading
import time

import pytest

from gpukeras import nvml
from gpukeras.monitor import Sample, UtilizationSampler


def _sampler_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "gpukeras-nvml"]


def test_nothing_to_watch() -> None:
    with UtilizationSampler([]) as sampler:
        assert _sampler_threads() == []
    assert sampler.reason == "no GPU to watch"
    assert sampler.samples == []
    assert sampler.summary() == []


def test_without_a_driver_the_reason_comes_from_nvml(no_driver: nvml.NvmlReport) -> None:
    with UtilizationSampler([0], hz=20) as sampler:
        time.sleep(0.2)
    assert sampler.reason == no_driver.reason
    assert sampler.samples == []
    assert sampler.summary() == []
    assert _sampler_threads() == []


def test_summary_of_samples() -> None:
    sampler = UtilizationSampler([0, 1])
    sampler.samples = [
        Sample(time=10.0 + i / 10, nvml_index=0, utilization_gpu=u, memory_used_mib=m, power_w=p)
        for i, (u, m, p) in enumerate(
            [(0.0, 100.0, None), (50.0, 300.0, 200.0), (100.0, 200.0, 300.0)]
        )
    ]
    (row,) = sampler.summary()
    assert row["nvml_index"] == 0
    assert row["samples"] == 3
    assert row["sample_hz"] == pytest.approx(10.0)
    assert row["utilization_mean"] == pytest.approx(50.0)
    assert row["utilization_max"] == 100.0
    assert row["memory_used_max_mib"] == 300.0
    assert row["power_mean_w"] == pytest.approx(250.0)

    (late,) = sampler.summary(since=10.15)
    assert late["samples"] == 1
    assert late["sample_hz"] is None
    assert late["utilization_mean"] == 100.0
    assert sampler.summary(since=11.0) == []


@pytest.mark.gpu
def test_samples_a_gpu_at_5_hz_or_more() -> None:
    report = nvml.query()
    index = nvml.visible_indices([device.uuid for device in report.devices])[0]
    with UtilizationSampler([index], hz=10) as sampler:
        time.sleep(1.5)
    assert sampler.reason is None
    assert _sampler_threads() == []
    (row,) = sampler.summary()
    assert row["samples"] >= 8
    assert row["sample_hz"] >= 5
    assert 0 <= row["utilization_max"] <= 100
    assert row["memory_used_max_mib"] > 0
    assert {sample.nvml_index for sample in sampler.samples} == {index}


@pytest.mark.gpu
def test_an_index_nvml_does_not_know_is_reported_not_raised() -> None:
    with UtilizationSampler([len(nvml.query().devices) + 7]) as sampler:
        pass
    assert sampler.samples == []
    assert sampler.reason.startswith("NVML stopped sampling")
