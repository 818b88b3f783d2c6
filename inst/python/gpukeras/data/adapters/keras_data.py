"""Data Keras reads as it is: a PyDataset, a generator (``KerasDataAdapter``)."""

from __future__ import annotations

from gpukeras.data.adapters.base import DataAdapter


class KerasDataAdapter(DataAdapter):
    """Data Keras reads as it is (a PyDataset, a generator), making its own batches."""

    kind = "other"

    def __init__(self, data: object, class_weight: dict[int, float] | None = None) -> None:
        # Keras applies class weights to what it can (a PyDataset), and refuses the rest.
        weighted = {} if class_weight is None else {"class_weight": class_weight}
        super().__init__({"x": data, **weighted})
