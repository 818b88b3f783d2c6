"""Device-resident training on JAX (gpukeras.train.resident): the same training as Keras'
fit(), on the device, k steps per dispatch, resumable; and the data that streams instead,
with why.

Each run is ``scripts/resident_fit.py`` in a fresh Python on the JAX backend (the CPU here).
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

from conftest import child_pythonpath, requires
from gpukeras.train import backup

pytestmark = pytest.mark.slow  # fits in fresh JAX processes, some killed and resumed

SCRIPT = Path(__file__).with_name("scripts") / "resident_fit.py"
LIMIT = 180  # seconds a run may take


def start(spec: dict) -> subprocess.Popen:
    requires("jax")
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "PYTHONPATH": child_pythonpath(),
    }
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), json.dumps(spec)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=LIMIT)
    assert process.returncode == 0, err[-4000:]
    return json.loads(out.strip().splitlines()[-1])


def run(spec: dict) -> dict:
    return finish(start(spec))


def weights(path: Path) -> list[np.ndarray]:
    with np.load(path) as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


# 1037 rows in batches of 64: 16 whole batches and a last one of 13, as Keras trains it.
TRAIN = {"rows": 1037, "batch_size": 64, "epochs": 3, "seed": 5, "dropout": True}


def test_on_the_device_it_trains_as_keras_fit_on_the_same_batches(tmp_path: Path) -> None:
    ours = start(
        {**TRAIN, "validation": True, "steps_per_execution": 5, "out": str(tmp_path / "a")}
    )
    keras_run = start({**TRAIN, "validation": True, "reference": True, "out": str(tmp_path / "b")})
    mine, theirs = finish(ours), finish(keras_run)
    settings = mine["settings"]
    assert settings["data"] == "device arrays"
    assert settings["data_path"]["resident"] is True
    assert "on the device" in settings["data_path"]["why"]
    assert settings["steps_per_execution"] == 5
    assert settings["steps_per_epoch"] == 17
    # each step traced once per compiled program (whole batches, the last partial one) for
    # all three epochs: the loop's body and its logs' shapes share one trace
    assert mine["traces"] == {"train": 2, "test": 2}
    # each program compiled once: the whole batches' loop for the first dispatch's 5 steps
    # on the training thread, those the first epoch's end needs (the loop of its last
    # whole batch, 16 = 3 x 5 + 1; the partial batch; validation's) each on a thread of its
    # own, beside it
    assert sorted(mine["compiled"]) == [
        "test_last on gpukeras-compile-ahead",
        "test_steps on gpukeras-compile-ahead",
        "train_last on gpukeras-compile-ahead",
        "train_steps on MainThread",
        "train_steps on gpukeras-compile-ahead",
    ]
    for name in ("loss", "accuracy", "val_loss", "val_accuracy"):
        np.testing.assert_allclose(mine["history"][name], theirs["history"][name], rtol=1e-6)
    for got, want in zip(weights(tmp_path / "a.npz"), weights(tmp_path / "b.npz")):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_auto_chooses_the_steps_per_dispatch_unless_the_model_was_compiled_with_its_own(
    tmp_path: Path,
) -> None:
    chosen = start({**TRAIN, "epochs": 1, "out": str(tmp_path / "w")})
    # a model compiled with its own steps per execution (not Keras' default of 1) keeps them
    own = start({**TRAIN, "epochs": 1, "model_steps": 3, "out": str(tmp_path / "own")})
    report, kept = finish(chosen), finish(own)
    settings = report["settings"]
    assert settings["data"] == "device arrays"
    # whole calls of the loop (8 steps), at most an epoch's 17, from a step timed on a copy
    assert settings["steps_per_execution"] in (8, 16, 17)
    assert report["step_timed"]
    assert report["model_steps_per_execution"] == 1  # the model's compiled setting, kept
    assert kept["settings"]["data"] == "device arrays"
    assert kept["settings"]["steps_per_execution"] == 3
    assert kept["model_steps_per_execution"] == 3


def test_auto_does_not_copy_a_state_past_its_share_of_free_memory(tmp_path: Path) -> None:
    """Timing a step takes a copy of the training state, which would raise the fit's peak
    by a whole state: past ``PROBE_SHARE`` of the free memory none is made, and k is one
    call of the loop; the training is the same."""
    spec = {**TRAIN, "epochs": 1}
    large = start({**spec, "probe_share": 1e-12, "out": str(tmp_path / "large")})
    given = start({**spec, "steps_per_execution": 8, "out": str(tmp_path / "given")})
    report, same = finish(large), finish(given)
    assert report["settings"]["data"] == "device arrays"
    assert report["settings"]["steps_per_execution"] == 8
    assert not report["step_timed"]
    for a, b in zip(weights(tmp_path / "large.npz"), weights(tmp_path / "given.npz")):
        np.testing.assert_array_equal(a, b)
    assert same["history"] == report["history"]


def test_auto_runs_a_step_per_dispatch_for_a_callback_that_acts_on_each_batch(
    tmp_path: Path,
) -> None:
    """Keras calls batch hooks at dispatch ends: a user's callback that has one sees every
    batch only at one step per dispatch, so "auto" chooses 1 for it; a k the user gave
    is theirs (Keras' way: the hook every k batches)."""
    spec = {**TRAIN, "epochs": 2, "count_batches": True}
    auto = start({**spec, "out": str(tmp_path / "auto")})
    given = start({**spec, "steps_per_execution": 4, "out": str(tmp_path / "given")})
    chosen, kept = finish(auto), finish(given)
    assert chosen["settings"]["data"] == "device arrays"
    assert chosen["settings"]["steps_per_execution"] == 1
    assert chosen["batch_calls"] == 2 * 17
    assert kept["settings"]["steps_per_execution"] == 4
    assert kept["batch_calls"] == 2 * 5  # 16 whole batches in 4 dispatches, the 17th alone


def test_data_beyond_the_devices_memory_share_streams_and_the_report_says_why(
    tmp_path: Path,
) -> None:
    report = run({**TRAIN, "epochs": 1, "memory_share": 1e-9, "out": str(tmp_path / "w")})
    settings = report["settings"]
    assert settings["data"] == "keras arrays"
    assert settings["data_path"]["resident"] is False
    assert "free memory" in settings["data_path"]["why"]
    assert "streams from host memory" in settings["data_path"]["why"]


def test_a_killed_run_resumes_mid_epoch_to_the_weights_of_an_unbroken_one(tmp_path: Path) -> None:
    """SIGKILL mid-epoch, then the same call again: the weights equal an uninterrupted run's."""
    common = {**TRAIN, "epochs": 4, "steps_per_execution": 3, "backup_freq": 3}
    reference = start({**common, "out": str(tmp_path / "unbroken")})
    backups = tmp_path / "backup"
    killed = start(
        {**common, "backup_dir": str(backups), "pause": 0.05, "out": str(tmp_path / "k")}
    )
    deadline = time.monotonic() + LIMIT
    state = None
    try:
        while time.monotonic() < deadline and killed.poll() is None:
            if (backups / backup.STATE_FILE).exists():
                state = backup.read_state(str(backups))
                if state is not None and state.epoch >= 1 and state.batches_done > 0:
                    break
            time.sleep(0.02)
        assert killed.poll() is None, killed.communicate()[1][-3000:]
        assert state is not None and state.batches_done > 0, "no mid-epoch backup in time"
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=30)
    kept = backup.read_state(str(backups))
    assert kept.batches_done % 3 == 0  # taken at a dispatch's end: its position is exact
    resumed = run({**common, "backup_dir": str(backups), "out": str(tmp_path / "resumed")})
    assert resumed["settings"]["resumed_from"]["epoch"] == kept.epoch + 1
    assert resumed["settings"]["resumed_from"]["batches_done"] == kept.batches_done
    unbroken = finish(reference)
    assert resumed["history"]["loss"][-1] == pytest.approx(unbroken["history"]["loss"][-1], 1e-6)
    for got, want in zip(weights(tmp_path / "resumed.npz"), weights(tmp_path / "unbroken.npz")):
        np.testing.assert_array_equal(got, want)


def test_a_data_parallel_over_two_devices_trains_on_them_as_one_device_does(
    tmp_path: Path,
) -> None:
    # both on the CPU, also where JAX sees a GPU (whose float32 matmuls run in TF32)
    spec = {**TRAIN, "dropout": False, "rows": 1024, "steps_per_execution": 4, "cpu": True}
    two = start({**spec, "cpu_devices": 2, "out": str(tmp_path / "two")})
    one = start({**spec, "out": str(tmp_path / "one")})
    on_two, on_one = finish(two), finish(one)
    assert on_two["settings"]["data"] == "device arrays"
    assert on_two["settings"]["strategy"]["replicas"] == 2
    np.testing.assert_allclose(on_two["history"]["loss"], on_one["history"]["loss"], rtol=1e-5)
    for got, want in zip(weights(tmp_path / "two.npz"), weights(tmp_path / "one.npz")):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_gpu_dataset_of_arrays_trains_on_the_device_as_keras_fit_unshuffled(
    tmp_path: Path,
) -> None:
    requires("tensorflow")
    common = {**TRAIN, "validation": True, "steps_per_execution": 4}
    ours = start({**common, "gpu_dataset": {"shuffle": False}, "out": str(tmp_path / "a")})
    # Keras' fit() on the rows in their own order: the reference's order when unshuffled.
    keras_run = start({**common, "reference": True, "shuffle": False, "out": str(tmp_path / "b")})
    mine, theirs = finish(ours), finish(keras_run)
    assert mine["settings"]["data"] == "device arrays"
    assert mine["settings"]["steps_per_epoch"] == 17
    for name in ("loss", "accuracy", "val_loss", "val_accuracy"):
        np.testing.assert_allclose(mine["history"][name], theirs["history"][name], rtol=1e-6)
    for got, want in zip(weights(tmp_path / "a.npz"), weights(tmp_path / "b.npz")):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_a_gpu_dataset_that_maps_its_rows_streams_and_the_report_says_why(
    tmp_path: Path,
) -> None:
    requires("tensorflow")
    spec = {**TRAIN, "epochs": 1, "gpu_dataset": {"seed": 1, "map": "identity"}}
    report = run({**spec, "out": str(tmp_path / "w")})
    settings = report["settings"]
    assert settings["data"] == "dataset"
    assert settings["data_path"]["resident"] is False
    assert "maps or augments its rows in tf.data" in settings["data_path"]["why"]
