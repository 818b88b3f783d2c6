"""The files gpu_profile() writes, and what is read back from them: the trace and the scalars.

Files (the layout Keras' callback writes, so ``tensorboard --logdir LOGDIR``
shows one run, ``train``, with scalars and a profile):

- ``LOGDIR/train/plugins/profile/<session>/<host>.xplane.pb``: the trace
  (XSpace protobuf; JAX also writes ``<host>.trace.json.gz``). Viewing it
  needs TensorBoard and its profile plugin (``pip install tensorboard
  tensorboard-plugin-profile``); writing it needs neither.
- ``LOGDIR/train/events.out.tfevents.*``: ``batch_<metric>`` scalars, one per
  step (the running means over the epoch that Keras logs), written after
  training with TensorFlow's own summary writer (``tf.summary.write`` with
  the scalars plugin's metadata: what ``tf.summary.scalar`` writes, without
  the ``tensorboard`` package). The values are collected by a batch-end hook
  marked ``async_safe``, so Keras keeps dispatching batch ends on its worker
  thread and the host never waits for a step's loss. Without TensorFlow no
  event file is written, and the scalars are returned from memory.

What is read back: the paths and sizes of the files; the scalars, from the
event files; from the trace (on TensorFlow its .xplane.pb, with TensorFlow's
XPlane protobuf; on JAX its .trace.json.gz, with the standard library): the
marked steps it holds, their host durations, on TensorFlow the time its
iterator ops took batches from the input pipeline within them, and per device plane
(``/device:GPU:0``, ...) the time anything ran on the device during those
steps. A CPU run has no device plane. The step numbers (time per step, its
spread, samples/s, the share of it spent waiting for input) come from
gpukeras' step timer (``gpukeras.train.timing``) timing exactly the traced steps,
so they are there even when the trace cannot be parsed.

Reading needs no TensorBoard: TensorFlow's XPlane protobuf class, or the
standard library for JAX's trace-event JSON, and tf.data for event files.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import shlex
from pathlib import Path
from typing import Any, TypedDict

from gpukeras.core import compat
from gpukeras.data import sources
from gpukeras.train import monitor

STEP_NAME = "train"  # the profiler's step marker, as TensorFlow's profiler guide names it
# TensorFlow's host events for taking a batch from a tf.data iterator (the op's
# run, waiting for the pipeline included), the ops its profiler counts as input.
INPUT_EVENT_PREFIXES = ("IteratorGetNext", "MultiDeviceIteratorGetNext")
INPUT_EVENT_SUFFIX = "Op::DoCompute"

# An event: its name, start and duration in nanoseconds, and its statistics.
Event = tuple[str, float, float, dict[str, Any]]


class Plane(TypedDict):
    """One timeline of a trace (a host thread group or a device), as both readers give it."""

    name: str
    events: list[Event]


# The trace ----------------------------------------------------------------------
def files(paths: list[Path]) -> list[dict[str, object]]:
    """The paths and sizes of files gpu_profile() wrote, sorted."""
    return [{"path": str(path), "bytes": path.stat().st_size} for path in sorted(paths)]


def _planes_tensorflow(path: Path) -> list[Plane]:
    """An .xplane.pb (XSpace protobuf) read with TensorFlow's own message class."""
    space = compat.xspace_message()()
    space.ParseFromString(path.read_bytes())
    planes: list[Plane] = []
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        events: list[Event] = []
        for line in plane.lines:
            for event in line.events:
                stats = {}
                for stat in event.stats:
                    kind = stat.WhichOneof("value")
                    if kind is not None:
                        stats[stat_names.get(stat.metadata_id, "")] = getattr(stat, kind)
                begin = line.timestamp_ns + event.offset_ps / 1000
                events.append(
                    (names.get(event.metadata_id, ""), begin, event.duration_ps / 1000, stats)
                )
        planes.append({"name": plane.name, "events": events})
    return planes


def _planes_jax(path: Path) -> list[Plane]:
    """The trace-event JSON (Chrome format) JAX writes beside the .xplane.pb, read with the
    standard library: jax.profiler.ProfileData, its xplane reader, aborts the whole process
    (and R with it) on a damaged file, where this raises."""
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    names = {
        event["pid"]: event["args"]["name"]
        for event in events
        if event.get("ph") == "M" and event.get("name") == "process_name"
    }
    planes: dict[object, list[Event]] = {}
    for event in events:
        if event.get("ph") == "X":  # a complete event; times in microseconds
            planes.setdefault(event["pid"], []).append(
                (
                    event["name"],
                    event["ts"] * 1000,
                    event.get("dur", 0) * 1000,
                    event.get("args", {}),
                )
            )
    return [{"name": names.get(pid, str(pid)), "events": found} for pid, found in planes.items()]


# The file each backend's trace is read from, and its reader.
TRACE_READERS = {
    "tensorflow": (".xplane.pb", _planes_tensorflow),
    "jax": (".trace.json.gz", _planes_jax),
}


def _union_ns(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by (begin, end) intervals, overlaps counted once."""
    total, reach = 0.0, -math.inf
    for begin, end in sorted(intervals):
        if end > reach:
            total += end - max(begin, reach)
            reach = end
    return total


def summarize_trace(planes: list[Plane]) -> dict[str, Any]:
    """The marked steps in a trace, their host durations, the time spent taking batches
    from the input pipeline, and device busy time within them.

    ``planes`` are ``{"name", "events"}`` with events as ``(name, start_ns,
    duration_ns, stats)``. A device's busy time is the union of every event
    on its plane (kernels, copies; nested ones counted once) clipped to the
    marked steps' span, and its share is that time over the span.

    ``input_ms`` / ``input_share``: the time TensorFlow's iterator ops ran
    within the span (``IteratorGetNext`` inside Keras' compiled step: a
    batch taken from the prefetch buffer, or the wait for one), the measure
    TensorFlow's profiler bases its input-bound verdict on. Unlike the step
    timer's, it leaves the step as Keras runs it and leaves out the Python
    cost of an eager ``next()``; None without such events (JAX).
    ``input_verdict``: that profiler's verdict for the share.
    """
    steps: dict[int, tuple[float, float]] = {}
    inputs: list[tuple[float, float]] = []
    for plane in planes:
        if plane["name"].startswith("/host:"):
            for name, start, duration, stats in plane["events"]:
                if name == STEP_NAME and "step_num" in stats:
                    steps[int(stats["step_num"])] = (start, start + duration)
                elif name.startswith(INPUT_EVENT_PREFIXES) and name.endswith(INPUT_EVENT_SUFFIX):
                    inputs.append((start, start + duration))
    result: dict[str, Any] = {
        "steps": sorted(steps),
        "step_time_mean_ms": None,
        "span_ms": None,
        "input_ms": None,
        "input_share": None,
        "input_verdict": None,
        "devices": [],
    }
    if not steps:
        return result
    durations = [end - begin for begin, end in steps.values()]
    first = min(begin for begin, _ in steps.values())
    last = max(end for _, end in steps.values())
    span = last - first
    result.update(step_time_mean_ms=sum(durations) / len(durations) / 1e6, span_ms=span / 1e6)
    if inputs:  # TensorFlow only: JAX takes batches in Python, which its trace does not name
        waited = _union_ns(
            [
                (max(begin, first), min(end, last))
                for begin, end in inputs
                if begin < last and end > first
            ]
        )
        share = waited / span if span > 0 else None
        result.update(
            input_ms=waited / 1e6, input_share=share, input_verdict=monitor.input_verdict(share)
        )
    for plane in planes:
        if not plane["name"].startswith("/device:"):
            continue
        intervals = [
            (max(start, first), min(start + duration, last))
            for _, start, duration, _ in plane["events"]
            if start < last and start + duration > first
        ]
        busy = _union_ns(intervals)
        result["devices"].append(
            {
                "plane": plane["name"],
                "events": len(intervals),
                "busy_ms": busy / 1e6,
                "busy_share": busy / span if span > 0 else None,
            }
        )
    return result


def read_trace(files: list[Path], backend: str) -> dict[str, object]:
    """``summarize_trace`` of the trace file, with ``parsed`` and, when it could not be
    read, ``note`` saying why (the step timer's numbers stand regardless)."""
    suffix, reader = TRACE_READERS[backend]
    found = [path for path in files if path.name.endswith(suffix)]
    empty = summarize_trace([])
    if not found:
        return {**empty, "parsed": False, "note": f"the profiler wrote no {suffix} file"}
    try:
        planes = reader(found[0])
    except Exception as error:  # a library without the parser, a damaged file
        why = f"the trace was written but not parsed here ({type(error).__name__}: {error})"
        return {**empty, "parsed": False, "note": why}
    summary = summarize_trace(planes)
    note: str | None = None
    if not summary["devices"]:
        note = "no device plane in the trace: it holds host (CPU) activity only"
    return {**summary, "parsed": True, "note": note}


# The scalars ----------------------------------------------------------------------
def write_scalars(run_dir: str, logs: list[dict[str, float]]) -> None:
    """``batch_<metric>`` scalars, one per step (1-based), in an event file in ``run_dir``.

    TensorFlow's summary writer with the scalars plugin's metadata: what
    ``tf.summary.scalar`` writes, without needing the ``tensorboard`` package.
    """
    tf = sources.tensorflow()
    metadata = tf.compat.v1.SummaryMetadata(
        plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars")
    )
    writer = tf.summary.create_file_writer(run_dir)
    with writer.as_default():
        for step, values in enumerate(logs, start=1):
            for name, value in values.items():
                tf.summary.write(
                    f"batch_{name}", tf.constant(value, tf.float32), step=step, metadata=metadata
                )
    writer.close()


def read_scalars(event_files: list[Path]) -> dict[str, list]:
    """The ``batch_`` scalars in event files as columns: ``step`` and one per metric."""
    tf = sources.tensorflow()
    values: dict[str, dict[int, float]] = {}
    for path in event_files:
        # tf.data rather than summary_iterator, which logs a deprecation warning
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag.startswith("batch_"):
                    number = float(tf.make_ndarray(value.tensor))
                    values.setdefault(value.tag[len("batch_") :], {})[int(event.step)] = number
    return _columns(values)


def logs_to_columns(logs: list[dict[str, float]]) -> dict[str, list]:
    """Per-step logs (step i + 1 at index i) as columns, like ``read_scalars``."""
    values: dict[str, dict[int, float]] = {}
    for step, row in enumerate(logs, start=1):
        for name, value in row.items():
            values.setdefault(name, {})[step] = value
    return _columns(values)


def _columns(values: dict[str, dict[int, float]]) -> dict[str, list]:
    steps = sorted({step for column in values.values() for step in column})
    columns: dict[str, list] = {"step": steps}
    for name, column in values.items():
        columns[name] = [column.get(step) for step in steps]
    return columns


def tensorboard_command(logdir: str) -> dict[str, object]:
    """The command that opens the logs, and what it needs that is not installed."""
    missing = [
        package
        for package, module in (
            ("tensorboard", "tensorboard"),
            ("tensorboard-plugin-profile", "tensorboard_plugin_profile"),
        )
        if importlib.util.find_spec(module) is None
    ]
    if missing:
        note = (
            f"Not installed in this Python: pip install {' '.join(missing)} "
            "(TensorBoard shows the scalars; its Profile tab needs tensorboard-plugin-profile)."
        )
    else:
        note = "Then open http://localhost:6006; the trace is under the Profile tab."
    return {"command": f"tensorboard --logdir {shlex.quote(logdir)}", "note": note}
