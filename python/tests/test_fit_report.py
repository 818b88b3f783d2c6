"""print(fit)'s lines as the core writes them (train/fit_report.py): numbers as R's
format() writes them, the monitor's report, the head and the settings."""

from __future__ import annotations

import pytest

from gpukeras.core.r_words import r_number
from gpukeras.data.pipeline_facts import benchmark_line, dataset_lines
from gpukeras.serve.predict_file import written_lines
from gpukeras.train.fit import signal_warning
from gpukeras.train.fit_report import fit_lines, monitor_lines


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (1.0, 7, "1"),
        (0.5, 7, "0.5"),
        (1e-4, 7, "1e-04"),
        (100000.0, 7, "1e+05"),
        (123456.0, 7, "123456"),
        (0.999, 7, "0.999"),
        (1.23456789, 4, "1.235"),
        (32, 7, "32"),
        (False, 7, "FALSE"),
        ("auto", 7, "auto"),
    ],
)
def test_numbers_are_written_as_r_formats_them(value: object, digits: int, text: str) -> None:
    assert r_number(value, digits) == text


def test_the_monitor_report_says_throughput_input_gpu_compute_and_advice() -> None:
    lines = monitor_lines(
        {
            "samples_per_second": 123456.7,
            "step_time_mean_ms": 25.6,
            "step_time_sd_ms": 1.5,
            "batch_time_mean_ms": 3.25,
            "steps_per_execution": 8,
            "input_wait_share": 0.074,
            "input_wait_mean_ms": 0.09,
            "fetch_floor_ms": 0.13,
            "input_verdict": "not input-bound",
            "gpu_utilization_mean": 87.4,
            "gpu_utilization_p95": 99,
            "gpu_memory_used_max_mib": 2048,
            "achieved_tflops": 1.5,
            "mfu": 0.25,
            "advice": "Use mixed precision.",  # one advice arrives from R as one string
        },
        arrow="->",
    )
    assert lines == [
        "Throughput:     123,457 samples/s; step 3.25 ms (8 steps a call: 25.60 ms, sd 1.50 ms)",
        "Input pipeline: not input-bound (waiting for input 7.4% of step time, 0.09 ms a step: "
        "less than the "
        "0.13 ms taking a ready batch takes)",
        "GPU:            utilization mean 87%, p95 99%; memory used up to 2.0 GiB",
        "Compute:        1.5 TFLOP/s achieved; MFU 25.0%",
        "Advice:",
        "  -> Use mixed precision.",
    ]
    assert monitor_lines(None) == ["Monitor: off (monitor = FALSE)"]
    estimated = monitor_lines(
        {"input_share_alone": 0.2, "pipeline_batch_ms": 1.5, "input_verdict": "input-bound"}
    )
    assert estimated[1:3] == [
        "Input pipeline: input-bound, estimated: the pipeline alone takes 1.50 ms a batch, "
        "20.0% of a training step",
        "                (input wait not measured)",
    ]


def test_the_head_names_class_weights_by_levels_and_the_settings_follow() -> None:
    settings = {
        "backend": "jax",
        "dtype_policy": "float32",
        "device": "CPU:0",
        "seconds": 150,
        "data": "250 rows of R data",
        "validation_data": "50 rows",
        "data_path": {"why": "on the device"},
        "weights": {
            "training": "class_weight",
            "class_weight": {"0": 1, "1": 2.5},
            "note": "train loss only",
        },
        "steps_per_epoch": 1234,
        "clipnorm": 1.0,
        "seed": 3,
        "deterministic": True,
        "backup_dir": "/tmp/b",
        "backup_freq": 100,
        "resumed_from": {"epoch": 2, "batches_done": 1234},
        "best": {"monitor": "val_loss", "best": [{"epoch": 3, "value": 0.123456}]},
    }
    lines = fit_lines(
        settings,
        None,
        epochs=1,
        encoding={
            "inputs": {},
            "input_order": [],
            "y": {"type": "factor", "levels": ["no", "yes"]},
        },
        learning_rate="0.001 (constant)",
    )
    assert lines["head"] == [
        "<gpukeras fit> 1 epoch on CPU:0 (jax, float32) in 2.5 min",
        "Data:           250 rows of R data; validation: 50 rows; on the device",
        "Weights:        class_weight no = 1, yes = 2.5",
        "                train loss only",
        "Encoding:       classes no, yes; predict(fit, newdata) and gpu_save() encode new data "
        "the same way",
    ]
    assert lines["settings"] == [
        "Settings:       1,234 steps per epoch, clipnorm 1, seed 3, deterministic ops",
        "Learning rate:  0.001 (constant)",
        "Backups:        /tmp/b, every 100 batches (resumed in epoch 2, after 1,234 batches)",
        "Best kept:      1 by val_loss (best: epoch 3, 0.1235); fit$settings$best",
    ]


def test_a_dataset_prints_its_rows_classes_input_and_pixels() -> None:
    info = {
        "role": "train",
        "source": "image folder",
        "rows": 12,
        "files": 20,
        "class_names": [f"c{i}" for i in range(12)],
        "batches": 1,
        "element_spec": "(TensorSpec(...), TensorSpec(...))",
        "steps": ["read", "batch"],
        "pixel_range": [0, 255.0],
        "rescale": None,
        "dropped_rows": 2,
    }
    assert dataset_lines(info, "  input:   x") == [
        "<gpukeras_dataset> train pipeline from image folder: 12 of 20 images in 12 classes, "
        "1 batch",
        "  element: (TensorSpec(...), TensorSpec(...))",
        "  steps:   read -> batch",
        "  classes: c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, and 2 more",
        "  input:   x",
        "  pixels:  float32 in [0, 255] (rescale = 1/255 reads them in [0, 1])",
        "  dropped 2 row(s) with NA",
    ]
    unknown = {"role": "validation", "source": "csv", "batches": None, "cardinality": "unknown"}
    unknown["vocabulary"] = {"colour": ["red", "blue"], "size": "small"}
    lines = dataset_lines(unknown)
    assert (
        lines[0] == "<gpukeras_dataset> validation pipeline from csv: rows not known until read, "
        "unknown batches"
    )
    assert lines[-1] == "  vocabulary: colour (2 levels), size (1 levels)"


def test_the_core_words_a_constant_rate_and_other_keras_schedules() -> None:
    def rate(value: object) -> list[str]:
        return [line for line in fit_lines({"learning_rate": value})["settings"] if "rate" in line]

    assert rate(1e-4) == ["Learning rate:  1e-04 (constant)"]
    assert rate(
        {"schedule": "PolynomialDecay", "decay_steps": 100, "cycle": False, "name": None}
    ) == ["Learning rate:  PolynomialDecay(decay_steps = 100, cycle = FALSE)"]


def test_a_predictions_file_prints_its_rows_and_times() -> None:
    times = {"model": 1.25, "reading": 90.0, "writing": 7200.0, "waiting_for_writer": 0.0}
    assert written_lines("/tmp/p.csv", 1234, 5, times) == [
        "<gpukeras_predictions_file> /tmp/p.csv",
        "  1,234 rows x 5 columns, written batch by batch (model 1.2 s, reading the data 1.5 min; "
        "writing 2.0 h, beside them)",
        '  read it with read.csv("/tmp/p.csv")',
    ]


def test_a_signal_after_the_last_step_is_a_warning_as_data() -> None:
    assert signal_warning(None) == []
    [said] = signal_warning("SIGTERM")
    assert said["class"] == "signal"
    assert said["message"].startswith(
        "SIGTERM arrived after the last training step: training completed"
    )


def test_a_pipeline_benchmark_prints_in_one_line() -> None:
    speed = {
        "steps": 20,
        "seconds": 0.0123,
        "batches_per_second": 1626.04,
        "elements_per_second": 26016.6,
    }
    assert benchmark_line(speed) == (
        "<gpukeras pipeline benchmark> 1,626 batches/s, 26,017 elements/s (20 batches in 0.012 s)"
    )
