"""The lines print() shows for gpu_batch_size()'s and gpu_tune()'s results.

Each function takes the plain data its tool returned (as R hands it back: a
missing value is None) and returns the lines R's ``format()`` method returns as
they are: the words and the tables are made here, once, and R only prints them.
A table is laid out as R's ``print(df, row.names = FALSE)`` lays one out (each
column right-aligned to its widest cell, a space before each), one line a row
however wide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]


def _missing(value: object) -> bool:
    """Whether ``value`` is R's NA: None, or a float NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _whole(value: float) -> str:
    """A number rounded to a whole one, with commas: ``1,234,567``."""
    return f"{round(value):,}"


def memory(mib: float | None) -> str:
    """MiB as GiB, MiB or (under 1 MiB) KiB; ``"?"`` when not known."""
    if _missing(mib):
        return "?"
    assert mib is not None
    if mib < 1:
        return f"{mib * 1024:.1f} KiB"
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def table_lines(columns: Mapping[str, Sequence[str]]) -> list[str]:
    """A table's lines, header first: each column right-aligned to its widest cell or name."""
    widths = {name: max([len(name), *map(len, cells)]) for name, cells in columns.items()}
    rows = len(next(iter(columns.values()), []))
    return [
        "".join(f" {name:>{widths[name]}}" for name in columns),
        *(
            "".join(f" {cells[i]:>{widths[name]}}" for name, cells in columns.items())
            for i in range(rows)
        ),
    ]


def _steps_rule_line(rule: Row) -> str:
    min_steps = int(rule["min_steps"])
    if rule.get("rows") is None:
        return (
            "Steps/epoch:   not known (the dataset's rows are not known): the rule of "
            f"{min_steps} or more steps per epoch is not applied."
        )
    return (
        f"Steps/epoch:   {min_steps} or more recommended: {_whole(rule['rows'])} training rows "
        f"allow batch_size {_whole(rule['largest_batch'])} at most."
    )


def _batch_table(trials: Sequence[Row], recommended: int, min_steps: int) -> list[str]:
    notes = []
    for trial in trials:
        reason = trial.get("reason") or ""
        note = (
            ""
            if trial["fits"]
            else ("over budget" if reason.startswith("over the") else reason.split(":")[0])
        )
        steps: Any = trial.get("steps_per_epoch")
        if trial["fits"] and not _missing(steps) and steps < min_steps:
            note = f"< {min_steps} steps"
        if trial["fits"] and trial["batch_size"] == recommended:
            note = "recommended"
        notes.append(note)
    # Padded to one width, the notes (and their header) read left-aligned.
    width = max(len(note) for note in [*notes, "note"])
    columns: dict[str, list[str]] = {
        "batch_size": [str(int(trial["batch_size"])) for trial in trials],
        "phase": [trial["phase"] for trial in trials],
        "fits": ["yes" if trial["fits"] else "no" for trial in trials],
        "samples/s": [
            "-" if _missing(t.get("samples_per_second")) else _whole(t["samples_per_second"])
            for t in trials
        ],
        "step_ms": ["-" if _missing(t.get("step_ms")) else f"{t['step_ms']:.2f}" for t in trials],
        "estimate": [memory(trial.get("estimated_mib")) for trial in trials],
    }
    if any(not _missing(trial.get("peak_mib")) for trial in trials):
        columns["peak"] = [
            "-" if _missing(t.get("peak_mib")) else memory(t["peak_mib"]) for t in trials
        ]
    columns["steps/epoch"] = [
        "-" if _missing(t.get("steps_per_epoch")) else _whole(t["steps_per_epoch"]) for t in trials
    ]
    columns["note".ljust(width)] = [note.ljust(width) for note in notes]
    return table_lines(columns)


def _recommended_lines(
    trials: Sequence[Row], recommended: int, fastest: int, rule: Row
) -> list[str]:
    fitting = [trial for trial in trials if trial["fits"]]
    chosen = next(trial for trial in fitting if trial["batch_size"] == recommended)
    faster = next(trial for trial in fitting if trial["batch_size"] == fastest)
    min_steps = int(rule["min_steps"])
    steps: Any = chosen.get("steps_per_epoch")
    rows: Any = rule.get("rows")
    if rule.get("rows") is None or fastest == recommended:
        why = "the fastest"
    elif steps < min_steps:
        why = (
            f"the smallest that fits: no size makes {min_steps} steps per epoch of "
            f"{_whole(rows)} rows"
        )
    else:
        why = f"the fastest with {min_steps} or more steps per epoch"
    per_epoch = "" if _missing(steps) else f", {_whole(steps)} steps per epoch"
    lines = [
        f"Recommended:   batch_size = {recommended}, {why} "
        f"({_whole(chosen['samples_per_second'])} samples/s, "
        f"{chosen['step_ms']:.2f} ms a step{per_epoch})."
    ]
    if fastest != recommended:
        its: Any = faster.get("steps_per_epoch")
        lines.append(
            f"               batch_size = {fastest} ran faster "
            f"({_whole(faster['samples_per_second'])} samples/s) but makes "
            f"{'NA' if _missing(its) else _whole(its)} step{'' if its == 1 else 's'} per epoch."
        )
    return lines


def batch_size_lines(result: Row) -> list[str]:
    """print(gpu_batch_size())'s lines: how sizes were judged, the estimate, the steps rule, a
    row per size, the size recommended and why, and the largest that fits."""
    trials = result["trials"]
    rule = result["steps_rule"]
    estimate = result["estimate"]
    budget = result["budget"]
    device = result["device"]
    recommended, fastest, largest = (
        int(result["recommended"]),
        int(result["fastest"]),
        int(result["largest"]),
    )
    if budget.get("mib") is None:
        judged = "by running each size (out-of-memory errors decide)"
    else:
        judged = (
            f"{'by running each size and ' if device.startswith('GPU') else ''}"
            "by the memory estimate against a "
            f"budget of {memory(budget['mib'])} ({budget['source']})"
        )
    failing = result.get("smallest_failing")
    if failing is None:
        limit = f"{largest} is max_batch: larger batches may fit (raise `max_batch`)."
    else:
        reason = next(trial["reason"] for trial in trials if trial["batch_size"] == failing)
        limit = f"{largest} ({int(failing)} does not: {reason})."
    uncounted = list(estimate.get("uncounted_layers") or [])
    settings = result["settings"]
    return [
        f"<gpukeras batch size> {device} ({result['device_name']}, {result['backend']}): "
        f"{len(trials)} sizes tried, "
        f"{int(settings['min_batch'])} to {int(settings['max_batch'])}",
        f"Fits:          {judged}",
        f"Estimate:      {memory(estimate['fixed_mib'])} + "
        f"{memory(estimate['per_sample_mib'])} per sample"
        + (f" (not counted: {', '.join(uncounted)} layers)" if uncounted else ""),
        _steps_rule_line(rule),
        *("  " + line for line in _batch_table(trials, recommended, int(rule["min_steps"]))),
        *_recommended_lines(trials, recommended, fastest, rule),
        f"Largest fits:  {limit}",
    ]


_SHORT_AXIS = {
    "baseline": "baseline",
    "precision": "precision",
    "batch_size": "batch",
    "steps_per_execution": "spe",
    "jit_compile": "jit",
}


def combination(run: Row) -> str:
    """A run's settings in words: ``float32, batch 32, steps_per_execution 1, jit_compile off``."""
    return (
        f"{run['precision']}, batch {int(run['batch_size'])}, "
        f"steps_per_execution {int(run['steps_per_execution'])}, "
        f"jit_compile {'on' if run['jit_compile'] is True else 'off'}"
    )


def _is_recommended(run: Row, best: Row) -> bool:
    return bool(run["sound"]) and all(
        run[key] == best[key] for key in _SHORT_AXIS if key != "baseline"
    )


def _strip(text: str | None, prefix: str, instead: str = "") -> str:
    if text is None:
        return "NA"
    return instead + text[len(prefix) :] if text.startswith(prefix) else text


def skipped_lines(skipped: Sequence[Row]) -> list[str]:
    """The runs gpu_tune() did not make, each with why: memory ones one by one, the budget's
    counted."""
    memory_runs = [run for run in skipped if run["reason"].startswith("memory:")]
    lines = [
        f"Skipped: {combination(run)}: {_strip(run['reason'], 'memory: ', 'memory, ')}"
        for run in memory_runs
    ]
    if len(memory_runs) < len(skipped):
        lines.append(f"Skipped (time_budget spent): {len(skipped) - len(memory_runs)} runs")
    return lines


def tune_lines(result: Row) -> list[str]:
    """print(gpu_tune())'s lines: a row per run, the unsound and stopped runs and the skipped
    ones below the table (a column of notes would make the table wrap at 80 columns), and the
    combination recommended."""
    runs = result["trials"]
    best = result.get("recommended")

    def cells(key: str, show: Any) -> list[str]:
        return ["-" if _missing(run.get(key)) else show(run[key]) for run in runs]

    table = {
        "run": [_SHORT_AXIS[run["axis"]] for run in runs],
        "precision": [run["precision"] for run in runs],
        "batch": [str(int(run["batch_size"])) for run in runs],
        "spe": [str(int(run["steps_per_execution"])) for run in runs],
        "jit": ["on" if run["jit_compile"] else "off" for run in runs],
        "data": [run.get("data") or "NA" for run in runs],
        "steps": cells("steps_per_epoch", _whole),
        "samples/s": cells("samples_per_second", _whole),
        "loss": cells("loss", lambda loss: f"{loss:5.4g}"),
        "numerics": ["sound" if run["sound"] else "UNSOUND" for run in runs],
    }
    lines = [
        f"<gpukeras tune> {len(runs)} runs in {result['seconds']:.0f} s on {result['device']} "
        f"({result['device_name']}, {result['backend']} backend); "
        f"batch sizes: {result['batch_sizes_from']}",
        *table_lines(table),
        *(
            f"UNSOUND: {combination(run)}: {_strip(run.get('note'), 'unsound: ')}"
            for run in runs
            if not run["sound"]
        ),
        *(
            f"Stopped early: {combination(run)}: {_strip(run.get('note'), 'stopped early: ')}"
            for run in runs
            if run["stopped_early"]
        ),
        *skipped_lines(result.get("skipped") or []),
    ]
    if not _missing(result.get("loss_samples")):
        lines.append(
            "loss: mean training loss over the first "
            f"{_whole(result['loss_samples'])} samples of each run"
        )
    if best is None:
        return [*lines, "Recommended: none: no run was numerically sound."]
    base = next((run["samples_per_second"] for run in runs if run["axis"] == "baseline"), math.nan)
    chosen = next(
        (run["samples_per_second"] for run in runs if _is_recommended(run, best)), math.nan
    )
    lines += [
        f"Recommended: {combination(best)} ({_whole(chosen)} samples/s, "
        f"{chosen / base:.2f}x the baseline)",
        "Use it:      gpu_fit(model, data, tuned = tune) applies the batch size, "
        "steps_per_execution and jit_compile.",
    ]
    if best["precision"] != "float32":
        lines.append(
            "Precision:   gpu_fit() cannot change a built model's dtype policy: "
            "build the model after "
            f'gpu_setup(mixed_precision = "{_strip(best["precision"], "mixed_")}").'
        )
    return lines
