"""gpu_tune(): settings measured on copies of a model, with real training on the CPU."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from conftest import requires, run_on_jax
from gpukeras.core.errors import BadArgumentError
from gpukeras.data import adapters, pipeline
from gpukeras.gpu import precision
from gpukeras.tools import tune
from gpukeras.train import advice, model_copies

pytestmark = pytest.mark.slow  # many short trainings


def data(rows: int = 512, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 8)).astype("float32")
    return scale * x, (x[:, 0] > 0).astype("int32")


def small_model(kernel: float | None = None) -> keras.Model:
    """A small classifier; with ``kernel``, a hidden layer whose outputs pass float16's range."""
    keras.utils.set_random_seed(1)
    init = "glorot_uniform" if kernel is None else keras.initializers.Constant(kernel)
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu", kernel_initializer=init),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def column(result: dict, name: str) -> list:
    return [trial[name] for trial in result["trials"]]


def test_tune_tries_each_axis_and_recommends_the_fastest_sound_one() -> None:
    model = small_model()
    before = [w.copy() for w in model.get_weights()]
    result = tune.tune(
        model,
        data(),
        time_budget=30,
        precisions=["float32", "mixed_bfloat16"],
        batch_sizes=[16, 64],
        steps_per_execution=[1, 8],
        seed=1,
    )
    # Every axis is visited: each of its values trained or, on a machine so busy that
    # copying and compiling spent the budget, left out for time and said so.
    by_time = [row for row in result["skipped"] if row["reason"].startswith("time")]
    assert by_time == result["skipped"]
    for axis in tune.AXES:
        considered = column(result, axis) + [row[axis] for row in by_time]
        assert len(set(considered)) >= 2, axis
    assert column(result, "axis")[0] == "baseline"
    sound = [t for t in result["trials"] if t["sound"] and t["samples_per_second"]]
    fastest = max(sound, key=lambda t: t["samples_per_second"])
    assert result["recommended"] == {axis: fastest[axis] for axis in tune.AXES}
    # Trials that ran their share give the loss over the same first samples.
    assert result["loss_samples"] > 0
    assert any(t["loss"] is not None and np.isfinite(t["loss"]) for t in result["trials"])
    # The user's model: same weights, optimizer untouched, the global policy as it was.
    for kept, now in zip(before, model.get_weights()):
        np.testing.assert_array_equal(kept, now)
    assert int(model.optimizer.iterations) == 0
    assert keras.config.dtype_policy().name == "float32"
    assert model.dtype_policy.name == "float32"


def test_on_jax_the_rows_train_on_the_device_and_spe_is_the_steps_per_dispatch() -> None:
    run = run_on_jax("import jax_tune")
    answer = run.readback["answer"]
    assert answer["ok"], answer
    trials = answer["value"]["trials"]
    on_device = [t for t in trials if t["jit_compile"]]
    assert on_device and all(t["data"] == "device" for t in on_device)
    # Without XLA the steps cannot be compiled together: those rows stream, as in gpu_fit().
    assert all(t["data"] == "host" for t in trials if not t["jit_compile"])
    assert {t["steps_per_execution"] for t in on_device} == {1, 8}
    assert all(t["samples_per_second"] and t["samples_per_second"] > 0 for t in on_device)
    assert run.readback["model_steps_per_execution"] == 1  # the user's model is untouched


def test_a_float16_overflow_is_marked_unsound_and_never_recommended() -> None:
    # Inputs of ~100 through a kernel of 1000s: hidden outputs past 65504, inf in float16.
    # Each precision in a call of its own, as its baseline, which always runs: second to
    # float32, a busy machine's time budget once left mixed_float16 out (CI, 2026-11-26).
    model = small_model(kernel=1000.0)
    rows = data(scale=100.0)
    results = {
        precision: tune.tune(
            model,
            rows,
            time_budget=3,
            precisions=[precision],
            batch_sizes=[32],
            steps_per_execution=[1],
            jit_compile=[False],
        )
        for precision in ("mixed_float16", "float32")
    }
    [half] = results["mixed_float16"]["trials"]
    assert half["precision"] == "mixed_float16"
    assert not half["sound"] and not half["finite"]
    assert half["note"].startswith("unsound")
    assert results["mixed_float16"]["recommended"] is None
    [full] = results["float32"]["trials"]
    assert full["sound"] and full["finite"]
    assert results["float32"]["recommended"]["precision"] == "float32"


def test_recommend_skips_an_unsound_trial_even_when_it_is_fastest() -> None:
    def trial(rate: float | None, sound: bool) -> tune.Trial:
        return tune.Trial("float32", 32, 1, False, "baseline", samples_per_second=rate, sound=sound)

    nan_fast, slow, fast = trial(9e9, False), trial(10.0, True), trial(20.0, True)
    assert tune.recommend([nan_fast, slow, fast]) is fast
    assert tune.recommend([nan_fast, trial(None, True)]) is None


def test_loss_over_weights_executions_by_rows() -> None:
    losses = [(32, 1.0), (32, 3.0), (64, 5.0)]
    assert tune.loss_over(losses, 64) == pytest.approx(2.0)
    assert tune.loss_over(losses, 100) == pytest.approx((32 + 96 + 320) / 128)
    assert tune.loss_over(losses, 500) is None


def test_precisions_follow_the_device() -> None:
    assert precision.precisions_for(None) == ["float32", "mixed_bfloat16"]
    assert precision.precisions_for("7.5") == ["float32", "mixed_float16"]
    assert precision.precisions_for("9.0") == ["float32", "mixed_bfloat16", "mixed_float16"]
    assert precision.precisions_for("6.1") == ["float32"]


def test_a_copy_under_another_policy_keeps_the_float32_output_and_the_weights() -> None:
    model = small_model()
    copy = model_copies.clone(keras, model, "gpu_tune()", weights=True, policy="mixed_bfloat16")
    assert [layer.dtype_policy.name for layer in copy.layers] == ["mixed_bfloat16", "float32"]
    assert keras.config.dtype_policy().name == "float32"
    for kept, now in zip(model.get_weights(), copy.get_weights()):
        np.testing.assert_array_equal(kept, now)


def test_steps_per_execution_stays_within_an_epoch() -> None:
    # 92 rows in batches of 4: 23 steps an epoch, so 32 becomes 23 (one execution an epoch).
    assert tune.steps_per_epoch(adapters.given(data(92)), 4) == 23
    assert tune.within_epoch([1, 8, 32], 23) == [1, 8, 23]
    assert tune.within_epoch([32, 64], 23) == [23]
    assert tune.within_epoch([1, 8, 32], None) == [1, 8, 32]
    result = tune.tune(
        small_model(),
        data(92),
        time_budget=15,
        precisions=["float32"],
        batch_sizes=[4],
        jit_compile=[False],
        seed=1,
    )
    # tried, or (on a busy machine: CI once ran 23 out of the budget) left out by the time
    # budget: never beyond the epoch
    others = [row["steps_per_execution"] for row in result["skipped"]]
    assert all(row["reason"].startswith("time") for row in result["skipped"])
    assert sorted(column(result, "steps_per_execution") + others) == [1, 8, 23]
    assert result["recommended"]["steps_per_execution"] <= 23


def test_a_datasets_own_batches_bound_steps_per_execution() -> None:
    requires("tensorflow")  # a gpu_dataset() is tf.data
    dataset = pipeline.from_arrays(*data(40), batch_size=8, seed=1)["dataset"]
    assert tune.steps_per_epoch(adapters.given(dataset), 8) == 5


# Memory (issue #26, item 4) -----------------------------------------------------------------
def gpu_with(monkeypatch: pytest.MonkeyPatch, free_mib: float) -> None:
    """The free memory gpu_memory_plan() reads, as a GPU with ``free_mib`` free would give it
    (this machine has no GPU; the plan and the training are real)."""
    monkeypatch.setattr(
        tune.memory_plan,
        "free_memory",
        lambda keras, model, device: {"device": "GPU:0", "free_mib": free_mib},
    )


def test_a_combination_the_plan_cannot_fit_is_skipped_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = small_model()
    plan, _ = tune.memory_plan.plan_of(keras, model)
    gpu_with(monkeypatch, plan.peak_mib(64))
    result = tune.tune(
        model,
        data(2048),  # 8 steps per epoch up to batch_size 292: 256 is left to the plan
        time_budget=8,
        precisions=["float32"],
        batch_sizes=[16, 32, 256],
        steps_per_execution=[1],
        jit_compile=[False],
        seed=1,
    )
    # 256 skipped for memory; 16 and 32 tried (or, on a busy machine, left out by the
    # time budget: never for memory)
    by_memory = [row for row in result["skipped"] if row["reason"].startswith("memory")]
    assert [row["batch_size"] for row in by_memory] == [256]
    assert by_memory[0]["reason"].startswith("memory: needs")
    assert "gpu_memory_plan()" in by_memory[0]["reason"]
    others = [row["batch_size"] for row in result["skipped"] if row not in by_memory]
    assert sorted(column(result, "batch_size") + others) == [16, 32]


def test_mixed_precision_halves_the_activations_the_plan_counts() -> None:
    model = small_model()
    plan, _ = tune.memory_plan.plan_of(keras, model)
    memory = tune.Memory(plan, plan.peak_mib(256, half_activations=True) + 1e-9)
    float32 = tune.Combination("float32", 256, 1, False)
    assert memory.too_big(float32) is not None
    assert memory.too_big(tune.Combination("mixed_bfloat16", 256, 1, False)) is None
    assert tune.Memory(plan, None).too_big(float32) is None  # free memory not known: run it


def test_the_plan_bounds_the_batch_sizes_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    model = small_model()
    plan, _ = tune.memory_plan.plan_of(keras, model)
    gpu_with(monkeypatch, plan.peak_mib(100))
    result = tune.tune(
        model, data(), time_budget=8, precisions=["float32"], steps_per_execution=[1], seed=1
    )
    # what was tried and what the time budget left out alike (on a busy machine the budget
    # can be spent before a trial runs): none above the plan's bound
    considered = column(result, "batch_size") + [row["batch_size"] for row in result["skipped"]]
    assert considered and max(considered) <= 64
    assert "by gpu_memory_plan()" in result["batch_sizes_from"]


# Steps per epoch (issue #32, item 8) -------------------------------------------------------
def test_given_sizes_that_make_fewer_than_8_steps_per_epoch_are_left_out() -> None:
    # 100 rows: 8 steps per epoch up to batch_size 14
    result = tune.tune(
        small_model(),
        data(100),
        time_budget=4,
        precisions=["float32"],
        batch_sizes=[8, 64],
        steps_per_execution=[1],
        jit_compile=[False],
        seed=1,
    )
    considered = column(result, "batch_size") + [row["batch_size"] for row in result["skipped"]]
    assert set(considered) == {8}
    assert result["batch_sizes_from"] == (
        "given (64 left out: 8 or more steps per epoch over 100 rows need batch_size 14 or less)"
    )
    assert set(column(result, "steps_per_epoch")) == {13}
    with pytest.raises(BadArgumentError, match="Give sizes of at most 14"):
        tune.tune(small_model(), data(100), batch_sizes=[32, 64])


def test_searched_sizes_stop_at_the_largest_with_8_steps_per_epoch() -> None:
    result = tune.tune(
        small_model(),
        data(100),
        time_budget=5,
        precisions=["float32"],
        steps_per_execution=[1],
        jit_compile=[False],
        seed=1,
    )
    considered = column(result, "batch_size") + [row["batch_size"] for row in result["skipped"]]
    assert considered and max(considered) <= 14
    assert result["batch_sizes_from"].startswith("gpu_batch_size()'s fastest sizes up to 14 (")
    if result["recommended"] is not None:
        assert -(-100 // result["recommended"]["batch_size"]) >= 8


# A fit with gpu_fit(settings = tune): advice that does not undo the tune ----------------------
def test_advice_leaves_alone_what_the_tune_chose_and_a_note_says_so() -> None:
    # GPU runs with every item that changes a setting due: input-bound on arrays in memory
    # with a busy host; or keeping up, idle with short steps, half the memory unused, float32
    # on Tensor Cores and XLA off.
    gpu = {"batch_time_mean_ms": 2.0, "gpu_utilization_mean": 40.0, "gpu_memory_used_max_mib": 1e3}
    reports = [
        {
            **gpu,
            "input_verdict": "moderately input-bound",
            "input_wait_share": 0.1,
            "host_cpu_percent_mean": 95.0,
        },
        {**gpu, "input_verdict": "not input-bound", "input_wait_share": 0.01},
    ]
    facts = {
        "backend": "tensorflow",
        "gpus": ["NVIDIA H100"],
        "compute_capability": "9.0",
        "memory_total_mib": 80000.0,
        "data": "arrays",
        "seconds": 60.0,
    }
    chosen = {
        "precision": "float32",
        "batch_size": 16,
        "steps_per_execution": 1,
        "jit_compile": False,
    }
    plain = advice.TrainingContext(**facts)  # type: ignore[arg-type]
    tuned = advice.TrainingContext(**facts, tuned=chosen)  # type: ignore[arg-type]
    untuned = " ".join(item for report in reports for item in advice.advice(report, plain))
    changes = (
        "raise batch_size",
        "raise the batch size",
        "larger batch size",
        "raise steps_per_execution",
        "mixed precision",
        "jit_compile = true",
    )
    for change in changes:
        assert change in untuned.lower(), change
    for report in reports:
        given = advice.advice(report, tuned)
        text = " ".join(given).lower()
        assert not [change for change in changes if change in text], given
        assert advice.tuned_notes(report, tuned) == [
            "No advice to change batch_size = 16, steps_per_execution = 1, jit_compile = FALSE, "
            'precision = "float32": gpu_tune() chose them, the fastest numerically sound '
            "settings it measured. To look further, give gpu_tune() other candidates "
            "(batch_sizes, steps_per_execution, max_batch)."
        ]
        assert advice.tuned_notes(report, plain) == []
    # the findings stay: the wait for input, the idle GPU
    assert any("waits for input" in item for item in advice.advice(reports[0], tuned))
    # a dataset keeps its own batches: the tune did not choose them, so batch advice stays
    dataset = advice.TrainingContext(
        **{**facts, "data": "dataset"},  # type: ignore[arg-type]
        gpu_dataset={"source": "arrays", "cache": False, "user_map": False},
        tuned={**chosen, "batch_size": None},
    )
    assert "raise batch_size" in " ".join(advice.advice(reports[0], dataset)).lower()


def test_batch_sizes_for_a_dataset_are_refused() -> None:
    tf = pytest.importorskip("tensorflow")
    dataset = tf.data.Dataset.from_tensor_slices(data(64)).batch(16)
    with pytest.raises(BadArgumentError, match=r"^`batch_sizes` is for R data: a dataset keeps"):
        tune.tune(small_model(), dataset, batch_sizes=[32])
