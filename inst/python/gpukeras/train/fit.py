"""gpu_fit(): train a compiled Keras 3 model with its speed options applied, measured, resumable.

``fit`` runs Keras' own ``model.fit()`` (for a multi-worker strategy,
``gpukeras.train.multiworker``'s loop instead) with the request's fields
(``fit_request.FitRequest``, every one of them here) and adds around it:

- ``epochs``, ``batch_size``, ``callbacks`` and ``verbose``: Keras' own, with
  ``batch_size`` the global batch under a strategy (the data's adapter,
  ``gpukeras.data.adapters``, batches with it);
- the speed options ``steps_per_execution`` and ``jit_compile``, and
  ``learning_rate``, ``clipnorm`` and ``clipvalue``, set on the already compiled
  model (``fit_request.apply_settings``); ``tuned``, what gpu_tune() chose,
  reported as the result's ``settings$tuned``;
- ``accumulate``: each update's gradients summed over that many micro-batches
  (``compat.accumulating``);
- ``remat``: layers recompute their activations in the backward pass instead
  of keeping them (``compat.rematerialized``, in each backend's mode);
- ``class_weight``: each row's weight, with the data's own sample weights
  (``gpukeras.data.weights``);
- ``seed``: Keras' random ops and the data's order seeded (gpu_setup()'s seed
  when the request has none);
- ``monitor``: NVML and host CPU samplers (``gpukeras.train.monitor``) and the step
  timer (``gpukeras.train.timing``), summarised by ``monitor.training_report``;
- ``backup_dir`` and ``backup_freq``: backups that resume exactly
  (``gpukeras.train.backup``);
- ``signals``: a scheduler's signal stops training at a step boundary, after a
  backup of that step (``gpukeras.train.preempt``);
- ``keep_best`` and ``keep_best_monitor``: the backup keeps the k best models
  (``gpukeras.train.best_models``); ``ema``: Keras' optimizer EMA, set by gpu_fit()'s
  verb (``gpukeras.train.ema``, from ``gpukeras.tools.training``);
- TensorFlow's errors about the data (a corrupt image mid-epoch) as a classed
  error that says training stopped and where progress is kept.

Data order. gpu_fit()'s data reaches ``model.fit()`` through an adapter
(``gpukeras.data.adapters``, whose notes say how), which also gives a
resumed epoch the order of batches the killed run had: ``fit`` builds the
model from a dataset's element spec first, so Keras need not peek at a
batch, and the adapter skips the epochs a backup holds.

What holds: a run killed at any moment (SIGKILL included) and started again
with the same call in a fresh process ends with the same weights as an
uninterrupted run (bit for bit on the CPU, as the tests check; on a GPU only
as far as its kernels are deterministic), with the full history. The
interrupted epoch's loss and metrics come out as in an uninterrupted run
(the backup keeps their running sums). Data augmentation inside tf.data (random layers in a map)
is not replayed exactly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from gpukeras.core import compat, messages
from gpukeras.core.errors import BadArgumentError, GpukerasError
from gpukeras.core.handles import Callback, Keras, Model
from gpukeras.core.runtime import config
from gpukeras.data import adapters
from gpukeras.data import failures as data_failures
from gpukeras.data.feed import feed
from gpukeras.distribute import jax_cluster, strategies
from gpukeras.gpu import precision
from gpukeras.train import (
    backup,
    backup_files,
    backup_match,
    failures,
    fit_request,
    live,
    multiworker,
    preempt,
    training_run,
)
from gpukeras.train.resident import ResidentLoop


# Callbacks made here ------------------------------------------------------------
def _helper_callbacks(keras: Keras, seed: int | None, reseed_numpy: bool) -> tuple[object, dict]:
    """A callback tracking the epoch and batch (for error messages), and reseeding
    NumPy per epoch where Keras shuffles arrays with it.

    It has no batch-end hook: Keras runs batch ends synchronously when any
    callback without ``async_safe`` has one, and turning each step's logs into
    numbers makes the host wait for the step, so on a GPU it could not queue
    the next one. Steps run one after another, so a step that begins means
    the one before it returned: ``batches_done`` counts those.
    """
    position: dict[str, int] = {"epoch": 0, "batch": -1, "batches_done": 0, "begun": 0}

    class Position(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            position.update(epoch=epoch, batch=-1)
            if reseed_numpy:
                np.random.seed(np.random.SeedSequence([seed or 0, epoch]).generate_state(1)[0])

        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            position.update(batch=batch, batches_done=position["begun"])
            position["begun"] += 1

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            position["batches_done"] = position["begun"]

    return Position(), position


def _fit_method(keras: Keras, model: Model) -> Callable[..., Any]:
    """``model.fit``; for a KerasHub task without a preprocessor (fed token ids), Keras' own
    ``Model.fit``: KerasHub's override batches what it is given itself, with Grain or
    tf.data (one of which must then be installed), even where there is nothing to
    preprocess, and gpu_fit()'s adapter gives it batches already."""
    hub = type(model).__module__.startswith("keras_hub.")
    if hub and getattr(model, "preprocessor", True) is None:
        return functools.partial(keras.Model.fit, model)
    return model.fit


def _jax_value_keeper(keras: Keras, model: Model) -> Callback:
    """A callback keeping the values of the model's variables until a train step has run.

    Keras' JAX trainer detaches the variables' values while it trains and puts
    the trained ones back at the end, but when the first step fails (data that
    does not fit the model) it has none to put back: the model lost its weights
    and its next fit() failed. ``reattach()`` gives back the values kept.
    """

    class Keeper(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            optimizer = getattr(model, "optimizer", None)
            variables = [
                *model.variables,
                *(optimizer.variables if optimizer is not None else []),
                *model.metrics_variables,
            ]
            self.kept = [(variable, compat.attached_value(variable)) for variable in variables]
            self.begun = 0

        # A step ran once the next begins or the epoch ends: Keras then has trained
        # values to put back. (No batch-end hook, for the reason Position has none.)
        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            self.begun += 1
            if self.begun > 1:
                self.kept = []

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self.kept = []

        def reattach(self) -> None:
            for variable, value in self.kept:
                compat.reattach_value(variable, value)

    return Keeper()


# The run ------------------------------------------------------------------------
def _backup_lock(backup_dir: str | None) -> contextlib.AbstractContextManager[None]:
    """The backup folder held for the fit (``backup_files.folder_lock``), by the process that
    writes there: on JAX with several processes, the chief alone (the others read it)."""
    if backup_dir is None or not backup.writes_here():
        return contextlib.nullcontext()
    return backup_files.folder_lock(backup_dir)


def _backup(
    request: fit_request.FitRequest,
    model: Model,
    steps_per_epoch: int | None,
    batch_size: int | None,
    spe: int,
    state: backup.BackupState | None,
) -> object | None:
    """The backup callback; ``state``, the backup to resume from, is checked against this run
    (its data's ``steps_per_epoch`` and ``batch_size``, as the adapter has them: two numbers,
    not the data, which goes from the feed to Keras' loop alone)."""
    if request.backup_dir is None:
        return None
    run: dict[str, object] = {
        "epochs": request.epochs,
        "steps_per_epoch": steps_per_epoch,
        "steps_per_execution": spe,
        "seed": request.seed,
        "batch_size": batch_size,
        "weights": [list(map(int, w.shape)) for w in model.weights] if model.built else None,
        **backup_match.training_fingerprint(model, request),
    }
    if state is not None:
        backup_match.check_matches(state, run, request.backup_dir)
    return backup.backup_callback(request.backup_dir, request.backup_freq, run, state)


def _resumed_steps(request: fit_request.FitRequest, state: backup.BackupState | None) -> int | None:
    """Steps per dispatch on the device: the one asked for; for "auto", the one the backup
    to resume (``state``) was made with (its batch positions count in those); None for the
    rule's (``ResidentLoop.choose_steps``)."""
    if request.steps_per_execution != "auto":
        return int(request.steps_per_execution)
    if state is not None and state.run.get("steps_per_execution"):
        return int(state.run["steps_per_execution"])  # type: ignore[call-overload]
    return None


def _compiled_steps(model: Model) -> int | None:
    """For "auto" on the device: the steps per execution the model was compiled with where
    it is not Keras' default of 1, the user's own choice, kept as it is off the device;
    None for the rule's (``ResidentLoop.choose_steps``)."""
    steps = int(getattr(model, "steps_per_execution", 1) or 1)
    return steps if steps > 1 else None


# Keras' Callback methods that run at each training batch (on_batch_* is called from the
# on_train_batch_* of Keras' base class, so overriding either counts).
BATCH_HOOKS = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end")


def _every_batch(keras: Keras, callbacks: list[object]) -> int | None:
    """For "auto" on the device: 1 where one of the user's callbacks acts on each batch
    (overrides a method of ``BATCH_HOOKS``, as a class or as LambdaCallback does), since
    Keras calls those at dispatch boundaries only, every k batches; None for the rule's
    (``ResidentLoop.choose_steps``). A k of the user's own (``steps_per_execution``, or the
    model's) is kept: then they asked for Keras' way. gpukeras' own callbacks that count
    in dispatches (``gpukeras_per_dispatch``: a background job's progress, the step timer)
    do not count."""
    base = keras.callbacks.Callback
    for callback in callbacks:
        if getattr(callback, "gpukeras_per_dispatch", False):
            continue
        for name in BATCH_HOOKS:
            method = getattr(callback, name, None)
            if getattr(method, "__func__", method) is not getattr(base, name):
                return 1
    return None


@contextlib.contextmanager
def _accumulating(model: Model, steps: int, strategy: object = None) -> Iterator[None]:
    """Gradient accumulation over ``steps`` micro-batches for the training inside, the
    optimizer's own setting again after it (``compat.accumulating``, its accumulators made in
    the ``strategy``'s scope); nothing for 1.

    The step functions Keras traced are dropped on both sides: the setting is traced in.
    """
    if steps == 1:
        yield
        return
    compat.forget_step_functions(model, all_of_them=False)
    try:
        scope = strategies.strategy_scope(strategy) if strategy is not None else None
        with compat.accumulating(fit_request.inner_optimizer(model), steps, scope):
            yield
    finally:
        compat.forget_step_functions(model, all_of_them=False)


def fit(
    model: Model,
    data: object,
    validation_data: object = None,
    strategy: object = None,
    request: Mapping[str, object] | fit_request.FitRequest | None = None,
    **fields: object,
) -> dict[str, object]:
    """Train a compiled Keras 3 model; return its history, the monitor report and the settings.

    Args:
        model: a compiled Keras 3 model.
        data: a tf.data dataset (gpu_dataset()), arrays as ``(x, y)`` (or
            ``(x,)``, or ``(x, y, sample_weight)``; ``x`` may be a dict of arrays),
            or anything else Keras' ``fit()`` takes.
        validation_data: a dataset or ``(x, y)`` arrays, evaluated every epoch.
        strategy: None (one device), or a strategy from ``strategies.make``
            (or a tf.distribute strategy / keras.distribution Distribution):
            the model is trained in its scope (a copy is made and the trained
            weights copied back when it was built outside, see
            ``gpukeras.distribute``); ``batch_size`` is then the global batch.
            Its kind (``strategies.kind_of``) chooses the loop: a multi-worker
            strategy's is ``multiworker.fit``; any other trains in Keras' own
            ``model.fit()``, its data laid out as the strategy's plan
            (``strategies.plan_of``) says. Rows that go on the device
            (``adapters.on_device``) train there, in ``train.resident``'s
            steps installed in that same ``model.fit()``.
        request: gpu_fit()'s other arguments as one mapping (as R sends
            them), every field declared in ``fit_request.FitRequest`` (what each
            means is on gpu_fit()'s help page; weights as ``gpukeras.data.weights``
            says). Without a ``seed`` it takes gpu_setup()'s, when that was given one.
        **fields: the same fields by name, as Python callers write them.

    Returns:
        ``history`` (columns: ``epoch``, 1-based, and every logged metric),
        ``monitor`` (``monitor.training_report``; None with monitor False),
        ``timeline`` (``gpu`` and ``host`` sample columns, time_s since the
        start of training; empty lists without the monitor or a GPU),
        ``settings`` (what was in force, with ``data_info``: the training
        data as the adapter saw it, and ``weights``: which losses are weighted,
        ``weights.describe``) and ``warnings`` (``class``, R's
        ``gpukeras_warning_<class>``, and ``message``: about the model or its
        labels, or an epoch that is not whole accumulated updates, for R to raise).

    Raises:
        BadModelError, ModelNotCompiledError, BadArgumentError (also for accumulate
        under a TensorFlow strategy), BadDataError,
        BackupMismatchError: see ``gpukeras.core.errors``; BadDataError also for labels
        the loss cannot take (``labels.check``) and when TensorFlow fails on the data
        during training; BackupWriteError,
        CallbackError, PreemptedError and OutOfMemoryError when training stops for
        a backup that cannot be written, the user's callback, a signal, or memory the
        device could not allocate.
    """
    keras = config.keras()
    checked = fit_request.check_request(keras, model, fields if request is None else request)
    if checked.seed is None and config.setup.seed is not None:
        # gpu_setup(seed = ) seeded the session for a repeatable run: without a seed of its
        # own, training would draw its data order from generators that have moved on.
        checked = dataclasses.replace(checked, seed=config.setup.seed)
    # the model's output precision is said once per model (``precision.warn_once``)
    said = precision.output_precision_warning(model)
    warned = said is not None and precision.warn_once(model)
    warnings = [{"class": "output_precision", "message": said}] if warned else []
    if checked.accumulate > 1 and strategy is not None and strategies.kind_of(strategy) != "jax":
        # Keras' accumulation puts the update in a cond, where tf.distribute cannot sync
        raise BadArgumentError(
            "`accumulate` works with no strategy, or a strategy on JAX: under a TensorFlow "
            "strategy Keras cannot accumulate gradients (its cond holds the replicas' "
            "all-reduce). Give each replica a larger share of the batch, or train on JAX."
        )
    remat = compat.REMAT_MODES.get(keras.backend.backend()) if checked.remat else None
    with compat.rematerialized(model, remat) if remat else contextlib.nullcontext():
        if strategy is not None and strategies.kind_of(strategy) == "multi_worker":
            result = multiworker.fit(strategy, model, data, validation_data, request=checked)
        else:
            with _backup_lock(checked.backup_dir):
                result = _fit_here(keras, model, data, validation_data, strategy, checked)
    result["settings"]["remat"] = remat  # type: ignore[index]
    left_over = _incomplete_accumulation(result["settings"])  # type: ignore[arg-type]
    if left_over:
        warnings.append({"class": "accumulation", "message": left_over})
    received = result["settings"].get("signal_after_training")  # type: ignore[attr-defined]
    result["warnings"] = warnings + result["warnings"] + signal_warning(received)  # type: ignore[operator]
    return result


def signal_warning(received: str | None) -> list[dict[str, str]]:
    """The warning (as data, class "signal") that a scheduler's signal ``received`` came
    once the last training step had begun: training completed, its backup removed."""
    if received is None:
        return []
    return [
        {
            "class": "signal",
            "message": f"{received} arrived after the last training step: training completed (and "
            "its backup was removed). Save what you need now: the scheduler may end this "
            "process soon.",
        }
    ]


def _incomplete_accumulation(settings: Mapping[str, object]) -> str | None:
    """What to say when an epoch's micro-batches are not whole updates, else None."""
    steps, every = settings.get("steps_per_epoch"), int(settings.get("accumulate", 1))  # type: ignore[call-overload]
    if every == 1 or not isinstance(steps, int) or steps % every == 0:
        return None
    return (
        f"An epoch has {steps} micro-batches, not a multiple of accumulate = {every}: the "
        f"last {steps % every} of each epoch join the next epoch's first update (Keras counts "
        "micro-batches across epochs), and the last epoch's are not applied. Choose "
        "batch_size so that it divides the rows, or rows that fill whole updates."
    )


def _feed_context(
    keras: Keras,
    model: Model,
    strategy: object,
    plan: strategies.StrategyPlan | None,
    request: fit_request.FitRequest,
) -> adapters.FeedContext:
    """What the data depends on, decided before it is built: the micro-batch, the seed, the
    strategy's plan and (JAX) distribution, whether the step will be XLA-compiled."""
    backend = keras.backend.backend()
    distribution = None
    if backend == "jax":
        jax_kind = strategy is not None and strategies.kind_of(strategy) == "jax"
        distribution = strategy if jax_kind else keras.distribution.distribution()
    return adapters.FeedContext(
        backend,
        batch_size=fit_request.micro_batch_size(request),
        seed=request.seed,
        class_weight=request.class_weight,
        plan=plan,
        distribution=distribution,
        jit_compile=fit_request.jit_in_force(model, request.jit_compile),
        several_processes=jax_cluster.multi_process(),
    )


def _fit_here(
    keras: Keras,
    model: Model,
    data: object,
    validation_data: object,
    strategy: object,
    request: fit_request.FitRequest,
) -> dict[str, object]:
    """``fit`` in this process, on one device or under a strategy's plan: everything the data
    depends on decided first, then the data built once (``feed``) and the model trained built
    from it."""
    if request.seed is not None:
        compat.set_random_seed(keras, request.seed, model)
    plan = None if strategy is None else strategies.plan_of(strategy)
    context = _feed_context(keras, model, strategy, plan, request)
    # Under a strategy the copy is built below; the user's model too where it is not built,
    # since the trained weights are copied back into it.
    adapter = feed(model, data, validation_data, context, build=plan is None or not model.built)
    if plan is None:
        with _accumulating(model, request.accumulate):
            return _train(keras, model, request, adapter, None)
    with (
        strategies.training_model(model, strategy) as trained,
        _accumulating(trained, request.accumulate, strategy),
    ):
        if trained is not model:
            # the copy's compiled loss and metrics are its own: built here, in its scope, so
            # Keras need not peek at a batch (which rows on the device cannot give)
            with strategies.strategy_scope(strategy):
                adapter.build(trained)
        return _train(keras, trained, request, adapter, plan)


def _train(
    keras: Keras,
    model: Model,
    request: fit_request.FitRequest,
    adapter: adapters.DataAdapter,
    plan: strategies.StrategyPlan | None,
) -> dict[str, object]:
    """``fit`` once the data is built and the model is the one to train (see ``fit``).

    Nothing here hands the data to a helper of this module: the data's way runs from the
    feed to Keras' loop (bench/data_walk.py measures it)."""
    applied = fit_request.apply_settings(keras, model, request)
    state = backup.resume_state(request.backup_dir) if request.backup_dir else None
    resident = None
    if isinstance(adapter, adapters.ResidentAdapter):
        resident = ResidentLoop(adapter.device_rows, fit_request.step_key(request))
        applied["steps_per_execution"] = (
            _resumed_steps(request, state)
            or _compiled_steps(model)
            or _every_batch(keras, request.callbacks)
            or resident.choose_steps(model)
        )
    spe = int(applied["steps_per_execution"])  # type: ignore[call-overload]
    gpu_rows = training_run.gpus_in_use(keras, model)

    position_callback, position = _helper_callbacks(keras, request.seed, adapter.reseed_numpy)
    saver = _backup(request, model, adapter.steps_per_epoch, adapter.batch_size, spe, state)
    if state is not None:
        # the resumed epoch gets the order it had (see gpukeras.data.adapters)
        adapter.skip_epochs(state.epoch)
    watcher = None
    if request.monitor:
        watcher = training_run.make_monitor(
            gpu_rows,
            batch_size=adapter.batch_size,
            resumed_steps=state.batches_done // spe if state is not None else 0,
            # The wait is timed where that leaves Keras' loop as it is, else this
            # dataset alone after training; resident data waits for nothing (its
            # train function says so: see gpukeras.train.timing).
            dataset=adapter.tf_dataset,
            steps_per_execution=spe,
        )
    keeper = _jax_value_keeper(keras, model) if keras.backend.backend() == "jax" else None
    own = [c for c in (saver, position_callback, keeper) if c is not None]
    own += watcher.callbacks if watcher is not None else []
    if resident is not None:
        own.append(resident.callback(keras))
        resident.install(model, spe)

    started = time.perf_counter()
    history = None
    with (
        watcher if watcher is not None else contextlib.nullcontext(),
        preempt.handling(request.signals) as stop,
    ):
        if request.signals:  # every process makes the same call
            stop.exchange = preempt.jax_exchange()
        own.append(preempt.callback(keras, stop, saver, request.backup_dir))
        try:
            history = _fit_method(keras, model)(
                **adapter.fit_args,
                **adapter.validation,
                epochs=request.epochs,
                callbacks=own
                + request.callbacks
                + live.display_callbacks(keras, watcher, request.verbose),
                verbose=request.verbose,
            )
        except GpukerasError:
            raise
        except Exception as error:
            # Memory the device could not give comes first (wherever it was raised); the
            # user's callback failing is the user's; data that does not fit the model
            # fails at the first step (Keras' checks when it traces it, or the model's ops)
            # or, for validation data, in Keras' input check; a batch that cannot be read
            # is the data's (``messages.refused_by_model`` tells them apart).
            refused = messages.refused_by_model(error, first_step=position["batches_done"] == 0)
            translated = (
                failures.out_of_memory(
                    error, model, adapter.batch_size, position, request.backup_dir
                )
                or failures.callback_error(
                    error, request.callbacks, position["epoch"], request.backup_dir
                )
                or (data_failures.refused_data(error) if refused else None)
                or failures.data_error(error, position, request.backup_dir, adapter.given_dataset)
            )
            if translated is None:
                raise
            raise translated from error
        finally:
            compat.unwrap_train_function(model)
            compat.set_initial_epoch(model, None)  # a backup sets it; it would stick
            if resident is not None:
                resident.uninstall(model)
            if keeper is not None:
                keeper.reattach()
    seconds = time.perf_counter() - started

    settings = training_run.settings(
        request, adapter, applied, model, gpu_rows, plan, state, stop, seconds
    )
    report = None
    if watcher is not None:
        if settings["batch_size"] is None:
            settings["batch_size"] = watcher.observed_batch_size()
        report = training_run.monitor_report(
            watcher, model, gpu_rows, settings, adapter.pipeline_steps(), adapter.gpu_dataset()
        )
    settings["accumulate"] = request.accumulate
    if request.accumulate > 1:
        # the monitor's figures are per micro-batch, a training step; the batch is the update's
        micro = settings["micro_batch_size"] = settings["batch_size"]
        settings["batch_size"] = None if micro is None else micro * request.accumulate
    history_columns = training_run.history_columns(
        history,
        saver.history if saver is not None else None,  # type: ignore[attr-defined]
    )
    result = training_run.result(history_columns, report, watcher, started, settings)
    result["warnings"] = adapter.warnings
    return result
