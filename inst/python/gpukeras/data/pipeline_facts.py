"""What a built pipeline is and how fast it reads alone: its plain facts for printing, and
gpu_dataset_benchmark()'s batches per second with no model."""

from __future__ import annotations

import time

from gpukeras.core.errors import BadArgumentError, BadDataError
from gpukeras.core.handles import Dataset
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
