"""The one data feed: gpu_fit()'s data built once, in its final form, for a loop that has decided.

A training loop first settles what the data depends on (the strategy and its
plan, gradient accumulation's micro-batch, the model's settings, the seed) and
then calls ``feed`` once. What it gets back is the data's adapter
(``gpukeras.data.adapters``) in its final form: rows on the device, Keras'
arrays, or tf.data, with

- ``fit_args`` and ``validation``: what ``model.fit()`` gets;
- the model built from it (``DataAdapter.build``), so Keras need not peek at
  a batch (see the notes on data order in ``gpukeras.data.adapters``);
- ``skip_epochs``: the epochs a resumed run skips;
- ``description`` and ``warnings``: the data for the report, and what to say
  about its labels.

gpu_fit()'s loop (``gpukeras.train.fit``), the multi-worker loop
(``gpukeras.train.multiworker``) and gpu_tune()'s trials use it; none of them
asks what kind of data it has.
"""

from __future__ import annotations

import dataclasses

from gpukeras.core.handles import Model
from gpukeras.data import labels, weights
from gpukeras.data.adapters import (
    DataAdapter,
    FeedContext,
    check_batched,
    get_data_adapter,
    given,
)

__all__ = ["FeedContext", "feed"]


def feed(
    model: Model, data: object, validation_data: object, context: FeedContext, build: bool = True
) -> DataAdapter:
    """gpu_fit()'s ``data`` and ``validation_data`` as the loop reads them, ``model`` built from
    them (see the module's notes).

    Args:
        model: the compiled model (its labels checked against its loss; built from the
            data unless ``build`` is False).
        data: a tf.data dataset (gpu_dataset()), arrays as ``(x, y)`` (or ``(x,)``, or
            ``(x, y, sample_weight)``; ``x`` may be a dict of arrays), or anything else
            Keras' ``fit()`` takes.
        validation_data: a dataset or ``(x, y)`` arrays, or None.
        context: what the loop decided (``FeedContext``).
        build: False where the loop builds the model later (``DataAdapter.build``): the
            multi-worker loop makes variables only once the workers agree, in its scope.

    Raises:
        BadDataError: data without rows or batches, of a type nothing reads, not batched
            for the model, or labels the loss cannot take (``labels.check``).
        BadArgumentError: weights the data cannot take, a batch the plan cannot split.
    """
    training, validation = given(data), given(validation_data, training=False)
    # Keras' own error for unbatched data does not say what to do (``check_batched``)
    if training.dataset:
        check_batched(model, data)
    if validation.dataset:
        check_batched(model, validation_data, "validation_data")
    said = labels.check(model, training)
    adapter = get_data_adapter(training, validation, context)
    if build:
        adapter.build(model)
    adapter.warnings = [{"class": "labels", "message": said}] if said else []
    adapter.description = {
        # the data as the loop saw it, for the report (R describes it without asking again)
        "data_info": training.info,
        "validation_data_info": validation.info,
        # which losses are weighted: the print says that validation may not be
        "weights": weights.describe(
            training.weighted,
            None if validation_data is None else validation.weighted,
            context.class_weight,
        ),
        "data_path": None if adapter.decision is None else dataclasses.asdict(adapter.decision),
    }
    return adapter
