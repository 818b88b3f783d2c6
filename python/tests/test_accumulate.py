"""gpu_fit(accumulate = ): micro-batches whose gradients make one update, on both engines.

Each backend runs ``scripts/accumulated_fit.py`` in a fresh process: batch 512 against
micro-batches of 128 x 4 in the same order, with SGD and Adam, twice (the second time on
optimizers already built), and resumes a run stopped in the middle of an update.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import in_process_backend, requires, run_core
from gpukeras import bridge
from gpukeras.core.runtime import config

# float32 sums in another order: the measured differences are about 3e-7
TOLERANCE = 1e-5


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_accumulating_four_micro_batches_gives_the_large_batch_weights(backend: str) -> None:
    requires(backend)
    run = run_core(
        "core.backend:configured_backend",
        env={"KERAS_BACKEND": backend},
        after="import accumulated_fit",
        timeout=240,
    )
    found = run.readback
    for name in ("sgd", "adam"):
        assert found[name] < TOLERANCE, (name, found[name])
        assert found[f"{name}_again"] < TOLERANCE, (name, found[f"{name}_again"])
        settings = found[f"{name}_settings"]
        assert settings["batch_size"] == 512 and settings["micro_batch_size"] == 128
        assert settings["accumulate"] == 4 and settings["steps_per_epoch"] == 16
        # the optimizer is the user's again: its setting, its variables, updates counted
        for plain, accumulated in (found[f"{name}_optimizers"], found[f"{name}_optimizers_again"]):
            assert accumulated == plain
            assert accumulated["gradient_accumulation_steps"] is None
    if backend == "jax":
        assert found["sgd_settings"]["data"] == "device arrays"  # Keras' step in lax loops
    # BatchNormalization normalizes each micro-batch by its own statistics
    assert found["batch_normalization"] > 1e-3
    assert found["warnings_2000"] == []
    assert found["warnings_1800"] == ["accumulation"]
    # a backup's positions count micro-batches: resumed mid-update, exactly
    assert found["stopped"] == "gpukeras_error_callback"
    assert found["resumed_from"] == {"epoch": 2, "batches_done": 6}
    assert found["resumed"] == 0.0


def test_a_jax_strategy_accumulates_over_its_replicas() -> None:
    requires("jax")
    run = run_core(
        "core.backend:configured_backend",
        # two logical CPU devices, also where JAX sees a GPU
        env={
            "KERAS_BACKEND": "jax",
            "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
            "JAX_PLATFORMS": "cpu",
        },
        after="import accumulated_replicas",
        timeout=240,
    )
    assert run.readback["replicas"] == 2
    assert max(run.readback["difference"]) < TOLERANCE


def test_a_tensorflow_strategy_refuses_accumulation_before_training() -> None:
    """Keras' accumulation holds the replicas' all-reduce in a cond, which tf.distribute
    refuses (measured: "merge_call called while defining a new graph")."""
    in_process_backend("tensorflow")
    import tensorflow as tf

    keras = config.keras()
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.zeros((8, 2), dtype="float32")
    answer = bridge.call(
        "fit",
        {
            "model": model,
            "data": (x, x[:, :1]),
            "strategy": tf.distribute.OneDeviceStrategy("/cpu:0"),
            "request": {"batch_size": 8, "accumulate": 2, "verbose": 0},
        },
    )
    assert not answer["ok"] and answer["r_class"] == "gpukeras_error_bad_argument"
    assert "train on JAX" in answer["message"]
    assert model.optimizer.gradient_accumulation_steps is None
