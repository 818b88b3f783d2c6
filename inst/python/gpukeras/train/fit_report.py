"""A gpu_fit() result in words: the lines print(fit) shows around its history table.

R keeps the fit's settings and monitor report as the core returned them and asks for
its lines when it prints (``fit_lines``): the head (the run, its data and weights),
the monitor's report (throughput, input pipeline, GPU, host, compute, advice, notes)
and the settings (strategy, step options, learning rate, backups, best models,
tracking). R writes the history table, the encoding's line and the learning rate's
words (R's schedules print themselves) and passes the arrow its console can show.
Numbers are written as R's ``format()`` writes them (``r_number``), so the lines are
those R wrote before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpukeras.core.r_words import big as _big
from gpukeras.core.r_words import r_number
from gpukeras.core.r_words import seconds as _seconds
from gpukeras.core.r_words import strings as _strings
from gpukeras.data.encoding import plain_encoding
from gpukeras.data.encoding_words import encoding_lines

INDENT = " " * 16


def fit_lines(
    settings: Mapping[str, Any] | None = None,
    monitor: Mapping[str, Any] | None = None,
    epochs: int = 0,
    encoding: Mapping[str, Any] | None = None,
    learning_rate: str | None = None,
    arrow: str = "->",
) -> dict[str, list[str]]:
    """The fit's lines for R to print: ``head`` (with the encoding's line), ``monitor``
    and ``settings``.

    ``settings`` and ``monitor`` are the fit's (as the core returned them, R's data
    description in ``settings["data"]``); ``epochs`` the epochs its history holds;
    ``encoding`` the recorded encoding, as R sends it (class weights are named by its
    labels' levels);
    ``learning_rate`` the learning rate in words where R writes them (gpukeras' own
    schedules); ``arrow`` the advice's bullet.
    """
    settings = settings or {}
    encoding = plain_encoding(encoding) if encoding is not None else None
    y = (encoding or {}).get("y") or {}
    levels = _strings(y.get("levels")) if y.get("type") == "factor" else []
    return {
        "head": _head(settings, epochs, levels) + encoding_lines(encoding, "fit"),
        "monitor": monitor_lines(monitor, arrow),
        "settings": _settings_lines(settings, learning_rate),
    }


def _items(value: Any) -> list[Any]:
    """A list R sent, where one element may arrive bare."""
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _percent(share: float, digits: int = 0) -> str:
    return f"{100 * share:.{digits}f}%"


def _mib(mib: float | None) -> str:
    if mib is None:
        return "?"
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def _flops(tflops: float) -> str:
    """FLOP/s in the unit that keeps the number readable."""
    units = {"TFLOP/s": 1.0, "GFLOP/s": 1e-3, "MFLOP/s": 1e-6, "kFLOP/s": 1e-9}
    name, unit = next(((n, u) for n, u in units.items() if tflops >= u), ("kFLOP/s", 1e-9))
    text = f"{tflops / unit:.3g}"
    return f"{text} {name}"


def _na(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _fixed(value: Any, digits: int) -> str:
    """``sprintf("%.<digits>f")`` of a number R may not have (NA)."""
    return "NA" if value is None else f"{float(value):.{digits}f}"


def _head(settings: Mapping[str, Any], epochs: int, levels: list[str]) -> list[str]:
    where = [str(settings[k]) for k in ("backend", "dtype_policy") if settings.get(k) is not None]
    devices = _strings(settings.get("device"))
    first = f"<gpukeras fit> {epochs} epoch{'' if epochs == 1 else 's'}"
    first += f" on {', '.join(devices)}" if devices else ""
    first += f" ({', '.join(where)})" if where else ""
    first += f" in {_seconds(settings['seconds'])}" if settings.get("seconds") is not None else ""
    data = _strings(settings.get("data"))
    data += [f"validation: {line}" for line in _strings(settings.get("validation_data"))]
    # Which way the data went on JAX (on the device, or streamed from host memory), and why;
    # on TensorFlow it always streams.
    why = (settings.get("data_path") or {}).get("why")
    if settings.get("backend") == "jax" and why is not None:
        data.append(str(why))
    lines = [first]
    if settings.get("simulated_gpu") is not None:
        lines.append(f"Auto choices:   for a {settings['simulated_gpu']}")
    if data:
        lines.append(f"Data:           {'; '.join(data)}")
    return lines + _weights_lines(settings.get("weights"), levels)


def _weights_lines(weights: Mapping[str, Any] | None, levels: list[str]) -> list[str]:
    """How the losses were weighted (data/weights.py describe()): class weights by the
    labels' names where the encoding has them, and the note on which losses they reach."""
    if weights is None:
        return []
    if weights.get("training") == "class_weight":
        named = []
        for code, weight in (weights.get("class_weight") or {}).items():
            index = int(code) if str(code).lstrip("-").isdigit() else -1
            name = levels[index] if 0 <= index < len(levels) else str(code)
            named.append(f"{name} = {r_number(weight)}")
        given = f"class_weight {', '.join(named)}"
    else:
        given = "sample weights given with the data"
    return [f"Weights:        {given}", f"                {weights.get('note')}"]


def monitor_lines(m: Mapping[str, Any] | None, arrow: str = "->") -> list[str]:
    """The monitor's report in print(fit) (and gpu_profile()'s timer lines)."""
    if m is None:
        return ["Monitor: off (monitor = FALSE)"]
    lines = [f"Throughput:     {_throughput(m)}"]
    if m.get("wall_samples_per_second") is not None:
        lines.append(
            f"{INDENT}{_big(round(m['wall_samples_per_second']))} samples/s over the epochs' wall"
            " time "
            "(compiling and stalls included)"
        )
    lines += [
        f"{'Input pipeline: ' if i == 0 else INDENT}{line}" for i, line in enumerate(_input(m))
    ]
    if m.get("gpu_utilization_mean") is None:
        gpu = f"not measured ({m.get('gpu_not_measured') or 'no GPU'})"
    else:
        gpu = _gpu_figures(
            m["gpu_utilization_mean"],
            m.get("gpu_utilization_p95"),
            m.get("gpu_memory_used_max_mib"),
        )
    lines.append(f"GPU:            {gpu}")
    if len(_items(m.get("gpus"))) > 1:
        lines += _each_gpu(m)
    if m.get("host_cpu_percent_mean") is not None:
        lines.append(f"Host CPU:       mean {m['host_cpu_percent_mean']:.0f}%")
    compute = [
        *(
            [f"{_flops(m['achieved_tflops'])} achieved"]
            if m.get("achieved_tflops") is not None
            else []
        ),
        *(
            [f"peak {_flops(m['peak_tflops'])} ({m.get('peak_source') or '?'})"]
            if m.get("peak_tflops") is not None
            else []
        ),
        *([f"MFU {_percent(m['mfu'], 1)}"] if m.get("mfu") is not None else []),
    ]
    if m.get("achieved_tflops") is not None or m.get("mfu") is not None:
        lines.append(f"Compute:        {'; '.join(compute)}")
    advice = _strings(m.get("advice"))
    if advice:
        lines += ["Advice:", *(f"  {arrow} {item}" for item in advice)]
    # findings to know, not to act on (a short or CPU run's input verdict): no arrow
    notes = _strings(m.get("notes"))
    if notes:
        lines += ["Notes:", *(f"  - {note}" for note in notes)]
    return lines


def _throughput(m: Mapping[str, Any]) -> str:
    """Samples/s and the time per training step (one batch); with several batches per
    call, also the time of a call, whose spread is the one measured."""
    per_call = m.get("steps_per_execution") or 1
    step_ms = m.get("batch_time_mean_ms") if per_call > 1 else m.get("step_time_mean_ms")
    step = None
    if step_ms is not None:
        sd = _fixed(m.get("step_time_sd_ms"), 2)
        if per_call > 1 and m.get("step_time_mean_ms") is not None:
            call = f"{int(per_call)} steps a call: {m['step_time_mean_ms']:.2f} ms, sd {sd} ms"
            step = f"step {step_ms:.2f} ms ({call})"
        else:
            step = f"step {step_ms:.2f} ms (sd {sd} ms)"
    if m.get("samples_per_second") is not None:
        rate: str | None = f"{_big(round(m['samples_per_second']))} samples/s"
    else:
        rate = "samples/s not known (rows per batch not seen)" if step is not None else None
    return "not measured" if rate is None else "; ".join(p for p in (rate, step) if p is not None)


def _input(m: Mapping[str, Any]) -> list[str]:
    """The input verdict and what it rests on: the wait timed (its margin, the line of the
    verdict it is near), none by construction (batches on the device), or the pipeline
    timed alone where Keras takes batches inside its graph loop. One line, or two where
    the second says why the wait was not timed."""
    if m.get("input_on_device"):
        return ["on the device (no wait by construction)"]
    if m.get("input_wait_share") is not None:
        margin = m.get("input_wait_margin")
        near = m.get("input_near_line")
        wait, floor = m.get("input_wait_mean_ms"), m.get("fetch_floor_ms")
        # Why a share over 5 % can still be "not input-bound" (the core's input_verdict()).
        within = wait is not None and floor is not None and wait < floor
        return [
            f"{m.get('input_verdict') or '?'} (waiting for input "
            f"{_percent(m['input_wait_share'], 1)}"
            + (f" +/- {100 * margin:.1f} points" if margin is not None and margin > 0 else "")
            + " of step time"
            + (f", near the {_percent(near)} line" if near is not None else "")
            + (
                f", {wait:.2f} ms a step: less than the {floor:.2f} ms taking a ready batch takes"
                if within
                else ""
            )
            + ")"
        ]
    why = m.get("input_wait_method") or "input wait not measured"
    if m.get("input_share_alone") is None:
        return [f"{m.get('input_verdict') or 'not known'} ({why})"]
    return [
        f"{m.get('input_verdict') or '?'}, estimated: the pipeline alone takes "
        f"{_fixed(m.get('pipeline_batch_ms'), 2)}"
        f" ms a batch, {_percent(m['input_share_alone'], 1)} of a training step",
        f"({why})",
    ]


def _gpu_figures(mean: float, p95: float | None, mib: float | None) -> str:
    return f"utilization mean {mean:.0f}%, p95 {_fixed(p95, 0)}%; memory used up to {_mib(mib)}"


def _each_gpu(m: Mapping[str, Any]) -> list[str]:
    """One line per GPU of a run on several, then how far apart they are."""
    lines = []
    for g in _items(m.get("gpus")):
        figures = (
            "not measured"
            if g.get("utilization_mean") is None
            else _gpu_figures(
                g["utilization_mean"], g.get("utilization_p95"), g.get("memory_used_max_mib")
            )
        )
        lines.append(f"  {g.get('device')} ({g.get('name') or '?'}): {figures}")
    if m.get("gpu_utilization_imbalance") is not None:
        lines.append(
            f"  imbalance: {m['gpu_utilization_imbalance']:.0f} points of utilization, "
            f"{_mib(m.get('gpu_memory_imbalance_mib'))} of memory between the busiest and the "
            "idlest GPU"
        )
    return [f"{' ' * 14}{line}" for line in lines]


def _run(settings: Mapping[str, Any]) -> list[str]:
    """The step options of the run, in the order print(fit) says them."""
    s = settings
    accumulate = s.get("accumulate")
    run = [
        *([f"rematerialized ({s['remat']})"] if s.get("remat") is not None else []),
        *(
            [
                f"accumulate {int(accumulate)} "
                f"(micro-batch {r_number(s.get('micro_batch_size') or '?')})"
            ]
            if isinstance(accumulate, int | float)
            and not isinstance(accumulate, bool)
            and accumulate > 1
            else []
        ),
        *(
            [f"{_big(s['steps_per_epoch'])} steps per epoch"]
            if s.get("steps_per_epoch") is not None
            else []
        ),
        *(
            [f"steps_per_execution {int(s['steps_per_execution'])}"]
            if s.get("steps_per_execution") is not None
            else []
        ),
        *(
            [f"jit_compile {r_number(s['jit_compile'])}"]
            if s.get("jit_compile") is not None
            else []
        ),
        *(
            f"{name} {r_number(s[name])}"
            for name in ("clipnorm", "clipvalue", "global_clipnorm")
            if s.get(name) is not None
        ),
        *([f"seed {int(s['seed'])}"] if s.get("seed") is not None else []),
    ]
    # Said only when on: off is every framework's default, and most runs'.
    return run + (["deterministic ops"] if s.get("deterministic") is True else [])


def _backups(settings: Mapping[str, Any]) -> str:
    freq = settings.get("backup_freq")
    resumed = settings.get("resumed_from")
    text = str(settings["backup_dir"])
    if isinstance(freq, int | float) and not isinstance(freq, bool):
        text += f", every {int(freq)} batches"
    if resumed is not None:
        done = _big(resumed["batches_done"])
        text += f" (resumed in epoch {int(resumed['epoch'])}, after {done} batches)"
    return text


def _placement(strategy: Mapping[str, Any]) -> str:
    replicas = int(strategy["replicas"])
    text = (
        f"{strategy['type']} over {', '.join(_strings(strategy.get('devices')))} "
        f"({replicas} replica{'' if replicas == 1 else 's'})"
    )
    if strategy.get("global_batch_size") is not None:
        text += (
            f"; global batch {int(strategy['global_batch_size'])} = "
            f"{r_number(strategy.get('per_replica_batch_size'))} per replica"
        )
    return text


def _learning_rate(rate: Any) -> str | None:
    """A learning rate as the core reports it: a number, or a Keras schedule (its class
    name and its config's single values); R words gpukeras' own schedules."""
    if rate is None:
        return None
    if isinstance(rate, int | float) and not isinstance(rate, bool):
        return f"{r_number(rate, 4)} (constant)"
    if isinstance(rate, Mapping) and rate.get("schedule") is not None:
        config = ", ".join(
            f"{name} = {r_number(value)}"
            for name, value in rate.items()
            if name != "schedule" and isinstance(value, bool | int | float | str)
        )
        return f"{rate['schedule']}({config})"
    return str(rate)


def _settings_lines(settings: Mapping[str, Any], learning_rate: str | None) -> list[str]:
    """The settings' lines, each labelled, those with nothing to say left out."""
    strategy = settings.get("strategy") or {}
    run = _run(settings)
    best = _items((settings.get("best") or {}).get("best"))
    tracking = settings.get("tracking") or {}
    ema = settings.get("ema")
    choice = settings.get("precision_choice")  # the memory plan's (tools/precision_plan.py)
    labelled = {
        "Strategy:": _placement(strategy) if strategy else None,
        # Multi-worker: who can reach this worker's ports (print(strategy): the firewall rules).
        "Network:": (strategy.get("network") or {}).get("reach"),
        "Settings:": ", ".join(run) if run else None,
        "Learning rate:": learning_rate or _learning_rate(settings.get("learning_rate")),
        "Precision:": f"{choice['policy']} ({choice['reason']})" if choice else None,
        # batch_size = "auto" (tools/precision_plan.py's auto_batch)
        "Batch size:": (settings.get("batch_choice") or {}).get("reason"),
        "Accumulate:": settings.get("accumulate_reason"),
        "Backups:": _backups(settings) if settings.get("backup_dir") is not None else None,
        "Weights:": None
        if ema is None
        else f"moving average (ema {r_number(ema)}): validation and the returned model use "
        "the averaged weights",
        "Best kept:": f"{len(best)} by {settings['best'].get('monitor')} (best: epoch "
        f"{int(best[0]['epoch'])}, {r_number(best[0]['value'], 4)}); fit$settings$best"
        if best
        else None,
        "Tracked:": None
        if tracking.get("key") is None
        else f"run {tracking.get('run_id') or '(being made)'} in {tracking.get('experiment')} "
        f"({tracking.get('uri')})",
    }
    return [f"{label:<15} {value}" for label, value in labelled.items() if value is not None]
