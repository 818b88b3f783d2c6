"""monitor: the NVML utilization sampler thread."""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path

import pytest

from gpukeras import advice, nvml
from gpukeras.monitor import HostCpuSampler, Sample, UtilizationSampler, read_cpu_times


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


# Host CPU ---------------------------------------------------------------------------
def test_cpu_times_from_a_proc_stat_file(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    busy, total = read_cpu_times(str(stat))
    assert total == 100 + 5 + 50 + 800 + 40 + 3 + 2
    assert busy == total - 800 - 40  # idle and iowait are not busy
    assert read_cpu_times(str(tmp_path / "missing")) is None


def test_host_sampler_records_load_and_its_own_cpu_time() -> None:
    if read_cpu_times() is None:
        pytest.skip("no /proc/stat here")
    with HostCpuSampler(hz=20) as sampler:
        deadline = time.perf_counter() + 0.5
        while time.perf_counter() < deadline:  # keep one core busy
            pass
    assert sampler.reason is None
    assert len(sampler.samples) >= 5
    assert all(0 <= s.cpu_percent <= 100 for s in sampler.samples)
    assert statistics.fmean(s.cpu_percent for s in sampler.samples) > 0
    assert 0 < sampler.cpu_seconds < 0.1
    assert [t for t in threading.enumerate() if t.name == "gpukeras-host-cpu"] == []


def test_host_sampler_without_proc_stat_says_why(tmp_path: Path) -> None:
    with HostCpuSampler(path=str(tmp_path / "missing")) as sampler:
        pass
    assert sampler.samples == []
    assert "cannot be read" in sampler.reason


# Advice for a gpu_dataset() pipeline ----------------------------------------------
@pytest.mark.parametrize(
    ("made", "advised", "not_advised"),
    [
        (
            {"source": "arrays", "cache": True, "user_map": False},
            "already gathers batches in parallel and prefetches",
            "Cache",
        ),
        (
            {"source": "images", "cache": False, "user_map": False},
            "gpu_dataset(cache = TRUE)",
            "map",
        ),
        (
            {"source": "arrays", "cache": True, "user_map": True},
            "Make the map function cheaper",
            "Cache",
        ),
    ],
)
def test_a_gpu_dataset_is_advised_on_its_own_options(
    made: dict[str, object], advised: str, not_advised: str
) -> None:
    """gpu_dataset() already follows tf.data's recommended order: its advice is about
    what it was made from, never the steps a tfdatasets pipeline may lack."""
    context = advice.TrainingContext(
        backend="tensorflow",
        pipeline_steps=["Prefetch", "FlatMap", "ParallelMap", "Map", "Random"],
        gpu_dataset=made,
    )
    items = advice.advice({"input_wait_share": 0.3, "input_verdict": "highly input-bound"}, context)
    text = " ".join(items)
    assert advised in text
    assert not_advised not in text.split("waits for input", 1)[1].split("No GPU")[0]
    assert "dataset_prefetch()" not in text
