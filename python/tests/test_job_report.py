"""gpukeras.train.job_report: what the session says about a background job, from its folder.

The jobs themselves are tested from R (tests/testthat/test-job.R, test-job-disk.R); here
the words and decisions the R side takes from the core.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpukeras.train import job, job_report


def test_progress_reads_the_childs_fields_and_its_sample(tmp_path: Path) -> None:
    assert job_report.progress(str(tmp_path)) is None
    (tmp_path / job.PROGRESS_FILE).write_text(
        "attempt: 2\nepoch: 1\nepochs: 3\nbatch: 5\nbatches_per_second: 2.5\nlog_loss: 0.25\n"
    )
    read = job_report.progress(str(tmp_path))
    assert read is not None
    assert (read["attempt"], read["epoch"], read["batch"]) == (2.0, 1.0, 5.0)
    assert read["sample"]["batches_per_second"] == 2.5
    assert read["sample"]["samples_per_second"] is None
    assert read["sample"]["logs"] == {"loss": 0.25}


def test_status_lines_say_where_a_stopped_job_is_and_how_to_resume(tmp_path: Path) -> None:
    status = {
        "state": "cancelled",
        "elapsed": 3.21,
        "restarts": 1,
        "pid": 12,
        "causes": "the training process was killed by signal 9",
        "epoch": 2,
        "epochs": 3,
        "batch": 4,
        "steps": 10,
        "sample": {"samples_per_second": 12345.6, "logs": {"loss": 0.00001}},
        "backup_dir": str(tmp_path / "backup"),
        "resume": "gpu_fit(<same arguments>)",
    }
    lines = job_report.status_lines(status, str(tmp_path))
    assert lines[0] == "<gpukeras job status> cancelled after 3.2 s, 1 restart(s)"
    assert "  Process:  12" not in lines  # a stopped job has no process
    assert lines[1] == "  Progress: epoch 2/3, batch 4/10; 12,346 samples/s; loss 1.0000e-05"
    assert lines[2] == "  Crashed:  the training process was killed by signal 9"
    assert lines[3].startswith("  Cancelled in epoch 2; its backup is in ")
    assert "temporary folder" in lines[-1]
    running = job_report.status_lines(
        {"state": "running", "elapsed": 1, "pid": 7},
        str(tmp_path),
        job={"backup_dir": "b", "max_restarts": 3},
    )
    assert running[0].startswith("<gpukeras job> running")
    assert "  Backups:  b (up to 3 restart(s) after a crash)" in running


def test_an_ended_attempt_restarts_after_a_crash_and_fails_on_the_childs_error(
    tmp_path: Path,
) -> None:
    crash = job_report.attempt_ended(str(tmp_path), None, -9, 1, 1)
    assert crash["state"] == "restarting"
    assert crash["cause"].endswith("signal 9 (SIGKILL, e.g. the out-of-memory killer)")
    assert job_report.attempt_ended(str(tmp_path), None, 3, 2, 1)["state"] == "failed"
    failed = job_report.attempt_ended(str(tmp_path), ["gpukeras_error_bad_data"], None, 1, 3)
    assert failed == {"state": "failed", "cause": None, "no_space": False}
    unwritten = job_report.attempt_ended(str(tmp_path), "gpukeras_error_job_write", None, 1, 3)
    assert unwritten["no_space"] and str(tmp_path) in unwritten["cause"]


def test_a_cancelled_job_keeps_its_backup_alone_and_says_how_to_resume(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    assert job_report.resume_call(str(backup), 5) is None
    backup.mkdir()
    (backup / "gpukeras-backup.json").write_text("{}")
    (tmp_path / "data-x.npy").write_text("x")
    (tmp_path / "tmp").mkdir()
    assert job_report.resume_call(str(backup), 5) == (
        f'gpu_fit(<same arguments>, seed = 5, backup = gpu_backup("{backup}"))'
    )
    (tmp_path / job.PROGRESS_FILE).write_text("epoch: 2\nbatch: 3\n")
    stopped = job_report.cancelled(str(tmp_path), str(backup))
    assert (stopped["state"], stopped["epoch"]) == ("cancelled", 2.0)
    assert stopped["backup_dir"] == str(backup)
    assert stopped["resume"] == f'gpu_fit(<same arguments>, backup = gpu_backup("{backup}"))'
    assert [path.name for path in tmp_path.iterdir()] == ["backup"]


def test_failure_counts_the_attempts_on_a_full_disk() -> None:
    made = job_report.failure(
        {"state": "failed", "restarts": 1, "causes": ["full"]}, "last line", True, "free space"
    )
    assert made["message"][:2] == [
        "Training in the background stopped after 2 attempts: full.",
        "free space",
    ]
    assert made["bullets"][3] == " "
    assert made["class"] == ["gpukeras_error_job_write", "gpukeras_error_job_failed"]


def test_save_arrays_writes_each_part(tmp_path: Path) -> None:
    saved = job.save_arrays(
        {"x": {"a": np.ones((2, 2)), "b": np.zeros(2)}, "y": np.arange(2), "sample_weight": None},
        str(tmp_path),
        "data",
    )
    files = saved["files"]
    assert files["x"]["a"].endswith("data-x-a.npy")
    assert files["y"].endswith("data-y.npy") and files["sample_weight"] is None
    assert np.load(files["y"]).tolist() == [0, 1]


def test_search_status_lines() -> None:
    lines = job_report.search_status_lines(
        {
            "state": "cancelled",
            "done": 3,
            "trials": 10,
            "running": 1,
            "best": {"number": 2, "value": 0.123456},
            "objective": "val_loss",
            "storage": "/s",
        }
    )
    assert lines == [
        "Search cancelled: 3 of 10 trials done, 1 interrupted (run again when the search resumes)",
        "Best so far: trial 2, val_loss = 0.12346",
        "The study is kept in /s: the same gpu_search() call resumes it.",
    ]


def test_a_wait_that_timed_out_says_where_the_job_is_and_how_to_go_on() -> None:
    assert job_report.timed_out({"state": "running", "epoch": 2}, 0.5) == [
        "The job did not end within 0.5 seconds; it is still running.",
        "Wait again with gpu_job_wait(job), or stop it with gpu_job_cancel(job).",
    ]
    search = job_report.timed_out({"state": "running", "trials": 8, "done": 3}, 2.0)
    assert search[0] == "The search did not end within 2 seconds; 3 of 8 trials are done."
    assert search[1].endswith("gpu_job_cancel(job) (the study keeps its trials).")
