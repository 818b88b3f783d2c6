"""gpu_fit()'s verb: its "auto" rules that need the tools decided, then ``train.fit.fit``.

A ``batch_size`` larger than the rows of arrays is the rows, a multiple of a numeric
``accumulate`` (``batch_rules.batch_within_rows``: one batch of all rows per epoch, which
is what Keras' fit() makes of it), said as a ``batch_size`` warning; ``accumulate = "auto"``
is then decided for that batch.

The model's precision is chosen by the memory plan on a GPU where its policy does not fit
(``precision_plan.choose``: bfloat16 weights where mixed_bfloat16 would not fit), before
``accumulate = "auto"`` is decided for the policy it then has; the result's
``settings$precision_choice`` says what and why (None where nothing was to choose).

``batch_size = "auto"`` (arrays only) judges the precision at the batch R data gets without
one (32, or the rows where fewer), then takes the largest power of two that fits the policy
the model then has (``precision_plan.auto_batch``: within the rows and
``batch_rules.AUTO_MOST``; 32 on the CPU), ``accumulate`` micro-batches of it an update (a
numeric ``accumulate``; "auto" is then 1: the batch fits); ``settings$batch_choice`` says
what and why (None where the batch was given).

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

from gpukeras.core import arguments, compat
from gpukeras.core.errors import BadArgumentError, OutOfMemoryError
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import batch_rules
from gpukeras.data.adapters import DEFAULT_BATCH_SIZE
from gpukeras.tools import memory_plan, precision_plan
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
    """``train.fit.fit`` (same arguments, same result) with the batch within the rows and
    ``batch_size = "auto"`` and ``accumulate = "auto"`` decided first (a ``FitRequest`` is
    trained as it is); the result's ``settings$batch_choice`` and
    ``settings$accumulate_reason`` say why (None otherwise). ``track``: where the run goes
    (``tracking.target_of``), None for no tracking; the result's ``settings$tracking`` then
    names the run."""
    given = fields if request is None else request
    if not isinstance(given, Mapping):  # a checked FitRequest: trained as it is
        return train_fit.fit(model, data, validation_data, strategy, request=given)
    batch_rules.check_batch_size_for(given.get("batch_size"), data)
    rows = _rows(data)
    auto = given.get("batch_size") == "auto"
    said: list[Record] = []
    if auto:  # the policy judged at the batch R data gets by default
        batch = min(DEFAULT_BATCH_SIZE, rows or DEFAULT_BATCH_SIZE)
    else:
        given, said = _batch_within_rows(given, rows)
        batch = given.get("batch_size") or compat.static_batch_size(data) or 1  # type: ignore[assignment]
    # the precision's plan reads the model's optimizer: what is not a compiled Keras model
    # gets the request's own error first
    arguments.check_compiled_model(config.keras(), model)
    chosen_precision = precision_plan.choose(model, int(batch))
    reason, batch_choice = None, None
    if auto:
        accumulate = given.get("accumulate")
        every = accumulate if isinstance(accumulate, int) else 1
        batch_choice = precision_plan.auto_batch(model, rows, every)
        given = {**given, "batch_size": batch_choice["batch_size"]}
        if accumulate == "auto":  # the batch fits: nothing to split
            reason = 'auto: 1, batch_size = "auto" took a batch that fits'
            given = {**given, "accumulate": 1}
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
    result["warnings"] = said + result["warnings"]  # type: ignore[operator]
    settings: dict[str, object] = result["settings"]  # type: ignore[assignment]
    settings["accumulate_reason"] = reason
    settings["precision_choice"] = chosen_precision
    settings["batch_choice"] = batch_choice
    settings["ema"] = momentum
    backup_dir = settings.get("backup_dir")
    keep = given.get("keep_best") and isinstance(backup_dir, str)
    settings["best"] = best_models.best_models(backup_dir) if keep else None  # type: ignore[arg-type]
    if run is not None:
        run.finished(model, result)
    return result


def _rows(data: object) -> int | None:
    """The rows of ``data`` given as arrays (``(x, y, ...)``, x an array or several by name or
    in order: the first one's); None for data that makes its own batches, or rows Keras
    counts (arrays without a shape)."""
    if not isinstance(data, (tuple, list)) or not data:
        return None
    first = data[0]
    if isinstance(first, Mapping):
        first = next(iter(first.values()), None)
    elif isinstance(first, (tuple, list)):
        first = first[0] if first else None
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape else None


def _batch_within_rows(
    given: Mapping[str, object], rows: int | None
) -> tuple[Mapping[str, object], list[Record]]:
    """``given`` with its ``batch_size`` within ``rows`` rows of arrays
    (``batch_rules.batch_within_rows``), and the warning that says so (none where the batch
    was within them, or the data makes its own batches)."""
    batch_size = given.get("batch_size")
    if batch_size is None or rows is None:
        return given, []
    size = int(batch_size)  # type: ignore[call-overload]
    if not 0 < rows < size:
        return given, []
    accumulate = given.get("accumulate", 1)
    every = accumulate if isinstance(accumulate, int) else 1  # "auto" is decided for the batch
    said = batch_rules.batch_over_rows(size, rows, None, "rows", every)
    within = batch_rules.batch_within_rows(size, rows, every)
    return {**given, "batch_size": within}, [{"class": "batch_size", "message": said}]


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
