"""tools/result_lines.py: the lines print() shows for gpu_batch_size()'s and gpu_tune()'s."""

from __future__ import annotations

from gpukeras.tools import result_lines


def test_memory_is_shown_in_kib_mib_or_gib_and_unknown_as_a_question_mark() -> None:
    shown = [result_lines.memory(mib) for mib in (0.5, 2, 4096, None, float("nan"))]
    assert shown == ["512.0 KiB", "2 MiB", "4.0 GiB", "?", "?"]


def test_a_table_is_laid_out_as_r_prints_a_data_frame_without_row_names() -> None:
    lines = result_lines.table_lines(
        {"a": ["x", "yyy"], "samples/s": ["1", "22"], "note": ["ab  ", "    "]}
    )
    assert lines == ["   a samples/s note", "   x         1 ab  ", " yyy        22     "]


def test_runs_skipped_for_memory_say_why_one_by_one_and_those_the_budget_left_out_are_counted() -> (
    None
):
    def skipped(precision: str, batch: int, spe: int, reason: str) -> dict[str, object]:
        return {
            "axis": "batch_size",
            "precision": precision,
            "batch_size": batch,
            "steps_per_execution": spe,
            "jit_compile": True,
            "reason": reason,
        }

    runs = [
        skipped("float32", 1024, 1, "memory: needs 9,000 MiB by gpu_memory_plan(), 8,000 MiB free"),
        skipped("mixed_bfloat16", 512, 1, "memory: out of memory when it ran (RESOURCE_EXHAUSTED)"),
        skipped("float32", 64, 8, "time: the budget was spent"),
    ]
    assert result_lines.skipped_lines(runs) == [
        "Skipped: float32, batch 1024, steps_per_execution 1, jit_compile on: memory, "
        "needs 9,000 MiB by "
        "gpu_memory_plan(), 8,000 MiB free",
        "Skipped: mixed_bfloat16, batch 512, steps_per_execution 1, jit_compile on: memory, "
        "out of memory when it "
        "ran (RESOURCE_EXHAUSTED)",
        "Skipped (time_budget spent): 1 runs",
    ]
    assert result_lines.skipped_lines([]) == []


def _run(
    axis: str, precision: str, rate: float, sound: bool = True, note: str | None = None
) -> dict[str, object]:
    return {
        "axis": axis,
        "precision": precision,
        "batch_size": 32,
        "steps_per_execution": 1,
        "jit_compile": False,
        "samples_per_second": rate,
        "loss": 0.5 if sound else float("nan"),
        "sound": sound,
        "stopped_early": False,
        "note": note,
        "data": "host",
        "steps_per_epoch": None,
    }


def test_tune_lines_recommend_a_sound_run_and_say_how_to_build_for_its_precision() -> None:
    result = {
        "trials": [_run("baseline", "float32", 1000), _run("precision", "mixed_bfloat16", 2500)],
        "recommended": {
            "precision": "mixed_bfloat16",
            "batch_size": 32,
            "steps_per_execution": 1,
            "jit_compile": False,
        },
        "loss_samples": None,
        "skipped": [],
        "device": "CPU:0",
        "device_name": "CPU",
        "backend": "jax",
        "batch_sizes_from": "given",
        "seconds": 4.6,
    }
    lines = result_lines.tune_lines(result)
    assert (
        lines[0] == "<gpukeras tune> 2 runs in 5 s on CPU:0 (CPU, jax backend); batch sizes: given"
    )
    assert lines[1].split() == [
        "run",
        "precision",
        "batch",
        "spe",
        "jit",
        "data",
        "steps",
        "samples/s",
        "loss",
        "numerics",
    ]
    assert lines[3].split() == [
        "precision",
        "mixed_bfloat16",
        "32",
        "1",
        "off",
        "host",
        "-",
        "2,500",
        "0.5",
        "sound",
    ]
    assert "  0.5 " in lines[3]  # as R's formatC(digits = 4) pads it
    assert lines[4] == (
        "Recommended: mixed_bfloat16, batch 32, steps_per_execution 1, jit_compile off "
        "(2,500 samples/s, 2.50x the "
        "baseline)"
    )
    assert lines[-1].endswith('build the model after gpu_setup(mixed_precision = "bfloat16").')
    unsound = {
        **result,
        "trials": [_run("baseline", "float32", 900, False, "unsound: the loss became NaN")],
        "recommended": None,
    }
    assert result_lines.tune_lines(unsound)[-2:] == [
        "UNSOUND: float32, batch 32, steps_per_execution 1, jit_compile off: the loss became NaN",
        "Recommended: none: no run was numerically sound.",
    ]


def test_batch_size_lines_pass_over_a_faster_size_that_makes_too_few_steps() -> None:
    def trial(batch: int, rate: float) -> dict[str, object]:
        return {
            "batch_size": batch,
            "phase": "double",
            "fits": True,
            "samples_per_second": rate,
            "step_ms": 1000 * batch / rate,
            "estimated_mib": 1 + batch / 100,
            "peak_mib": None,
            "reason": None,
            "steps_per_epoch": -(-150 // batch),
        }

    result = {
        "trials": [trial(8, 4000), trial(16, 8000), trial(32, 12000)],
        "recommended": 16,
        "fastest": 32,
        "largest": 32,
        "smallest_failing": None,
        "steps_rule": {"min_steps": 8, "rows": 150, "largest_batch": 18},
        "device": "CPU:0",
        "device_name": "AMD EPYC",
        "backend": "tensorflow",
        "budget": {"mib": 300, "source": "memory_budget_mib"},
        "estimate": {"fixed_mib": 1, "per_sample_mib": 0.01, "uncounted_layers": []},
        "settings": {"min_batch": 8, "max_batch": 32},
    }
    lines = result_lines.batch_size_lines(result)
    assert lines[2] == "Estimate:      1 MiB + 10.2 KiB per sample"
    assert (
        lines[3]
        == "Steps/epoch:   8 or more recommended: 150 training rows allow batch_size 18 at most."
    )
    assert (
        lines[4] == "   batch_size  phase fits samples/s step_ms estimate steps/epoch note       "
    )
    assert lines[6].endswith(" 10 recommended")
    assert lines[7].endswith("  5 < 8 steps  ")
    assert lines[-3:] == [
        "Recommended:   batch_size = 16, the fastest with 8 or more steps per epoch "
        "(8,000 samples/s, 2.00 ms a "
        "step, 10 steps per epoch).",
        "               batch_size = 32 ran faster (12,000 samples/s) but makes 5 steps per epoch.",
        "Largest fits:  32 is max_batch: larger batches may fit (raise `max_batch`).",
    ]


def test_scaling_lines_give_the_efficiency_the_best_rates_and_the_batch() -> None:
    runs = [
        {"devices": 1, "round": 1, "samples_per_second": 1000.0},
        {"devices": 2, "round": 1, "samples_per_second": 1500.0},
        {"devices": 2, "round": 2, "samples_per_second": 1800.0},
    ]
    result = {
        "runs": runs,
        "replicas": 2,
        "efficiency": 0.9,
        "speedup": 1.8,
        "devices": ["GPU:0", "GPU:1"],
        "backend": "jax",
        "batch_size": 64,
        "per_replica_batch_size": 32,
    }
    assert result_lines.scaling_lines(result) == [
        "<gpukeras scaling> 2 devices (GPU:0, GPU:1), jax backend: efficiency 0.90, scales well",
        "  one device (GPU:0): 1,000 samples/s",
        "  2 devices:       1,800 samples/s (1.80x one device; perfect scaling would be 2x)",
        "  global batch 64, 32 per device; best of 2 runs each",
    ]
    slower = {
        **result,
        "efficiency": 0.4,
        "speedup": 0.8,
        "batch_size": None,
        "per_replica_batch_size": None,
    }
    lines = result_lines.scaling_lines(slower)
    assert lines[0].endswith("efficiency 0.40, slower than one device")
    assert lines[3] == "  global batch the dataset's, ? per device; best of 2 runs each"


def test_lr_find_lines_write_rates_as_r_does_and_advise_where_nothing_is_suggested() -> None:
    found = {
        "lr": [1e-5, 1e-3, 1e-1],
        "stopped": "the loss diverged",
        "advice": None,
        "recommended": 3.16e-4,
        "suggested": {"valley": 3.16e-4, "steepest": 1e-3, "minimum": None},
        "settings": {
            "steps": 60,
            "min_lr": 1e-5,
            "max_lr": 10.0,
            "optimizer": "Adam",
            "backend": "jax",
        },
    }
    assert result_lines.lr_find_lines(found) == [
        "<gpukeras lr_find> 3 of 60 steps, learning rate 1e-05 to 1e+01 (Adam, jax backend)",
        "Stopped:   the loss diverged",
        "Suggested: 3.16e-04 (valley); steepest 1e-03; minimum/10 none",
        "Use it:    3.16e-04 as the optimizer's learning rate, or the peak of lr_warmup_cosine()",
    ]
    none = {**found, "advice": "Raise max_lr.", "recommended": None}
    assert result_lines.lr_find_lines(none)[2:] == ["Suggested: none", "Advice:    Raise max_lr."]


def test_step_ranges_read_as_a_range_one_step_or_a_list() -> None:
    assert [result_lines.step_range(s) for s in ([2, 3, 4], [5], [1, 3], [])] == [
        "2-4",
        "5",
        "1, 3",
        "none",
    ]


def test_cv_lines_count_the_fits_by_device_and_summarise_each_metric() -> None:
    lines = result_lines.cv_lines(
        folds=3,
        split="stratified by the labels",
        seed=11,
        trained="processes",
        why=None,
        devices=["GPU:1", "GPU:0", "GPU:1"],
        metrics={"loss": [0.5, 0.7, 0.6], "accuracy": [0.9, 0.8, 1.0]},
    )
    assert lines == [
        "<gpukeras_cv> 3 folds (stratified by the labels), seed 11",
        "Fits:     each in a fresh worker process: 1 on GPU:0, 2 on GPU:1",
        "Held-out metrics, mean (sd) over the folds:",
        "  loss         0.6 (sd 0.1)",
        "  accuracy     0.9 (sd 0.1)",
    ]
    both = result_lines.cv_lines(
        3, "random", 1, "population and processes", "why", ["CPU:0"] * 3, {}
    )
    assert both[1:3] == [
        "Fits:     some as one population, others each in a fresh worker process: 3 on CPU:0",
        "          (why)",
    ]
