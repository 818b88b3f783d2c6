"""Arrays Keras batches and shuffles itself (``ArrayAdapter``)."""

from __future__ import annotations

import math

from gpukeras.data.adapters.base import DataAdapter, row_count


class ArrayAdapter(DataAdapter):
    """Arrays Keras batches and shuffles itself: on JAX, or where TensorFlow is not installed.

    On JAX this is the fastest way for data already in memory: Keras slices
    NumPy batches and places each on the device, where a tf.data pipeline adds
    TensorFlow's per-batch work and a copy out of its tensors (issue #17, item 5).
    """

    kind = "keras arrays"

    def __init__(
        self,
        x: object,
        y: object,
        batch_size: int,
        seed: int | None,
        sample_weight: object = None,
    ) -> None:
        rows = row_count(x)
        weighted = {} if sample_weight is None else {"sample_weight": sample_weight}
        super().__init__(
            {"x": x, "y": y, "batch_size": batch_size, "shuffle": True, **weighted},
            batch_size=batch_size,
            steps_per_epoch=math.ceil(rows / batch_size),
            rows=rows,
        )
        self.reseed_numpy = seed is not None
        self.seed = seed

    def gpu_dataset(self) -> dict[str, object] | None:
        """In-memory rows, as gpu_dataset() from arrays has them: nothing to cache or map."""
        return {"source": "arrays", "cache": False, "user_map": False}
