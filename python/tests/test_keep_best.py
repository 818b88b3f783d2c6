"""gpu_backup(keep_best = ) and gpu_step(ema = ) across a real kill (SIGKILL) and resume: the
best-so-far, the k best models and the averaged weights are exactly an unbroken run's (the
keras#17012 case: a resumed run never replaces a better best with a worse one), and a
tracked run goes on as the same MLflow run, each epoch once, the k best its artifacts."""

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
from gpukeras import bridge
from gpukeras.core.runtime import config
from gpukeras.train import backup, best_models

pytestmark = pytest.mark.slow  # training processes, one of them killed

SCRIPT = Path(__file__).with_name("scripts") / "best_ema_fit.py"


def _child(
    tmp_path: Path, name: str, backup_dir: Path, pause: float, track: dict | None, engine: str
) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "KERAS_BACKEND": engine}
    command = [
        sys.executable,
        str(SCRIPT),
        str(tmp_path / f"{name}.npz"),
        str(backup_dir),
        str(pause),
    ]
    return subprocess.Popen(
        command + ([json.dumps(track)] if track else []),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _report(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("engine", ["tensorflow", "jax"])
def test_the_best_and_the_average_survive_a_kill(tmp_path: Path, engine: str) -> None:
    if engine == "jax":
        requires("jax")
    tracked = "mlflow" in sys.modules or __import__("importlib").util.find_spec("mlflow")
    track = None
    if tracked:
        opened = bridge.call("track_open_folder", {"folder": str(tmp_path / "runs")})["value"]
        track = {"uri": opened["uri"], "experiment": "best", "spool": str(tmp_path / "kept")}
    reference = _child(tmp_path, "unbroken", tmp_path / "unbroken", 0.0, None, engine)
    killed_dir = tmp_path / "killed"
    killed = _child(tmp_path, "killed", killed_dir, 0.05, track, engine)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and killed.poll() is None:
            state = (
                backup.read_state(str(killed_dir))
                if (killed_dir / backup.STATE_FILE).exists()
                else None
            )
            if state is not None and state.epoch >= 3 and state.batches_done > 0:
                break  # in the middle of epoch 4, with best models kept
            time.sleep(0.02)
        assert killed.poll() is None, killed.communicate()[1][-3000:]
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=30)
    assert killed.returncode == -signal.SIGKILL
    kept = backup.read_state(str(killed_dir))
    assert kept.best and kept.epoch >= 3

    resumed = _report(_child(tmp_path, "resumed", killed_dir, 0.0, track, engine))
    unbroken = _report(reference)
    assert resumed["resumed_from"]["epoch"] == kept.epoch + 1
    assert resumed["history"]["val_loss"] == pytest.approx(
        unbroken["history"]["val_loss"], rel=1e-5
    )
    # the k best: the same epochs, values and names as the unbroken run's, best first
    assert [(b["epoch"], b["file"]) for b in resumed["best"]["best"]] == [
        (b["epoch"], b["file"]) for b in unbroken["best"]["best"]
    ]
    assert [b["value"] for b in resumed["best"]["best"]] == pytest.approx(
        [b["value"] for b in unbroken["best"]["best"]], rel=1e-6
    )
    values = unbroken["history"]["val_loss"]
    assert resumed["best"]["best"][0]["value"] == pytest.approx(min(values), rel=1e-6)
    assert sorted(p.name for p in killed_dir.iterdir()) == sorted(
        [best_models.BEST_INDEX, *(b["file"] for b in resumed["best"]["best"])]
    )
    # the averaged weights, in the returned model and in each best model
    got, want = np.load(tmp_path / "resumed.npz"), np.load(tmp_path / "unbroken.npz")
    for key in want.files:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6)
    keras = config.keras()
    for mine, theirs in zip(resumed["best"]["best"], unbroken["best"]["best"]):
        a = keras.saving.load_model(mine["path"]).get_weights()
        b = keras.saving.load_model(theirs["path"]).get_weights()
        for left, right in zip(a, b):
            np.testing.assert_allclose(left, right, rtol=1e-5, atol=1e-6)

    if track is not None:
        from mlflow import MlflowClient

        assert bridge.call("track_flush", {})["ok"]
        client = MlflowClient(track["uri"])
        runs = client.search_runs([client.get_experiment_by_name("best").experiment_id])
        assert len(runs) == 1 and runs[0].info.run_id == resumed["tracking"]["run_id"]
        assert runs[0].info.status == "FINISHED"
        steps = [m.step for m in client.get_metric_history(runs[0].info.run_id, "val_loss")]
        assert sorted(steps) == [1, 2, 3, 4, 5, 6]
        artifacts = [f.path for f in client.list_artifacts(runs[0].info.run_id, "best")]
        assert sorted(os.path.basename(p) for p in artifacts) == sorted(
            b["file"] for b in resumed["best"]["best"]
        )
