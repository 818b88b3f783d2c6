"""What print() shows of gpu_batch_size(), gpu_tune(), gpu_scaling() and gpu_lr_find().

Each function takes the plain data its tool returned (as R hands it back: a
missing value is None) and returns the lines R's ``format()`` method returns as
they are: the words and the tables are made here, once, and R only prints them.
(gpu_scaling() and gpu_lr_find() return theirs as ``lines``.)
A table is laid out as R's ``print(df, row.names = FALSE)`` lays one out (each
column right-aligned to its widest cell, a space before each), one line a row
however wide.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from gpukeras.core.r_words import whole

Row = Mapping[str, Any]


def _missing(value: object) -> bool:
    """Whether ``value`` is R's NA: None, or a float NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


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
        f"Steps/epoch:   {min_steps} or more recommended: {whole(rule['rows'])} training rows "
        f"allow batch_size {whole(rule['largest_batch'])} at most."
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
            "-" if _missing(t.get("samples_per_second")) else whole(t["samples_per_second"])
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
        "-" if _missing(t.get("steps_per_epoch")) else whole(t["steps_per_epoch"]) for t in trials
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
            f"{whole(rows)} rows"
        )
    else:
        why = f"the fastest with {min_steps} or more steps per epoch"
    per_epoch = "" if _missing(steps) else f", {whole(steps)} steps per epoch"
    lines = [
        f"Recommended:   batch_size = {recommended}, {why} "
        f"({whole(chosen['samples_per_second'])} samples/s, "
        f"{chosen['step_ms']:.2f} ms a step{per_epoch})."
    ]
    if fastest != recommended:
        its: Any = faster.get("steps_per_epoch")
        lines.append(
            f"               batch_size = {fastest} ran faster "
            f"({whole(faster['samples_per_second'])} samples/s) but makes "
            f"{'NA' if _missing(its) else whole(its)} step{'' if its == 1 else 's'} per epoch."
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
        "steps": cells("steps_per_epoch", whole),
        "samples/s": cells("samples_per_second", whole),
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
            f"{whole(result['loss_samples'])} samples of each run"
        )
    if best is None:
        return [*lines, "Recommended: none: no run was numerically sound."]
    base = next((run["samples_per_second"] for run in runs if run["axis"] == "baseline"), math.nan)
    chosen = next(
        (run["samples_per_second"] for run in runs if _is_recommended(run, best)), math.nan
    )
    lines += [
        f"Recommended: {combination(best)} ({whole(chosen)} samples/s, "
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


def scaling_lines(result: Row) -> list[str]:
    """print(gpu_scaling())'s lines but its advice (R writes that, with its arrow): the efficiency
    and its verdict, the best rate on one device and on all, and the batch."""
    runs = result["runs"]
    replicas = int(result["replicas"])
    one, all_ = (
        max(run["samples_per_second"] for run in runs if run["devices"] == n) for n in (1, replicas)
    )
    efficiency, speedup = result["efficiency"], result["speedup"]
    verdict = (
        "scales well"
        if efficiency >= 0.8
        else "slower than one device"
        if speedup < 1
        else "scales poorly"
    )
    batch, per_device = result.get("batch_size"), result.get("per_replica_batch_size")
    batch_text = "the dataset's" if batch is None else str(int(batch))
    return [
        f"<gpukeras scaling> {replicas} devices ({', '.join(result['devices'])}), "
        f"{result['backend']} backend: efficiency {efficiency:.2f}, {verdict}",
        f"  one device ({result['devices'][0]}): {whole(one)} samples/s",
        f"  {replicas} devices:       {whole(all_)} samples/s ({speedup:.2f}x one device; "
        f"perfect scaling would be {replicas}x)",
        f"  global batch {batch_text}, "
        f"{'?' if per_device is None else int(per_device)} per device; "
        f"best of {max(int(run['round']) for run in runs)} runs each",
    ]


def _rate(value: float | None) -> str:
    """A learning rate to 3 significant digits in scientific notation, as R's format() writes
    it (``1e-05``, ``3.16e-04``); ``"none"`` for none."""
    if _missing(value):
        return "none"
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"


def lr_find_lines(found: Row) -> list[str]:
    """print(gpu_lr_find())'s lines: the steps and the range, why it stopped, the rates suggested
    (or, where none is, the advice) and the one to use."""
    settings, suggested = found["settings"], found["suggested"]
    if found.get("advice") is not None:
        suggestion = ["Suggested: none", f"Advice:    {found['advice']}"]
    else:
        suggestion = [
            f"Suggested: {_rate(suggested['valley'])} (valley); steepest "
            f"{_rate(suggested['steepest'])}; minimum/10 {_rate(suggested['minimum'])}"
        ]
    use = found.get("recommended")
    return [
        f"<gpukeras lr_find> {len(found['lr'])} of {int(settings['steps'])} steps, learning rate "
        f"{_rate(settings['min_lr'])} to {_rate(settings['max_lr'])} ({settings['optimizer']}, "
        f"{settings['backend']} backend)",
        f"Stopped:   {found['stopped']}",
        *suggestion,
        *(
            []
            if _missing(use)
            else [
                f"Use it:    {_rate(use)} as the optimizer's learning rate, or the peak of "
                "lr_warmup_cosine()"
            ]
        ),
    ]


def step_range(steps: Sequence[int]) -> str:
    """Steps as a range where they run on (``2-4``), one (``5``), else listed (``1, 3``)."""
    if not steps:
        return "none"
    steps = [int(step) for step in steps]
    if steps == list(range(min(steps), max(steps) + 1)):
        return str(steps[0]) if len(steps) == 1 else f"{min(steps)}-{max(steps)}"
    return ", ".join(map(str, steps))


def _bytes(size: float) -> str:
    """A size in the largest binary unit below it: ``504 B``, ``1.0 KiB``, ``2.9 MiB``."""
    for unit, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if size >= unit:
            return f"{size / unit:.1f} {name}"
    return f"{size:.0f} B"


def _trace_lines(trace: Row) -> list[str]:
    if not trace.get("parsed"):
        return [f"Trace:          not read ({trace.get('note') or '?'})"]
    mean = trace.get("step_time_mean_ms")
    lines = [
        f"Trace:          steps {step_range(trace.get('steps') or [])} found; host step "
        f"{'?' if mean is None else f'{mean:.2f}'} ms"
    ]
    if trace.get("input_share") is not None:
        lines.append(
            f"  input: {100 * trace['input_share']:.1f}% of the traced steps in tf.data's iterator "
            f"ops ({trace['input_ms']:.2f} ms): {trace.get('input_verdict') or '?'}"
        )
    devices = trace.get("devices") or []
    lines += [
        f"  {device['plane']} busy {100 * device['busy_share']:.1f}% of the traced steps "
        f"({device['busy_ms']:.2f} ms, {whole(device['events'])} events)"
        for device in devices
    ]
    if not devices and trace.get("note") is not None:
        lines.append(f"                {trace['note']}")
    return lines


def profile_lines(result: Row) -> list[str]:
    """print(gpu_profile())'s lines but the step timer's (R writes those as gpu_fit()'s print
    does, after the first line): the range and where it ran, the trace, the files, the scalars
    read back, the logs and how to open them."""
    settings = result["settings"]
    device = settings.get("device")
    devices = [device] if isinstance(device, str) else list(device or [])
    where = [part for part in (result.get("backend"), settings.get("dtype_policy")) if part]
    files = result.get("trace_files") or []
    scalars = result.get("scalars") or {}
    metrics = [name for name in scalars if name != "step"]
    tensorboard = result["tensorboard"]
    return [
        f"<gpukeras profile> steps {int(result['steps']['start'])}-{int(result['steps']['stop'])}"
        + (f" on {', '.join(devices)}" if devices else "")
        + (f" ({', '.join(where)})" if where else ""),
        *_trace_lines(result["trace"]),
        *(
            [
                f"{'Trace files:' if i == 0 else '':16}{file['path']} ({_bytes(file['bytes'])})"
                for i, file in enumerate(files)
            ]
            or ["Trace files:    none"]
        ),
        f"Scalars:        {', '.join(metrics) if metrics else 'none'} for "
        f"{len(scalars.get('step') or [])} steps (from {result.get('scalars_source') or '?'})",
        f"Logs:           {result['logdir']}",
        f"Open with:      {tensorboard['command']}",
        *([] if tensorboard.get("note") is None else [f"                {tensorboard['note']}"]),
    ]


_CV_TRAINED = {
    "population": "as one population in a worker process",
    "processes": "each in a fresh worker process",
}


def cv_lines(
    folds: int,
    split: str,
    seed: int,
    trained: str,
    why: str | None,
    devices: Sequence[str],
    metrics: Mapping[str, Sequence[float]],
) -> list[str]:
    """print(gpu_cv())'s lines: the folds and how they were split, where and how the fits ran
    (``trained``: "population", "processes" or both, and why), and each held-out metric's mean
    and standard deviation over the folds."""
    how = _CV_TRAINED.get(trained, "some as one population, others each in a fresh worker process")
    where = ", ".join(f"{devices.count(device)} on {device}" for device in sorted(set(devices)))
    return [
        f"<gpukeras_cv> {folds} folds ({split}), seed {seed}",
        f"Fits:     {how}: {where}",
        *([] if why is None else [f"          ({why})"]),
        "Held-out metrics, mean (sd) over the folds:",
        *(
            f"  {name:<12} {statistics.mean(values):.4g} (sd {statistics.stdev(values):.2g})"
            for name, values in metrics.items()
        ),
    ]


def audit_lines(
    findings: Mapping[str, Sequence[Any]],
    info: Row | None = None,
    width: int = 74,
    bullet: str = "*",
    arrow: str = "->",
) -> list[str]:
    """print(gpu_audit())'s lines, for its rows as they are (a subset too): a header (the
    model, backend, layers checked and batch size from ``info``, where R still has it) with
    the counts, then the warnings and those worth a look, each finding and its advice
    wrapped to ``width`` as R's ``strwrap()`` does, then which layers' FLOPs were not
    counted. ``findings``: the columns of ``tools.audit``'s rows (a share not known is
    None or NaN); ``bullet`` and ``arrow``: the symbols the console shows."""
    info = info or {}
    header = "<gpukeras audit>"
    if info.get("model") is not None:
        header += (
            f" model '{info['model']}' ({info['backend']} backend), "
            f"{int(info['layers'])} layers checked"
        )
    if info.get("batch_size") is not None:
        header += f", batch size {int(info['batch_size'])}"
    rows = [dict(zip(findings, row, strict=True)) for row in zip(*findings.values(), strict=True)]
    if not rows:
        return [header, "No findings: nothing in this model stands in the way of the GPU."]

    def wrap(text: str, indent: int) -> list[str]:
        return textwrap.wrap(
            text,
            width - 1,
            initial_indent=" " * indent,
            subsequent_indent=" " * (indent + 2),
            break_long_words=False,
            break_on_hyphens=False,
        )

    lines: list[str] = []
    counts = {}
    for severity, title in (("warning", "Warnings"), ("info", "Worth a look")):
        these = [row for row in rows if row["severity"] == severity]
        counts[severity] = len(these)
        if these:
            lines.append(f"{title} ({len(these)}):")
        for row in these:
            share = row["flops_share"]
            share = "" if _missing(share) else f", {100 * share:.0f}% of FLOPs"
            what = row["layer"]
            if row["layer_class"]:
                what += f" ({row['layer_class']}{share})"
            lines += wrap(f"{bullet} {what}: {row['finding']}", 2)
            lines += wrap(f"{arrow} {row['advice']}", 4)
    warnings = counts["warning"]
    summary = f"{warnings} warning{'' if warnings == 1 else 's'}, {counts['info']} to look at"
    uncounted = info.get("uncounted") or []
    note = (
        [f"FLOP shares are of the counted FLOPs (not counted: {', '.join(uncounted)})."]
        if uncounted
        else []
    )
    return [f"{header}: {summary}", *lines, *note]
