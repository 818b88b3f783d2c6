"""gpu_search()'s study (search/search.py) on real Optuna storages (a folder's journal file;
the tests of resuming, interrupted trials and processes sharing a study on an SQLite file
too), and where the workers run (tools/workers.py), on the CPU and on GPUs as NVML shows them."""

from __future__ import annotations

import json
import math
import os
import pwd
import re
import stat
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import other_group
from gpukeras import bridge
from gpukeras.core.errors import BadArgumentError
from gpukeras.search import search, search_sampler, search_trial, study_journal, study_storage
from gpukeras.tools import workers
from nvml_double import FakeGpu, fake_pynvml

SPACE = {
    "units": {"type": "int", "lower": 4, "upper": 64, "log": True},
    "dropout": {"type": "float", "lower": 0.0, "upper": 0.5, "log": False},
    "optimizer": {"type": "choice", "choices": ["adam", "sgd"], "log": False},
}
REQUEST = {"space": SPACE, "model_fn": "function(params) ...", "objective": "val_loss"}
CORE = Path(__file__).resolve().parents[2] / "inst" / "python"


# The storage url() gives: a folder's journal, or (both_storages) an SQLite URL too.
KIND = {"storage": "journal"}


@pytest.fixture(params=["journal", "sqlite"])
def both_storages(request: pytest.FixtureRequest) -> Iterator[None]:
    # (not through monkeypatch, which a test may undo midway)
    KIND["storage"] = request.param
    yield
    KIND["storage"] = "journal"


def url(tmp_path: Path) -> str:
    if KIND["storage"] == "sqlite":
        return f"sqlite:///{tmp_path / 'search.db'}"
    return str(tmp_path / "search.journal")


def opened(tmp_path: Path, trials: int = 5, **kwargs: object) -> search.Search:
    return search.open_study(
        url(tmp_path), "s", SPACE, REQUEST, trials, "val_loss", seed=3, **kwargs
    )


def trained(*values: float, pruned: bool = False) -> dict[str, object]:
    """A worker's result (as R passes it) for a trial that reported ``values``."""
    return {"pruning": {"values": list(values), "pruned": pruned, "missing": None}}


def failed(
    *classes: str, message: str = "it failed\nat line 2", **more: object
) -> dict[str, object]:
    """A worker's result for a trial whose fit raised (or whose process was lost)."""
    return {"error": {"class": list(classes), "message": message, **more}}


def told(study: search.Search, number: int, result: dict[str, object]) -> str:
    return str(search.tell(study, number, result)["state"])


def test_trials_draw_from_the_space_and_stop_at_the_budget(tmp_path: Path) -> None:
    study = opened(tmp_path, trials=4)
    asked = [search.ask(study) for _ in range(4)]
    assert search.ask(study) is None  # the budget counts asked trials too
    for trial in asked:
        assert trial is not None
        assert 4 <= trial["params"]["units"] <= 64
        assert 0 <= trial["params"]["dropout"] <= 0.5
        assert trial["params"]["optimizer"] in ("adam", "sgd")
    assert len({t["seed"] for t in asked if t}) == 4
    assert [t["seed"] for t in asked if t] == [search_sampler.trial_seed(3, n) for n in range(4)]
    states = [
        told(study, 0, trained(0.7, 0.5)),
        told(study, 1, trained(0.7, float("nan"))),
        told(study, 2, trained(0.9, pruned=True)),
        told(study, 3, failed("gpukeras_error_out_of_memory", message="out of memory\nmore")),
    ]
    assert states == ["complete", "failed", "pruned", "failed"]
    models = tmp_path / "models"
    models.mkdir()
    for name in (
        "trial-0.keras",
        "trial-0.gpukeras.json",
        "trial-2.keras",
        "trial-3.gpukeras.json",
        "notes",
    ):
        (models / name).write_text("")
    table = search.trials(study, models=str(models))
    # only the best trial's model stays
    assert sorted(p.name for p in models.iterdir()) == [
        "notes",
        "trial-0.gpukeras.json",
        "trial-0.keras",
    ]
    assert table["state"] == ["complete", "failed", "pruned", "failed"]
    assert table["value"][0] == 0.5  # the last epoch's
    assert table["reason"][1] == "the objective val_loss was nan"  # NaN is never best
    assert table["reason"][3] == "out of memory"
    assert table["best"] == {
        "number": 0,
        "params": asked[0]["params"],  # type: ignore[index]
        "value": 0.5,
        "path": str(models / "trial-0.keras"),
    }
    assert table["direction"] == "minimize"
    assert search.progress(url(tmp_path), "s") == {
        "done": 4,
        "running": 0,
        "best": {"number": 0, "value": 0.5, "params": asked[0]["params"]},  # type: ignore[index]
    }


@pytest.mark.usefixtures("both_storages")
def test_the_same_request_resumes_and_another_is_refused(tmp_path: Path) -> None:
    study = opened(tmp_path, trials=2)
    first = search.ask(study)
    assert first is not None
    told(study, first["number"], trained(1.0))
    again = opened(tmp_path, trials=3)
    assert search.trials(again)["number"] == [0]
    assert search.ask(again)["number"] == 1  # type: ignore[index]
    changed = {**REQUEST, "model_fn": "function(params) other"}
    with pytest.raises(search.SearchMismatchError, match="the model function differs"):
        search.open_study(url(tmp_path), "s", SPACE, changed, 3, "val_loss")
    assert search.open_study(url(tmp_path), "other", SPACE, changed, 3, "val_loss")


def test_a_mismatch_names_each_argument_that_differs_with_both_values(tmp_path: Path) -> None:
    """Not "gpu_fit()'s arguments differs": which argument, what the study holds, what the
    call gives; a searched value as the R call that makes it."""
    made = {**REQUEST, "fit": {"epochs": "3", "batch_size": "32"}}
    search.open_study(url(tmp_path), "s", SPACE, made, 3, "val_loss")
    space = {**SPACE, "units": {"type": "int", "lower": 4, "upper": 128, "log": True}}
    changed = {**made, "space": space, "objective": "val_accuracy", "fit": {"epochs": "5"}}
    with pytest.raises(search.SearchMismatchError) as raised:
        search.open_study(url(tmp_path), "s", space, changed, 3, "val_accuracy")
    said = str(raised.value)
    assert (
        "the search space's `units` is search_int(4, 64, log = TRUE) in the study, "
        "search_int(4, 128, log = TRUE) in this call" in said
    )
    assert 'the objective is "val_loss" in the study, "val_accuracy" in this call' in said
    assert "gpu_fit()'s `epochs` is 3 in the study, 5 in this call" in said
    assert "gpu_fit()'s `batch_size` is 32 in the study, not given in this call" in said
    assert 'the direction is "minimize" in the study, "maximize" in this call' in said


def test_a_later_identical_search_that_runs_nothing_resumes_nothing(tmp_path: Path) -> None:
    """Trial 0 interrupted, run again by the search after it; the one after that runs
    nothing and lists no interrupted trial (Optuna's retry history stays in the study)."""
    study = opened(tmp_path, trials=1)
    first = search.ask(study)
    assert first is not None
    search.interrupt(study)  # the trial asked and not told
    resumed = opened(tmp_path, trials=1)
    retry = search.ask(resumed)
    assert retry is not None and search.trials(resumed)["retry_of"] == [0]
    told(resumed, retry["number"], trained(1.0))
    assert resumed.outstanding == set()  # told: a stop interrupts none
    assert search.trials(resumed)["interrupted"] == [0]
    later = opened(tmp_path, trials=1)
    assert search.ask(later) is None
    assert search.trials(later)["interrupted"] == []


@pytest.mark.usefixtures("both_storages")
def test_a_trial_whose_search_died_is_asked_again_with_its_parameters(tmp_path: Path) -> None:
    """A search process asks a trial and is killed (os._exit, as SIGKILL leaves it)."""
    script = textwrap.dedent(
        f"""
        import json, os, sys
        sys.path.insert(0, {str(CORE)!r})
        from gpukeras.search import search
        study = search.open_study(
            {url(tmp_path)!r}, "s", {SPACE!r}, {REQUEST!r}, 3, "val_loss", seed=3
        )
        trial = search.ask(study)
        print(json.dumps(trial["params"]), flush=True)
        os._exit(9)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 9, done.stderr
    params = json.loads(done.stdout)
    resumed = opened(tmp_path, trials=3)
    table = search.trials(resumed)
    assert table["number"] == [1]  # the retry waits to be asked; the interrupted one is not counted
    assert table["state"] == ["waiting"]
    assert table["interrupted"] == [0]
    retry = search.ask(resumed)
    assert retry is not None
    assert retry["params"] == params
    assert search.trials(resumed)["retry_of"] == [0]
    assert search.ask(resumed) is not None
    assert search.ask(resumed) is not None
    assert search.ask(resumed) is None  # 3 counted: the retry and two more


@pytest.mark.usefixtures("both_storages")
def test_a_trial_its_search_asked_for_but_never_marked_is_released_and_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search stopped between Optuna's ask and marking the trial its own (no owner, no
    heartbeat: Optuna would never fail it): a cancel releases it at once, a later search
    after the grace period, and a live search whose fresh trial was released asks again."""
    study = opened(tmp_path, trials=3)
    optuna = pytest.importorskip("optuna")
    distributions = {
        name: search_sampler.distribution(optuna, spec) for name, spec in SPACE.items()
    }
    orphan = study.study.ask(distributions)  # its search stopped here
    # a search resumed at once cannot tell it from a live search's fresh trial: it waits
    assert search.trials(opened(tmp_path, trials=3))["state"] == ["running"]
    # ... for the grace period, after which the next search fails it and asks it again
    monkeypatch.setattr(study_storage, "GRACE_SECONDS", 1)
    time.sleep(1.1)
    resumed = opened(tmp_path, trials=3)
    assert search.trials(resumed)["state"] == ["waiting"]
    assert search.trials(resumed)["interrupted"] == [orphan.number]
    retry = search.ask(resumed)
    assert retry is not None and retry["params"] == orphan.params
    monkeypatch.undo()

    # the cancel of a search job releases one at once (and only the unmarked ones)
    fresh = study.study.ask(distributions)
    assert bridge.call("search_release", {"storage": url(tmp_path), "study": "s"})["value"] == 1
    table = search.trials(opened(tmp_path, trials=3))
    assert table["state"] == ["running", "waiting"]  # the retry's, marked; fresh's retry
    assert search.release(url(tmp_path), "s") == 0
    assert search.release(url(tmp_path), "no such study") == 0

    # a live search whose trial is released before it marks it asks again
    real_ask = study.study.ask
    released: list[int] = []

    def ask_then_released(*args: object, **kwargs: object) -> object:
        trial = real_ask(*args, **kwargs)
        if not released:
            released.append(trial.number)
            search.release(url(tmp_path), "s")
        return trial

    monkeypatch.setattr(study.study, "ask", ask_then_released)
    asked = search.ask(study)
    assert asked is not None and asked["number"] != released[0]
    table = search.trials(study)
    states = dict(zip(table["number"], table["state"]))
    assert states[asked["number"]] == "running"
    assert fresh.number not in states and released[0] not in states  # failed, not counted


def test_the_core_says_which_failures_stop_the_search(tmp_path: Path) -> None:
    """A lost worker, out of memory or a NaN fail the trial alone; another error (a bug in
    model_fn, an objective the logs lack) stops a search that completed no trial."""
    study = opened(tmp_path, trials=7)
    for _ in range(7):
        search.ask(study)
    lost = search.tell(study, 0, failed("gpukeras_error_worker_lost", crashed=True))
    assert lost == {
        "state": "failed",
        "value": None,
        "reason": "it failed",
        "epochs": 0,
        "stop": None,
    }
    assert search.tell(study, 1, failed("gpukeras_error_out_of_memory"))["stop"] is None
    bug = ["gpukeras_error_bad_model", "gpukeras_error", "rlang_error", "error", "condition"]
    assert search.tell(study, 2, failed(*bug))["stop"] == {
        "class": bug,
        "message": "it failed\nat line 2",
    }
    lacking = {"pruning": {"values": [], "pruned": False, "missing": ["accuracy", "loss"]}}
    said = search.tell(study, 3, lacking)
    assert (
        said["reason"]
        == 'the objective "val_loss" is not among the logged values (accuracy, loss).'
    )
    assert said["stop"]["class"] == ["gpukeras_error_bad_argument"]
    assert said["stop"]["message"].endswith("Give `objective` one of them.")
    # R gives one value as a number, one class as a string
    assert search.tell(study, 4, {"pruning": {"values": 0.25, "pruned": False}})["value"] == 0.25
    # once a trial completed, the search goes on whatever fails
    assert search.tell(study, 5, failed("gpukeras_error_bad_model"))["stop"] is None
    assert search.trials(study)["state"] == ["failed"] * 4 + ["complete", "failed", "running"]


def test_a_task_that_failed_fails_each_of_its_trials_and_says_which_stops_the_search(
    tmp_path: Path,
) -> None:
    """``tell_task`` tells each trial of a task that failed with the task's error, and
    answers with the first that stops the search, its ``number`` with it."""
    from gpukeras.search import search_population

    study = opened(tmp_path, trials=5)
    for _ in range(5):
        search.ask(study)
    lost = search_population.tell_task(study, [0], failed("gpukeras_error_out_of_memory"))
    assert lost["number"] == 0 and lost["stop"] is None and lost["status"] == "FAILED"
    told = search_population.tell_task(
        study, [1, 2], failed("gpukeras_error_bad_model"), population=True
    )
    assert told["number"] == 1 and told["stop"]["class"] == ["gpukeras_error_bad_model"]
    assert search_population.tell_task(study, [3], None)["reason"].startswith("the objective")
    pruned = search_population.tell_task(study, [4], trained(0.5, 0.4, pruned=True))
    assert (pruned["status"], pruned["reason"]) == ("KILLED", "pruned after epoch 2")
    assert search.trials(study)["state"] == ["failed"] * 4 + ["pruned"]


@pytest.mark.usefixtures("both_storages")
def test_a_trial_whose_heartbeat_stopped_is_failed_and_asked_again_by_optuna(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its search lives (this process), but nothing records the trial's heartbeat: after the
    grace period Optuna's fail_stale_trials fails it, its retry callback queues it again,
    and the search that ran it, telling it late, leaves it so."""
    monkeypatch.setattr(study_storage, "HEARTBEAT_SECONDS", 1)
    monkeypatch.setattr(study_storage, "GRACE_SECONDS", 1)
    study = opened(tmp_path, trials=2)
    first = search.ask(study)
    assert first is not None
    time.sleep(2.1)  # SQLite's clock counts whole seconds
    resumed = opened(tmp_path, trials=2)
    table = search.trials(resumed)
    assert table["state"] == ["waiting"] and table["interrupted"] == [0]
    late = search.tell(study, first["number"], trained(0.5))
    assert late["state"] == "failed" and late["stop"] is None
    retry = search.ask(resumed)
    assert retry is not None and retry["params"] == first["params"]
    assert search.trials(resumed)["retry_of"] == [0]


@pytest.mark.usefixtures("both_storages")
def test_the_process_that_trains_a_trial_records_its_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    import keras

    monkeypatch.setattr(study_storage, "HEARTBEAT_SECONDS", 1)
    study = opened(tmp_path, trials=1)
    trial = search.ask(study)
    assert trial is not None

    def beat() -> str:
        if KIND["storage"] == "journal":
            stored = study_storage.open_storage(url(tmp_path)).get_trial(trial["trial_id"])
            return str(stored.system_attrs[study_journal.HEARTBEAT_ATTR])
        with sqlite3.connect(tmp_path / "search.db") as db:
            query = "SELECT heartbeat FROM trial_heartbeats WHERE trial_id = ?"
            return str(db.execute(query, (trial["trial_id"],)).fetchone()[0])

    asked = beat()  # the search records the first
    callback = search_trial.pruning_callback(url(tmp_path), "s", trial["trial_id"], "loss")
    slow = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: time.sleep(0.8))
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((8, 3), "float32")
    model.fit(x, x[:, :1], epochs=3, verbose=0, callbacks=[callback, slow])
    assert beat() > asked
    deadline = time.monotonic() + 5
    while any(t.name == "gpukeras-heartbeat" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the heartbeat went on after training"
        time.sleep(0.05)


@pytest.mark.usefixtures("both_storages")
def test_two_processes_share_the_budget(tmp_path: Path) -> None:
    """Two searches ask at once until the study is full: 6 trials between them, none twice."""
    search.open_study(url(tmp_path), "s", SPACE, REQUEST, 6, "val_loss", sampler="random")
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(CORE)!r})
        from gpukeras.search import search
        study = search.open_study({url(tmp_path)!r}, "s", {SPACE!r}, {REQUEST!r}, 6, "val_loss",
                                  sampler="random")
        while (trial := search.ask(study)) is not None:
            time.sleep(0.05)
            result = {{"pruning": {{"values": [float(trial["number"])], "pruned": False}}}}
            search.tell(study, trial["number"], result)
            print(trial["number"], flush=True)
        """
    )
    runs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    numbers = [int(line) for run in runs for line in run.communicate(timeout=120)[0].split()]
    assert sorted(numbers) == list(range(6))
    table = search.trials(opened(tmp_path, trials=6))
    assert table["number"] == list(range(6))
    assert set(table["state"]) == {"complete"}


def test_direction_follows_the_metric() -> None:
    assert search.direction_for("val_loss") == "minimize"
    assert search.direction_for("val_accuracy") == "maximize"
    assert search.direction_for("auc") == "maximize"
    assert search.direction_for("val_mean_absolute_error") == "minimize"
    assert search.direction_for("val_accuracy", "minimize") == "minimize"


def test_grid_needs_finite_values(tmp_path: Path) -> None:
    with pytest.raises(BadArgumentError, match=r"`units` is a log-scaled int range"):
        search.open_study(url(tmp_path), "g", SPACE, REQUEST, 4, "val_loss", sampler="grid")
    grid = {
        "units": {"type": "int", "lower": 4, "upper": 8, "log": False},
        "optimizer": SPACE["optimizer"],
    }
    request = {**REQUEST, "space": grid}
    study = search.open_study(url(tmp_path), "g2", grid, request, 200, "loss", sampler="grid")
    seen = []
    while (trial := search.ask(study)) is not None:
        seen.append((trial["params"]["units"], trial["params"]["optimizer"]))
        assert told(study, trial["number"], trained(1.0)) == "complete"
    # every whole number from 4 to 8 with each optimizer, once: the grid is the budget
    assert sorted(seen) == sorted((u, o) for u in range(4, 9) for o in ("adam", "sgd"))


def test_pruning_stops_a_poor_trial_after_its_epoch(tmp_path: Path) -> None:
    """Five finished trials reached 0.01 at every epoch; a trial whose loss is far above is
    stopped by the median pruner after its first epoch."""
    import keras

    study = opened(tmp_path, trials=10)
    for _ in range(5):
        trial = search.ask(study)
        assert trial is not None
        reporter = search_trial.pruning_callback(url(tmp_path), "s", trial["trial_id"], "loss")
        for epoch in range(6):
            reporter.on_epoch_end(epoch, {"loss": 0.01})
        told(study, trial["number"], trained(0.01))
    poor = search.ask(study)
    assert poor is not None
    callback = search_trial.pruning_callback(url(tmp_path), "s", poor["trial_id"], "loss")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((8, 3), "float32")
    history = model.fit(x, x[:, :1] * 100, epochs=6, verbose=0, callbacks=[callback])
    assert search_trial.pruning_outcome(callback)["pruned"] is True
    assert len(history.history["loss"]) == 1
    outcome = search_trial.pruning_outcome(callback)
    assert told(study, poor["number"], {"pruning": outcome}) == "pruned"
    table = search.trials(study)
    assert table["state"][-1] == "pruned"
    assert table["epochs"][-1] == 1
    assert math.isclose(table["value"][-1], history.history["loss"][-1], rel_tol=1e-6)
    missing = search_trial.pruning_callback(url(tmp_path), "s", poor["trial_id"], "val_auc")
    model.fit(x, x[:, :1], epochs=3, verbose=0, callbacks=[missing])
    assert search_trial.pruning_outcome(missing)["missing"] == ["loss"]


@pytest.mark.usefixtures("both_storages")
def test_a_storage_opened_ahead_is_taken_once_by_the_pruning_callback(tmp_path: Path) -> None:
    """A waiting worker opens the storage ahead (search_warm); its trial's callback reports
    through that storage, and a storage that cannot be opened waits for the callback's
    error."""
    study = opened(tmp_path, trials=2)
    trial = search.ask(study)
    assert trial is not None
    study_storage.warm(url(tmp_path))
    assert url(tmp_path) in study_storage._WARMED
    reporter = search_trial.pruning_callback(url(tmp_path), "s", trial["trial_id"], "loss")
    assert study_storage._WARMED == {}
    reporter.on_epoch_end(0, {"loss": 0.5})
    told(study, trial["number"], trained(0.5))
    assert search.trials(study)["epochs"][-1] == 1
    unreachable = "postgresql://al:secret@127.0.0.1:1/db"
    study_storage.warm(unreachable)
    assert study_storage._WARMED == {}
    with pytest.raises(study_storage.SearchStorageError):
        search_trial.pruning_callback(unreachable, "s", trial["trial_id"], "loss")


def test_a_worker_given_the_masked_url_opens_the_study_at_the_url_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's task holds the study's URL masked (callr writes it to a file); the URL
    whole, password and all, is in the worker's environment, and is what it opens."""
    whole = f"sqlite:///{tmp_path / 'search.db'}?password=S3cret-w"
    masked = study_storage.mask_uri(whole)
    assert "S3cret-w" not in masked
    with warnings.catch_warnings():  # SQLAlchemy's about the query string SQLite ignores
        warnings.simplefilter("ignore")
        search.open_study(whole, "s", SPACE, REQUEST, 2, "val_loss", seed=3)
    monkeypatch.setenv(study_storage.STORAGE_VARIABLE, whole)
    assert study_storage.unmasked(masked) == whole
    # another URL, or one that masks to something else, is taken as it is
    other = f"sqlite:///{tmp_path / 'other.db'}?password=***"
    assert study_storage.unmasked(other) == other
    assert study_storage.unmasked(url(tmp_path)) == url(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        studies = study_storage.open_storage(masked).get_all_studies()
    assert [study.study_name for study in studies] == ["s"]
    # without it, the masked URL is opened as given: its password is not the study's
    monkeypatch.delenv(study_storage.STORAGE_VARIABLE)
    assert study_storage.unmasked(masked) == masked


def test_optuna_logging_is_given_back() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.DEBUG)
    try:
        with study_storage.quiet():
            assert optuna.logging.get_verbosity() == optuna.logging.WARNING
        assert optuna.logging.get_verbosity() == optuna.logging.DEBUG
    finally:
        optuna.logging.set_verbosity(optuna.logging.INFO)


def test_a_storage_that_cannot_be_opened_is_a_classed_error_without_the_password(
    tmp_path: Path,
) -> None:
    with pytest.raises(study_storage.SearchStorageError) as raised:
        search.open_study(
            "postgresql://al:secret@127.0.0.1:1/db", "s", SPACE, REQUEST, 2, "val_loss"
        )
    assert "secret" not in str(raised.value)
    assert "***@127.0.0.1:1/db" in str(raised.value) and "al:" not in str(raised.value)


# The study folder: gpu_backup()'s rules ----------------------------------------------------
def unsafe(folder: Path) -> str:
    answer = bridge.call("search_folder", {"folder": str(folder)})
    assert not answer["ok"], f"{folder} was accepted"
    assert answer["r_class"] == "gpukeras_error_search_storage_unsafe", answer
    assert f"storage folder {folder}" in answer["message"] or str(folder) in answer["message"]
    return str(answer["message"])


def test_a_study_folder_is_made_for_this_user_alone(tmp_path: Path) -> None:
    made = Path(study_storage.check_folder(str(tmp_path / "studies" / "churn")))
    assert made == tmp_path / "studies" / "churn"
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert study_storage.check_folder(str(made)) == str(made)  # and taken again as it is
    (tmp_path / "file").write_text("")
    answer = bridge.call("search_folder", {"folder": str(tmp_path / "file")})
    assert answer["r_class"] == "gpukeras_error_bad_argument" and "is a file" in answer["message"]


def test_another_users_study_folder_is_refused(tmp_path: Path, nobody: pwd.struct_passwd) -> None:
    """The issue's case: a folder made by another user (writable by all, or not)."""
    for mode in (0o1777, 0o755):
        shared = tmp_path / f"shared-{mode:o}"
        shared.mkdir()
        os.chown(shared, nobody.pw_uid, nobody.pw_gid)
        os.chmod(shared, mode)
        said = unsafe(shared)
        assert re.search(r"belongs to nobody \(uid \d+\), not to you", said)
        assert "gpu_load(search$best$path) would load their model" in said
        assert list(shared.iterdir()) == []  # nothing made there


def test_a_study_folder_others_may_write_to_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    assert f"chmod go-w {shared}" in unsafe(shared)
    if os.geteuid() == 0:
        os.chown(shared, -1, other_group().gr_gid)
        os.chmod(shared, 0o770)
        assert f"chmod g-w {shared}" in unsafe(shared)


def test_a_folder_whose_study_is_in_sqlite_resumes_it_there(tmp_path: Path) -> None:
    """A study an older gpukeras kept in the folder's search.db (SQLite) goes on there; a
    new folder's study is its journal."""
    folder = tmp_path / "study"
    assert study_storage.study_folder(str(folder))["storage"] == str(folder / "search.journal")
    old = search.open_study(
        f"sqlite:///{folder / 'search.db'}", "s", SPACE, REQUEST, 3, "val_loss", seed=3
    )
    first = search.ask(old)
    assert first is not None
    told(old, first["number"], trained(0.5))
    where = bridge.call("search_folder", {"folder": str(folder)})["value"]
    assert where == {"folder": str(folder), "storage": f"sqlite:///{folder / 'search.db'}"}
    resumed = search.open_study(where["storage"], "s", SPACE, REQUEST, 3, "val_loss", seed=3)
    assert search.trials(resumed)["value"] == [0.5]
    assert not (folder / "search.journal").exists()


@pytest.mark.parametrize("name", ["search.journal", "search.db", "models"])
def test_a_linked_search_db_or_models_is_refused(tmp_path: Path, name: str) -> None:
    """A link planted where the study or the best model is written is never written through."""
    folder = tmp_path / "study"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "trial-7.keras").write_text("the victim's own model")
    (folder / name).symlink_to(victim if name == "models" else victim / "trial-7.keras")
    said = unsafe(folder)
    assert f"{folder / name} in gpu_search()'s storage folder is a link" in said
    assert f'unlink("{folder / name}")' in said
    assert (victim / "trial-7.keras").read_text() == "the victim's own model"


# Where the workers run --------------------------------------------------------------------
def test_without_a_gpu_the_workers_run_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "_visible_gpus", list)
    monkeypatch.delenv("GPUKERAS_SIMULATE_GPU", raising=False)  # (test_simulated's case)
    assert workers.plan()["slots"] == [{"device": "CPU", "visible": None, "memory_total_mib": None}]
    assert len(workers.plan(workers=3)["slots"]) == 3
    with pytest.raises(BadArgumentError, match="no GPU is visible here"):
        workers.plan(devices=[0])


def test_each_worker_sees_one_gpu_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [
        FakeGpu(uuid="GPU-aaaa", pci_bus_id="0:1:0.0"),
        FakeGpu(uuid="GPU-bbbb", pci_bus_id="0:2:0.0"),
    ]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(gpus))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    plan = workers.plan()
    assert [slot["visible"] for slot in plan["slots"]] == ["GPU-aaaa", "GPU-bbbb"]
    assert [slot["device"] for slot in plan["slots"]] == ["GPU 0", "GPU 1"]
    assert [s["visible"] for s in workers.plan(devices=[1], per_device=2)["slots"]] == [
        "GPU-bbbb"
    ] * 2
    assert [s["device"] for s in workers.plan(workers=3)["slots"]] == ["GPU 0", "GPU 1", "GPU 0"]
    # what this process may see is what the workers share out
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [slot["visible"] for slot in workers.plan()["slots"]] == ["GPU-bbbb"]
    with pytest.raises(BadArgumentError, match="this process sees 1 GPU"):
        workers.plan(devices=[1])


def test_workers_share_a_gpu_as_far_as_the_memory_plan_allows() -> None:
    assert workers.fitting(81559, 30000)["workers"] == 2
    assert workers.fitting(81559, 1000)["workers"] == workers.MOST_PER_DEVICE
    assert workers.fitting(81559, 90000)["workers"] == 1
    assert workers.fitting(None, 1000)["workers"] == 1
    assert "30,000 MiB of 81,559 MiB" in workers.fitting(81559, 30000)["reason"]
    # the pool grows on the fit's GPU alone, its new slots after the others
    gpu = {"device": "GPU 0", "visible": "GPU-aaaa", "memory_total_mib": 81559}
    slots = [gpu, {**gpu, "device": "GPU 1", "visible": "GPU-bbbb"}]
    grown = workers.grow(slots, 0, 30000, cores=16)
    assert [s["visible"] for s in grown["slots"]] == ["GPU-aaaa", "GPU-bbbb", "GPU-aaaa"]
    assert grown["reason"].startswith("2 workers per GPU")
    # as many as fit there already: none added, none taken away
    assert workers.grow(grown["slots"], 2, 90000, cores=16)["slots"] == grown["slots"]
    assert workers.grow(slots, 1, None)["slots"] == slots


def test_worker_environment_keeps_cuda_visible_devices_of_this_process() -> None:
    # The plan reads CUDA_VISIBLE_DEVICES from the environment, and changes nothing in it.
    before = dict(os.environ)
    workers.plan()
    assert dict(os.environ) == before


def test_a_batch_of_trials_is_the_budget_where_nothing_learns_from_completed_ones(
    tmp_path: Path,
) -> None:
    """search_population asks 8 trials at a time for TPE or a pruner (they judge by the
    completed trials), and the whole budget for the random or grid sampler without one."""
    from gpukeras.search import search_population

    tpe = opened(tmp_path, trials=20)
    assert search_population.batch_size(tpe) == search_population.TRIALS_PER_BATCH
    plain = opened(tmp_path, trials=20, sampler="random", pruner="none")
    assert search_population.batch_size(plain) == 20
    asked = search_population.ask(plain)
    assert asked["width"] == 20 and len(asked["trials"]) == 20
    assert search_population.ask(plain) == {"width": 20, "trials": []}  # the budget is spent
    pruned = opened(tmp_path, trials=20, sampler="random")
    assert search_population.batch_size(pruned) == search_population.TRIALS_PER_BATCH


def test_a_batch_splits_by_its_shapes_and_processes_that_measured_faster_train_as_processes(
    tmp_path: Path,
) -> None:
    """A batch's trials group by the values that set their shapes; a group of one trains as
    a process, a group of several as a population unless processes measured faster (2 s a
    trial in a process, 5 s a population's task: 2 trials as processes, 3 as a population),
    and the queue and ``trained_why`` say so."""
    from gpukeras.search import search_population

    def trial(number: int, units: int, lr: float) -> dict:
        return {"number": number, "params": {"units": units, "lr": lr}}

    batch = [trial(0, 16, 0.1), trial(1, 32, 0.1), trial(2, 16, 0.01), trial(3, 64, 0.1)]
    groups = search_population.shape_groups(batch, ["units"])
    assert [[t["number"] for t in group] for group in groups] == [[0, 2], [1], [3]]
    assert len(search_population.shape_groups(batch, ["units", "lr"])) == 4
    groups_of = search_population.open_groups(["units"], "the plan's reason")
    assert groups_of.way(1) == "process" and groups_of.way(2) == "population"
    search_population.ended(groups_of, True, 10.0, 3)
    search_population.ended(groups_of, True, 0.0, 3)
    for _ in range(4):
        search_population.ended(groups_of, False, 2.0, 1)
    assert groups_of.way(2) == "process" and groups_of.way(3) == "population"
    plain = opened(tmp_path, trials=3, sampler="random", pruner="none")
    first = search_population.next_task(groups_of, plain)
    assert first is not None and len(first.get("trials", [first])) in (1, 3)
    state = search_population.state(groups_of)
    assert state["why"].startswith("the plan's reason, split by architecture into tasks")
    assert plain.outstanding == {0, 1, 2}  # asked, none told: what a stop interrupts
    while search_population.next_task(groups_of, plain) is not None:
        pass
    assert groups_of.queue == []


def test_a_worker_drops_what_it_opened_ahead_after_its_task(tmp_path: Path) -> None:
    """A worker runs many tasks, and a spare may serve another search: what ``warm``
    opened and the task did not take is dropped (``unwarm``, after each task)."""
    storage = url(tmp_path)
    study_storage.warm(storage)
    study_storage.unwarm()
    assert study_storage.take_warmed(storage) is None
    study_storage.warm(storage)
    assert study_storage.take_warmed(storage) is not None
    assert study_storage.take_warmed(storage) is None


def test_a_search_prints_its_trials_best_and_how_they_trained_in_r_words() -> None:
    from gpukeras.search.search_report import search_lines

    shared = {
        "objective": "val_loss",
        "direction": "minimize",
        "validation": "given",
        "study": "gpukeras",
        "storage": "search/",
        "seed": 1.0,
    }
    best = {
        "number": 2,
        "value": 0.123456,
        "params": {"units": 16, "lr": 0.00123456, "opt": "adam"},
    }
    lines = search_lines(
        ["failed", "complete", "complete", "pruned"],
        trained="populations",
        trained_why="the trials train in batches",
        best={**best, "path": "NA"},
        interrupted=1,
        **shared,
    )
    assert lines == [
        "<gpukeras_search> 4 trials (2 complete, 1 pruned, 1 failed), minimize val_loss",
        "Best:       trial 2, val_loss = 0.12346",
        "            units = 16, lr = 0.001235, opt = adam",
        "Validation: given",
        "Study:      'gpukeras' in search/, seed 1",
        "Trained:    in batches, as populations (the trials train in batches)",
        "Resumed:    1 interrupted trial(s) run again",
    ]
    # one trial (R sends a bare string), no best yet, trained in processes on any engine
    alone = search_lines("failed", trained="processes", **shared)
    assert alone[:2] == [
        "<gpukeras_search> 1 trials (1 failed), minimize val_loss",
        "Best:       none yet (no trial completed)",
    ]
    assert alone[-1] == "Trained:    a fit per trial, in worker processes"
    saved = search_lines(
        "complete", trained="processes", best={**best, "path": "m.keras"}, **shared
    )
    assert "            model: m.keras (gpu_load() it)" in saved


def test_without_groups_a_task_is_a_trial_and_a_told_task_counts_in_its_groups(
    tmp_path: Path,
) -> None:
    from gpukeras.search import search_population

    plain = opened(tmp_path, trials=2, sampler="random", pruner="none")
    first = search_population.next_task(None, plain)  # no populations: the next trial
    assert first is not None and "trials" not in first and first["number"] == 0
    groups = search_population.open_groups(["units"], "the plan's reason")
    answer = search_population.tell_task(
        plain, [first["number"]], trained(0.5), seconds=3.0, groups=groups
    )
    assert answer["state"] == "complete"
    assert groups.trials["process"] == 1 and groups.seconds["process"] == 3.0
    assert plain.outstanding == set()


def test_a_population_search_says_how_its_trials_really_trained() -> None:
    """``trained`` follows what the groups did: a search whose every group was of one trial
    trained as processes, not as the populations it planned."""
    from gpukeras.search import search_population

    groups = search_population.Groups(["learning_rate"], "trials train in batches")
    assert search_population.state(groups)["trained"] == "populations"  # nothing ended yet
    groups.as_trials["process"], groups.as_groups["process"] = 16, 16
    done = search_population.state(groups)
    assert done["trained"] == "processes"
    assert "16 in processes of their own" in done["why"]
    groups.as_trials["population"], groups.as_groups["population"] = 4, 1
    assert search_population.state(groups)["trained"] == "populations and processes"
