"""gpu_fit()'s core: real training on tiny data, read back from the model, optimizer and backups.

Tests train in this process on its backend (TensorFlow here, JAX on the GPU
machines); tests that need tf.data skip where TensorFlow is not installed.
JAX without TensorFlow runs in a fresh process, and the resume test kills a
real training process with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import child_pythonpath, requires, run_core, run_on_jax, run_setup
from gpukeras import bridge
from gpukeras.core import compat, errors
from gpukeras.core.runtime import config
from gpukeras.data import adapters, sources
from gpukeras.gpu import samplers
from gpukeras.train import backup, fit, monitor, training_run
from gpukeras.train.advice import TrainingContext

BATCH = 16
ROWS = 8 * BATCH


def tiny_model(metrics: tuple[str, ...] = ("mae",), optimizer: object = "adam") -> object:
    keras = config.keras()
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=optimizer, loss="mse", metrics=list(metrics))
    return model


def tiny_data(rows: int = ROWS, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 8), dtype=np.float32)
    y = (x @ rng.standard_normal((8, 1))).astype(np.float32)
    return x, y


def call(**kwargs: object) -> dict:
    """fit.fit through the bridge, as R calls it; fails the test on an error."""
    answer = bridge.call("fit", {"verbose": 0, **kwargs})
    assert answer["ok"], answer
    return answer["value"]


def error_of(**kwargs: object) -> dict:
    answer = bridge.call("fit", {"verbose": 0, **kwargs})
    assert not answer["ok"], answer
    assert answer["traceback"] is None, answer["traceback"]
    return answer


def assert_same_weights(got: list[np.ndarray], want: list[np.ndarray], device: object) -> None:
    """Bit for bit on the CPU; on a GPU as far as its kernels are deterministic."""
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if device == "CPU:0":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def tensorflow() -> object:
    """TensorFlow for tests that build tf.data pipelines; skips where it is not installed."""
    if not adapters.tensorflow_available():
        pytest.skip("TensorFlow is not installed: no tf.data here")
    return sources.tensorflow()


# Training and what it returns ----------------------------------------------------
def test_history_has_every_metric_and_the_loss_decreases() -> None:
    x, y = tiny_data()
    result = call(
        model=tiny_model(), data=(x, y), epochs=4, seed=1, validation_data=tiny_data(64, seed=1)
    )
    history = result["history"]
    assert history["epoch"] == [1, 2, 3, 4]
    assert set(history) == {"epoch", "loss", "mae", "val_loss", "val_mae"}
    assert all(len(values) == 4 for values in history.values())
    assert history["loss"][-1] < history["loss"][0]
    settings = result["settings"]
    assert settings["epochs"] == 4
    assert settings["batch_size"] == 32
    assert settings["steps_per_epoch"] == ROWS // 32
    assert settings["seed"] == 1
    assert settings["deterministic"] is False  # gpu_setup(deterministic = TRUE): test_deterministic
    assert settings["backend"] == config.keras().backend.backend()
    assert settings["device"] in ("CPU:0", "GPU:0")
    # the model's policy: Keras' global one, gpu_setup()'s choice in the simulated-GPU run
    assert settings["dtype_policy"] == config.keras().config.dtype_policy().name
    json.dumps(result)  # plain data, all the way down


def test_same_seed_same_weights_other_seed_other_weights() -> None:
    x, y = tiny_data()

    device = []

    def weights(seed: int) -> list[np.ndarray]:
        config.keras().utils.set_random_seed(seed)
        model = tiny_model()
        result = call(model=model, data=(x, y), epochs=2, seed=seed, batch_size=BATCH)
        device.append(result["settings"]["device"])
        return model.get_weights()

    first, again, other = weights(3), weights(3), weights(4)
    assert_same_weights(again, first, device[0])
    assert not all(np.allclose(a, b) for a, b in zip(first, other))


def test_speed_options_are_in_force_on_the_model_and_its_loss_and_metrics_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = tiny_model()
    x, y = tiny_data()
    result = call(
        model=model,
        data=(x, y),
        epochs=2,
        batch_size=BATCH,
        steps_per_execution=4,
        jit_compile=False,
    )
    assert model.steps_per_execution == 4
    assert model.jit_compile is False
    assert result["settings"]["steps_per_execution"] == 4
    assert result["settings"]["jit_compile"] is False
    assert set(result["history"]) == {"epoch", "loss", "mae"}
    # 8 batches per epoch ran as 2 executions of 4: the timer saw 4 executions, and left out
    # the first, which holds the first 2 batches (tracing and compiling).
    assert result["monitor"]["steps_timed"] == 2 * 2 - 1
    assert model.get_compile_config()["steps_per_execution"] == 4

    # "auto" takes gpu_setup()'s default first, and keeps the model's steps_per_execution.
    monkeypatch.setattr(config.setup, "jit_compile", True)
    result = call(model=model, data=(x, y), epochs=1, batch_size=BATCH, monitor=False)
    assert model.jit_compile is True
    assert result["settings"]["jit_compile"] is True
    assert result["settings"]["steps_per_execution"] == 4


def test_jit_auto_without_a_setup_default_is_keras_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config.setup, "jit_compile", "auto")
    model = tiny_model()
    expected = compat.auto_jit_compile(model)
    result = call(model=model, data=tiny_data(), epochs=1, monitor=False)
    assert result["settings"]["jit_compile"] is expected
    assert model.jit_compile is expected


def test_learning_rate_number_and_schedule_are_set_on_the_optimizer() -> None:
    keras = config.keras()
    model = tiny_model(optimizer="sgd")
    x, y = tiny_data()
    spec = {"schedule": "exponential", "initial": 0.1, "decay_steps": 4, "decay_rate": 0.5}
    result = call(model=model, data=(x, y), epochs=1, batch_size=BATCH, learning_rate=spec)
    assert result["settings"]["learning_rate"] == {**spec, "staircase": False}
    assert isinstance(
        compat.learning_rate_of(model.optimizer), keras.optimizers.schedules.ExponentialDecay
    )
    # 8 optimizer steps: the rate in force is the schedule's at step 8.
    assert int(model.optimizer.iterations) == 8
    assert float(model.optimizer.learning_rate) == pytest.approx(0.1 * 0.5**2)
    # A number after a schedule (Keras' own setter refuses that).
    result = call(model=model, data=(x, y), epochs=1, batch_size=BATCH, learning_rate=0.05)
    assert float(model.optimizer.learning_rate) == pytest.approx(0.05)
    assert result["settings"]["learning_rate"] == pytest.approx(0.05)
    # None keeps what the optimizer has, and says what that is.
    result = call(model=model, data=(x, y), epochs=1, batch_size=BATCH)
    assert result["settings"]["learning_rate"] == pytest.approx(0.05)


def test_clipnorm_and_clipvalue_bound_the_update() -> None:
    """One SGD step (learning rate 1) on a huge loss moves each weight by at most the clip."""
    keras = config.keras()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 8), dtype=np.float32)
    y = np.full((BATCH, 1), 1000.0, dtype=np.float32)

    def update(**clip: float) -> list[np.ndarray]:
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0), loss="mse")
        before = model.get_weights()
        result = call(model=model, data=(x, y), batch_size=BATCH, monitor=False, **clip)
        for name, value in clip.items():
            assert result["settings"][name] == value
            assert getattr(model.optimizer, name) == value
        return [after - start for after, start in zip(model.get_weights(), before)]

    assert max(np.linalg.norm(delta) for delta in update()) > 100
    assert max(np.linalg.norm(delta) for delta in update(clipnorm=0.5)) <= 0.5 + 1e-5
    assert max(np.abs(delta).max() for delta in update(clipvalue=0.01)) <= 0.01 + 1e-7


# The monitor ------------------------------------------------------------------
REPORT_KEYS = {
    "samples_per_second",
    "step_time_mean_ms",
    "step_time_sd_ms",
    "input_wait_share",
    "input_verdict",
    "gpu_utilization_mean",
    "gpu_utilization_p95",
    "gpu_memory_used_max_mib",
    "host_cpu_percent_mean",
    "flops_per_step",
    "achieved_tflops",
    "mfu",
    "notes",
    "advice",
}


def test_report_on_the_cpu_has_no_nvml_parts(no_gpu: None) -> None:
    x, y = tiny_data(32 * BATCH)
    result = call(model=tiny_model(), data=(x, y), epochs=2, batch_size=BATCH)
    report = result["monitor"]
    assert set(report) >= REPORT_KEYS
    assert report["samples_per_second"] > 0
    assert report["step_time_mean_ms"] > 0 and report["step_time_sd_ms"] >= 0
    assert 0 <= report["input_wait_share"] <= 1
    assert report["input_verdict"] == monitor.input_verdict(
        report["input_wait_share"],
        report["input_wait_mean_ms"],
        report["fetch_floor_ms"],
        report["input_wait_margin"],
    )
    for key in ("gpu_utilization_mean", "gpu_utilization_p95", "gpu_memory_used_max_mib", "mfu"):
        assert report[key] is None
    assert report["gpu_not_measured"] == "no GPU in use"
    # FLOPs: 2 x (8 x 16 + 16 x 1) per sample forward, 3 x that per trained sample.
    assert report["flops_per_step"] == pytest.approx(3 * 2 * (8 * 16 + 16) * BATCH)
    assert report["achieved_tflops"] == pytest.approx(
        3 * 2 * (8 * 16 + 16) * report["samples_per_second"] / 1e12
    )
    assert any("No GPU was used" in item for item in report["advice"])
    timeline = result["timeline"]
    assert all(values == [] for values in timeline["gpu"].values())
    if Path(samplers.PROC_STAT).exists():
        host = timeline["host"]
        assert len(host["time_s"]) == len(host["cpu_percent"]) >= 1
        assert all(0 <= value <= 100 for value in host["cpu_percent"])
        assert 0 <= report["host_cpu_percent_mean"] <= 100
    assert report["monitor_cpu_share"] < 0.05
    assert result["settings"]["device"] == "CPU:0"


def test_monitor_false_returns_no_report() -> None:
    result = call(model=tiny_model(), data=tiny_data(), epochs=1, monitor=False)
    assert result["monitor"] is None
    assert result["timeline"]["host"] == {"time_s": [], "cpu_percent": []}
    assert result["settings"]["monitor"] is False


def test_slow_input_pipeline_is_highly_input_bound_with_pipeline_advice() -> None:
    tf = tensorflow()
    x, y = tiny_data()

    def slow(x: object, y: object) -> tuple[object, object]:
        x = tf.py_function(lambda t: (time.sleep(0.02), t)[1], [x], tf.float32)
        x.set_shape([None, 8])
        return x, y

    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).map(slow)
    report = call(model=tiny_model(), data=dataset, epochs=2)["monitor"]
    assert report["input_wait_share"] >= 0.2
    assert report["input_verdict"] == "highly input-bound"
    # A fit this short, on the CPU or a GPU, gets the verdict as a note, not as advice
    # (advice.notes); the pipeline advice itself is tested with a GPU run's facts below.
    notes = " ".join(report["notes"])
    assert "(highly input-bound)" in notes and "Not advice to change the batch size" in notes
    assert "prefetch" not in " ".join(report["advice"]).lower()


@pytest.mark.parametrize(
    ("share", "verdict"),
    [
        (0.0, "not input-bound"),
        (0.0499, "not input-bound"),
        (0.05, "moderately input-bound"),
        (0.1999, "moderately input-bound"),
        (0.2, "highly input-bound"),
        (0.9, "highly input-bound"),
        (None, None),
    ],
)
def test_verdict_thresholds_are_the_tf_profilers(share: float | None, verdict: str | None) -> None:
    assert monitor.input_verdict(share) == verdict


def test_a_wait_under_the_timers_resolution_is_not_input_bound() -> None:
    # 8 % of a 1 ms step is 0.08 ms: less than the 0.17 ms a ready batch took.
    assert monitor.input_verdict(0.08, 0.08, 0.17) == "not input-bound"
    assert monitor.input_verdict(0.08, 0.25, 0.17) == "moderately input-bound"
    assert monitor.input_verdict(0.5, 20.0, 0.17) == "highly input-bound"
    assert monitor.input_verdict(0.08, 0.08, None) == "moderately input-bound"


def gpu_context(**changes: object) -> TrainingContext:
    values = {
        "backend": "jax",
        "gpus": ["NVIDIA H100 80GB HBM3"],
        "compute_capability": "9.0",
        "memory_total_mib": 81559.0,
        "dtype_policy": "float32",
        "jit_compile": True,
        "steps_per_execution": 1,
        "batch_size": 64,
    }
    return TrainingContext(**{**values, **changes})  # type: ignore[arg-type]


def synthetic_samples(utilization: list[float], memory: float = 2000.0) -> list[samplers.Sample]:
    """One GPU sampled at 10 Hz from t = 10 s."""
    return [
        samplers.Sample(
            time=10 + i / 10, nvml_index=0, utilization_gpu=u, memory_used_mib=memory, power_w=300
        )
        for i, u in enumerate(utilization)
    ]


STEPS = {
    "steps": 100,
    "seconds": 1.0,
    "samples": 6400,
    "samples_per_second": 6400.0,
    "step_time_mean_ms": 2.0,
    "step_time_sd_ms": 0.1,
    "input_wait_share": 0.01,
    "between_steps_share": 0.3,
    "method": "synthetic",
}


def test_gpu_report_from_samples_with_mfu_and_advice() -> None:
    utilization = [float(u) for u in range(0, 100, 5)]  # 0, 5, ..., 95
    counted = {
        "per_sample": 1e9,
        "method": "per layer",
        "peak": {"tflops": 494.7, "source": "NVIDIA spec sheet, H100 SXM dense TF32"},
    }
    report = monitor.training_report(
        STEPS, synthetic_samples(utilization), [], (9.0, 20.0), gpu_context(), counted, 0.01, 1.0
    )
    assert report["gpu_utilization_mean"] == pytest.approx(47.5)
    assert report["gpu_utilization_p95"] == pytest.approx(np.percentile(utilization, 95))
    assert report["gpu_memory_used_max_mib"] == 2000.0
    assert report["gpu_sample_hz"] == pytest.approx(10.0)
    assert report["gpu_power_mean_w"] == 300
    assert report["flops_per_step"] == pytest.approx(3e9 * 64)
    assert report["achieved_tflops"] == pytest.approx(3e9 * 6400 / 1e12)
    assert report["mfu"] == pytest.approx(3e9 * 6400 / 1e12 / 494.7)
    assert report["peak_source"].startswith("NVIDIA spec sheet")
    assert report["monitor_cpu_share"] == pytest.approx(0.01)
    advice = " ".join(report["advice"])
    assert "steps_per_execution" in advice  # idle GPU, 2 ms steps
    assert "larger batch size" in advice  # 2 of 80 GB used
    assert "mixed_precision = 'bfloat16'" in advice  # float32 on compute capability 9.0
    assert "XLA" not in advice  # jit_compile is on


@pytest.mark.parametrize(("backend", "op_by_op"), [("jax", True), ("tensorflow", False)])
def test_a_layer_keras_cannot_compile_is_named_instead_of_asking_for_jit(
    backend: str, op_by_op: bool
) -> None:
    """Seen on an H100 on JAX: a RandomRotation layer made Keras train op by op."""
    context = gpu_context(
        backend=backend, jit_compile=False, layers_without_jit=["random_rotation (RandomRotation)"]
    )
    report = monitor.training_report(
        {**STEPS, "step_time_mean_ms": 50.0}, synthetic_samples([97.0] * 20), [], None, context
    )
    advice = " ".join(report["advice"])
    assert "Keras cannot compile random_rotation (RandomRotation)" in advice
    assert ("runs on its own" in advice) is op_by_op
    assert "gpu_dataset(augment = list(rotation" in advice
    assert "jit_compile = TRUE" not in advice  # Keras would turn it off again


def test_the_report_names_the_layers_that_turn_xla_off() -> None:
    import keras

    inner = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.RandomZoom(0.1, name="zoom")])
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.RandomRotation(0.05, name="rotate"),
            keras.layers.RandomFlip("horizontal", name="flip"),  # Keras compiles this one
            inner,
            keras.layers.RandomCrop(6, 6, name="crop"),
            # not Flatten: Keras 3.15's RandomCrop on JAX does not crop outside training
            # (its symbolic build then finds 8x8), which fails Keras' own fit() there
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ]
    )
    model.compile(optimizer="sgd", loss="mse")
    # on JAX, gpukeras compiles rotation and zoom (compat.JAX_TRACEABLE_LAYERS)
    expected = ["rotate (RandomRotation)", "zoom (RandomZoom)", "crop (RandomCrop)"]
    if config.backend == "jax":
        expected = ["crop (RandomCrop)"]
    assert training_run.layers_without_jit(model) == expected
    x = np.random.default_rng(0).random((64, 8, 8, 1), dtype=np.float32)
    result = fit.fit(model, (x, np.zeros((64, 2), np.float32)), epochs=1, batch_size=32, verbose=0)
    advice = " ".join(result["monitor"]["advice"])
    assert f"Keras cannot compile {', '.join(expected)}" in advice


def test_busy_gpu_in_mixed_precision_gets_no_overhead_advice() -> None:
    report = monitor.training_report(
        {**STEPS, "step_time_mean_ms": 50.0},
        synthetic_samples([97.0] * 20, memory=70000.0),
        [],
        None,
        gpu_context(dtype_policy="mixed_bfloat16"),
    )
    assert report["mfu"] is None and report["flops_per_step"] is None
    assert report["advice"] == [
        "The GPU is busy 97 % of the time and the input keeps up: further speed has to come "
        "from the model itself."
    ]


def test_input_bound_gpu_gets_pipeline_advice_not_overhead_advice() -> None:
    report = monitor.training_report(
        {**STEPS, "input_wait_share": 0.4},
        synthetic_samples([30.0] * 20),
        [samplers.HostSample(time=10.5, cpu_percent=95.0)],
        None,
        gpu_context(),
    )
    assert report["input_verdict"] == "highly input-bound"
    advice = " ".join(report["advice"])
    assert "Cache the data" in advice and "Prefetch" in advice and "in parallel" in advice
    assert "host CPU is 95 % busy" in advice
    assert "steps_per_execution" not in advice


@pytest.mark.parametrize(
    ("steps", "advised", "not_advised"),
    [
        (None, ["Cache the data", "in parallel", "Prefetch batches"], ["already caches"]),
        (["Batch", "Map", "TensorSlice"], ["Cache the data", "in parallel", "Prefetch"], []),
        (
            ["Prefetch", "Batch", "ParallelMap", "Cache", "TensorSlice"],
            ["already caches, maps in parallel and prefetches"],
            ["Cache the data", "Run per-element maps", "Prefetch batches"],
        ),
        (["Batch", "Cache", "TensorSlice"], ["Prefetch batches", "dataset_prefetch()"], ["Cache"]),
    ],
)
def test_pipeline_advice_names_only_the_steps_the_dataset_lacks(
    steps: list[str] | None, advised: list[str], not_advised: list[str]
) -> None:
    report = monitor.training_report(
        {**STEPS, "input_wait_share": 0.4},
        [],
        [],
        None,
        # a GPU run's facts: on the CPU the verdict is a note (advice.notes)
        TrainingContext(backend="tensorflow", gpus=["a GPU"], pipeline_steps=steps),
    )
    advice = " ".join(report["advice"])
    assert advice.startswith("Training waits for input 40 % of the step time (highly")
    for text in advised:
        assert text in advice
    for text in not_advised:
        assert text not in advice


def test_dataset_steps_are_read_from_the_dataset() -> None:
    tf = pytest.importorskip("tensorflow")
    dataset = (
        tf.data.Dataset.range(8)
        .cache()
        .map(lambda x: x, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(4)
        .prefetch(2)
    )
    assert compat.dataset_steps(dataset) == ["Prefetch", "Batch", "ParallelMap", "Cache", "Range"]
    assert compat.static_batch_size(dataset) == 4
    assert compat.static_batch_size(tf.data.Dataset.range(8)) is None


# Errors ---------------------------------------------------------------------------
def test_not_a_keras_model() -> None:
    answer = error_of(model={"layers": 2}, data=tiny_data())
    assert answer["r_class"] == "gpukeras_error_bad_model"
    assert "must be a Keras 3 model" in answer["message"]


def test_model_not_compiled() -> None:
    keras = config.keras()
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    answer = error_of(model=model, data=tiny_data())
    assert answer["r_class"] == "gpukeras_error_model_not_compiled"
    assert "compile it first" in answer["message"]
    assert 'model$compile(optimizer = "adam", loss = ' in answer["message"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"learning_rate": -0.1}, "`learning_rate` must be one positive number"),
        ({"learning_rate": "fast"}, "`learning_rate` must be one positive number or a schedule"),
        ({"learning_rate": {"schedule": "linear"}}, "Unknown learning-rate schedule"),
        ({"learning_rate": {"schedule": "cyclical", "low": 1}}, "lr_cyclical() needs `high`"),
        ({"callbacks": ["print"]}, "`callbacks` must be a Keras callback or a list of them"),
        ({"data": "train.csv"}, "data cannot be str"),
    ],
)
def test_bad_arguments_are_classed_errors(arguments: dict, message: str) -> None:
    """The arguments the core checks (gpu_fit() checks the others in R:
    tests/testthat/test-bad-input-training.R)."""
    answer = error_of(**{"model": tiny_model(), "data": tiny_data(), **arguments})
    expected = "gpukeras_error_bad_data" if "data" in arguments else "gpukeras_error_bad_argument"
    assert answer["r_class"] == expected
    assert message in answer["message"]


def test_an_endless_dataset_is_refused() -> None:
    tf = tensorflow()
    dataset = tf.data.Dataset.from_tensor_slices(tiny_data()).batch(BATCH).repeat()
    answer = error_of(model=tiny_model(), data=dataset)
    assert answer["r_class"] == "gpukeras_error_bad_data"
    assert "repeats forever" in answer["message"]


def image_folder_with_a_corrupt_png(root: Path) -> Path:
    """8 PNGs in two classes; the third (in name order) is truncated after its header.

    Not the last: TensorFlow's in-memory cache, measured here, ends an epoch
    quietly without the rest after an error in the last element.
    """
    tf = tensorflow()
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
        for i in range(4):
            pixels = np.random.default_rng(i).integers(0, 255, (8, 8, 3), dtype=np.uint8)
            (root / label / f"{i}.png").write_bytes(tf.io.encode_png(pixels).numpy())
    good = (root / "a" / "0.png").read_bytes()
    (root / "a" / "2.png").write_bytes(good[:40] + bytes(30))
    return root


def test_corrupt_image_mid_epoch_is_bad_data_and_progress_is_kept(tmp_path: Path) -> None:
    from gpukeras.data import pipeline

    root = image_folder_with_a_corrupt_png(tmp_path / "images")
    keras = config.keras()
    built = pipeline.from_source(
        "image_folder", {"path": str(root), "image_size": [8, 8]}, batch_size=2, shuffle=False
    )
    model = keras.Sequential(
        [keras.Input((8, 8, 3)), keras.layers.Flatten(), keras.layers.Dense(2)]
    )
    model.compile(
        optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    backups = tmp_path / "backup"
    answer = error_of(
        model=model, data=built["dataset"], epochs=2, backup_dir=str(backups), backup_freq=1
    )
    assert answer["r_class"] == "gpukeras_error_bad_data"
    message = answer["message"]
    assert message.startswith("Training stopped at epoch 1, batch 2:")
    assert "Invalid PNG" in message
    assert f"Progress is kept in {backups} (epoch 1, 1 batches done)" in message
    assert backup.read_state(str(backups)).batches_done == 1
    assert "Make the dataset again" in message
    # Without backup_dir the message says nothing was kept.
    built = pipeline.from_source(
        "image_folder", {"path": str(root), "image_size": [8, 8]}, batch_size=2, shuffle=False
    )
    answer = error_of(model=model, data=built["dataset"], epochs=1)
    assert "Nothing was kept" in answer["message"]


def test_corrupt_image_in_the_pipeline_benchmark_is_bad_data(tmp_path: Path) -> None:
    from gpukeras.data import pipeline, pipeline_facts

    root = image_folder_with_a_corrupt_png(tmp_path / "images")
    built = pipeline.from_source(
        "image_folder", {"path": str(root), "image_size": [8, 8]}, batch_size=2, shuffle=False
    )
    with pytest.raises(errors.BadDataError) as raised:
        pipeline_facts.benchmark(built["dataset"], steps=3, warmup=0)
    message = str(raised.value)
    assert message.startswith("The benchmark stopped at batch 2: a batch could not be made")
    assert "Invalid PNG" in message and "corrupt or truncated image" in message


def test_corrupt_image_on_the_jax_backend_is_bad_data_too(tmp_path: Path) -> None:
    """On JAX, Keras peeks at a batch through an iterator it leaves running; with it alive,
    tf.data's in-memory cache skipped the corrupt element without an error. The core
    builds the model from the element spec instead, so the error comes through."""
    pytest.importorskip("jax")
    root = image_folder_with_a_corrupt_png(tmp_path / "images")
    after = f"""
import keras
from gpukeras.data import pipeline
built = pipeline.from_source(
    "image_folder", {{"path": {str(root)!r}, "image_size": [8, 8]}}, batch_size=2, shuffle=False
)
model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(), keras.layers.Dense(2)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
readback["answer"] = bridge.call(
    "fit", {{"model": model, "data": built["dataset"], "epochs": 2, "verbose": 0}}
)
"""
    run = run_core("core.runtime:configured_backend", env={"KERAS_BACKEND": "jax"}, after=after)
    answer = run.readback["answer"]
    assert answer["ok"] is False, answer
    assert answer["r_class"] == "gpukeras_error_bad_data"
    assert answer["message"].startswith("Training stopped at epoch 1, batch 2:")


# Backups and resuming ---------------------------------------------------------------
class Interrupt(Exception):
    """Stands in for a crash in the middle of training."""


def interrupted() -> object:
    """``pytest.raises`` for training stopped by ``interrupt_at``: the user's callback failed."""
    return pytest.raises(errors.CallbackError, match=r"Your callback Crash\.on_train_batch_begin")


def interrupt_at(epoch: int, batch: int) -> object:
    keras = config.keras()

    class Crash(keras.callbacks.Callback):
        def on_epoch_begin(self, e: int, logs: dict | None = None) -> None:
            self.epoch = e

        def on_train_batch_begin(self, b: int, logs: dict | None = None) -> None:
            if (self.epoch, b) == (epoch, batch):
                raise Interrupt

    return Crash()


def fresh_model(seed: int) -> object:
    keras = config.keras()
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.25),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="adam", loss="mse")
    return model


def test_resume_in_the_same_process_ends_with_the_same_weights(tmp_path: Path) -> None:
    x, y = tiny_data()
    common = {
        "data": (x, y),
        "epochs": 3,
        "batch_size": BATCH,
        "seed": 5,
        "monitor": False,
        "learning_rate": {"schedule": "cyclical", "low": 1e-3, "high": 1e-2, "step_size": 5},
    }
    reference = fresh_model(1)
    expected = call(model=reference, **common)
    backups = tmp_path / "backup"
    (backups).mkdir()
    (backups / "notes.txt").write_text("not ours")
    with interrupted():
        fit.fit(
            fresh_model(1),
            backup_dir=str(backups),
            backup_freq=3,
            callbacks=[interrupt_at(1, 5)],
            verbose=0,
            **common,
        )
    state = backup.read_state(str(backups))
    assert (state.epoch, state.batches_done) == (1, 3)
    assert [row["epoch"] for row in state.history] == [1]
    resumed_model = fresh_model(2)  # other initial weights: the backup replaces them
    resumed = call(model=resumed_model, backup_dir=str(backups), backup_freq=3, **common)
    assert resumed["settings"]["resumed_from"] == {"epoch": 2, "batches_done": 3}
    assert resumed["history"]["epoch"] == [1, 2, 3]
    losses = resumed["history"]["loss"]
    assert losses[0] == expected["history"]["loss"][0]  # from the backup
    # The resumed epoch's loss is the mean over all its batches, the 3 before the kill included.
    assert losses[1:] == pytest.approx(expected["history"]["loss"][1:], rel=1e-5)
    assert_same_weights(
        resumed_model.get_weights(), reference.get_weights(), expected["settings"]["device"]
    )
    # Done: only the backup's own files are gone.
    assert sorted(p.name for p in backups.iterdir()) == ["notes.txt"]


def test_a_backup_of_another_run_is_refused(tmp_path: Path) -> None:
    x, y = tiny_data()
    backups = str(tmp_path / "backup")
    with interrupted():
        fit.fit(
            tiny_model(),
            (x, y),
            epochs=2,
            batch_size=BATCH,
            backup_dir=backups,
            callbacks=[interrupt_at(1, 0)],
            verbose=0,
        )
    answer = error_of(model=tiny_model(), data=(x, y), epochs=2, batch_size=8, backup_dir=backups)
    assert answer["r_class"] == "gpukeras_error_backup_mismatch"
    assert "steps_per_epoch: backup 8, now 16" in answer["message"]
    assert "delete this one to start over" in answer["message"]


def test_a_killed_training_process_resumes_to_the_same_weights(tmp_path: Path) -> None:
    """SIGKILL mid-epoch, then the same call again: the weights equal an uninterrupted run's."""
    script = Path(__file__).with_name("scripts") / "resumable_fit.py"
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    backups = tmp_path / "backup"

    def child(name: str, backup_dir: str, pause: float) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / name), backup_dir, str(pause)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    # The uninterrupted run trains alongside the one that gets killed.
    reference = child("uninterrupted.npz", "", 0.0)
    killed = child("killed.npz", str(backups), 0.03)
    state_file = backups / backup.STATE_FILE
    deadline = time.monotonic() + 60
    state = None
    try:
        while time.monotonic() < deadline and killed.poll() is None:
            if state_file.exists():
                state = backup.read_state(str(backups))
                if state.epoch >= 1 and state.batches_done > 0:  # in the middle of epoch 2
                    break
            time.sleep(0.02)
        assert killed.poll() is None, killed.communicate()[1][-3000:]
        assert state is not None and state.batches_done > 0, "no mid-epoch backup within 60 s"
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=30)
    assert killed.returncode == -signal.SIGKILL
    kept = backup.read_state(str(backups))
    assert kept.epoch >= 1

    resumed = child("resumed.npz", str(backups), 0.0)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report["resumed_from"] == {"epoch": kept.epoch + 1, "batches_done": kept.batches_done}
    assert report["history"]["epoch"] == [1, 2, 3, 4]
    ref_out, ref_err = reference.communicate(timeout=120)
    assert reference.returncode == 0, ref_err[-3000:]
    expected = json.loads(ref_out.strip().splitlines()[-1])
    # Epochs after the interrupted one saw the same batches from the same state.
    assert report["history"]["loss"][-1] == pytest.approx(expected["history"]["loss"][-1], 1e-5)

    got, want = np.load(tmp_path / "resumed.npz"), np.load(tmp_path / "uninterrupted.npz")
    assert_same_weights(
        [got[key] for key in got.files], [want[key] for key in want.files], report["device"]
    )
    assert not backups.exists(), sorted(p.name for p in backups.iterdir())  # removed at the end


def test_an_error_in_the_users_callback_is_theirs_not_a_bug_in_gpukeras() -> None:
    """Classed as the user's callback failing, naming it, its hook and the line; a callback
    made of functions (LambdaCallback) too."""
    keras = config.keras()

    class Boom(keras.callbacks.Callback):  # type: ignore[name-defined,misc]
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if epoch == 1:
                raise ValueError(f"my mistake in epoch {epoch + 1}")

    def broken(batch: int, logs: dict | None = None) -> None:
        raise KeyError("no such log")

    x, y = tiny_data()
    lambda_line = broken.__code__.co_firstlineno + 1
    for callback, said in (
        (
            Boom(),
            "Your callback Boom.on_epoch_end raised ValueError: my mistake in epoch 2 (at "
            f"{__file__}, line {Boom.on_epoch_end.__code__.co_firstlineno + 2}). Training "
            "stopped in epoch 2.",
        ),
        (
            keras.callbacks.LambdaCallback(on_train_batch_end=broken),
            "Your callback LambdaCallback.on_train_batch_end raised KeyError: 'no such log' "
            f"(at {__file__}, line {lambda_line}). Training stopped in epoch 1. Nothing was kept",
        ),
    ):
        given = [keras.callbacks.LambdaCallback(), callback]
        answer = error_of(model=tiny_model(), data=(x, y), epochs=3, callbacks=given)
        assert answer["r_class"] == "gpukeras_error_callback", answer
        assert said in answer["message"]


# Other backends, and GPUs ------------------------------------------------------------


def test_jax_compiles_the_geometric_augmentation_layers_that_keras_marks_for_tensorflow() -> None:
    """On JAX, RandomRotation, RandomZoom and RandomTranslation trace under jit: the model
    trains compiled, on the device, augmenting in every step; RandomCrop still cannot."""
    # TensorFlow importable (unused): blocked through sys.modules, it would answer Keras'
    # "in a tf.data graph?" check (utils/backend_utils.py) with an ImportError
    run = run_on_jax("import jax_augmented_fit", tensorflow=True)
    answer = run.readback["geometric"]
    assert answer["ok"], answer
    settings = answer["value"]["settings"]
    assert settings["jit_compile"] is True
    assert settings["data"] == "device arrays"
    assert settings["steps_per_execution"] == 3  # three augmented steps per compiled call
    assert all(np.isfinite(answer["value"]["history"]["loss"]))
    assert run.readback["seed_moved"] is True
    advice = " ".join(answer["value"]["monitor"]["advice"])
    assert "cannot compile" not in advice
    cropped = run.readback["cropped"]
    assert cropped["ok"], cropped
    assert cropped["value"]["settings"]["jit_compile"] is False
    assert run.readback["blocks"] == ["random_crop"]
    assert "Keras cannot compile random_crop (RandomCrop)" in " ".join(
        cropped["value"]["monitor"]["advice"]
    )


def test_jax_backend_without_tensorflow_in_a_fresh_process() -> None:
    """The GPU machines' setting: Keras on JAX, no TensorFlow; the arrays train on the device."""
    run = run_on_jax("import jax_fit")
    answer = run.readback["answer"]
    assert answer["ok"], answer
    value = answer["value"]
    assert value["history"]["epoch"] == [1, 2, 3]
    assert value["history"]["loss"][-1] < value["history"]["loss"][0]
    settings = value["settings"]
    assert settings["backend"] == "jax"
    assert settings["data"] == "device arrays"
    assert settings["data_path"]["resident"] is True
    assert settings["jit_compile"] is True and run.readback["jit"] is True
    report = value["monitor"]
    assert report["samples_per_second"] > 0
    assert report["input_wait_method"] == "input on the device (no wait by construction)"
    assert report["input_wait_share"] == 0
    assert "tensorflow" not in run.loaded
    # gpu_fit()'s own callbacks leave Keras dispatching batch ends on its worker
    # thread, so the host does not wait for each step before queueing the next.
    assert run.readback["batch_ends_on_main_thread"] is False


@pytest.mark.gpu
def test_on_a_gpu_the_report_has_utilization_and_nvml_samples_at_5_hz() -> None:
    """About 2 s of matmul-heavy training: enough for NVML to see the GPU busy."""
    keras = config.keras()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16 * 1024, 1024), dtype=np.float32)
    y = rng.integers(0, 10, len(x))
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((1024,)),
            keras.layers.Dense(8192, activation="relu"),
            keras.layers.Dense(8192, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    result = call(model=model, data=(x, y), epochs=20, batch_size=1024)
    report = result["monitor"]
    assert report["gpu_not_measured"] is None
    assert report["gpu_utilization_mean"] > 0
    assert report["gpu_utilization_p95"] >= report["gpu_utilization_mean"]
    assert report["gpu_memory_used_max_mib"] > 0
    assert report["achieved_tflops"] > 0
    if report["peak_tflops"] is not None:
        assert 0 < report["mfu"] < 1
    assert result["settings"]["device"] == "GPU:0"
    gpu = result["timeline"]["gpu"]
    assert len(gpu["time_s"]) >= 5
    for index in set(gpu["nvml_index"]):
        times = [t for t, i in zip(gpu["time_s"], gpu["nvml_index"]) if i == index]
        assert (len(times) - 1) / (times[-1] - times[0]) >= 5


# The devices a run uses ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_the_devices_in_use_are_the_strategys_own(backend: str) -> None:
    """Real strategies over logical CPU devices: a one-device strategy on CPU:1 uses
    CPU:1 (not the first device), a mirrored one over CPU:1 and CPU:2 those two."""
    run = run_setup(backend, {"cpu_devices": 3}, "import devices_in_use")
    assert run.readback["none"] is None  # Keras' own choice: the first GPU, else the CPU
    assert run.readback["one"] == ["CPU:1"]
    assert run.readback["two"] == ["CPU:1", "CPU:2"]


@pytest.mark.gpu
def test_on_a_gpu_the_report_names_the_gpu_in_use_with_its_own_figures() -> None:
    """The GPU Keras trains on (the first), watched through its own NVML index; its peak
    alone divides the achieved TFLOP/s."""
    from gpukeras.gpu import devices
    from gpukeras.train import flops

    keras = config.keras()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8 * 1024, 1024), dtype=np.float32)
    y = rng.standard_normal((len(x), 1)).astype(np.float32)
    model = keras.Sequential(
        [keras.Input((1024,)), keras.layers.Dense(4096, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer="adam", loss="mse")
    report = call(model=model, data=(x, y), epochs=5, batch_size=1024)["monitor"]
    first = next(row for row in devices.list_devices() if row["type"] == "GPU")
    (gpu,) = report["gpus"]
    assert (gpu["device"], gpu["nvml_index"]) == ("GPU:0", first["nvml_index"])
    assert gpu["utilization_mean"] == pytest.approx(report["gpu_utilization_mean"])
    assert gpu["memory_used_max_mib"] > 0
    assert report["gpu_utilization_imbalance"] is None
    peak = flops.peak(str(first["name"]), "float32", first["compute_capability"])
    if peak is not None:
        assert report["peak_tflops"] == pytest.approx(peak["tflops"])


@pytest.mark.gpu
def test_on_a_gpu_a_strategy_over_the_gpus_is_watched_on_exactly_those() -> None:
    from gpukeras.distribute import strategies
    from gpukeras.train import training_run

    keras = config.keras()
    made = strategies.make("mirrored")  # every GPU
    with strategies.strategy_scope(made["strategy"]):
        model = tiny_model()
        rows = training_run.gpus_in_use(keras, model)
    assert [row["device"] for row in rows] == made["plan"].devices
    assert all(row["nvml_index"] is not None for row in rows)


def test_only_a_users_callback_with_a_batch_hook_asks_for_a_step_per_dispatch(
    tmp_path: Path,
) -> None:
    """The rule behind "auto" steps per dispatch on the device (test_resident.py runs it):
    a hook overridden in a class or given to LambdaCallback counts; epoch hooks and
    gpukeras' own per-dispatch callbacks (a background job's progress, the step timer) do
    not."""
    from gpukeras.train import job, timing

    keras = config.keras()

    class EachBatch(keras.callbacks.Callback):
        def on_batch_end(self, batch: int, logs: dict | None = None) -> None:
            pass

    every = keras.callbacks.LambdaCallback(on_train_batch_begin=lambda batch, logs: None)
    per_epoch = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: None)
    ours = [job.progress_callback(str(tmp_path), 1), timing.step_timer()]
    assert fit._every_batch(keras, [per_epoch, EachBatch()]) == 1
    assert fit._every_batch(keras, [every]) == 1
    assert fit._every_batch(keras, [per_epoch, keras.callbacks.EarlyStopping(), *ours]) is None


def test_a_seeded_fit_on_jax_leaves_tensorflow_unloaded_until_tf_data_loads_it_seeded() -> None:
    """Keras' set_random_seed() imports TensorFlow to seed it, on any backend (1.7-2 s);
    gpu_fit(seed = ) of arrays on JAX needs none, and the same seed still gives the same
    weights. TensorFlow loaded afterwards for a gpu_dataset() gets the seed."""
    requires("tensorflow")
    run = run_on_jax(
        """
import keras
import numpy as np
from gpukeras.core import compat
x = np.random.default_rng(0).random((64, 4), dtype=np.float32)
y = (x[:, 0] > 0.5).astype("int32")
def trained():
    compat.set_random_seed(keras, 11)  # the same starting weights (Keras' own loads TF)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dropout(0.5), keras.layers.Dense(2)])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    answer = bridge.call("fit", {"model": model, "data": (x, y), "epochs": 2,
                                 "batch_size": 16, "seed": 11, "verbose": 0, "monitor": False})
    assert answer["ok"], answer
    return model.get_weights()
first, again = trained(), trained()
readback["same"] = all(np.array_equal(a, b) for a, b in zip(first, again))
readback["tensorflow_after_fits"] = "tensorflow" in sys.modules
from gpukeras.data import pipeline
pipeline.from_arrays(x, y, batch_size=16, seed=1)
import tensorflow as tf
readback["tensorflow_seed"] = tf.compat.v1.get_seed(None)[0]
""",
        tensorflow=True,
    )
    assert run.readback["same"]
    assert run.readback["tensorflow_after_fits"] is False
    assert run.readback["tensorflow_seed"] == 11
