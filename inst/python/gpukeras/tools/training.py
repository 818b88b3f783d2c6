"""gpu_fit()'s verb: its "auto" rules that need the tools decided, then ``train.fit.fit``.

``accumulate = "auto"`` is the smallest factor of ``batch_size`` whose micro-batch fits the
device's free memory by the memory plan (``memory_plan.accumulate_auto``); the training
layer below cannot ask the plan (tools sit above it), so the verb decides before it
trains, and R makes one call per fit. With tracking on (``track``, what R sends), the
fit is a run in MLflow (``tracked_runs``): a callback the request carries sends each
epoch's logs, and the run's settings, report and model follow when training ends.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpukeras.core.handles import Model
from gpukeras.tools import memory_plan, tracked_runs
from gpukeras.train import fit as train_fit
from gpukeras.train.fit_request import FitRequest


def fit(
    model: Model,
    data: object,
    validation_data: object = None,
    strategy: object = None,
    request: Mapping[str, object] | FitRequest | None = None,
    track: Mapping[str, object] | None = None,
    **fields: object,
) -> dict[str, object]:
    """``train.fit.fit`` (same arguments, same result) with ``accumulate = "auto"`` decided
    first (a ``FitRequest``'s accumulate is a number already); the result's
    ``settings$accumulate_reason`` says why (None otherwise). ``track``: where the run goes
    (``tracking.target_of``), None for no tracking; the result's ``settings$tracking`` then
    names the run."""
    given = fields if request is None else request
    reason = None
    if isinstance(given, Mapping) and given.get("accumulate") == "auto":
        chosen, reason = memory_plan.accumulate_auto(model, int(given["batch_size"]))  # type: ignore[call-overload]
        given = {**given, "accumulate": chosen}
    run = tracked_runs.start_fit(model, data, given, track) if isinstance(given, Mapping) else None
    if run is not None:
        callbacks = given.get("callbacks")  # type: ignore[union-attr]
        callbacks = [] if callbacks is None else callbacks
        callbacks = list(callbacks) if isinstance(callbacks, (list, tuple)) else [callbacks]
        given = {**given, "callbacks": [*callbacks, run.callback()]}  # type: ignore[dict-item]
    try:
        result = train_fit.fit(model, data, validation_data, strategy, request=given)
    except BaseException as error:
        if run is not None:
            run.failed(error)
        raise
    result["settings"]["accumulate_reason"] = reason  # type: ignore[index]
    if run is not None:
        run.finished(model, result)
    return result
