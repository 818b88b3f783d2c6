"""gpu_profile()'s core: real traces of tiny models on the CPU, read back from the files.

Tests profile in this process on its backend (TensorFlow here, JAX with
KERAS_BACKEND=jax and on the GPU machines); JAX with and without TensorFlow
also runs in fresh processes. A failure inside the traced range comes from
real data (a NaN that tf.data's check_numerics rejects), not from a mock.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest

from conftest import run_on_jax
from gpukeras import bridge
from gpukeras.core.runtime import config
from gpukeras.data import adapters, sources
from gpukeras.tools import profile, profile_logs

BATCH = 16
ROWS = 4 * BATCH


def tiny_model(compile: bool = True) -> object:
    keras = config.keras()
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    if compile:
        model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    return model


def tiny_data(rows: int = ROWS) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 8), dtype=np.float32)
    return x, (x @ rng.standard_normal((8, 1))).astype(np.float32)


@pytest.fixture(autouse=True)
def logdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Temporary logdirs (logdir None) made under the test's tmp_path, so none is left."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    return tmp_path


def call(**kwargs: object) -> dict:
    """profile.profile through the bridge, as R calls it; fails the test on an error."""
    answer = bridge.call("profile", {"batch_size": BATCH, **kwargs})
    assert answer["ok"], answer
    return answer["value"]


def error_of(**kwargs: object) -> dict:
    answer = bridge.call("profile", kwargs)
    assert not answer["ok"], answer
    assert answer["traceback"] is None, answer["traceback"]
    return answer


def assert_profiled(value: dict, start: int, stop: int, input_measured: bool = True) -> None:
    """Files exist and are not empty, the trace holds exactly the range, numbers are plausible."""
    assert value["steps"] == {"start": start, "stop": stop, "trained": stop}
    files = [Path(row["path"]) for row in value["trace_files"]]
    assert any(path.name.endswith(".xplane.pb") for path in files)
    for row in value["trace_files"] + value["event_files"]:
        assert Path(row["path"]).stat().st_size == row["bytes"] > 0
    assert all(path.parent == Path(value["trace_dir"]) for path in files)
    assert Path(value["trace_dir"]).parent == Path(value["run_dir"], "plugins", "profile")
    trace = value["trace"]
    assert trace["parsed"] is True, trace
    assert trace["steps"] == list(range(start, stop + 1))
    assert 0 < trace["step_time_mean_ms"] <= trace["span_ms"]
    if value["backend"] == "tensorflow":  # batches come through tf.data's iterator ops
        assert 0 < trace["input_ms"] < trace["span_ms"]
        assert trace["input_share"] == pytest.approx(trace["input_ms"] / trace["span_ms"])
    else:
        assert trace["input_ms"] is None and trace["input_share"] is None
    numbers = value["numbers"]
    assert numbers["steps_timed"] == stop - start + 1
    assert numbers["step_time_mean_ms"] > 0 and numbers["step_time_sd_ms"] >= 0
    assert numbers["samples_per_second"] > 0
    if input_measured:
        assert 0 <= numbers["input_wait_share"] <= 1
        assert numbers["input_verdict"].endswith("input-bound")
    scalars = value["scalars"]
    assert scalars["step"] == list(range(1, stop + 1))  # one value per step
    assert set(scalars) == {"step", "loss", "mae"}
    assert all(math.isfinite(v) for v in scalars["loss"] + scalars["mae"])
    assert value["tensorboard"]["command"] == f"tensorboard --logdir {value['logdir']}"
    json.dumps(value)  # plain data, all the way down


# Traces and logs ------------------------------------------------------------------
def test_a_trace_of_the_range_event_files_and_the_numbers_are_written_and_read_back(
    tmp_path: Path,
) -> None:
    model = tiny_model()
    before = [w.copy() for w in model.get_weights()]
    value = call(model=model, data=tiny_data(), steps=[2, 4], logdir=str(tmp_path / "logs"))
    assert_profiled(value, 2, 4)
    assert value["logdir"] == str(tmp_path / "logs")
    assert value["backend"] == config.keras().backend.backend()
    assert value["settings"]["batch_size"] == BATCH
    assert value["settings"]["device"] in ("CPU:0", "GPU:0")
    # The model trained: its weights moved.
    assert not all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    if adapters.tensorflow_available():
        assert value["scalars_source"] == "event files"
        assert [Path(row["path"]).parent for row in value["event_files"]] == [
            tmp_path / "logs" / "train"
        ]
    if value["settings"]["device"] == "CPU:0":
        assert value["trace"]["devices"] == []
        assert "host (CPU) activity only" in value["trace"]["note"]


def test_more_steps_than_batches_repeat_the_data_and_a_temporary_logdir_is_made(
    logdir: Path,
) -> None:
    value = call(model=tiny_model(), data=tiny_data(2 * BATCH), steps=[3, 5])
    assert_profiled(value, 3, 5)
    assert Path(value["logdir"]).parent == logdir
    assert Path(value["logdir"]).name.startswith("gpukeras-profile-")


def test_several_batches_per_step_count_as_one_step() -> None:
    model = tiny_model()
    model.compile(optimizer="adam", loss="mse", metrics=["mae"], steps_per_execution=2)
    value = call(model=model, data=tiny_data(8 * BATCH), steps=[2, 3])
    # As gpu_fit(): on TensorFlow, timing the input would turn Keras' graph loop into Python.
    tensorflow = value["backend"] == "tensorflow"
    assert_profiled(value, 2, 3, input_measured=not tensorflow)
    assert (value["numbers"]["input_wait_share"] is None) is tensorflow
    assert value["settings"]["steps_per_execution"] == 2
    # 2 steps of 2 batches of 16 rows
    assert value["numbers"]["samples_per_second"] == pytest.approx(
        64 / (value["numbers"]["step_time_mean_ms"] * 2 / 1e3)
    )


def test_twice_in_one_process_in_one_logdir_and_again_after_a_failure_inside_the_range(
    tmp_path: Path,
) -> None:
    """A run that fails with its trace running stops the profiler, so the next one starts."""
    if not adapters.tensorflow_available():
        pytest.skip("TensorFlow is not installed: no tf.data here")
    tf = sources.tensorflow()
    x, y = tiny_data()
    x[40, 0] = np.nan  # in the third batch of 16
    bad = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .map(lambda a, b: (tf.debugging.check_numerics(a, "a NaN in x"), b))
        .batch(BATCH)
    )
    logdir = str(tmp_path / "logs")
    failed = error_of(model=tiny_model(), data=bad, steps=[2, 4], logdir=logdir)
    assert failed["r_class"] == "gpukeras_error_bad_data"
    assert "a NaN in x" in failed["message"]
    first = call(model=tiny_model(), data=tiny_data(), steps=[2, 3], logdir=logdir)
    second = call(model=tiny_model(), data=tiny_data(), steps=[1, 2], logdir=logdir)
    assert_profiled(first, 2, 3)
    assert_profiled(second, 1, 2)
    # Each keeps and lists only the files it wrote, within a second of each other too;
    # the failed run left no trace.
    assert first["trace_dir"] != second["trace_dir"]
    assert len(list(Path(logdir, "train", "plugins", "profile").iterdir())) == 2
    assert len(second["event_files"]) == 1
    assert second["event_files"] != first["event_files"]


def test_a_running_trace_is_a_classed_error_before_any_step() -> None:
    busy = profile.Profiler(config.keras().backend.backend())
    busy.start()
    model = tiny_model()
    model.build((None, 8))
    before = [w.copy() for w in model.get_weights()]
    try:
        answer = error_of(model=model, data=tiny_data(), steps=[1, 2], batch_size=BATCH)
    finally:
        busy.stop(None)
    assert answer["r_class"] == "gpukeras_error_profiler"
    assert "already running" in answer["message"]
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    assert_profiled(call(model=model, data=tiny_data(), steps=[1, 2]), 1, 2)


# Bad input --------------------------------------------------------------------------
def test_a_logdir_that_cannot_be_written_is_a_classed_error(tmp_path: Path) -> None:
    file = tmp_path / "a-file"
    file.write_text("not a folder")
    for logdir in (str(file / "logs"), str(file), 3, ""):
        answer = error_of(model=tiny_model(), data=tiny_data(), steps=[1, 2], logdir=logdir)
        assert answer["r_class"] == "gpukeras_error_bad_argument", logdir
        assert answer["message"].startswith("logdir "), answer


def test_model_and_data_errors_are_classed_and_come_before_the_logdir(tmp_path: Path) -> None:
    logdir = tmp_path / "never"
    cases = [
        ({"model": "a model"}, "gpukeras_error_bad_model"),
        ({"model": tiny_model(compile=False)}, "gpukeras_error_model_not_compiled"),
    ]
    for arguments, r_class in cases:
        answer = error_of(data=tiny_data(), steps=[1, 2], logdir=str(logdir), **arguments)
        assert answer["r_class"] == r_class
    assert not logdir.exists()
    answer = error_of(model=tiny_model(), data="data.csv", steps=[1, 2], logdir=str(logdir))
    assert answer["r_class"] == "gpukeras_error_bad_data"
    x, _ = tiny_data()
    answer = error_of(model=tiny_model(), data=(x[:0],), steps=[1, 2])
    assert answer["r_class"] == "gpukeras_error_bad_data"


# Reading a trace ----------------------------------------------------------------------
def test_device_busy_time_is_the_union_of_its_events_within_the_marked_steps() -> None:
    """The parser on planes as both readers return them: nested and overlapping events
    count once, time outside the steps not at all."""
    step = profile_logs.STEP_NAME
    planes = [
        {
            "name": "/host:CPU",
            "events": [
                (step, 100.0, 1_000_000.0, {"step_num": 2, "_r": 1}),
                (step, 1_000_100.0, 3_000_000.0, {"step_num": "3"}),  # as JSON has it
                ("other", 0.0, 10.0, {}),
                ("IteratorGetNextOp::DoCompute", 200.0, 100_000.0, {}),
                ("MultiDeviceIteratorGetNextFromShardOp::DoCompute", 1_000_100.0, 50_000.0, {}),
                ("IteratorGetNextOp::DoCompute", 3_999_100.0, 5_000.0, {}),  # half after the steps
                ("EagerLocalExecute: IteratorGetNext", 200.0, 900_000.0, {}),  # not the op's run
            ],
        },
        {
            "name": "/device:GPU:0",
            "events": [
                ("module", 100.0, 2_000_000.0, {}),
                ("fusion", 100.0, 500_000.0, {}),  # inside the module
                ("dot", 1_500_000.0, 1_000_000.0, {}),  # sticks out of it
                ("late", 9_000_000.0, 1_000.0, {}),  # after the steps
            ],
        },
    ]
    summary = profile_logs.summarize_trace(planes)
    assert summary["steps"] == [2, 3]
    assert summary["step_time_mean_ms"] == pytest.approx(2.0)
    assert summary["span_ms"] == pytest.approx(4.0)
    (device,) = summary["devices"]
    assert device["plane"] == "/device:GPU:0"
    assert device["events"] == 3
    assert device["busy_ms"] == pytest.approx(2.5 - 0.0001)
    assert device["busy_share"] == pytest.approx((2.5 - 0.0001) / 4.0)
    assert summary["input_ms"] == pytest.approx(0.1 + 0.05 + 0.001)
    assert summary["input_share"] == pytest.approx(0.151 / 4.0)
    assert profile_logs.summarize_trace(planes[1:])["steps"] == []
    assert profile_logs.summarize_trace(planes[1:])["input_share"] is None


@pytest.mark.skipif(not adapters.tensorflow_available(), reason="tf.data needs TensorFlow")
def test_the_trace_tells_a_pipeline_that_starves_the_model_from_one_that_keeps_up(
    tmp_path: Path,
) -> None:
    """The same model and batches, once with a map that sleeps 100 ms per batch in the
    pipeline: Keras reads one batch ahead, so a step's own work (a few ms, tens on a
    busy machine) hides part of each sleep, and the trace's input time is most of the
    rest; a cached, prefetched pipeline's stays far below. (Shares of step time are
    not asserted: a busy machine lengthens the steps.)"""
    if config.keras().backend.backend() != "tensorflow":
        pytest.skip("the trace's input time is TensorFlow's profiler's (None in JAX's trace)")
    tf = sources.tensorflow()
    x, y = tiny_data()
    fast = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).cache().prefetch(2)

    def sleep(features: np.ndarray) -> np.ndarray:
        import time

        time.sleep(0.1)
        return features

    slow = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .batch(BATCH)
        .map(lambda a, b: (tf.ensure_shape(tf.numpy_function(sleep, [a], tf.float32), a.shape), b))
    )
    input_ms_per_step = {}
    for name, data in {"fast": fast, "slow": slow}.items():
        answer = bridge.call(
            "profile",
            {"model": tiny_model(), "data": data, "steps": [3, 6], "logdir": str(tmp_path / name)},
        )
        assert answer["ok"], answer
        trace = answer["value"]["trace"]
        assert len(trace["steps"]) >= 2, trace
        input_ms_per_step[name] = trace["input_ms"] / len(trace["steps"])
    assert input_ms_per_step["slow"] >= 50
    assert input_ms_per_step["fast"] < 50


def test_a_trace_that_cannot_be_read_leaves_a_note_and_does_not_crash(tmp_path: Path) -> None:
    backend = config.keras().backend.backend()
    suffix, _ = profile_logs.TRACE_READERS[backend]
    broken = tmp_path / f"host{suffix}"
    broken.write_bytes(b"not a trace")
    result = profile_logs.read_trace([broken], backend)
    assert result["parsed"] is False
    assert result["note"].startswith("the trace was written but not parsed here")
    assert profile_logs.read_trace([], backend)["note"] == f"the profiler wrote no {suffix} file"


# JAX --------------------------------------------------------------------------------
@pytest.mark.parametrize("tensorflow", [True, False], ids=["with-tensorflow", "without"])
def test_jax_backend_in_a_fresh_process(tensorflow: bool) -> None:
    """The GPU machines' setting (no TensorFlow: scalars from memory), and JAX beside
    TensorFlow, whose ops a JAX trace would break without profile's mending."""
    if tensorflow and not adapters.tensorflow_available():
        pytest.skip("TensorFlow is not installed")
    run = run_on_jax("import jax_profile", tensorflow=tensorflow)
    for answer in run.readback["answers"]:
        assert answer["ok"], answer
        value = answer["value"]
        assert_profiled(value, 2, 4)
        assert value["backend"] == "jax"
        names = [Path(row["path"]).name for row in value["trace_files"]]
        assert any(name.endswith(".trace.json.gz") for name in names)
        if tensorflow:
            assert value["scalars_source"] == "event files"
            assert value["settings"]["data"] == "dataset"  # a tf.data pipeline, after a trace
        else:
            assert value["event_files"] == []
            assert value["scalars_source"].startswith("memory")
            # the rows on the device: nothing to wait for, and each step's 2 x 16 rows
            # counted (the token rows Keras is given counted 2 a step before)
            assert value["settings"]["data"] == "device arrays"
            assert value["settings"]["steps_per_execution"] == 2
            assert value["numbers"]["input_wait_share"] == 0
        numbers = value["numbers"]
        assert numbers["samples_per_second"] == pytest.approx(
            32 / (numbers["step_time_mean_ms"] / 1e3)
        )
    assert ("tensorflow" in run.loaded) is tensorflow
