"""The input-wait verdict to trust (issue #28, item 3): one measurement for the live column
and the report, a verdict with a stated margin, advice that fits the data."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from conftest import run_on_jax
from gpukeras.train import advice, live, monitor, step_ledger, step_summary
from gpukeras.train.step_ledger import Step, StepRecord
from scripts import live_and_report

BOUND = {"input_wait_share": 0.3, "input_verdict": "highly input-bound"}


# The margin rule, on given numbers ------------------------------------------------
@pytest.mark.parametrize(
    ("share", "margin", "verdict", "near"),
    [
        (0.141, 0.02, "moderately input-bound", None),
        (0.099, 0.02, "moderately input-bound", None),
        (0.06, 0.03, "not input-bound", 0.05),  # within its margin above the 5 % line
        (0.04, 0.03, "not input-bound", 0.05),
        (0.21, 0.02, "moderately input-bound", 0.20),
        (0.25, 0.02, "highly input-bound", None),
        (0.02, 0.01, "not input-bound", None),
        (0.06, None, "moderately input-bound", None),  # no margin known: the share alone
    ],
)
def test_a_band_is_given_only_when_the_share_less_its_margin_clears_its_line(
    share: float, margin: float | None, verdict: str, near: float | None
) -> None:
    assert monitor.input_verdict(share, margin=margin) == verdict
    assert monitor.near_line(share, margin) == near


def test_noise_within_the_margin_does_not_raise_the_verdict() -> None:
    # Shares of similar runs scattered around 5 %, each with its margin: none is called
    # input-bound unless it clears the line by its margin.
    for share in (0.04, 0.05, 0.06, 0.07):
        assert monitor.input_verdict(share, margin=0.03) == "not input-bound"
    assert monitor.input_verdict(0.09, margin=0.03) == "moderately input-bound"
    # The fetch floor rule still holds beside the margin.
    assert monitor.input_verdict(0.3, wait_ms=0.1, resolution_ms=0.2, margin=0.01) == (
        "not input-bound"
    )


def record_of(waits: list[float], step: float = 1.0, epochs: int = 1) -> StepRecord:
    """Steps of ``step`` seconds each, waiting ``waits[i]`` of it, ``epochs`` epochs."""
    per_epoch = len(waits) // epochs
    steps, ends, now = [], {}, 0.0
    for i, wait in enumerate(waits):
        epoch = i // per_epoch
        steps.append(Step(epoch=epoch, begin=now, fetch_seconds=wait, returned=now + wait))
        now += step
        if (i + 1) % per_epoch == 0:
            ends[epoch] = now
            now += 5.0  # validation and the epoch's end: in no step's time
    return StepRecord(steps=steps, epoch_ends=ends)


def entries_of(record: StepRecord) -> list[step_ledger.Timed]:
    ledger = step_ledger.Ledger(0)
    ledger.update(record)
    return ledger.entries


def test_the_margin_comes_from_how_much_windows_of_steps_differ() -> None:
    steady = entries_of(record_of([0.1] * 40))
    assert step_ledger.share(steady) == pytest.approx(0.1)
    assert step_ledger.share_margin(steady) == step_ledger.MARGIN_FLOOR
    rng = np.random.default_rng(0)
    noisy = entries_of(record_of(list(rng.uniform(0.0, 0.2, 40))))
    margin = step_ledger.share_margin(noisy)
    assert margin is not None and step_ledger.MARGIN_FLOOR < margin < 0.1
    # Too few steps for three windows: no margin is claimed.
    assert step_ledger.share_margin(entries_of(record_of([0.1] * 14))) is None


def test_the_report_states_its_margin_and_the_line_it_is_near() -> None:
    waits = [0.06, 0.10] * 20  # 8 % of each step on average, varying
    steps = step_summary.summarize(record_of(waits), skip=0, batch_size=8)
    assert steps["input_wait_share"] == pytest.approx(0.08)
    context = advice.TrainingContext(backend="tensorflow", data="arrays")
    report = monitor.training_report(steps, [], [], None, context)
    assert report["input_wait_margin"] == steps["input_wait_margin"] > 0
    assert report["input_wait_margin"] == step_ledger.MARGIN_FLOOR  # windows of 4 agree
    assert report["input_verdict"] == "moderately input-bound"
    assert report["input_near_line"] is None and report["input_wait_estimated"] is False
    wide = {**steps, "input_wait_margin": 0.04}
    near = monitor.training_report(wide, [], [], None, context)
    assert near["input_verdict"] == "not input-bound" and near["input_near_line"] == 0.05
    estimated = {**steps, "input_wait_share": None, "input_share_alone": 0.3}
    assert monitor.training_report(estimated, [], [], None, context)["input_wait_estimated"]


# One measurement ------------------------------------------------------------------
def test_the_summary_is_the_total_of_the_live_windows_from_the_same_steps() -> None:
    record = record_of([0.1, 0.3] * 15, epochs=3)
    record.fetch_floor_seconds = 0.05
    ledger = step_ledger.Ledger(2)
    summary = step_summary.summarize(record, skip=2, ledger=ledger)
    epochs = [step_ledger.totals(ledger.of_epoch(epoch)) for epoch in range(3)]
    waited = sum(window[0] for window in epochs if window)
    seconds = sum(window[1] for window in epochs if window)
    assert summary["input_wait_share"] == pytest.approx(waited / seconds, rel=1e-12)
    # The 5 s between epochs (validation, the epoch's end) are in no step's time.
    assert seconds == pytest.approx(28.0)
    assert summary["input_wait_share"] == pytest.approx(0.15)


def check_live_and_summary_agree(run: dict[str, Any]) -> None:
    """Each epoch line showed its window's share; the report's share is their total."""
    windows = [tuple(window) for window in run["windows"]]
    assert len(windows) == live_and_report.EPOCHS and len(run["shown"]) == len(windows)
    for shown, (waited, seconds) in zip(run["shown"], windows):
        assert shown == live.percent(100 * waited / seconds)
    total = sum(w for w, _ in windows) / sum(s for _, s in windows)
    assert run["share"] == pytest.approx(total, rel=1e-12)


def test_live_and_summary_agree_on_a_real_fit() -> None:
    check_live_and_summary_agree(live_and_report.fit_with_live_figures())


def test_live_and_summary_agree_on_a_real_fit_on_jax() -> None:
    run = run_on_jax("import live_and_report\n").readback
    assert run["backend"] == "jax"
    check_live_and_summary_agree(run)


# Advice that fits the data ----------------------------------------------------------
def all_advice(context: advice.TrainingContext, busy: bool = True) -> str:
    report = {**BOUND, "host_cpu_percent_mean": 97.0 if busy else 20.0}
    report["gpu_utilization_mean"] = 40.0
    return " ".join(advice.advice(report, context))


ARRAYS = {"source": "arrays", "cache": False, "user_map": False}


@pytest.mark.parametrize(("backend", "kind"), [("tensorflow", "arrays"), ("jax", "keras arrays")])
def test_r_data_in_memory_is_advised_on_batches_not_images_or_gpu_dataset(
    backend: str, kind: str
) -> None:
    table = advice.TrainingContext(backend=backend, gpus=["a GPU"], gpu_dataset=ARRAYS, data=kind)
    assert advice.data_form(table) == advice.IN_MEMORY
    text = all_advice(table)
    assert "image" not in text and "gpu_dataset()" not in text and "cache" not in text.lower()
    assert "Raise batch_size" in text and "steps_per_execution" in text
    assert ("on the device" in text) is (backend == "jax")


def test_a_gpu_dataset_of_rows_is_advised_on_batches_and_a_folder_on_its_images() -> None:
    rows = advice.TrainingContext(backend="tensorflow", gpus=["a GPU"], gpu_dataset=ARRAYS)
    assert advice.data_form(rows) == advice.DATASET_ROWS
    text = all_advice(rows)
    assert "Raise batch_size" in text and "image" not in text and "Cache" not in text
    folder = {"source": "image_folder", "cache": False, "user_map": False}
    images = advice.TrainingContext(backend="tensorflow", gpus=["a GPU"], gpu_dataset=folder)
    text = all_advice(images)
    assert "image_size" in text and "cache = TRUE" in text and "smaller images" in text
    csv = advice.TrainingContext(
        backend="tensorflow", gpus=["a GPU"], gpu_dataset={**folder, "source": "csv"}
    )
    assert "image" not in all_advice(csv)


def test_a_users_dataset_hears_of_images_only_when_the_model_takes_them() -> None:
    steps = ["Prefetch", "ParallelMap", "Cache"]
    table = advice.TrainingContext(backend="tensorflow", gpus=["a GPU"], pipeline_steps=steps)
    assert advice.data_form(table) == advice.USER_DATASET
    assert "image" not in all_advice(table)
    pictures = advice.TrainingContext(
        backend="tensorflow", gpus=["a GPU"], pipeline_steps=steps, images=True
    )
    assert "smaller images" in all_advice(pictures)


def test_data_on_the_device_or_from_a_generator_gets_advice_of_its_own() -> None:
    resident = advice.TrainingContext(
        backend="jax", gpus=["a GPU"], gpu_dataset={**ARRAYS, "on_device": True}
    )
    assert advice.data_form(resident) == advice.ON_DEVICE
    assert "gpu_dataset()" not in all_advice(resident, busy=False)
    other = advice.TrainingContext(backend="tensorflow", gpus=["a GPU"], data="other")
    assert "make it a gpu_dataset()" in all_advice(other, busy=False)
