"""gpu_batch_size()'s core: the search on its own, then real searches on a small MLP.

On the CPU a size fits when its memory estimate is within the host budget, so
a budget set from the estimate cuts the search at a known size. The real
out-of-memory path needs a GPU (the ``gpu`` test drives a model into it).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import requires, run_on_jax, run_setup
from gpukeras import bridge
from gpukeras.core import messages
from gpukeras.core.runtime import config
from gpukeras.data import adapters, batch_rules, pipeline
from gpukeras.gpu import peak_memory
from gpukeras.tools import batch_size

ROWS = 100  # fewer than most sizes tried: the batch is tiled


def mlp(compile: bool = True, loss: object = "mse") -> object:
    keras = config.keras()
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)]
    )
    if compile:
        model.compile(optimizer="adam", loss=loss, metrics=["mae"])
    return model


def arrays(rows: int = ROWS) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 8), dtype=np.float32)
    return x, (x @ rng.standard_normal((8, 1))).astype(np.float32)


def call(**kwargs: object) -> dict:
    """batch_size.search through the bridge, as R calls it; fails the test on an error."""
    answer = bridge.call("batch_size", {"data": arrays(), **kwargs})
    assert answer["ok"], answer
    return answer["value"]


def error_of(**kwargs: object) -> dict:
    answer = bridge.call("batch_size", {"data": arrays(), **kwargs})
    assert not answer["ok"], answer
    assert answer["traceback"] is None, answer["traceback"]
    return answer


def sizes(result: dict, phase: str | None = None) -> list[int]:
    return [t["batch_size"] for t in result["trials"] if phase in (None, t["phase"])]


# The search on its own ---------------------------------------------------------------
def threshold(limit: int, tried: list[tuple[int, str]]) -> object:
    def fits(size: int, phase: str) -> bool:
        tried.append((size, phase))
        return size <= limit

    return fits


def test_doubling_then_bisection_to_within_the_tolerance() -> None:
    tried: list[tuple[int, str]] = []
    largest, failing = batch_size.search_sizes(threshold(100, tried), 1, 4096, 0.1)
    assert tried == [
        *((2**k, "double") for k in range(8)),  # 1 ... 128, which fails
        (96, "bisect"),
        (112, "bisect"),
        (104, "bisect"),
    ]
    assert (largest, failing) == (96, 104)  # gap 8 <= 10 % of 96


def test_a_tighter_tolerance_bisects_to_the_exact_limit() -> None:
    tried: list[tuple[int, str]] = []
    assert batch_size.search_sizes(threshold(100, tried), 1, 4096, 0.001) == (100, 101)


def test_max_batch_is_tried_even_off_the_doubling_and_ends_the_search() -> None:
    tried: list[tuple[int, str]] = []
    assert batch_size.search_sizes(threshold(10**6, tried), 3, 100, 0.1) == (100, None)
    assert [size for size, _ in tried] == [3, 6, 12, 24, 48, 96, 100]


def test_min_batch_failing_ends_the_search_at_once() -> None:
    tried: list[tuple[int, str]] = []
    assert batch_size.search_sizes(threshold(0, tried), 8, 64, 0.1) == (None, 8)
    assert tried == [(8, "double")]


@pytest.mark.parametrize(
    ("fits", "fails", "expected"),
    [(64, 128, 96), (96, 128, 112), (96, 104, 100), (8, 16, 12), (1, 2, 1), (2, 4, 3)],
)
def test_midpoint_prefers_multiples_of_8(fits: int, fails: int, expected: int) -> None:
    assert batch_size.midpoint(fits, fails) == expected


# Real searches on the CPU (or the GPU where there is one) -----------------------------
def test_sizes_double_to_max_batch_and_the_fastest_is_recommended() -> None:
    result = call(model=mlp(), data=arrays(4096), min_batch=8, max_batch=256, steps=3)
    assert sizes(result) == [8, 16, 32, 64, 128, 256]
    trials = result["trials"]
    assert all(t["fits"] and t["reason"] is None for t in trials)
    assert all(t["samples_per_second"] > 0 and t["step_ms"] > 0 for t in trials)
    fastest = max(trials, key=lambda t: t["samples_per_second"])
    # 4,096 rows make 8 steps per epoch up to batch_size 584: every size may be recommended
    assert result["recommended"] == result["fastest"] == fastest["batch_size"]
    assert (result["largest"], result["smallest_failing"]) == (256, None)
    # The estimate grows by the same amount per sample, from the fixed part.
    estimate = result["estimate"]
    for t in trials:
        want = estimate["fixed_mib"] + t["batch_size"] * estimate["per_sample_mib"]
        assert t["estimated_mib"] == pytest.approx(want)
    params = sum(int(np.prod(w.shape)) for w in mlp().weights)
    assert estimate["weights_mib"] == pytest.approx(params * 4 / 2**20)
    assert estimate["optimizer_mib"] >= 2 * estimate["weights_mib"]  # Adam's two moments
    assert estimate["uncounted_layers"] == []
    assert result["settings"]["steps"] == 3
    assert result["backend"] == config.keras().backend.backend()
    json.dumps(result)  # plain data


def test_a_budget_cuts_the_search_and_the_bisection_closes_in_below_it() -> None:
    model = mlp()
    estimate = call(model=model, min_batch=8, max_batch=8, steps=1)["estimate"]
    cut = 100  # the estimate of 100 rows is the budget: 100 fits, 101 does not
    budget = estimate["fixed_mib"] + (cut + 0.5) * estimate["per_sample_mib"]
    result = call(model=model, min_batch=8, max_batch=1024, steps=2, memory_budget_mib=budget)
    assert sizes(result, "double") == [8, 16, 32, 64, 128]
    between = sizes(result, "bisect")
    assert between and all(64 < size < 128 for size in between)
    largest, failing = result["largest"], result["smallest_failing"]
    assert largest <= cut < failing
    assert failing - largest <= 0.1 * largest
    for t in result["trials"]:
        assert t["fits"] is (t["batch_size"] <= cut)
        if not t["fits"]:
            assert t["reason"].startswith("over the")
            assert t["samples_per_second"] is None  # not run
            assert t["estimated_mib"] > budget
    assert result["recommended"] <= largest
    assert result["budget"] == {"mib": budget, "source": "memory_budget_mib"}


def test_the_default_cpu_budget_is_half_the_available_memory(no_gpu: None) -> None:
    from gpukeras.gpu import devices

    _, available = devices.host_memory_mib()
    result = call(model=mlp(), min_batch=4, max_batch=4, steps=1)
    assert result["device"] == "CPU:0"
    assert result["budget"]["mib"] == pytest.approx(0.5 * available, rel=0.2)
    assert "50% of the host's available memory" in result["budget"]["source"]


def test_the_users_model_is_not_changed() -> None:
    model = mlp()
    x, y = arrays()
    model.fit(x, y, batch_size=20, epochs=1, verbose=0)  # an optimizer with state
    weights = model.get_weights()
    slots = [np.array(v) for v in model.optimizer.variables]
    iterations = int(model.optimizer.iterations)
    jit = model.jit_compile
    call(model=model, min_batch=16, max_batch=64, steps=2)
    for got, want in zip(model.get_weights(), weights):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(model.optimizer.variables, slots):
        np.testing.assert_array_equal(np.array(got), want)
    assert int(model.optimizer.iterations) == iterations == 5
    assert model.jit_compile == jit


def test_dict_inputs_of_a_functional_model_and_few_rows_are_tiled() -> None:
    keras = config.keras()
    a, b = keras.Input((3,), name="a"), keras.Input((5,), name="b")
    joined = keras.layers.Concatenate()([a, b])
    model = keras.Model({"a": a, "b": b}, keras.layers.Dense(1)(joined))
    model.compile(optimizer="sgd", loss="mse")
    rng = np.random.default_rng(1)
    x = {"a": rng.random((5, 3), dtype=np.float32), "b": rng.random((5, 5), dtype=np.float32)}
    result = call(model=model, data=(x, np.ones((5, 1), np.float32)), min_batch=2, max_batch=32)
    assert sizes(result) == [2, 4, 8, 16, 32]
    assert result["estimate"]["batch_per_sample_mib"] == pytest.approx(9 * 4 / 2**20)


def test_a_tf_dataset_gives_its_first_batch() -> None:
    if not adapters.tensorflow_available():
        pytest.skip("TensorFlow is not installed: no tf.data here")
    from gpukeras.data import sources

    tf = sources.tensorflow()
    dataset = tf.data.Dataset.from_tensor_slices(arrays(40)).batch(16)
    result = call(model=mlp(), data=dataset, min_batch=8, max_batch=64, steps=2)
    assert sizes(result) == [8, 16, 32, 64]
    assert all(t["fits"] for t in result["trials"])


# Errors ---------------------------------------------------------------------------------
def test_even_the_smallest_batch_over_the_budget_is_a_classed_error() -> None:
    answer = error_of(model=mlp(), min_batch=4, memory_budget_mib=1e-6)
    assert answer["r_class"] == "gpukeras_error_out_of_memory"
    assert answer["message"].startswith("Even a batch of 4 does not fit on ")
    assert "over the" in answer["message"]
    assert "memory_budget_mib" in answer["message"]


def test_not_a_model_and_an_uncompiled_model() -> None:
    assert error_of(model="mlp")["r_class"] == "gpukeras_error_bad_model"
    uncompiled = error_of(model=mlp(compile=False))
    assert uncompiled["r_class"] == "gpukeras_error_model_not_compiled"
    assert "compile it first" in uncompiled["message"]


def test_data_the_model_cannot_take() -> None:
    wrong = error_of(model=mlp(), data=(np.zeros((4, 3), np.float32), np.zeros((4, 1))))
    assert wrong["r_class"] == "gpukeras_error_bad_data"
    assert "expected axis -1 of input shape to have value 8" in wrong["message"]
    assert "\x1b[" not in wrong["message"]
    assert error_of(model=mlp(), data="x.csv")["r_class"] == "gpukeras_error_bad_data"
    empty = error_of(model=mlp(), data=(np.zeros((0, 8), np.float32), np.zeros((0, 1))))
    assert empty["r_class"] == "gpukeras_error_bad_data"
    assert "no rows" in empty["message"]


def test_a_model_that_cannot_be_copied() -> None:
    def own_loss(y_true: object, y_pred: object) -> object:
        return config.keras().ops.mean((y_true - y_pred) ** 2)

    answer = error_of(model=mlp(loss=own_loss))
    assert answer["r_class"] == "gpukeras_error_bad_model"
    assert "works on a copy made with clone_model(), which failed" in answer["message"]
    assert "own_loss" in answer["message"]
    assert "register_keras_serializable" in answer["message"]


def test_out_of_memory_errors_are_told_from_others() -> None:
    assert messages.is_out_of_memory(MemoryError())
    assert messages.is_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while"))
    assert not messages.is_out_of_memory(ValueError("incompatible shapes"))


@pytest.mark.parametrize(
    "message",
    [
        "failed to create cublas handle: CUBLAS_STATUS_ALLOC_FAILED",
        "Could not create cudnn handle: CUDNN_STATUS_ALLOC_FAILED",
        "Failed to get convolution algorithm. This is probably because cuDNN failed to "
        "initialize, so try looking to see if a warning log message was printed above.",
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.",
        "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    ],
)
def test_allocation_failures_not_worded_as_out_of_memory_count_as_not_fitting(
    message: str,
) -> None:
    assert messages.is_out_of_memory(RuntimeError(message))
    if config.backend == "tensorflow":  # as TensorFlow raises them
        tf = config.backend_module()
        assert messages.is_out_of_memory(tf.errors.InternalError(None, None, message))


@pytest.mark.parametrize(
    "message",
    ["INTERNAL: Failed to launch CUDA kernel", "CUDNN_STATUS_NOT_SUPPORTED", "bad shape"],
)
def test_other_library_errors_are_not_taken_for_out_of_memory(message: str) -> None:
    assert not messages.is_out_of_memory(RuntimeError(message))


ALLOC_FAILED = "failed to create cublas handle: CUBLAS_STATUS_ALLOC_FAILED"


def cublas_limited_mlp(limit: int) -> object:
    """An MLP whose middle layer fails as cuBLAS does when it cannot get its workspace,
    for batches over ``limit`` rows (at run time on TensorFlow, when traced on JAX)."""
    keras = config.keras()

    class CublasWorkspace(keras.layers.Layer):
        def __init__(self, limit: int, **kwargs: object) -> None:
            super().__init__(**kwargs)
            self.limit = limit

        def get_config(self) -> dict:
            return {**super().get_config(), "limit": self.limit}

        def call(self, x: object) -> object:
            if config.backend == "tensorflow":
                tf = config.backend_module()
                check = tf.debugging.Assert(tf.shape(x)[0] <= self.limit, [ALLOC_FAILED])
                with tf.control_dependencies([check]):
                    return tf.identity(x)
            # a symbolic batch (Keras inferring shapes; JAX >= 0.11 refuses to compare it) passes
            rows = x.shape[0]
            if isinstance(rows, int) and rows > self.limit:
                raise RuntimeError(ALLOC_FAILED)
            return x

        def compute_output_shape(self, shape: tuple) -> tuple:
            return shape

    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16), CublasWorkspace(limit), keras.layers.Dense(1)]
    )
    model.compile(optimizer="adam", loss="mse")
    return model


def test_a_cublas_allocation_failure_ends_the_doubling_and_bisection_finds_the_limit() -> None:
    result = call(model=cublas_limited_mlp(20), min_batch=4, max_batch=256, steps=1, tolerance=0.01)
    assert sizes(result, "double") == [4, 8, 16, 32]
    assert (result["largest"], result["smallest_failing"]) == (20, 21)
    failed = [t for t in result["trials"] if not t["fits"]]
    assert failed and all(t["batch_size"] > 20 for t in failed)
    assert all(t["reason"].startswith("out of memory") for t in failed)
    assert all("CUBLAS_STATUS_ALLOC_FAILED" in t["reason"] for t in failed)


def test_an_allocation_failure_at_the_smallest_batch_carries_the_memory_plan() -> None:
    """gpu_batch_size() (and gpu_tune(), which searches with it): the error R gets says what
    took the memory at the smallest batch and what would lower the peak."""
    answer = error_of(model=cublas_limited_mlp(2), min_batch=4, max_batch=64, steps=1)
    assert answer["r_class"] == "gpukeras_error_out_of_memory"
    assert "CUBLAS_STATUS_ALLOC_FAILED" in answer["message"]
    assert answer["plan"]["batch_size"] == 4
    assert answer["details"][0].startswith("By the memory plan, a step of batch 4 needs about ")
    assert [row["change"] for row in answer["plan"]["changes"]][2] == "accumulation"
    # over a budget is no allocation failure: no plan
    assert "plan" not in error_of(model=mlp(), min_batch=4, memory_budget_mib=1e-6)


def test_the_peak_meter_reads_nothing_on_the_cpu() -> None:
    assert peak_memory.meter(config.backend, "CPU:0")()() is None
    assert peak_memory.meter(config.backend, None)()() is None


def test_the_jax_meter_reads_the_device_named_not_the_first() -> None:
    run = run_setup("jax", {"cpu_devices": 3}, "import jax_meter_devices")
    assert run.readback["named"] == run.readback["listed"]
    assert len(set(run.readback["named"])) == 3


def test_tensorflows_resource_exhausted_is_out_of_memory() -> None:
    if config.backend != "tensorflow":
        pytest.skip(f"this process runs the {config.backend} backend")
    tf = config.backend_module()
    error = tf.errors.ResourceExhaustedError(None, None, "failed to allocate a tensor")
    assert messages.is_out_of_memory(error)


# Other backends, and GPUs ------------------------------------------------------------


def test_jax_backend_without_tensorflow_in_a_fresh_process() -> None:
    """The GPU machines' setting: Keras on JAX, no TensorFlow."""
    run = run_on_jax("import jax_batch_search")
    answer = run.readback["answer"]
    assert answer["ok"], answer
    value = answer["value"]
    assert value["backend"] == "jax"
    assert [t["batch_size"] for t in value["trials"] if t["phase"] == "double"] == [8, 16, 32, 64]
    assert value["largest"] <= 40 < value["smallest_failing"]
    assert any(t["phase"] == "bisect" for t in value["trials"])
    assert value["settings"]["jit_compile"] is True
    assert run.readback["iterations"] == 0
    assert "tensorflow" not in run.loaded


@pytest.mark.gpu
def test_on_a_gpu_a_real_out_of_memory_is_caught_and_bisected() -> None:
    """A model whose activations (a 4096-wide Dense over 512 positions: 8 MiB a sample,
    and its gradients) fill any GPU's memory within a few thousand samples."""
    keras = config.keras()
    model = keras.Sequential(
        [
            keras.Input((512, 64)),
            keras.layers.Dense(4096, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="adam", loss="mse")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512, 64), dtype=np.float32)
    y = np.zeros((256, 512, 1), np.float32)
    weights = model.get_weights()
    answer = bridge.call(
        "batch_size",
        {"model": model, "data": (x, y), "min_batch": 64, "max_batch": 2**17, "steps": 2},
    )
    assert answer["ok"], answer
    value = answer["value"]
    assert value["device"] == "GPU:0"
    failed = [t for t in value["trials"] if not t["fits"]]
    assert failed and all(t["reason"].startswith("out of memory") for t in failed)
    assert value["smallest_failing"] is not None
    assert value["largest"] < value["smallest_failing"] <= 2**17
    assert any(t["phase"] == "bisect" for t in value["trials"])
    assert any(t["peak_mib"] for t in value["trials"] if t["fits"])
    fitting = {t["batch_size"] for t in value["trials"] if t["fits"]}
    assert value["recommended"] in fitting and value["largest"] in fitting
    for got, want in zip(model.get_weights(), weights):
        np.testing.assert_array_equal(got, want)
    # The GPU is usable afterwards: the user's model trains at the largest size.
    model.train_on_batch(x[:64], y[:64])


@pytest.mark.gpu
def test_on_a_gpu_the_peak_meter_reads_the_device_the_model_trains_on() -> None:
    """In a fresh process (JAX keeps each device's peak since its start): 1 GiB made on
    the device the model trains on raises that device's peak by at least as much."""
    run = run_on_jax("import jax_gpu_meter")
    assert run.readback["device"] == "GPU:0"
    assert run.readback["on"] == run.readback["expected"]
    assert run.readback["peak_mib"] >= 1024


# Steps per epoch (issue #32, item 8) --------------------------------------------------------
@pytest.mark.parametrize(
    ("rows", "largest"),
    [(150, 21), (120, 17), (100, 14), (56, 7), (57, 8), (64, 9), (8, 1), (7, 1), (1, 1)],
)
def test_the_largest_batch_that_makes_8_steps_per_epoch(rows: int, largest: int) -> None:
    assert batch_rules.largest_batch_for_steps(rows) == largest


def test_the_rule_is_exact_for_every_row_count() -> None:
    for rows in range(8, 2000):
        largest = batch_rules.largest_batch_for_steps(rows)
        assert batch_rules.steps_per_epoch(rows, largest) >= batch_rules.MIN_STEPS_PER_EPOCH, rows
        assert batch_rules.steps_per_epoch(rows, largest + 1) < batch_rules.MIN_STEPS_PER_EPOCH, (
            rows
        )


def test_steps_rule_allows_sizes_up_to_the_largest_or_else_the_smallest() -> None:
    rule = batch_size.steps_rule(150, [8, 16, 32, 64])
    assert rule == {"min_steps": 8, "rows": 150, "largest_batch": 21, "allowed": [8, 16]}
    # fewer rows than any size allows: the size with the most steps
    assert batch_size.steps_rule(100, [16, 32])["allowed"] == [16]
    # rows not known: the rule cannot apply
    unknown = batch_size.steps_rule(None, [16, 32])
    assert unknown["allowed"] == [16, 32] and unknown["largest_batch"] is None


def test_the_recommended_size_makes_at_least_8_steps_per_epoch() -> None:
    # 100 rows: 8 steps per epoch up to batch_size 14, so of 8..256 only 8 may be recommended,
    # however fast the larger sizes run
    result = call(model=mlp(), min_batch=8, max_batch=256, steps=1)
    trials = result["trials"]
    assert [t["steps_per_epoch"] for t in trials] == [-(-ROWS // t["batch_size"]) for t in trials]
    assert result["steps_rule"] == {"min_steps": 8, "rows": ROWS, "largest_batch": 14}
    assert result["recommended"] == 8
    assert result["fastest"] == max(trials, key=lambda t: t["samples_per_second"])["batch_size"]
    assert result["largest"] == 256  # what fits is still said


def test_a_gpu_datasets_training_rows_count_and_other_datasets_rows_are_not_known() -> None:
    requires("tensorflow")  # gpu_dataset() builds tf.data
    x, y = arrays(200)
    split = pipeline.from_arrays(x, y, batch_size=10, validation_split=0.2, seed=1)
    assert pipeline.rows_in(split["dataset"]) == 160
    assert pipeline.rows_in(split["validation"]) == 40
    result = batch_size.search(mlp(), split["dataset"], min_batch=8, max_batch=32, steps=1)
    assert result["steps_rule"]["rows"] == 160
    assert [t.steps_per_epoch for t in result["trials"]] == [20, 10, 5]
    assert result["recommended"] in (8, 16)
    import tensorflow as tf

    other = tf.data.Dataset.from_tensor_slices((x, y)).batch(10)
    assert pipeline.rows_in(other) is None
    result = batch_size.search(mlp(), other, min_batch=8, max_batch=32, steps=1)
    assert result["steps_rule"]["rows"] is None
    assert all(t.steps_per_epoch is None for t in result["trials"])
    assert result["recommended"] == result["fastest"]


@pytest.mark.parametrize("drop_remainder", [False, True])
def test_a_gpu_dataset_batch_larger_than_its_training_rows_is_the_rows(
    drop_remainder: bool,
) -> None:
    requires("tensorflow")  # a gpu_dataset() is tf.data
    x, y = arrays(150)
    made = pipeline.from_arrays(
        x, y, batch_size=256, validation_split=0.2, seed=1, drop_remainder=drop_remainder
    )
    [warning] = made["warnings"]
    assert warning["class"] == "batch_size"
    assert warning["message"][0] == (
        "`batch_size` (256) is larger than the 120 training rows (150 less 30 for "
        "validation): each epoch is one batch of all 120 rows (batch_size = 120)."
    )
    assert "batch_size = 17 or less gives 8 or more steps per epoch" in warning["message"][1]
    # one batch of all training rows, even with drop_remainder (else an epoch of none)
    batches = list(made["dataset"])
    assert [len(batch[0]) for batch in batches] == [120]
    assert made["info"]["batches"] == 1
    # a batch within the rows: nothing to say
    assert (
        pipeline.from_arrays(x, y, batch_size=120, validation_split=0.2, seed=1)["warnings"] == []
    )


@pytest.mark.parametrize(("accumulate", "batch"), [(1, 40), (4, 40), (3, 42)])
def test_a_fit_batch_larger_than_the_rows_is_the_rows_said_once(
    accumulate: int, batch: int
) -> None:
    """The fit verb, through the bridge as R calls it: a batch above the rows of arrays is
    one batch of all rows, a multiple of accumulate, and the result's warning says so."""
    x, y = arrays(40)
    request = {"batch_size": 120, "accumulate": accumulate, "monitor": False, "verbose": 0}
    answer = bridge.call("fit", {"model": mlp(), "data": (x, y), "request": request})
    assert answer["ok"], answer
    [warning] = [w for w in answer["value"]["warnings"] if w["class"] == "batch_size"]
    multiple = f", a multiple of accumulate = {accumulate}" if accumulate > 1 else ""
    assert warning["message"][0] == (
        "`batch_size` (120) is larger than the 40 training rows: each epoch is one batch of "
        f"all 40 rows (batch_size = {batch}{multiple})."
    )
    settings = answer["value"]["settings"]
    assert (settings["batch_size"], settings["steps_per_epoch"]) == (batch, accumulate)
    # within the rows: nothing to say
    request["batch_size"] = 40 if accumulate == 1 else 36
    answer = bridge.call("fit", {"model": mlp(), "data": (x, y), "request": request})
    assert not [w for w in answer["value"]["warnings"] if w["class"] == "batch_size"]


def test_a_batch_size_is_for_arrays_alone_the_one_rule_the_verbs_share():
    batch_rules.check_batch_size_for(None, object())
    batch_rules.check_batch_size_for(8, (np.zeros((4, 2)), np.zeros(4)))
    answer = bridge.answer(batch_rules.check_batch_size_for, {"batch_size": 8, "data": object()})
    assert answer["ok"] is False
    assert answer["r_classes"] == ["gpukeras_error_bad_argument"]
    assert answer["fields"] == {"argument": "batch_size"}
    assert answer["message"] == "`batch_size` is for R data: a dataset makes its own batches."
