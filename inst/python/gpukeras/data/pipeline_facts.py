"""What a built pipeline is and how fast it reads alone: its plain facts for printing, and
gpu_dataset_benchmark()'s batches per second with no model."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from gpukeras.core.errors import BadArgumentError, BadDataError
from gpukeras.core.handles import Dataset
from gpukeras.core.r_words import big, r_number, strings
from gpukeras.data.failures import unreadable_batch
from gpukeras.data.sources import tensorflow


def describe(dataset: Dataset, info: dict[str, object] | None = None) -> dict[str, object]:
    """Plain facts about a dataset for printing: element spec, cardinality, and ``info``."""
    tf = tensorflow()
    cardinality = int(dataset.cardinality())
    known = cardinality >= 0
    return {
        **(info or {}),
        "element_spec": str(dataset.element_spec),
        "batches": cardinality if known else None,
        "cardinality": "infinite"
        if cardinality == tf.data.INFINITE_CARDINALITY
        else ("unknown" if not known else str(cardinality)),
    }


def benchmark(dataset: Dataset, steps: int = 100, warmup: int = 5) -> dict[str, object]:
    """Batches/s and elements/s of the pipeline alone, no model.

    The first ``warmup`` batches (filling caches and buffers) are not timed.
    """
    tf = tensorflow()
    if not isinstance(dataset, tf.data.Dataset):
        raise BadArgumentError(
            f"dataset must be a gpu_dataset() or a tf.data.Dataset, not a {type(dataset).__name__}."
        )
    if steps < 1:
        raise BadArgumentError(f"steps must be >= 1, not {steps}.")
    iterator = iter(dataset.repeat())
    taken = 0
    try:
        for _ in range(warmup):
            next(iterator)
            taken += 1
        elements = 0
        started = time.perf_counter()
        for _ in range(steps):
            batch = next(iterator)
            taken += 1
            first = tf.nest.flatten(batch)[0]
            elements += int(first.shape[0]) if first.shape.rank else 1
        seconds = time.perf_counter() - started
    except tf.errors.OpError as error:
        unreadable = unreadable_batch(error)
        if unreadable is None:
            raise
        raise BadDataError(f"The benchmark stopped at batch {taken + 1}: {unreadable}") from error
    return {
        "steps": steps,
        "seconds": seconds,
        "batches_per_second": steps / seconds,
        "elements_per_second": elements / seconds,
    }


def dataset_lines(
    info: Mapping[str, Any], input_lines: Sequence[str] | str | None = None
) -> list[str]:
    """print() of a gpu_dataset(): its role, source, rows and batches, the steps of its
    pipeline, its classes or vocabulary, ``input_lines`` (its columns, from the encoding),
    its pixel range and the rows dropped. ``info`` is the dataset's facts as R keeps them."""
    rows = info.get("rows")
    shown = "rows not known until read" if rows is None else f"{big(rows)} rows"
    classes = strings(info.get("class_names"))
    if classes and rows is not None:
        of = f" of {big(info['files'])}" if info.get("files") != rows else ""
        shown = f"{big(rows)}{of} images in {len(classes)} classes"
    batches = info.get("batches")
    if batches is None:
        count = f"{info.get('cardinality')} batches"
    else:
        count = f"{big(batches)} {'batch' if batches == 1 else 'batches'}"
    lines = [
        f"<gpukeras_dataset> {info.get('role')} pipeline from {info.get('source')}: "
        f"{shown}, {count}",
        f"  element: {info.get('element_spec')}",
        f"  steps:   {' -> '.join(strings(info.get('steps')))}",
        *(f"  cache:   {why}" for why in strings(info.get("cache_declined"))),
    ]
    vocabulary = info.get("vocabulary") or {}
    if classes:
        more = f", and {len(classes) - 10} more" if len(classes) > 10 else ""
        lines.append(f"  classes: {', '.join(classes[:10])}{more}")
    elif vocabulary:
        levels = ", ".join(f"{name} ({len(strings(v))} levels)" for name, v in vocabulary.items())
        lines.append(f"  vocabulary: {levels}")
    lines += strings(input_lines)
    pixels = info.get("pixel_range")
    if pixels:
        low, high = (r_number(v, 4) for v in pixels)
        rescale = info.get("rescale")
        how = (
            " (rescale = 1/255 reads them in [0, 1])"
            if rescale is None
            else f" (rescale = {r_number(rescale, 4)})"
        )
        lines.append(f"  pixels:  float32 in [{low}, {high}]{how}")
    dropped = info.get("dropped_rows")
    if dropped is not None and dropped > 0:
        lines.append(f"  dropped {int(dropped)} row(s) with NA")
    return lines


def benchmark_line(speed: Mapping[str, Any]) -> str:
    """print() of gpu_dataset_benchmark()'s result ``speed`` (``benchmark``'s)."""
    batches = round(float(speed["batches_per_second"]), 1)
    return (
        f"<gpukeras pipeline benchmark> {f'{batches:,.1f}'.removesuffix('.0')} batches/s, "
        f"{big(round(float(speed['elements_per_second'])))} elements/s "
        f"({int(speed['steps'])} batches in {float(speed['seconds']):.3f} s)"
    )
