"""Arrays Keras batches and shuffles itself (``ArrayAdapter``)."""

from __future__ import annotations

import math

from gpukeras.data.adapters.base import DataAdapter, Rows
from gpukeras.data.indicators import host_form


class ArrayAdapter(DataAdapter):
    """Arrays Keras batches and shuffles itself: on JAX, or where TensorFlow is not installed.

    On JAX this is the fastest way for data already in memory that stays on the host: Keras
    slices NumPy batches and places each on the device, where a tf.data pipeline adds
    TensorFlow's per-batch work and a copy out of its tensors (issue #17, item 5).
    """

    kind = "keras arrays"

    def __init__(self, rows: Rows) -> None:
        weighted = {} if rows.sample_weight is None else {"sample_weight": rows.sample_weight}
        super().__init__(
            {
                "x": host_form(rows.x),
                "y": rows.y,
                "batch_size": rows.batch_size,
                "shuffle": rows.shuffle,
                **weighted,
            },
            batch_size=rows.batch_size,
            steps_per_epoch=math.ceil(rows.count / rows.batch_size),
            rows=rows.count,
        )
        self.reseed_numpy = rows.seed is not None and rows.shuffle
        self.seed = rows.seed

    def gpu_dataset(self) -> dict[str, object] | None:
        """In-memory rows, as gpu_dataset() from arrays has them: nothing to cache or map."""
        return {"source": "arrays", "cache": False, "user_map": False}
