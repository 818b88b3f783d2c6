"""devices: what the running backend can use, with NVML's facts about each GPU."""

from __future__ import annotations

import re
import sys

import pytest

from gpukeras.gpu import cuda_driver, devices, nvml
from nvml_double import FakeGpu, FakeLibcuda, fake_mig, fake_pynvml


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


# Framework GPUs matched to NVML's by the CUDA driver's UUIDs (issue #14, item 2) ----------
H100 = "GPU-{}-0000-0000-0000-00000000000{}"


def _node(monkeypatch: pytest.MonkeyPatch, gpus: list[FakeGpu]) -> nvml.NvmlReport:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(gpus))
    return nvml.query()


def _framework(count: int) -> list[dict[str, object]]:
    """framework_gpus()'s rows for ``count`` GPUs, by CUDA ordinal."""
    return [
        {"framework_name": f"GPU:{i}", "name": "H100", "compute_capability": "9.0", "cuda_index": i}
        for i in range(count)
    ]


def test_the_driver_reports_each_cuda_ordinal() -> None:
    driver = FakeLibcuda(
        [(H100.format("1111aaaa", 1), "0000:17:00.0"), (H100.format("2222bbbb", 2), "0000:65:00.0")]
    )
    found = cuda_driver.gpus(driver)
    assert [(g.ordinal, g.uuid, g.pci_bus_id) for g in found] == [
        (0, "1111aaaa-0000-0000-0000-000000000001", "0000:17:00.0"),
        (1, "2222bbbb-0000-0000-0000-000000000002", "0000:65:00.0"),
    ]


def test_the_driver_is_not_asked_before_cuda_starts() -> None:
    """gpukeras never calls cuInit: it would fix CUDA_VISIBLE_DEVICES before gpu_setup()."""
    with pytest.raises(cuda_driver.CudaDriverUnavailable, match="not started"):
        cuda_driver.gpus(FakeLibcuda([], started=False))


def test_without_libcuda_the_reason_names_it() -> None:
    try:
        cuda_driver.load()
    except cuda_driver.CudaDriverUnavailable as error:
        assert "libcuda.so.1" in str(error)
    else:
        pytest.skip("libcuda.so.1 is installed here")


def test_a_slurm_job_gets_the_gpu_cuda_runs_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML lists the node's 4 GPUs; the job's CUDA sees NVML's 2 and 3 as its 0 and 1."""
    uuids = [H100.format(f"{i}{i}{i}{i}0000", i) for i in range(4)]
    report = _node(
        monkeypatch, [FakeGpu(uuid=u, memory_used_mib=1000.0 * i) for i, u in enumerate(uuids)]
    )
    driver = FakeLibcuda([(uuids[2], "0000:b1:00.0"), (uuids[3], "0000:ca:00.0")])
    rows = devices.gpu_rows(_framework(2), report, driver)
    assert [row["nvml_index"] for row in rows] == [2, 3]
    assert [row["uuid"] for row in rows] == uuids[2:]
    assert rows[0]["memory_free_mib"] == pytest.approx(81559.0 - 2000.0)
    view = devices.cuda_view(report, driver)
    assert view.source == "driver" and view.reason is None


def test_a_mig_instance_is_reported_as_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = H100.format("abcdabcd", 7)
    migs = [fake_mig(parent, "1g.10gb", 9856.0), fake_mig(parent, "3g.40gb", 40192.0)]
    report = _node(monkeypatch, [FakeGpu(uuid=parent, migs=migs)])
    (row,) = devices.gpu_rows(_framework(1), report, FakeLibcuda([(migs[1].uuid, "0000:17:00.0")]))
    assert row["uuid"] == migs[1].uuid
    assert row["memory_total_mib"] == 40192.0  # the instance's, not the GPU's 80 GB
    assert row["mig_parent"] == 0
    assert row["nvml_index"] is None
    assert row["nvml_reason"] == devices.MIG_NOT_SAMPLED
    assert row["compute_capability"] == "9.0"


def test_without_the_driver_cuda_visible_devices_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    uuids = [H100.format("aaaa0000", 0), H100.format("bbbb0000", 1)]
    report = _node(monkeypatch, [FakeGpu(uuid=u) for u in uuids])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", uuids[1])
    view = devices.cuda_view(report, FakeLibcuda([], started=False))
    assert view.source == "CUDA_VISIBLE_DEVICES"
    assert "not started" in view.reason
    (row,) = devices.gpu_rows(_framework(1), report, FakeLibcuda([], started=False))
    assert row["nvml_index"] == 1
    assert row["uuid"] == uuids[1]


def test_a_cuda_gpu_nvml_does_not_know_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _node(monkeypatch, [FakeGpu(uuid=H100.format("aaaa0000", 0))])
    driver = FakeLibcuda([(H100.format("ffff0000", 9), "0000:99:00.0")])
    (row,) = devices.gpu_rows(_framework(1), report, driver)
    assert row["nvml_index"] is None
    assert row["nvml_reason"] == "no GPU NVML reads is CUDA's GPU 0"


@pytest.mark.gpu
def test_gpu_row_is_the_gpu_the_cuda_driver_names() -> None:
    """On a real GPU: CUDA runs here once the backend has its GPUs, so the driver is asked,
    and GPU:0's NVML UUID is the driver's for CUDA ordinal 0."""
    rows = [row for row in devices.list_devices() if row["type"] == "GPU"]
    found = cuda_driver.gpus()
    assert len(found) >= len(rows) >= 1
    assert rows[0]["uuid"].partition("-")[2] == found[0].uuid
    assert rows[0]["pci_bus_id"] == found[0].pci_bus_id
    view = devices.cuda_view(nvml.query())
    assert view.source == "driver", view.reason
    assert all(device is not None for device in view.devices)


def test_messages_say_how_cuda_numbers_map_to_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = H100.format("abcdabcd", 7)
    migs = [fake_mig(parent, "1g.10gb"), fake_mig(parent, "3g.40gb")]
    report = _node(
        monkeypatch, [FakeGpu(uuid=parent, migs=migs), FakeGpu(uuid=H100.format("e", 1))]
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", migs[1].uuid)
    view = devices.cuda_view(report, FakeLibcuda([], started=False))
    assert devices.cuda_numbering(view) == (
        f"CUDA_VISIBLE_DEVICES={migs[1].uuid}: GPU 0 here is nvidia-smi's GPU 0 MIG device 1"
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert devices.cuda_numbering(devices.cuda_view(report, FakeLibcuda([], started=False))) == (
        "CUDA_VISIBLE_DEVICES=-1: CUDA lets this process see no GPU"
    )
