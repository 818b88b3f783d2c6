"""Tracking in MLflow, against the real thing: `mlflow server` started here (SQLite backend,
artifacts proxied, basic authentication) and an embedded store in a folder, both read back
with MLflow's own client. A server that is down, paused (SIGSTOP: connections accepted,
nothing answered) or refusing the credentials never fails nor holds up a fit; what it did
not take is kept and sent once it answers, each value once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from conftest import requires
from gpukeras import bridge
from gpukeras.core.runtime import config
from gpukeras.track import model_copy, sending, tracked_runs, tracking, tracking_read
from mlflow_server import PASSWORD, USER, free_port, running, silent

pytestmark = pytest.mark.slow  # a server process and whole fits


def _model() -> object:
    keras = config.keras()
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((96, 4), dtype=np.float32), rng.integers(0, 3, 96).astype("int32")


def _fit(track: dict, epochs: int = 3, **request: object) -> dict:
    x, y = _data()
    answer = bridge.call(
        "fit",
        {
            "model": _model(),
            "data": (x, y),
            "validation_data": (x, y),
            "request": {"epochs": epochs, "batch_size": 32, "verbose": 0, "seed": 1, **request},
            "track": track,
        },
    )
    assert answer["ok"], answer
    return answer["value"]


def _held(result: dict) -> float:
    """Seconds tracking held the fit up: its work on the training thread and its wait at
    the end. A fit's own time is the machine's, no measure of tracking on a busy one."""
    tracked = result["settings"]["tracking"]
    return float(tracked["seconds_on_training_thread"] + tracked["seconds_waited"])


def _client(uri: str) -> object:
    from mlflow import MlflowClient

    return MlflowClient(uri)


def _runs(uri: str, experiment: str) -> list:
    client = _client(uri)
    found = client.get_experiment_by_name(experiment)
    return [] if found is None else client.search_runs([found.experiment_id])


def _kept(spool: Path) -> list:
    """The runs kept in the spool's MLflow store."""
    local = sending.kept_store(str(spool))
    return [] if local is None else sending.kept_runs(local)


def _flush() -> dict:
    """track_flush with time for a busy machine: the first run kept makes the kept store,
    and MLflow's migrations of a new SQLite store took 2 s here and 8.7 s under 4x load
    (beyond track_flush's 30 s once on CI, 2026-11-30)."""
    answer = bridge.call("track_flush", {"wait": 180})
    assert answer["ok"], answer
    return answer


def test_fit_run_on_a_real_server_and_what_it_did_not_take(tmp_path: Path) -> None:
    requires("mlflow")
    with running(tmp_path / "server") as server:
        env = {"MLFLOW_TRACKING_USERNAME": USER, "MLFLOW_TRACKING_PASSWORD": PASSWORD}
        track = {
            "uri": server.url,
            "experiment": "fits",
            "spool": str(tmp_path / "kept"),
            "env": env,
            "versions": {"gpukeras": "test"},
            "wait": 30,  # the fit waits for its records (by default it only waits for its run)
        }
        result = _fit(track)
        assert result["warnings"] == []
        run_id = result["settings"]["tracking"]["run_id"]
        client = _client(server.url)
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED"
        params = run.data.params
        assert params["epochs"] == "3" and params["batch_size"] == "32" and params["seed"] == "1"
        assert (
            params["optimizer"] == "Adam" and params["backend"] == config.keras().backend.backend()
        )
        assert (
            params["keras_version"] == config.keras().__version__
            and params["gpukeras_version"] == "test"
        )
        assert len(params["data_hash"]) == 16 and params["data_shapes"] == "[[96, 4], [96]]"
        assert run.data.tags["gpukeras.kind"] == "fit" and "gpukeras.input_verdict" in run.data.tags
        for name in ("loss", "accuracy", "val_loss", "val_accuracy"):
            history = client.get_metric_history(run_id, name)
            assert sorted(m.step for m in history) == [1, 2, 3]
            assert [m.value for m in sorted(history, key=lambda m: m.step)] == pytest.approx(
                result["history"][name]
            )
        assert run.data.metrics["samples_per_second"] > 0
        # the model as gpu_save() writes it, downloaded and loaded: the same predictions
        folder = client.download_artifacts(run_id, "model", str(tmp_path / "down"))
        assert sorted(os.listdir(folder)) == ["model.gpukeras.json", "model.keras"]
        loaded = bridge.call("load_model", {"path": os.path.join(folder, "model.keras")})
        assert loaded["ok"], loaded

        # refused credentials: the fit completes, a warning says so, nothing secret shown
        wrong = {**track, "env": {**env, "MLFLOW_TRACKING_PASSWORD": "not-the-password"}, "wait": 0}
        refused = _fit(wrong, epochs=2)
        assert _held(refused) < 15
        said = " ".join(w["message"] for w in refused["warnings"])
        assert [w["class"] for w in refused["warnings"]] == ["tracking"]
        assert "401" in said and "gpu_track_sync()" in said and "not-the-password" not in said
        assert _flush()["value"]["done"]  # the rest kept meanwhile
        kept = _kept(tmp_path / "kept")
        assert [r.data.tags[sending.KEPT_FOR_TAG] for r in kept] == [server.url]
        written = [p for p in (tmp_path / "kept").rglob("*") if p.is_file()]
        assert written and all(b"not-the-password" not in p.read_bytes() for p in written)
        assert oct((tmp_path / "kept").stat().st_mode & 0o777) == "0o700"
        # sent once the credentials are right again, every value once
        synced = bridge.call("track_sync", {"track": track})["value"]
        assert synced["sent"] == len(kept) and synced["left"] == 0
        late = [r for r in _runs(server.url, "fits") if r.info.run_id != run_id]
        assert len(late) == 1 and late[0].info.status == "FINISHED"
        assert sorted(m.step for m in client.get_metric_history(late[0].info.run_id, "loss")) == [
            1,
            2,
        ]

        # a server that accepts connections and answers nothing: the fit waits `wait` s at most
        server.pause()
        try:
            stalled = _fit({**track, "wait": 2}, epochs=2)
            assert stalled["settings"]["tracking"]["seconds_waited"] < 2 + 3
            assert _held(stalled) < 2 + 15
            assert [w["class"] for w in stalled["warnings"]] == ["tracking"]
        finally:
            server.resume()
        target = tracking.target_of(track)
        sending.SENDER.drain(target, wait=60)  # the request in flight ends too
        synced = bridge.call("track_sync", {"track": track})["value"]
        assert synced["left"] == 0 and synced["why"] is None
        runs = _runs(server.url, "fits")
        assert len(runs) == 3, [r.data.tags for r in runs]
        newest = max(runs, key=lambda r: r.info.start_time)
        assert newest.info.status == "FINISHED"
        for name in ("loss", "val_loss"):
            steps = [m.step for m in client.get_metric_history(newest.info.run_id, name)]
            assert sorted(steps) == [1, 2], steps  # once each, whatever reached it late


def test_nothing_listening_costs_the_fit_nothing(tmp_path: Path) -> None:
    requires("mlflow")
    port = free_port()
    track = {"uri": f"http://127.0.0.1:{port}", "spool": str(tmp_path / "kept"), "wait": 5}
    result = _fit(track, epochs=2)
    assert _held(result) < 15
    assert [w["class"] for w in result["warnings"]] == ["tracking"], result["warnings"]
    # why, whole and short: the system's reason and where, not urllib3's cut-off repr
    said = f"does not take runs now: connection refused at 127.0.0.1:{port}."
    assert said in result["warnings"][0]["message"], result["warnings"][0]["message"]
    assert _flush()["value"]["done"]
    (run,) = _kept(tmp_path / "kept")  # in MLflow's own store, whole: epochs, model, end
    local = _client(f"sqlite:///{tmp_path / 'kept' / tracking.DATABASE}")
    assert sorted(m.step for m in local.get_metric_history(run.info.run_id, "loss")) == [1, 2]
    assert "model" in [a.path for a in local.list_artifacts(run.info.run_id)]
    assert run.info.status == "FINISHED" and run.data.params["epochs"] == "2"
    assert _fit(track, epochs=1)["warnings"] == []  # said once


def test_a_silent_server_is_asked_once_and_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that accepts connections and never answers: asked once per process with
    MLflow's request of ``reach.REACH_TIMEOUT`` s and no retry (the user's own timeout where
    set), and remembered; fits complete, their records kept, the warning given once; reading
    runs and gpu_track_sync() say why."""
    requires("mlflow")
    for name in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"):
        monkeypatch.setenv(name, tracking.PATIENCE[name])  # gpukeras' own, as R sends it back
    kept = tmp_path / "kept"
    with silent() as checked_url, silent() as url:
        # gpu_track()'s check says it, so the fits that follow do not
        track = {"uri": checked_url, "experiment": "silent", "spool": str(kept)}
        checked = bridge.call("track_check", {"track": track})["value"]
        where = checked_url.removeprefix("http://")
        assert checked["reachable"] is False
        assert checked["why"] == f"no answer within 2 s from {where}"
        # the kept store is made by the check, before any run is kept in it
        assert checked["spool"] == str(kept) and (kept / tracking.DATABASE).is_file()
        assert checked["lines"] == [
            f"<gpukeras tracking> {checked_url}, experiment silent",
            f"  not answering now: no answer within 2 s from {where}",
        ]
        assert checked["warnings"] == [
            {
                "class": "tracking",
                "message": [
                    f"Tracking: {checked_url} does not take runs now: no answer within 2 s from "
                    f"{where}.",
                    "Runs are kept until it does: gpu_track_sync() sends them.",
                ],
            }
        ]
        assert [_fit(track, epochs=1)["warnings"] for _ in range(2)] == [[], []]
        # met by a fit first: the first fit says it, whole, and the second does not
        track = {"uri": url, "experiment": "silent", "spool": str(kept)}
        where = url.removeprefix("http://")
        first, second = (_fit(track, epochs=1) for _ in range(2))
        assert [w["class"] for w in first["warnings"]] == ["tracking"]
        assert first["warnings"][0]["message"].startswith(
            f"Tracking: {url} does not take runs now: no answer within 2 s from {where}. "
            "Training went on;"
        )
        assert second["warnings"] == [] and first["history"] and second["history"]
        assert _flush()["value"]["done"]  # what reads runs waits for
        kept_for = [r.data.tags[sending.KEPT_FOR_TAG] for r in _kept(kept)]
        assert set(kept_for) == {checked_url, url}
        read = bridge.call("track_runs", {"track": track})
        assert not read["ok"]
        assert read["message"] == (
            f"Cannot read the runs from {url}: no answer within 2 s from {where}."
        )
        synced = bridge.call("track_sync", {"track": track})["value"]
        assert synced["sent"] == 0 and synced["left"] == kept_for.count(url)
        assert synced["why"] == f"no answer within 2 s from {where}"
        assert synced["lines"][0] == (
            f"<gpukeras track sync> 0 sent, {synced['left']} left (no answer within 2 s from "
            f"{where})"
        )
        assert synced["lines"][1:] == [f"  kept for another store: {checked_url} (2)"]
        # the user's own MLflow timeout is the one asked with
        own = {**track, "env": {"MLFLOW_HTTP_REQUEST_TIMEOUT": "1"}}
        assert bridge.call("track_check", {"track": own})["value"]["why"] == (
            f"no answer within 1 s from {where}"
        )


def test_a_folder_store_is_mlflows_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    requires("mlflow")
    monkeypatch.chdir(tmp_path)  # nothing may land in the working folder
    opened = bridge.call("track_open_folder", {"folder": str(tmp_path / "runs")})["value"]
    assert opened["uri"] == f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"
    track = {"uri": opened["uri"], "experiment": "local", "spool": str(tmp_path / "kept")}
    parent = bridge.call("track_open_run", {"track": track, "kind": "cv", "name": "cv"})["value"]
    result = _fit({**track, "parent": parent["key"], "name": "fold 1"}, epochs=2)
    bridge.call(
        "track_record",
        {"track": track, "key": parent["key"], "metrics": {"loss_mean": 1.0}, "status": "FINISHED"},
    )
    assert _flush()["value"] == {"done": True, "warnings": []}
    runs = {r.data.tags["mlflow.runName"]: r for r in _runs(opened["uri"], "local")}
    assert set(runs) == {"cv", "fold 1"}
    assert runs["fold 1"].data.tags["mlflow.parentRunId"] == runs["cv"].info.run_id
    assert runs["cv"].data.metrics["loss_mean"] == 1.0 and runs["cv"].info.status == "FINISHED"
    assert runs["fold 1"].info.run_id == result["settings"]["tracking"]["run_id"]
    artifacts = runs["fold 1"].info.artifact_uri
    assert artifacts.lstrip("/").startswith(str(tmp_path / "runs" / "artifacts" / "local-")[1:])
    assert os.path.isfile(os.path.join(artifacts, "model", "model.keras"))
    assert sorted(os.listdir(tmp_path)) == ["runs"]
    assert not (tmp_path / "kept").exists()


def test_the_runs_model_is_the_fits_though_it_trains_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's model is written on the sending thread after the fit returned (held here
    until the model has trained further): it is the fit's, not the live model's."""
    requires("mlflow")
    trained_on = threading.Event()
    write = model_copy.ModelCopy.folder

    def folder_once_trained_on(copy: model_copy.ModelCopy, encoding: object) -> str:
        assert trained_on.wait(60)
        return write(copy, encoding)

    monkeypatch.setattr(model_copy.ModelCopy, "folder", folder_once_trained_on)
    opened = bridge.call("track_open_folder", {"folder": str(tmp_path / "runs")})["value"]
    track = {"uri": opened["uri"], "experiment": "on", "spool": str(tmp_path / "kept")}
    model, (x, y) = _model(), _data()
    answer = bridge.call(
        "fit",
        {
            "model": model,
            "data": (x, y),
            "request": {"epochs": 2, "batch_size": 32, "verbose": 0, "seed": 1},
            "track": track,
        },
    )
    assert answer["ok"], answer
    fitted = model.predict(x, verbose=0)  # type: ignore[attr-defined]
    model.fit(x, y, epochs=3, batch_size=32, verbose=0)  # type: ignore[attr-defined]
    trained_on.set()
    assert _flush()["value"] == {"done": True, "warnings": []}
    run_id = answer["value"]["settings"]["tracking"]["run_id"]
    path = tracking_read.download_model(track, run_id, str(tmp_path / "down"))["path"]
    loaded = bridge.call("load_model", {"path": path})["value"]["model"]
    kept = loaded.predict(x, verbose=0)
    assert kept == pytest.approx(fitted, abs=1e-6)
    assert np.abs(model.predict(x, verbose=0) - kept).max() > 1e-3  # type: ignore[attr-defined]


def test_compare_gives_rows_for_rs_tables(tmp_path: Path) -> None:
    """gpu_compare_runs()' tables are made here: the params that differ (as logged), the
    final metrics with b less a, and the histories of metrics logged at several steps."""
    requires("mlflow")
    opened = bridge.call("track_open_folder", {"folder": str(tmp_path / "runs")})["value"]
    track = {"uri": opened["uri"], "experiment": "compared", "spool": str(tmp_path / "kept")}
    target = tracking.target_of(track)
    client = tracking.client(target)
    ids = []
    for units, rate, losses in (("8", "0.001", [1.0, 0.5]), ("16", "0.001", [0.9, 0.25])):
        run = client.create_run(tracking.experiment_id(target))
        client.log_param(run.info.run_id, "units", units)
        client.log_param(run.info.run_id, "learning_rate", rate)
        for step, loss in enumerate(losses, start=1):
            client.log_metric(run.info.run_id, "loss", loss, step=step)
        ids.append(run.info.run_id)
    client.log_metric(ids[0], "accuracy", 0.5, step=1)
    compared = bridge.call("track_compare", {"track": track, "run_ids": ids})["value"]
    assert [r["run_id"] for r in compared["runs"]] == ids
    assert compared["params"] == [{"param": "units", "a": "8", "b": "16"}]
    assert compared["metrics"] == [
        {"metric": "accuracy", "a": 0.5, "b": None, "change": None},
        {"metric": "loss", "a": 0.5, "b": 0.25, "change": -0.25},
    ]
    assert compared["history"] == [
        {"run": run, "metric": "loss", "epoch": float(step), "value": value}
        for run, values in (("a", [1.0, 0.5]), ("b", [0.9, 0.25]))
        for step, value in enumerate(values, start=1)
    ]


def test_print_of_a_check_names_the_credentials_and_the_runs_kept() -> None:
    checked = {
        "uri": "http://h:5000",
        "experiment": "churn",
        "reachable": True,
        "why": None,
        "credentials": ["MLFLOW_TRACKING_TOKEN"],
        "username": None,
        "kept": 2,
        "spool": "/k",
    }
    assert tracked_runs.check_lines(checked) == [
        "<gpukeras tracking> http://h:5000, experiment churn",
        "  answering",
        "  as token (MLFLOW_TRACKING_TOKEN set)",
        "  2 run(s) kept in /k: gpu_track_sync() sends them",
    ]
    quiet = {**checked, "credentials": [], "kept": 0}
    assert tracked_runs.check_lines(quiet)[2:] == []
