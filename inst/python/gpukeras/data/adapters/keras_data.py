"""Data Keras reads as it is: a PyDataset, a generator (``KerasDataAdapter``)."""

from __future__ import annotations

from gpukeras.data.adapters.base import DataAdapter


class KerasDataAdapter(DataAdapter):
    """Data Keras reads as it is (a PyDataset, a generator), making its own batches."""

    kind = "other"

    def __init__(self, data: object) -> None:
        super().__init__({"x": data})
