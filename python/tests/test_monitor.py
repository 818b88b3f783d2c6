"""monitor: the NVML utilization sampler thread."""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import first_gpu
from gpukeras.core.runtime import config
from gpukeras.gpu import nvml, samplers
from gpukeras.gpu.samplers import HostCpuSampler, Sample, UtilizationSampler, read_cpu_times
from gpukeras.train import advice, monitor, timing, training_run
from nvml_double import FakeGpu, fake_mig, fake_pynvml


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
    """CUDA's GPU:0, found through the driver; a MIG instance by its UUID, memory only."""
    gpu = first_gpu()
    whole = [] if gpu.is_mig else [gpu.index]
    with UtilizationSampler(whole, hz=10, mig_uuids=[gpu.uuid] if gpu.is_mig else []) as sampler:
        time.sleep(1.5)
    assert sampler.reason is None
    assert _sampler_threads() == []
    assert {sample.gpu for sample in sampler.samples} == {gpu.uuid if gpu.is_mig else gpu.index}
    assert len(sampler.samples) >= 8
    assert max(sample.memory_used_mib for sample in sampler.samples) > 0
    if gpu.is_mig:
        assert {sample.utilization_gpu for sample in sampler.samples} == {None}
        return
    (row,) = sampler.summary()
    assert row["sample_hz"] >= 5
    assert 0 <= row["utilization_max"] <= 100


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
        (  # cache = TRUE asked and not applied: never advised again
            {
                "source": "tfrecord",
                "cache": False,
                "user_map": False,
                "cache_declined": "cache = TRUE not applied: the decoded size is not known",
            },
            "in a file on a local disk (cache = TRUE not applied",
            "gpu_dataset(cache = TRUE)",
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
        gpus=["a GPU"],  # on the CPU the input verdict is a note (advice.notes)
        pipeline_steps=["Prefetch", "FlatMap", "ParallelMap", "Map", "Random"],
        gpu_dataset=made,
    )
    items = advice.advice({"input_wait_share": 0.3, "input_verdict": "highly input-bound"}, context)
    text = " ".join(items)
    assert advised in text
    assert not_advised not in text.split("waits for input", 1)[1].split("XLA")[0]
    assert "dataset_prefetch()" not in text


# Several GPUs -------------------------------------------------------------------------
H100 = "NVIDIA H100 80GB HBM3"


def device_rows(gpus: int) -> list[dict[str, object]]:
    """``devices.list_devices()`` as a machine with ``gpus`` H100s, NVML index = position."""
    cpu = {"device": "CPU:0", "type": "CPU", "name": "a CPU", "nvml_index": None}
    return [cpu] + [
        {
            "device": f"GPU:{i}",
            "type": "GPU",
            "name": H100,
            "compute_capability": "9.0",
            "memory_total_mib": 81559.0,
            "memory_free_mib": 80000.0,
            "nvml_index": i,
        }
        for i in range(gpus)
    ]


def two_fake_gpus(monkeypatch: pytest.MonkeyPatch, busy: tuple[int, int]) -> None:
    gpus = [
        FakeGpu(uuid=f"GPU-{i}", utilization=load, memory_used_mib=1000.0 * (i + 1))
        for i, load in enumerate(busy)
    ]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(gpus))


def context(gpus: list[dict[str, object]]) -> advice.TrainingContext:
    return advice.TrainingContext(
        backend=config.backend,
        gpus=[str(row["name"]) for row in gpus],
        compute_capability="9.0",
        memory_total_mib=81559.0,
        jit_compile=True,
    )


def test_a_one_device_strategy_on_gpu_1_is_watched_there_not_on_the_idle_gpu_0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real OneDeviceStrategy naming GPU:1 (TensorFlow makes it without a GPU), a
    machine of two GPUs in the NVML double: GPU:0 idle, GPU:1 busy."""
    if config.backend != "tensorflow":
        pytest.skip(f"this process runs the {config.backend} backend")
    keras, tf = config.keras(), config.backend_module()
    with tf.distribute.OneDeviceStrategy("/gpu:1").scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile(optimizer="sgd", loss="mse")
    two_fake_gpus(monkeypatch, busy=(0, 90))
    in_use = training_run.gpus_in_use(keras, model, device_rows(2))
    assert [row["device"] for row in in_use] == ["GPU:1"]
    watcher = training_run.make_monitor(in_use, batch_size=8, measure_input=False)
    with watcher:
        time.sleep(0.4)
    assert {sample.nvml_index for sample in watcher.gpu.samples} == {1}
    report = watcher.report(context(in_use), None, in_use)
    assert report["gpu_utilization_mean"] == 90
    (gpu,) = report["gpus"]
    assert gpu["device"] == "GPU:1" and gpu["nvml_index"] == 1
    assert gpu["utilization_mean"] == 90 and gpu["memory_used_max_mib"] == 2000.0
    assert report["gpu_utilization_imbalance"] is None  # one GPU
    assert not any("busy only" in item for item in report["advice"])


def test_a_mirrored_strategy_over_some_gpus_watches_only_those() -> None:
    if config.backend != "tensorflow":
        pytest.skip(f"this process runs the {config.backend} backend")
    keras, tf = config.keras(), config.backend_module()
    with tf.distribute.MirroredStrategy(["/gpu:0", "/gpu:2"]).scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    in_use = training_run.gpus_in_use(keras, model, device_rows(4))
    assert [row["device"] for row in in_use] == ["GPU:0", "GPU:2"]
    watcher = training_run.make_monitor(in_use, batch_size=8, measure_input=False)
    assert watcher.gpu.nvml_indices == [0, 2]
    # Without a strategy: the first GPU, as Keras computes there.
    plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    assert [row["device"] for row in training_run.gpus_in_use(keras, plain, device_rows(4))] == [
        "GPU:0"
    ]


def test_mfu_on_two_gpus_is_against_both_peaks() -> None:
    keras = config.keras()
    model = keras.Sequential([keras.Input((1024,)), keras.layers.Dense(1024)])
    two = device_rows(2)[1:]
    counted = training_run.counted_flops(model, two)
    assert counted["peak"]["tflops"] == pytest.approx(2 * 494.7)  # float32: TF32 on an H100
    steps = {"steps": 10, "samples": 1e6, "samples_per_second": 1e6, "method": "synthetic"}
    report = monitor.training_report(steps, [], [], None, context(two), counted)
    achieved = 3 * 2 * 1024 * 1024 * 1e6 / 1e12
    assert report["achieved_tflops"] == pytest.approx(achieved)
    assert report["mfu"] == pytest.approx(achieved / (2 * 494.7))
    assert report["peak_source"].startswith("sum over 2 GPUs")


def test_each_gpu_has_its_figures_and_uneven_ones_are_named_in_the_advice() -> None:
    two = device_rows(2)[1:]
    samples = [
        Sample(
            time=10 + i / 10,
            nvml_index=index,
            utilization_gpu=load,
            memory_used_mib=m,
            power_w=300.0,
        )
        for i in range(20)
        for index, load, m in ((0, 95.0, 30000.0), (1, 40.0, 20000.0))
    ]
    steps = {
        "steps": 100,
        "samples": 6400,
        "samples_per_second": 6400.0,
        "step_time_mean_ms": 20.0,
        "input_wait_share": 0.01,
        "method": "synthetic",
    }
    report = monitor.training_report(steps, samples, [], (10.0, 12.0), context(two), gpus=two)
    first, second = report["gpus"]
    assert (first["device"], first["utilization_mean"], first["memory_used_max_mib"]) == (
        "GPU:0",
        95.0,
        30000.0,
    )
    assert (second["device"], second["utilization_mean"], second["utilization_p95"]) == (
        "GPU:1",
        40.0,
        40.0,
    )
    assert report["gpu_utilization_mean"] == pytest.approx(67.5)
    assert report["gpu_utilization_imbalance"] == pytest.approx(55.0)
    assert report["gpu_memory_imbalance_mib"] == pytest.approx(10000.0)
    uneven = [item for item in report["advice"] if "unevenly busy" in item]
    assert uneven == [
        "The GPUs are unevenly busy (GPU:0 95 %, GPU:1 40 %; 55 points apart): every step "
        "waits for the slowest replica. Check that no other process uses the busier GPU "
        "(gpu_check(), nvidia-smi), and give every replica the same rows (a global batch "
        "size that is a multiple of the number of GPUs)."
    ]
    even = [Sample(s.time, s.nvml_index, 90.0, s.memory_used_mib, None) for s in samples]
    calm = monitor.training_report(steps, even, [], None, context(two), gpus=two)
    assert calm["gpu_utilization_imbalance"] == 0
    assert not any("unevenly" in item for item in calm["advice"])


# A MIG instance -----------------------------------------------------------------------
def test_a_mig_instance_in_use_is_watched_for_its_memory_and_utilization_is_named_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NVML reads a MIG instance's own memory through its handle but measures no
    utilization there (NOT_SUPPORTED): the monitor samples the memory, by UUID, and says
    why utilization is missing instead of reporting it as "no NVML samples"."""
    parent = "GPU-0e0e0e0e-0000-0000-0000-000000000001"
    mig = fake_mig(parent, "3g.40gb")
    mig.memory_used_mib = 12000.0
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([FakeGpu(uuid=parent, migs=[mig])]))
    row = {
        "device": "GPU:0",
        "type": "GPU",
        "name": mig.name,
        "compute_capability": "9.0",
        "nvml_index": None,
        "uuid": mig.uuid,
        "mig_parent": 0,
    }
    watcher = training_run.make_monitor([row], batch_size=8, measure_input=False)
    assert watcher.gpu.mig_uuids == [mig.uuid]
    with watcher:
        time.sleep(0.3)
    assert watcher.gpu.reason is None
    assert watcher.gpu.samples
    assert {(s.uuid, s.nvml_index, s.utilization_gpu) for s in watcher.gpu.samples} == {
        (mig.uuid, None, None)
    }
    report = watcher.report(context([row]), None, [row])
    assert report["gpu_memory_used_max_mib"] == 12000.0
    assert report["gpu_utilization_mean"] is None
    assert report["gpu_not_measured"] == samplers.MIG_UTILIZATION
    assert report["gpu_not_measured"].startswith("utilization not available on MIG")
    (gpu,) = report["gpus"]
    assert (gpu["utilization_mean"], gpu["memory_used_max_mib"]) == (None, 12000.0)
    assert not any("busy only" in item for item in report["advice"])


# The input line and the advice fit what ran -------------------------------------------
def busy_gpu(utilization: float) -> list[Sample]:
    """NVML samples of GPU 0 at ``utilization`` %, 10 a second over 2 s."""
    return [Sample(10.0 + i / 10, 0, utilization, 2000.0, 300.0) for i in range(20)]


def gpu_in_use(**changes: object) -> advice.TrainingContext:
    facts: dict[str, object] = {
        "backend": "tensorflow",
        "gpus": [H100],
        "compute_capability": "9.0",
        "memory_total_mib": 81559.0,
        "dtype_policy": "mixed_bfloat16",
        "jit_compile": True,
    }
    return advice.TrainingContext(**{**facts, **changes})  # type: ignore[arg-type]


TIMED = {
    "steps": 10,
    "batches": 80,
    "seconds": 0.16,
    "samples": 80 * 64,
    "samples_per_second": 32000.0,
    "step_time_mean_ms": 16.0,
    "step_time_sd_ms": 0.5,
    "batch_time_mean_ms": 2.0,
    "steps_per_execution": 8,
    "method": "synthetic",
}


def test_a_wait_not_timed_is_estimated_from_the_pipeline_alone_and_said_so() -> None:
    steps = {**TIMED, "pipeline_batch_ms": 0.6, "input_share_alone": 0.3}
    report = monitor.training_report(
        steps, busy_gpu(40.0), [], None, gpu_in_use(steps_per_execution=8)
    )
    assert report["input_wait_share"] is None
    assert report["input_share_alone"] == 0.3 and report["pipeline_batch_ms"] == 0.6
    assert report["input_verdict"] == "highly input-bound"
    assert report["batch_time_mean_ms"] == 2.0 and report["batches_timed"] == 80
    assert report["flops_per_step"] is None  # no FLOPs counted: nothing per batch
    text = " ".join(report["advice"])
    assert "The input pipeline alone needs 30 % of a training step's time" in text
    assert "estimated" in text and "waits for input" not in text

    quick = {**TIMED, "pipeline_batch_ms": 0.02, "input_share_alone": 0.01}
    calm = monitor.training_report(quick, busy_gpu(40.0), [], None, gpu_in_use())
    assert calm["input_verdict"] == "not input-bound"


def test_batches_on_the_device_are_not_input_bound_by_construction() -> None:
    steps = {**TIMED, "input_on_device": True, "input_wait_share": 0.0, "input_wait_mean_ms": 0.0}
    report = monitor.training_report(steps, busy_gpu(97.0), [], None, gpu_in_use())
    assert report["input_on_device"] is True
    assert report["input_verdict"] == "not input-bound"
    assert report["advice"] == [
        "The GPU is busy 97 % of the time and the input keeps up: further speed has to come "
        "from the model itself."
    ]


@pytest.mark.parametrize(("per_call", "advised"), [(1, True), (4, True), (8, False), (32, False)])
def test_more_batches_per_call_are_advised_only_while_there_are_few(
    per_call: int, advised: bool
) -> None:
    # 2 ms a training step, the input keeps up, on the CPU and on an idle GPU
    steps = {**TIMED, "input_wait_share": 0.01, "steps_per_execution": per_call}
    cpu = advice.TrainingContext(backend="tensorflow", steps_per_execution=per_call)
    on_cpu = " ".join(monitor.training_report(steps, [], [], None, cpu)["advice"])
    assert ("steps_per_execution = 8 or more" in on_cpu) is advised
    idle = gpu_in_use(steps_per_execution=per_call)
    on_gpu = " ".join(monitor.training_report(steps, busy_gpu(30.0), [], None, idle)["advice"])
    assert ("raise steps_per_execution" in on_gpu) is advised
    assert ("raise the batch size" in on_gpu) is True


def test_data_given_in_memory_is_not_called_a_gpu_dataset() -> None:
    made = {"source": "arrays", "cache": False, "user_map": False}
    bound = {"input_wait_share": 0.3, "input_verdict": "highly input-bound"}
    own = advice.advice(bound, gpu_in_use(gpu_dataset=made))
    assert any("gpu_dataset() already gathers" in item for item in own)
    given = gpu_in_use(gpu_dataset=made, data="arrays")
    text = " ".join(advice.advice(bound, given))
    assert "gpu_dataset()" not in text and "The data is in memory" in text


def test_a_busy_host_is_input_advice_only_beside_a_gpu_and_fits_the_data() -> None:
    bound = {"input_wait_share": 0.3, "input_verdict": "highly input-bound"}
    busy = {**bound, "host_cpu_percent_mean": 97.0, "gpu_utilization_mean": 40.0}
    on_cpu = advice.advice(busy, advice.TrainingContext(backend="tensorflow"))
    assert not any("host CPU is" in item for item in on_cpu)  # the model computes there too
    made = {"source": "arrays", "cache": False, "user_map": False}
    in_memory = " ".join(advice.advice(busy, gpu_in_use(gpu_dataset=made)))
    assert "host CPU is 97 % busy" in in_memory and "decoding" not in in_memory
    files = {"source": "images", "cache": True, "user_map": False}
    assert "cache after decoding" in " ".join(advice.advice(busy, gpu_in_use(gpu_dataset=files)))


def test_the_monitor_leaves_out_the_first_calls_and_reads_the_on_device_mark() -> None:
    def skip(**kwargs: object) -> int:
        return training_run.make_monitor([], batch_size=8, **kwargs).timer.skip  # type: ignore[arg-type,attr-defined]

    assert skip() == training_run.TIMER_SKIP == 2  # two calls of one batch
    assert skip(steps_per_execution=8) == 1  # the first call, compiling, holds 8
    assert skip(steps_per_execution=8, resumed_steps=3) == 4
    # a train function marked as one whose batches are on the device (the resident loop's)
    keras = config.keras()
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.train_function = timing.mark_input_on_device(lambda *args: None)
    watcher = training_run.make_monitor([], batch_size=8)
    timer = watcher.timer  # type: ignore[attr-defined]
    timer.set_model(model)
    timer.on_train_begin()
    assert timer.record.input_on_device is True
    assert timer.record.method == timing.ON_DEVICE_METHOD


def test_a_short_or_cpu_run_gets_its_input_verdict_as_a_note_not_advice() -> None:
    # issue #32, item 8: a few seconds, or the CPU, are no ground to change the batch
    steps = {**TIMED, "input_wait_share": 0.3}
    rows = {"gpu_dataset": {"source": "arrays", "cache": False, "user_map": False}}
    long_run = monitor.training_report(steps, [], [], None, gpu_in_use(seconds=60.0, **rows))
    assert long_run["input_verdict"] == "highly input-bound" and long_run["notes"] == []
    assert any("Raise batch_size" in item for item in long_run["advice"])

    short = monitor.training_report(steps, [], [], None, gpu_in_use(seconds=2.0, **rows))
    assert short["input_verdict"] == "highly input-bound"
    assert not any("batch_size" in item or "waits for input" in item for item in short["advice"])
    assert short["notes"] == [
        "Training waits for input 30 % of the step time (highly input-bound), but training "
        "took only 2.0 s, in which compiling, the first batches and Keras' teardown weigh "
        "heavily. Not advice to change the batch size or the pipeline; judge the input on a "
        "longer fit (more epochs)."
    ]

    cpu = advice.TrainingContext(backend="tensorflow", data="arrays", seconds=60.0)
    on_cpu = monitor.training_report(steps, [], [], None, cpu)
    assert on_cpu["advice"] == [
        "No GPU was used: training ran on the CPU. gpu_check() tells why no GPU is visible."
    ]
    assert len(on_cpu["notes"]) == 1
    assert on_cpu["notes"][0].startswith(
        "Training waits for input 30 % of the step time (highly input-bound) on the CPU: "
    )
    # a verdict that is not input-bound is neither advice nor a note
    fine = monitor.training_report({**TIMED, "input_wait_share": 0.01}, [], [], None, cpu)
    assert fine["notes"] == []
