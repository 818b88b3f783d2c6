"""gpu_fit()'s verb: its "auto" rules that need the tools decided, then ``train.fit.fit``.

``accumulate = "auto"`` is the smallest factor of ``batch_size`` whose micro-batch fits the
device's free memory by the memory plan (``memory_plan.accumulate_auto``); the training
layer below cannot ask the plan (tools sit above it), so the verb decides before it
trains, and R makes one call per fit. With tracking on (``track``, what R sends), the
fit is a run in MLflow (``tracked_runs``): a callback the request carries sends each
epoch's logs, and the run's settings, report and model follow when training ends.

``ema``: Keras' optimizer EMA turned on, and a callback the request carries validates
with the averaged weights (``train.ema``); ``keep_best``: the backup keeps the k best
models (``train.best_models``), listed in ``settings$best`` and, tracked, the run's artifacts.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpukeras.core.errors import BadArgumentError
from gpukeras.core.handles import Model
from gpukeras.core.runtime import config
from gpukeras.tools import memory_plan
from gpukeras.track import tracked_runs
from gpukeras.train import best_models, ema
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
    if not isinstance(given, Mapping):  # a checked FitRequest: trained as it is
        return train_fit.fit(model, data, validation_data, strategy, request=given)
    reason = None
    if given.get("accumulate") == "auto":
        chosen, reason = memory_plan.accumulate_auto(model, int(given["batch_size"]))  # type: ignore[call-overload]
        given = {**given, "accumulate": chosen}
    _check_keep_best(given, validation_data)
    momentum = given.get("ema")
    run = tracked_runs.start_fit(model, data, given, track)
    added = [run.callback()] if run is not None else []
    if isinstance(momentum, (int, float)):
        ema.averaging(model, float(momentum))
        added.append(ema.callback(config.keras()))
    if added:
        callbacks = given.get("callbacks")
        callbacks = [] if callbacks is None else callbacks
        callbacks = list(callbacks) if isinstance(callbacks, (list, tuple)) else [callbacks]
        given = {**given, "callbacks": [*callbacks, *added]}
    try:
        result = train_fit.fit(model, data, validation_data, strategy, request=given)
    except BaseException as error:
        if run is not None:
            run.failed(error)
        raise
    settings: dict[str, object] = result["settings"]  # type: ignore[assignment]
    settings["accumulate_reason"] = reason
    settings["ema"] = momentum
    backup_dir = settings.get("backup_dir")
    keep = given.get("keep_best") and isinstance(backup_dir, str)
    settings["best"] = best_models.best_models(backup_dir) if keep else None  # type: ignore[arg-type]
    if run is not None:
        run.finished(model, result)
    return result


def _check_keep_best(given: Mapping[str, object], validation_data: object) -> None:
    """gpu_backup(keep_best = ) needs the backup folder, and validation data for a ``val_``
    monitor (data that carries its own, a dataset of a split, is Keras' to check)."""
    if not given.get("keep_best"):
        return
    if not given.get("backup_dir"):
        raise BadArgumentError(
            "gpu_backup(keep_best = ) needs a folder: gpu_backup(dir, keep_best = )."
        )
    monitor = str(given.get("keep_best_monitor") or "val_loss")
    if monitor.startswith("val_") and validation_data is None:
        raise BadArgumentError(
            f"gpu_backup(keep_best = ) monitors {monitor!r}, but there is no validation data: "
            'give validation_data, or monitor = "loss".'
        )
