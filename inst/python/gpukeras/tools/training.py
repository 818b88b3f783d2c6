"""gpu_fit()'s verb: its "auto" rules that need the tools decided, then ``train.fit.fit``.

``accumulate = "auto"`` is the smallest factor of ``batch_size`` whose micro-batch fits the
device's free memory by the memory plan (``accumulate_auto``); the training
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

from gpukeras.core.errors import BadArgumentError, OutOfMemoryError
from gpukeras.core.handles import Model, Record
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
        chosen, reason = accumulate_auto(model, int(given["batch_size"]))  # type: ignore[call-overload]
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


# accumulate = "auto" ---------------------------------------------------------------------
def accumulate_choice(plan: Record, batch_size: int) -> tuple[int, str]:
    """``accumulate = "auto"`` by a memory plan (``memory_plan.memory_plan``'s record for
    ``batch_size``): the smallest factor of ``batch_size`` whose micro-batch fits the free
    memory, with why it was chosen; 1 where the plan knows no free memory. Accumulating holds
    one more copy of the gradients (Keras' accumulators), so a micro-batch of a split batch
    pays it too.

    Raises:
        OutOfMemoryError: where even a micro-batch of 1 does not fit, saying what to lower.
    """
    free = plan["free_mib"]
    if free is None or plan["largest_batch"] is None:
        why = plan["largest_batch_reason"] or "free memory unknown"
        return 1, f"auto: 1, no memory plan to split by ({why})"
    gradients = sum(part["mib"] for part in plan["parts"] if part["part"] == "gradients")
    fixed, per_sample = plan["fixed_mib"], plan["per_sample_mib"]
    for factor in (f for f in range(1, batch_size + 1) if batch_size % f == 0):
        micro = batch_size // factor
        peak = fixed + (gradients if factor > 1 else 0) + micro * per_sample
        if peak <= free:
            return factor, (
                f"auto: micro-batch {micro} fits by the memory plan ({peak:.0f} of {free:.0f} "
                "MiB free)"
            )
    if fixed >= free:
        raise OutOfMemoryError(
            f"No micro-batch of `batch_size` {batch_size} fits the GPU's free memory by the "
            f"memory plan: the parameters, gradients and optimizer slots alone take "
            f"{fixed:.0f} of {free:.0f} MiB free. Free GPU memory (other processes, other "
            "models in this session) or train a smaller model; gpu_memory_plan(model, "
            "batch_size) shows what takes the memory."
        )
    raise OutOfMemoryError(
        f"No micro-batch of `batch_size` {batch_size} fits the GPU's free memory by the memory "
        f"plan: even a micro-batch of 1 needs {fixed + gradients + per_sample:.1f} MiB, and "
        f"{free:.1f} MiB are free. Lower the per-sample memory: mixed precision "
        '(gpu_setup(mixed_precision = "bfloat16") or "float16" before building the model) or '
        "rematerialization (gpu_fit(step = gpu_step(remat = TRUE)): activations are "
        "recomputed in the backward pass instead of kept); gpu_memory_plan(model, batch_size) "
        "shows what takes the memory."
    )


def accumulate_auto(model: Model, batch_size: int) -> tuple[int, str]:
    """``accumulate = "auto"`` for ``model`` at ``batch_size`` (``accumulate_choice`` of its
    memory plan); 1 for a model not built, which has no plan."""
    if not model.built:
        return 1, "auto: 1, the model is not built, so no memory plan"
    return accumulate_choice(memory_plan.memory_plan(model, batch_size), batch_size)
