"""preempt: a signal stops training at a step boundary, after a backup of that step, in real
processes; the same call then resumes mid-epoch and ends with the weights of an unbroken run.

Each run is ``scripts/preemptible_fit.py`` in a fresh Python, paused a little
after every batch so the test can signal it in the middle of an epoch; every
wait on a child is bounded. Several workers: test_jax_multiworker.py and
test_multiworker.py have the clusters; here, one of each stopped by SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import child_pythonpath, requires
from gpukeras import bridge
from gpukeras.core.runtime import config
from gpukeras.train import backup
from private_network import private_network
from test_multiworker import free_ports

SCRIPT = Path(__file__).with_name("scripts") / "preemptible_fit.py"
WORKER = Path(__file__).with_name("scripts") / "preemptible_worker.py"
LIMIT = 120  # seconds a child may take


def start(out: Path, **spec: object) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), json.dumps({"out": str(out), **spec})],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(out / f"{spec['name']}-stderr.txt").open("w"),
    )


def finish(process: subprocess.Popen, out: Path, name: str) -> dict:
    try:
        process.wait(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
        pytest.fail(f"{name} did not finish within {LIMIT} s")
    assert process.returncode == 0, (out / f"{name}-stderr.txt").read_text()[-3000:]
    return json.loads((out / f"{name}.json").read_text())


def wait_for(
    out: Path, name: str, epoch: int, batch: int, process: subprocess.Popen, named: bool = False
) -> None:
    """Until the child has trained past (epoch, batch), 0-based (its progress file is
    ``<name>-progress.txt``, or ``<name>.txt`` when ``named``)."""
    progress = out / (f"{name}.txt" if named else f"{name}-progress.txt")
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline and process.poll() is None:
        if progress.exists():
            text = progress.read_text().split()
            if len(text) == 2 and (int(text[0]), int(text[1])) >= (epoch, batch):
                return
        time.sleep(0.02)
    stderr = out / f"{name}-stderr.txt"
    said = stderr.read_text()[-3000:] if stderr.exists() else ""
    pytest.fail(f"{name} did not reach epoch {epoch + 1}, batch {batch + 1}:\n{said}")


def weights(out: Path, name: str) -> list[np.ndarray]:
    with np.load(out / f"{name}.npz") as saved:
        return [saved[key] for key in saved.files]


def test_sigterm_mid_epoch_backs_up_that_step_and_the_rerun_ends_as_an_unbroken_run(
    tmp_path: Path,
) -> None:
    backups = tmp_path / "backup"
    unbroken = start(tmp_path, name="unbroken")
    stopped = start(tmp_path, name="stopped", backup_dir=str(backups), pause=0.05)
    wait_for(tmp_path, "stopped", 2, 3, stopped)  # in the middle of epoch 3 (16 batches)
    stopped.send_signal(signal.SIGTERM)
    answer = finish(stopped, tmp_path, "stopped")
    assert answer["r_class"] == "gpukeras_error_preempted", answer
    assert answer["traceback"] is None
    state = backup.read_state(str(backups))
    assert state is not None and state.epoch == 2 and 0 < state.batches_done < 16
    assert answer["message"] == (
        f"Training stopped at SIGTERM in epoch 3, after {state.batches_done} of its batches; "
        f"the backup in {backups} holds this step. Run the same gpu_fit() call again, with the "
        "same backup_dir, to continue from there: it ends with the weights of an unbroken run."
    )
    # Stopped at the next step: at most one more batch than the child had reported.
    reached = int((tmp_path / "stopped-progress.txt").read_text().split()[1]) + 1
    assert state.batches_done == reached

    resumed = finish(start(tmp_path, name="resumed", backup_dir=str(backups)), tmp_path, "resumed")
    assert resumed["ok"], resumed
    assert resumed["settings"]["resumed_from"] == {"epoch": 3, "batches_done": state.batches_done}
    reference = finish(unbroken, tmp_path, "unbroken")
    assert resumed["history"]["epoch"] == [1, 2, 3, 4]
    assert resumed["history"]["loss"] == pytest.approx(reference["history"]["loss"], rel=1e-5)
    for got, want in zip(weights(tmp_path, "resumed"), weights(tmp_path, "unbroken")):
        np.testing.assert_array_equal(got, want)
    assert not backups.exists()


def test_a_warning_signal_named_by_the_user_stops_and_a_c_handler_is_back_afterwards(
    tmp_path: Path,
) -> None:
    """SIGUSR1 (which R handles itself, in C): named in signals it stops training; afterwards
    the handler installed from C before the fit is in place again: it answers the signal."""
    backups = tmp_path / "backup"
    spec = {"backup_dir": str(backups), "signals": ["SIGTERM", "SIGUSR1"], "c_handler": "SIGUSR1"}
    stopped = start(tmp_path, name="warned", pause=0.05, send_after=True, **spec)
    wait_for(tmp_path, "warned", 1, 2, stopped)
    stopped.send_signal(signal.SIGUSR1)
    answer = finish(stopped, tmp_path, "warned")
    assert answer["r_class"] == "gpukeras_error_preempted", answer
    assert answer["message"].startswith("Training stopped at SIGUSR1 in epoch 2, after ")
    # The C handler (faulthandler's) answered the signal raised after the fit.
    assert "Current thread" in (tmp_path / "warned-c-handler.txt").read_text()


def test_without_a_backup_dir_a_signal_stops_and_says_nothing_was_kept(tmp_path: Path) -> None:
    stopped = start(tmp_path, name="nothing", pause=0.05)
    wait_for(tmp_path, "nothing", 0, 4, stopped)
    stopped.send_signal(signal.SIGTERM)
    answer = finish(stopped, tmp_path, "nothing")
    assert answer["r_class"] == "gpukeras_error_preempted", answer
    assert "No backup_dir was given, so no backup holds this step" in answer["message"]


def test_a_signal_not_named_is_left_to_its_own_handler(tmp_path: Path) -> None:
    """signals = NULL: SIGTERM ends the process at once, as it would without gpukeras."""
    stopped = start(tmp_path, name="plain", pause=0.05, signals=None)
    wait_for(tmp_path, "plain", 0, 2, stopped)
    stopped.send_signal(signal.SIGTERM)
    stopped.wait(timeout=LIMIT)
    assert stopped.returncode == -signal.SIGTERM


# Two workers ----------------------------------------------------------------------------------
@contextlib.contextmanager
def cluster(out: Path, backend: str, **spec: object) -> Iterator[list[subprocess.Popen]]:
    """Two workers of ``backend`` on 127.0.0.1 (TensorFlow's in a private network, as
    gpu_launch() runs them), started; all killed past LIMIT, and when the block ends."""
    requires(backend)
    requires("tensorflow")  # the seeded tf.data pipeline several processes read
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "KERAS_BACKEND": backend}
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    network = private_network() if backend == "tensorflow" else contextlib.nullcontext([])
    with network as prefix:
        common = {"backend": backend, "workers": workers, "out": str(out), "epochs": 3, **spec}
        processes = [
            subprocess.Popen(
                [*prefix, sys.executable, str(WORKER), json.dumps({**common, "index": index})],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=(out / f"stderr-{index}.txt").open("w"),
            )
            for index in range(2)
        ]
        try:
            yield processes
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait(timeout=30)


def results(out: Path, processes: list[subprocess.Popen]) -> list[dict]:
    """What each worker wrote, once both exited (within LIMIT)."""
    deadline = time.monotonic() + LIMIT
    for index, process in enumerate(processes):
        try:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker {index} did not finish within {LIMIT} s")
        assert process.returncode == 0, (out / f"stderr-{index}.txt").read_text()[-3000:]
    return [json.loads((out / f"result-{index}.json").read_text()) for index in range(2)]


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_two_workers_stop_at_the_same_step_the_chief_backs_it_up_and_both_resume(
    tmp_path: Path, backend: str
) -> None:
    """SIGTERM reaches the workers at different moments (worker 1 first): both stop at the
    same step, the chief's backup holds it, and the two started again with the same call end
    with the weights of an unbroken cluster, bit for bit."""
    backups = tmp_path / "backup"
    with cluster(tmp_path / "unbroken", backend) as unbroken_workers:
        with cluster(tmp_path / "stopped", backend, backup_dir=str(backups), pause=0.05) as pair:
            wait_for(tmp_path / "stopped", "progress-1", 1, 5, pair[1], named=True)
            pair[1].send_signal(signal.SIGTERM)
            time.sleep(0.2)
            pair[0].send_signal(signal.SIGTERM)
            stopped = results(tmp_path / "stopped", pair)
        unbroken = results(tmp_path / "unbroken", unbroken_workers)
    state = backup.read_state(str(backups))
    assert state is not None and state.epoch == 1 and 0 < state.batches_done < 28
    where = f"Training stopped at SIGTERM in epoch 2, after {state.batches_done} of its batches;"
    for answer in stopped:
        assert answer["r_class"] == "gpukeras_error_preempted", answer
        assert answer["message"].startswith(where), answer["message"]
    with cluster(tmp_path / "resumed", backend, backup_dir=str(backups)) as pair:
        resumed = results(tmp_path / "resumed", pair)
    for index, answer in enumerate(resumed):
        assert answer["ok"], answer
        start = answer["settings"]["resumed_from"]
        assert start == {"epoch": 2, "batches_done": state.batches_done}
        assert answer["history"]["epoch"] == [1, 2, 3]
        assert answer["history"]["loss"][2] == pytest.approx(unbroken[index]["history"]["loss"][2])
        for got, want in zip(weights(tmp_path / "resumed", f"weights-{index}"),
                             weights(tmp_path / "unbroken", f"weights-{index}")):  # fmt: skip
            np.testing.assert_array_equal(got, want)
    assert not backups.exists()


# In this process ------------------------------------------------------------------------
def test_a_signal_in_the_middle_of_fit_stops_at_the_next_batch_in_this_process(
    tmp_path: Path,
) -> None:
    """The handler only sets a flag; the stop comes at the next batch's beginning, with the
    backup of the batches done; SIGTERM's handler is what it was before, and answers."""
    keras = config.keras()

    class Raise(keras.callbacks.Callback):  # type: ignore[name-defined,misc]
        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if batch == 4:
                signal.raise_signal(signal.SIGTERM)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 8)).astype("float32")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    answered: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda number, frame: answered.append(number))
    try:
        answer = bridge.call(
            "fit",
            {"model": model, "data": (x, x[:, :1]), "epochs": 2, "batch_size": 16, "verbose": 0,
             "monitor": False, "backup_dir": str(tmp_path / "b"), "callbacks": [Raise()],
             "steps_per_execution": 1},  # batch by batch on JAX too
        )  # fmt: skip
        assert answered == []  # the fit's handler took the signal
        signal.raise_signal(signal.SIGTERM)  # the handler set before the fit answers it again
        assert answered == [int(signal.SIGTERM)]
    finally:
        signal.signal(signal.SIGTERM, before)
    assert answer["r_class"] == "gpukeras_error_preempted", answer
    assert "in epoch 1, after 5 of its batches" in answer["message"]
    assert backup.read_state(str(tmp_path / "b")).batches_done == 5  # type: ignore[union-attr]
