"""gpu_processes: this process's own GPU use apart from other processes' (issue #14, item 7)."""

from __future__ import annotations

import sys

import pytest

from gpukeras.gpu import nvml
from gpukeras.gpu.gpu_processes import ProcessSampler
from nvml_double import FakeGpu, FakeProcess, fake_mig, fake_pynvml

ME, OTHER = 1001, 4242


def _watch(monkeypatch: pytest.MonkeyPatch, gpu: FakeGpu, mig: int | None = None) -> dict:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([gpu]))
    device = nvml.query().devices[0]
    watched = device if mig is None else device.mig_devices[mig]
    with ProcessSampler(watched, pid=ME, since_us=0) as sampler:
        pass
    return sampler.summary()


def test_own_use_and_other_processes_are_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(
        processes=[FakeProcess(ME, 3000.0, 80), FakeProcess(OTHER, 20480.0, 40)],
    )
    summary = _watch(monkeypatch, gpu)
    assert summary["pid"] == ME
    assert (summary["own_memory_mib"], summary["own_sm_max"]) == (3000.0, 80.0)
    assert summary["others"] == [{"pid": OTHER, "memory_mib": 20480.0, "sm_max": 40.0}]
    assert summary["notes"] == []


def test_an_idle_process_next_to_a_busy_one_used_no_sm(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(
        utilization=97, processes=[FakeProcess(ME, 300.0, 0), FakeProcess(OTHER, 20480.0, 97)]
    )
    summary = _watch(monkeypatch, gpu)
    assert summary["own_sm_max"] == 0.0
    assert summary["others"][0]["sm_max"] == 97.0


def test_no_samples_at_all_tell_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    summary = _watch(monkeypatch, FakeGpu(processes=[FakeProcess(ME, 300.0, 0)]))
    assert summary["own_sm_max"] is None
    assert summary["notes"] == ["NVML returned no per-process utilization samples"]


def test_on_a_mig_instance_only_memory_is_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = "GPU-0e0e0e0e-0000-0000-0000-000000000001"
    mig = fake_mig(parent)
    mig.processes = [FakeProcess(ME, 2048.0, 0)]
    summary = _watch(monkeypatch, FakeGpu(uuid=parent, migs=[mig]), mig=0)
    assert summary["own_memory_mib"] == 2048.0
    assert summary["own_sm_max"] is None
    assert summary["notes"] == ["per-process utilization: not available on MIG"]


def test_host_process_ids_in_a_container_are_said(monkeypatch: pytest.MonkeyPatch) -> None:
    summary = _watch(monkeypatch, FakeGpu(processes=[FakeProcess(88001, 3000.0, 80)]))
    assert summary["own_memory_mib"] is None and summary["own_sm_max"] is None
    assert summary["others"] == []
    assert summary["notes"] == [
        f"this process (pid {ME}) is not among the processes NVML lists on the GPU (pids "
        "88001): inside a container NVML shows the host's process ids, so its own share "
        "cannot be told apart"
    ]


def test_nothing_to_watch() -> None:
    with ProcessSampler(None, pid=ME) as sampler:
        pass
    assert sampler.summary()["notes"] == ["no GPU to watch"]


def test_a_sample_is_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(processes=[FakeProcess(ME, 100.0, 30)])
    double = fake_pynvml([gpu])
    sampler = ProcessSampler(None, pid=ME, since_us=0)
    sampler.read(double, gpu)
    gpu.processes[0].sm_util = 90  # NVML's sample of the same period does not change
    sampler.read(double, gpu)
    assert sampler.processes[ME].sm_max == 30.0
    gpu.sample_time += 1
    sampler.read(double, gpu)
    assert sampler.processes[ME].sm_max == 90.0


@pytest.mark.gpu
def test_this_process_is_seen_using_the_gpu() -> None:
    """On a real GPU: this process's memory and SM use show under its own pid."""
    from gpukeras.core.runtime import config
    from gpukeras.gpu import devices

    keras = config.keras()
    (row,) = [r for r in devices.list_devices() if r["device"] == "GPU:0"]
    device = nvml.query().find(row["uuid"])
    with ProcessSampler(device, hz=10) as sampler:
        x = keras.random.normal((4096, 4096))
        for _ in range(200):
            x = keras.ops.tanh(keras.ops.matmul(x, x) / 4096)
        keras.ops.convert_to_numpy(x)
    summary = sampler.summary()
    if summary["own_memory_mib"] is None and summary["others"] == [] and summary["notes"]:
        pytest.skip(f"NVML does not show this process: {summary['notes']}")
    assert summary["own_memory_mib"] and summary["own_memory_mib"] > 0, summary
    if not device.is_mig:
        assert summary["own_sm_max"] is not None and summary["own_sm_max"] > 0, summary
