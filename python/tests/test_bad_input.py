"""Bad inputs the core must answer with a classed error and no traceback (issue #7).

The R sweep (tests/testthat/test-bad-input-*.R) throws bad inputs at every
exported function; these are the cases it found the core answering with a
raw Python error, checked here on the configured backend and, for training
and quantizing, on JAX without TensorFlow (as on the GPU machines).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import requires, run_on_jax
from gpukeras import bridge
from gpukeras.core.runtime import config

ROWS = 32


def model(compile: bool = True) -> object:
    keras = config.keras()
    built = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(1)])
    if compile:
        built.compile(optimizer="adam", loss="mse")
    return built


def arrays(width: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((ROWS, width), dtype=np.float32), np.zeros(ROWS, np.float32)


def error_of(target: str, **kwargs: object) -> dict:
    """The bridge's answer to a call that must fail with a user's error: ``target`` a verb,
    or a core function as "module:function"."""
    if ":" in target:
        answer = bridge.answer(bridge.function_at(target), kwargs)
    else:
        answer = bridge.call(target, kwargs)
    assert answer["ok"] is False, answer
    assert answer["traceback"] is None, answer["traceback"]
    return answer


def test_fit_on_data_of_the_wrong_width_is_bad_data_and_leaves_the_model_as_it_was() -> None:
    """Keras refuses such data when it traces the train step, or (traced already, on
    TensorFlow) the model's matmul fails on it: both say the data does not fit the model.
    The weights stay as they were (on JAX, Keras had dropped them), so a fit on the right
    data works next."""
    fresh = model()
    for _ in range(2):
        weights = fresh.get_weights()
        answer = error_of("fit", model=fresh, data=list(arrays(3)), verbose=0)
        assert answer["r_class"] == "gpukeras_error_bad_data"
        assert answer["message"].startswith("The model cannot train on this data: ")
        assert "Give x and y that match the model's inputs and outputs" in answer["message"]
        assert "\x1b[" not in answer["message"]  # Keras' bold, removed
        for before, after in zip(weights, fresh.get_weights()):
            np.testing.assert_array_equal(before, after)
        trained = bridge.call("fit", {"model": fresh, "data": list(arrays()), "verbose": 0})
        assert trained["ok"], trained


def test_fit_with_validation_data_of_the_wrong_width_is_bad_data() -> None:
    answer = error_of(
        "fit", model=model(), data=list(arrays()), validation_data=list(arrays(2)), verbose=0
    )
    assert answer["r_class"] == "gpukeras_error_bad_data"
    assert "expected axis -1 of input shape to have value 4" in answer["message"]


def test_fit_on_a_model_instead_of_data_is_bad_data() -> None:
    answer = error_of("fit", model=model(), data=model(), verbose=0)
    assert answer["r_class"] == "gpukeras_error_bad_data"
    assert "Unrecognized data type" in answer["message"]


def test_quantize_with_data_of_the_wrong_width_is_bad_data() -> None:
    answer = error_of("quantize", model=model(), data=list(arrays(3)))
    assert answer["r_class"] == "gpukeras_error_bad_data"
    assert answer["message"].startswith("The model cannot run on this data: ")


def test_strategy_scope_of_what_is_no_strategy_is_a_bad_argument() -> None:
    for not_a_strategy in (np.zeros(2), model()):
        answer = error_of("strategy_scope", strategy=not_a_strategy)
        assert answer["r_class"] == "gpukeras_error_bad_argument"
        assert answer["message"].startswith("strategy must come from gpu_strategy()")


def test_pipeline_benchmark_of_what_is_no_dataset_is_a_bad_argument() -> None:
    requires("tensorflow")
    answer = error_of("dataset_benchmark", dataset=np.zeros((2, 2)), steps=2)
    assert answer["r_class"] == "gpukeras_error_bad_argument"
    assert answer["message"] == (
        "dataset must be a gpu_dataset() or a tf.data.Dataset, not a ndarray."
    )


def test_pipeline_to_a_device_that_does_not_exist_is_an_unknown_device() -> None:
    requires("tensorflow")
    x, y = arrays()
    answer = error_of("dataset_from_arrays", x=x, y=y, to_device="GPU:99")
    assert answer["r_class"] == "gpukeras_error_unknown_device"
    assert answer["message"].startswith("No such device: 'GPU:99'. Devices here: ")


def test_on_jax_without_tensorflow_data_of_the_wrong_width_is_bad_data() -> None:
    run = run_on_jax("import jax_refused")
    for name, start in (("fit", "train on"), ("quantize", "run on")):
        answer = run.readback[name]
        assert answer["ok"] is False, answer
        assert answer["r_class"] == "gpukeras_error_bad_data", answer
        assert answer["message"].startswith(f"The model cannot {start} this data: ")
        assert answer["traceback"] is None
    assert "tensorflow" not in run.loaded


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("SLURM_PROCID", "abc", r"^SLURM_PROCID is 'abc'; it must be a whole number >= 0"),
        ("SLURM_NTASKS", "4.0", r"^SLURM_NTASKS is '4.0'; it must be a whole number from 1"),
        ("GPUKERAS_PORT_BASE", "http", r"^GPUKERAS_PORT_BASE is 'http'; it must be a whole"),
        ("SLURM_JOB_NODELIST", "n[1-999999999]", r"^SLURM_JOB_NODELIST is .* more than 4096"),
    ],
)
def test_multi_worker_strategy_in_a_bad_slurm_environment_names_the_variable(
    variable: str, value: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpu_strategy("multi_worker") with no workers reads the scheduler's environment: a bad
    value there is a bad argument naming the variable, before the runtime is touched."""
    slurm = {
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "2",
        "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_TASKS_PER_NODE": "1(x2)",
    }
    for name in (
        "TF_CONFIG",
        "SLURM_STEP_NUM_TASKS",
        "SLURM_STEP_NODELIST",
        "SLURM_STEP_TASKS_PER_NODE",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, setting in {**slurm, variable: value}.items():
        monkeypatch.setenv(name, setting)
    answer = error_of("strategy", type="multi_worker")
    assert answer["r_class"] == "gpukeras_error_bad_argument", answer
    assert re.search(message, answer["message"]), answer["message"]
