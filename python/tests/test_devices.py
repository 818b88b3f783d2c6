"""devices: what the running backend can use, with NVML's facts about each GPU."""

from __future__ import annotations

import re

import pytest

from gpukeras import devices, nvml


def test_first_row_is_the_host_cpu() -> None:
    cpu = devices.list_devices()[0]
    assert cpu["device"] == "CPU:0"
    assert cpu["type"] == "CPU"
    assert cpu["name"]
    assert cpu["compute_capability"] is None
    assert cpu["nvml_index"] is None
    assert cpu["memory_total_mib"] > 0
    assert 0 < cpu["memory_free_mib"] <= cpu["memory_total_mib"]


def test_no_gpu_rows_without_a_gpu(no_gpu: None) -> None:
    assert devices.framework_gpus() == []
    report = nvml.query()
    rows = devices.list_devices(report)
    assert [row["type"] for row in rows] == ["CPU"]


@pytest.mark.gpu
def test_gpu_rows_carry_nvml_facts() -> None:
    report = nvml.query()
    rows = devices.list_devices(report)
    gpus = [row for row in rows if row["type"] == "GPU"]
    assert len(gpus) == len(devices.framework_gpus()) >= 1
    for position, row in enumerate(gpus):
        assert row["device"] == f"GPU:{position}"
        assert row["name"]
        assert re.fullmatch(r"\d+\.\d+", row["compute_capability"])
        assert isinstance(row["nvml_index"], int)
        nvml_device = report.devices[row["nvml_index"]]
        assert row["memory_total_mib"] == nvml_device.memory_total_mib > 0
        assert 0 <= row["memory_free_mib"] <= row["memory_total_mib"]
