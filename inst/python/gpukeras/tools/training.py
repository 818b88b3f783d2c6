"""gpu_fit()'s verb: its "auto" rules that need the tools decided, then ``train.fit.fit``.

``accumulate = "auto"`` is the smallest factor of ``batch_size`` whose micro-batch fits the
device's free memory by the memory plan (``memory_plan.accumulate_auto``); the training
layer below cannot ask the plan (tools sit above it), so the verb decides before it
trains, and R makes one call per fit.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpukeras.core.handles import Model
from gpukeras.tools import memory_plan
from gpukeras.train import fit as train_fit
from gpukeras.train.fit_request import FitRequest


def fit(
    model: Model,
    data: object,
    validation_data: object = None,
    strategy: object = None,
    request: Mapping[str, object] | FitRequest | None = None,
    **fields: object,
) -> dict[str, object]:
    """``train.fit.fit`` (same arguments, same result) with ``accumulate = "auto"`` decided
    first (a ``FitRequest``'s accumulate is a number already); the result's
    ``settings$accumulate_reason`` says why (None otherwise)."""
    given = fields if request is None else request
    reason = None
    if isinstance(given, Mapping) and given.get("accumulate") == "auto":
        chosen, reason = memory_plan.accumulate_auto(model, int(given["batch_size"]))  # type: ignore[call-overload]
        given = {**given, "accumulate": chosen}
    result = train_fit.fit(model, data, validation_data, strategy, request=given)
    result["settings"]["accumulate_reason"] = reason  # type: ignore[index]
    return result
