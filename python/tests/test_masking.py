"""The one masking rule (core/masking.py): every URI gpukeras prints, keeps or raises loses
its user information and its secret query values; a message R receives through the bridge
is masked by the same rule; a kept run's artifacts are read only inside the kept store."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import requires
from gpukeras import bridge
from gpukeras.core import masking
from gpukeras.core.errors import GpukerasError
from gpukeras.tools import report
from gpukeras.track import records, sending, tracking


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        # user information, whole, a user alone too (it may be a token)
        ("https://TOKEN@h", "https://***@h"),
        ("https://TOKEN@h:5000/path", "https://***@h:5000/path"),
        ("https://u:p@h", "https://***@h"),
        ("postgresql://al:S3c:r@t@h:5432/db", "postgresql://***@h:5432/db"),
        ("postgresql://al@h/db", "postgresql://***@h/db"),
        ("http://u:pa/ss@h/x", "http://***@h/x"),
        ("http://u:p#ss@h/x", "http://***@h/x"),
        # secret query keys, wherever the word stands in the name, any case
        ("postgresql://u:p@h/db?sslpassword=x", "postgresql://***@h/db?sslpassword=***"),
        ("http://h/?access_token=x&api_key=y", "http://h/?access_token=***&api_key=***"),
        ("http://h/?token=x", "http://h/?token=***"),
        (
            "postgresql://h/db?sslmode=require&PassWord=S3c&pwd=S3c#x",
            "postgresql://h/db?sslmode=require&PassWord=***&pwd=***#x",
        ),
        (
            "https://h/a?X-Amz-Credential=c&X-Amz-Signature=s&v=1",
            "https://h/a?X-Amz-Credential=***&X-Amz-Signature=***&v=1",
        ),
        ("http://h/?client_secret=s;apikey=k", "http://h/?client_secret=***;apikey=***"),
        ("sqlite:////tmp/s/search.db?password=S3c", "sqlite:////tmp/s/search.db?password=***"),
        # ... and in the fragment, as OAuth's redirects carry a token
        ("https://h/cb#access_token=x&state=1", "https://h/cb#access_token=***&state=1"),
        ("https://h/cb?code=1#id_token=x", "https://h/cb?code=1#id_token=***"),
        # nothing secret: as it is
        ("http://h:5000/?sslmode=require", "http://h:5000/?sslmode=require"),
        ("sqlite:////tmp/runs/mlflow.db", "sqlite:////tmp/runs/mlflow.db"),
        ("/home/al/study", "/home/al/study"),
    ],
)
def test_a_uri_keeps_no_user_information_and_no_secret_query_value(given: str, shown: str) -> None:
    assert masking.mask_uri(given) == shown
    # a URI in a message, as an error or a warning quotes it
    assert (
        masking.mask_text(f"Cannot reach '{given}': refused") == f"Cannot reach '{shown}': refused"
    )


def test_text_is_masked_of_query_strings_and_secret_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-123456")
    text = "Max retries exceeded with url: /api/2.0/runs?token=abc (token tok-123456; other s3cr3t)"
    assert masking.mask_text(text, ["s3cr3t"]) == (
        "Max retries exceeded with url: /api/2.0/runs?token=*** (token ***; other ***)"
    )


@pytest.mark.parametrize(
    "name", ["MLFLOW_TRACKING_TOKEN", "api_key", "SSLPASSWORD", "X-Auth", "sig"]
)
def test_secret_names(name: str) -> None:
    assert masking.is_secret_name(name)


@pytest.mark.parametrize("name", ["MLFLOW_TRACKING_URI", "sslmode", "experiment", "host"])
def test_names_that_are_not_secret(name: str) -> None:
    assert not masking.is_secret_name(name)


def test_every_uri_the_core_shows_or_raises_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    # what gpu_search() shows of its storage
    shown = bridge.call("mask_uri", {"uri": "postgresql://TOKEN@h/db?sslpassword=x"})
    assert shown == {"ok": True, "value": "postgresql://***@h/db?sslpassword=***"}
    # the tracking store, as print(gpu_track()) and every warning show it
    target = tracking.Target(uri="http://TOKEN@h:5000/?api_key=k")
    assert target.safe == "http://***@h:5000/?api_key=***"
    assert "TOKEN" not in tracking.masked(f"refused {target.uri}", target)

    # any error R receives, raised by the core or by a library inside it
    def fails(kind: str) -> None:
        message = "cannot open http://TOKEN@h/?access_token=x"
        raise GpukerasError(message) if kind == "ours" else RuntimeError(message)

    for kind in ("ours", "theirs"):
        answer = bridge.answer(fails, {"kind": kind})
        assert not answer["ok"]
        assert "TOKEN" not in answer["message"] and "access_token=x" not in answer["message"]
        assert "http://***@h/?access_token=***" in answer["message"]
        assert "TOKEN" not in (answer["traceback"] or "")
    # gpu_report()'s variables: a secret name's value whole, a URI's user in any other
    monkeypatch.setenv("GPUKERAS_STORE", "http://TOKEN@h")
    found = report.environment({"GPUKERAS_STORE": "http://TOKEN@h", "GPUKERAS_KEY": "k"})
    assert found == {"GPUKERAS_KEY": report.MASKED, "GPUKERAS_STORE": "http://***@h"}


# A kept run's artifacts: only inside the kept store ----------------------------------------
def _kept(spool: Path, target: tracking.Target) -> str:
    """A run kept in the spool's MLflow store as a store that is down leaves it, with one
    artifact; its id there."""
    made = spool.parent / "made"
    made.mkdir()
    (made / "model.txt").write_text("the model")
    sender = sending.Sender()
    key = records.new_key()
    creation = records.Creation(name="kept run")
    for op in (records.log_op(params={"a": 1}), records.artifacts_op(str(made), "m")):
        sending.keep(sending._Item(target, key, creation, op), "down", sender)
    local = sending.kept_store(str(spool))
    assert local is not None and not made.exists()
    (run,) = sending.kept_runs(local)
    assert run.data.tags[sending.KEPT_FOR_TAG] == target.safe
    return str(run.info.run_id)


@pytest.mark.parametrize("where", ["absolute", "dotdot", "link"])
def test_a_kept_run_naming_artifacts_outside_the_kept_store_is_neither_sent_nor_removed(
    tmp_path: Path, where: str
) -> None:
    requires("mlflow")
    opened = bridge.call("track_open_folder", {"folder": str(tmp_path / "runs")})["value"]
    spool = tmp_path / "kept"
    target = tracking.Target(uri=opened["uri"], experiment="kept", spool=str(spool))
    run_id = _kept(spool, target)
    outside = tmp_path / "users-own"
    outside.mkdir()
    (outside / "thesis.tex").write_text("years of work")
    database = sqlite3.connect(spool / tracking.DATABASE)
    (uri,) = database.execute(
        "select artifact_uri from runs where run_uuid = ?", (run_id,)
    ).fetchone()
    if where == "link":
        shutil.rmtree(uri)
        Path(uri).symlink_to(outside)
    else:
        moved = (
            str(outside)
            if where == "absolute"
            else str(spool / "artifacts" / ".." / ".." / "users-own")
        )
        with database:
            database.execute("update runs set artifact_uri = ? where run_uuid = ?", (moved, run_id))
    database.close()

    synced = sending.sync(target, sending.Sender())
    assert synced["sent"] == 0 and synced["left"] == 1
    assert run_id in str(synced["why"])
    assert (outside / "thesis.tex").read_text() == "years of work"
    from mlflow import MlflowClient

    assert MlflowClient(opened["uri"]).get_experiment_by_name("kept") is None
    # discarded: the run deleted from the kept store, the folder outside it left alone
    discarded = sending.sync(target, sending.Sender(), discard=True)
    assert discarded["left"] == 1 and (outside / "thesis.tex").exists()


def test_a_kept_run_is_sent_with_its_own_artifacts_and_then_removed(tmp_path: Path) -> None:
    requires("mlflow")
    opened = bridge.call("track_open_folder", {"folder": str(tmp_path / "runs")})["value"]
    spool = tmp_path / "kept"
    target = tracking.Target(uri=opened["uri"], experiment="kept", spool=str(spool))
    run_id = _kept(spool, target)
    from mlflow import MlflowClient

    folder = Path(
        MlflowClient(f"sqlite:///{spool / tracking.DATABASE}").get_run(run_id).info.artifact_uri
    )
    assert (folder / "m" / "model.txt").exists()
    synced = sending.sync(target, sending.Sender())
    assert synced == {"sent": 1, "left": 0, "other": {}, "why": None, "kept": []}
    assert not folder.exists()
    local = sending.kept_store(str(spool))
    assert local is not None and sending.kept_runs(local) == []
    client = MlflowClient(opened["uri"])
    (run,) = client.search_runs([client.get_experiment_by_name("kept").experiment_id])
    assert run.data.params == {"a": "1"} and run.data.tags["mlflow.runName"] == "kept run"
    assert [a.path for a in client.list_artifacts(run.info.run_id, "m")] == ["m/model.txt"]


def test_kept_runs_are_listed_and_discarded(tmp_path: Path) -> None:
    requires("mlflow")
    spool = tmp_path / "kept"
    target = tracking.Target(uri="http://127.0.0.1:1", experiment="kept", spool=str(spool))
    run_id = _kept(spool, target)
    listed = sending.sync(target, sending.Sender(), why="down")
    assert listed["left"] == 1 and listed["kept"][0]["name"] == "kept run"
    other = tracking.Target(uri="http://127.0.0.1:2", spool=str(spool))
    assert sending.sync(other, sending.Sender(), why="down")["other"] == {target.safe: 1}
    discarded = bridge.call(
        "track_sync", {"track": {"uri": target.uri, "spool": str(spool)}, "discard": True}
    )
    assert discarded["value"]["sent"] == 1 and discarded["value"]["left"] == 0
    from mlflow import MlflowClient

    assert (
        MlflowClient(f"sqlite:///{spool / tracking.DATABASE}").get_run(run_id).info.lifecycle_stage
        == "deleted"
    )
