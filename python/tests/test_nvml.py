"""nvml: what the NVIDIA driver sees, and CUDA_VISIBLE_DEVICES parsed as CUDA does."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from conftest import run_core
from gpukeras.gpu import devices, nvml
from nvml_double import FakeGpu, fake_mig, fake_pynvml


def test_query_without_a_driver_says_why(no_driver: nvml.NvmlReport) -> None:
    assert no_driver.available is False
    assert "driver" in no_driver.reason
    assert no_driver.devices == []
    assert no_driver.driver_version is None


def test_session_without_a_driver_raises_nvml_unavailable(no_driver: nvml.NvmlReport) -> None:
    with pytest.raises(nvml.NvmlUnavailable, match="driver"), nvml.session():
        pass


def test_query_without_nvidia_ml_py_says_what_to_install() -> None:
    run = run_core("gpu.nvml:query", setup="sys.modules['pynvml'] = None")
    assert run.value["available"] is False
    assert "nvidia-ml-py" in run.value["reason"]
    assert "pip install nvidia-ml-py" in run.value["reason"]
    assert run.value["devices"] == []


@pytest.mark.gpu
def test_query_on_a_gpu_machine() -> None:
    report = nvml.query()
    assert report.available is True
    assert report.reason is None
    assert re.fullmatch(r"\d+\.\d+", report.cuda_driver_version)
    assert report.driver_version
    assert report.devices
    for index, device in enumerate(report.devices):
        assert device.index == index
        assert device.uuid.startswith(("GPU-", "MIG-"))
        assert device.name
        assert device.memory_total_mib > 0
        assert 0 <= device.memory_used_mib <= device.memory_total_mib
        assert device.compute_capability is None or re.fullmatch(
            r"\d+\.\d+", device.compute_capability
        )
        assert device.utilization_gpu is None or 0 <= device.utilization_gpu <= 100


UUIDS = ["GPU-aaaa1111-0000", "GPU-bbbb2222-0000"]


def indices(gpus: list, value: str | None = None, order: str | None = None) -> list[int]:
    """NVML's indices of the GPUs ``cuda_devices`` gives, in its order (no MIG here)."""
    return [gpu.index for gpu in nvml.cuda_devices(gpus, value, order)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", []),
        ("-1", []),
        ("0,1", [0, 1]),
        ("1,0", [1, 0]),
        ("1", [1]),
        ("2", []),
        ("0,2,1", [0]),
        ("GPU-bbbb", [1]),
        ("GPU-bbbb2222-0000,0", [1, 0]),
        ("GPU-", []),
        ("0,0,1", [0]),
        ("0,GPU-aaaa", [0]),
        ("0,x,1", [0]),
        ("0,,1", [0]),
    ],
)
def test_cuda_visible_devices_parsed_as_cuda_does(value: str, expected: list[int]) -> None:
    assert indices(UUIDS, value) == expected


def test_cuda_visible_devices_unset_means_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert indices(UUIDS) == [0, 1]
    assert indices([]) == []


def test_cuda_visible_devices_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert indices(UUIDS) == [1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert indices(UUIDS) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, [1, 3]), ("0", [1]), ("1,0", [3, 1]), ("2", []), ("GPU-dddd", [3]), ("3", [])],
)
def test_cuda_counts_only_the_gpus_nvml_can_read(value: str | None, expected: list[int]) -> None:
    """Under a job's cgroup NVML lists the node's 4 GPUs and can read the job's 2 (1 and 3);
    CUDA sees those 2 as its GPUs 0 and 1 (issue #14, item 2)."""
    uuids = ["", "GPU-bbbb", "", "GPU-dddd"]
    if value is None:
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
            assert indices(uuids) == expected
    else:
        assert indices(uuids, value) == expected


# A machine as NVML shows it, through a test double (see nvml_double) --------------
def test_a_gpu_nvml_cannot_read_is_reported_and_the_others_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NVML counts GPUs whose handle lookup then fails: NO_PERMISSION (another user's GPU)
    or OPERATING_SYSTEM (outside the job's cgroup, the normal case under SLURM)."""
    import pynvml

    gpus = [
        FakeGpu(uuid="GPU-aaaa"),
        FakeGpu(
            uuid="GPU-bbbb", fails={"nvmlDeviceGetHandleByIndex": pynvml.NVML_ERROR_NO_PERMISSION}
        ),
        FakeGpu(
            uuid="GPU-cccc", fails={"nvmlDeviceGetMemoryInfo": pynvml.NVML_ERROR_OPERATING_SYSTEM}
        ),
    ]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(gpus))
    report = nvml.query()
    assert report.available is True
    assert report.driver_version == "580.95.05"
    assert report.cuda_driver_version == "13.0"
    first, denied, blocked = report.devices
    assert (first.name, first.uuid, first.error) == ("NVIDIA H100 80GB HBM3", "GPU-aaaa", None)
    assert first.memory_total_mib == pytest.approx(81559.0)
    assert first.compute_capability == "9.0"
    assert denied.index == 1 and denied.memory_total_mib is None
    assert denied.name == "GPU 1 (not readable)"
    assert denied.error.startswith("NVML has no permission to read this GPU")
    assert blocked.error.startswith("the operating system blocked access to this GPU")
    # the devices that could be read are matched as before
    assert indices([device.uuid for device in report.devices], "0") == [0]


def test_nvml_failing_after_it_started_is_a_report_not_an_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pynvml

    double = fake_pynvml([FakeGpu()])

    def lost() -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    double.nvmlDeviceGetCount = lost  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", double)
    report = nvml.query()
    assert report.available is False
    assert report.reason.startswith("NVML started but failed: ")
    assert report.devices == []


def test_devices_listing_survives_an_unreadable_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import pynvml

    gpus = [FakeGpu(fails={"nvmlDeviceGetHandleByIndex": pynvml.NVML_ERROR_NO_PERMISSION})]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(gpus))
    rows = devices.list_devices(nvml.query())
    assert rows[0]["device"] == "CPU:0"


# MIG instances, CUDA_DEVICE_ORDER, and what CUDA_VISIBLE_DEVICES names (issue #14, item 2) ----
def _query(monkeypatch: pytest.MonkeyPatch, gpus: list[FakeGpu]) -> nvml.NvmlReport:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(gpus))
    return nvml.query()


def test_a_gpu_in_mig_mode_lists_its_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = "GPU-0e0e0e0e-0000-0000-0000-000000000001"
    migs = [fake_mig(parent, "3g.40gb", 40192.0), fake_mig(parent, "2g.20gb", 19968.0)]
    report = _query(monkeypatch, [FakeGpu(uuid=parent, migs=migs, pci_bus_id="00000000:3B:00.0")])
    (gpu,) = report.devices
    assert gpu.mig_enabled and not gpu.is_mig
    assert gpu.pci_bus_id == "0000:3b:00.0"  # NVML's 8-digit domain, as CUDA writes it
    assert gpu.utilization_gpu is None  # NVML: not supported on a GPU in MIG mode
    first, second = gpu.mig_devices
    assert first.uuid == migs[0].uuid and first.uuid.startswith("MIG-")
    assert first.name == "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
    assert (first.memory_total_mib, second.memory_total_mib) == (40192.0, 19968.0)
    assert (first.mig_parent, first.mig_index, second.mig_index) == (0, 0, 1)
    assert first.is_mig and first.utilization_gpu is None
    assert first.compute_capability == "9.0" and first.pci_bus_id == "0000:3b:00.0"
    assert first.nvidia_smi_name() == "GPU 0 MIG device 0"
    # CUDA sees the instances, not the GPU
    assert nvml.cuda_devices(report.devices, "") == []
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        assert [d.uuid for d in nvml.cuda_devices(report.devices)] == [m.uuid for m in migs]
    named = nvml.cuda_devices(report.devices, migs[1].uuid)
    assert [d.uuid for d in named] == [migs[1].uuid]
    assert [d.uuid for d in nvml.cuda_devices(report.devices, migs[1].uuid[:12])] == [migs[1].uuid]


def test_cuda_device_order_decides_what_an_index_means(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML (nvidia-smi) numbers by PCI bus; CUDA's default FASTEST_FIRST puts the H100 first."""
    gpus = [
        FakeGpu(name="Tesla T4", uuid="GPU-aaaa", capability=(7, 5), pci_bus_id="0000:17:00.0"),
        FakeGpu(uuid="GPU-bbbb", pci_bus_id="0000:65:00.0"),
    ]
    report = _query(monkeypatch, gpus)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert indices(report.devices) == [0, 1]
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    assert indices(report.devices) == [1, 0]
    assert indices(report.devices, "0") == [1]
    monkeypatch.delenv("CUDA_DEVICE_ORDER")  # CUDA's default is FASTEST_FIRST
    assert indices(report.devices, "1") == [0]
    assert indices(report.devices, "0", "PCI_BUS_ID") == [0]


def test_the_kernel_driver_and_the_binding_are_known_without_nvml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What gpu_check(fix = TRUE) needs when nvidia-ml-py is missing (tools/repair.py)."""
    folder = tmp_path / "gpus"
    folder.mkdir()
    for bus in ("0000:17:00.0", "0000:65:00.0"):
        (folder / bus).mkdir()
    assert nvml.kernel_driver_gpus(str(folder)) == 2
    assert nvml.kernel_driver_gpus(str(folder / "absent")) == 0
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([FakeGpu()]))
    assert nvml.binding_installed()
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert not nvml.binding_installed()
