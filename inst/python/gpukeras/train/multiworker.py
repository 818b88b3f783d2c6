"""Multi-worker training: several machines (processes) train one model in step, on TensorFlow.

gpu_strategy(workers = , index = ) and gpu_fit(strategy = ) with it. Each
worker is its own process (an R session per machine) that runs the same
calls: ``cluster.make_strategy`` joins the cluster, this module's ``fit``
trains.

The engine. ``tf.distribute.MultiWorkerMirroredStrategy`` (MWMS) keeps a
replica of the model on every device of every worker and all-reduces the
gradients every step. Keras 3's ``model.fit()`` fails under it
(keras-team/keras#20585: "Attempt to convert a value (PerReplica...)"), so
``fit`` has a loop of its own around Keras' own ``model.train_step``, run on
every replica (``strategy.run`` in a ``tf.function``) over
``strategy.experimental_distribute_dataset``. Keras' step does the scaling
MWMS needs, read from Keras 3.15: the compiled loss is the mean over the
replica's rows times 1/replicas (``scale_loss_for_distribution``), mixed
precision's loss scale applies, and the optimizer sums the gradients over
all replicas (``_all_reduce_sum_gradients``) before one update. So a step
applies the gradient of the mean loss over the global batch, once: 2
workers end with the weights of one process training with gpu_fit() on the
same batches (to 3e-7, tested). A global batch that does not split evenly
(the last of an epoch) weights each replica's rows by its share, as Keras'
``fit()`` under MirroredStrategy does. The step is not XLA-compiled, and
runs one batch per call.

Data. ``batch_size`` (and the batches of a dataset) is the global batch,
the rows of one step over all replicas; each replica gets batch_size /
replicas. The auto-shard policy is DATA (``strategies.shard_by_data``):
every worker reads the same stream of global batches and keeps its share of
each, so a step trains on exactly the batch one process would. (AUTO tries
FILE sharding first, which needs at least as many files as workers and
changes which rows meet in a batch; in-memory arrays have no files, so AUTO
falls back to DATA with a warning.) DATA needs every worker to draw the same
order: arrays go through the seeded pipeline of ``data.adapters``, and
without a seed all workers take one the chief draws. A dataset given by the
user must be the same on every worker, its shuffle seeded (gpu_dataset(seed
= )). Where the number of batches is known, each worker takes exactly that
many per epoch, and tf.distribute's per-batch check that every worker has
one left (an all-reduce in each ``next()``) is turned off: measured here (2
CPU workers, the tests' digits model) it made steps 54 ms instead of 15, and
counted the wait for the slowest worker as input wait (25 % instead of 10 %).

The model. One built outside the strategy's scope is copied into it
(``strategies.training_model``), and the trained weights copied back. Every
worker then starts from the chief's weights and optimizer state (broadcast
at the start): a model copied in, or weights set, on each worker alone would
otherwise train different replicas that never agree (measured).

The cluster. ``gpukeras.distribute.cluster`` joins it (gpu_strategy(), before
TensorFlow starts), exchanges numbers between the workers, and says which
worker was lost and how; its notes say what happens when one is lost.

Backups. With ``backup_dir``, the chief writes the weights, the
optimizer's state, the epoch and the history at every epoch's end with
``gpukeras.train.backup`` (atomic: written, then committed by a rename), and at
the step where a signal stopped every worker (``gpukeras.train.preempt``: the
workers agree on a stop about once a second); the others never
write there. At start every worker restores from it, and all must see the
same backup: for several machines backup_dir must be storage they all share
(NFS, a mounted bucket). Training continues where the backup was taken with
the data order it would have had (the dataset is iterated once per finished
epoch, and the interrupted epoch's first batches are drawn and let go by),
so a killed or stopped run started again with the same call ends with the
weights of an unbroken run (bit for bit here, tested). The loss and metrics
logged for an epoch resumed in its middle are those of the batches after
the resume (reading their running values for a backup would be an exchange
the chief makes alone). When training completes, the chief removes the
backup.

Callbacks. Keras callbacks get Keras' events (epoch and batch begin and
end, ``on_test_begin``/``end`` around validation) on every worker, with the
whole cluster's epoch logs, so callbacks that decide (EarlyStopping,
ReduceLROnPlateau) decide alike; a request to stop takes effect at the
epoch's end, on all workers together. Batch logs are this worker's running
values. Callbacks that write files (ModelCheckpoint, TensorBoard,
CSVLogger) run on the chief only; BackupAndRestore is refused (backup_dir
does that). The loop runs outside the strategy's scope: inside it, Keras'
saving on the chief alone makes a variable, which under MWMS is a
collective the other workers never join (measured: the next exchange fails).

Monitor. gpu_fit()'s (``monitor.TrainingMonitor``: host CPU and NVML
samplers, ``step_summary.summarize``, ``monitor.training_report``), for this
worker: its step time, the throughput of its replicas, its GPUs, and its
input wait. ``workers`` adds every worker's step time, input wait and
throughput (gathered at the end), the cluster's throughput, and the
step-time skew (slowest / fastest mean - 1). Steps are synchronous, so a
slow worker slows every worker's steps and the skew stays small (0.9 %
here); the worker whose input wait is far below the others' is the one they
wait for. Advice about steps_per_execution and XLA, which this loop does not
have, is left out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import secrets
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpukeras.core import compat
from gpukeras.core.errors import (
    BackupMismatchError,
    BadArgumentError,
    GpukerasError,
    PreemptedError,
    StrategyError,
    WorkerLostError,
)
from gpukeras.core.handles import Dataset, Keras, Model, Strategy
from gpukeras.core.runtime import config
from gpukeras.data import adapters
from gpukeras.data.feed import feed
from gpukeras.distribute import cluster, strategies
from gpukeras.train import (
    backup,
    backup_match,
    failures,
    fit_request,
    monitor,
    preempt,
    timing,
    training_run,
)


# Arguments --------------------------------------------------------------------------
def _check_callbacks(keras: object, callbacks: list[object], is_chief: bool) -> list[object]:
    """The callbacks this worker runs: file writers on the chief only; BackupAndRestore refused."""
    cb = keras.callbacks  # type: ignore[attr-defined]
    if any(isinstance(c, cb.BackupAndRestore) for c in callbacks):
        raise BadArgumentError(
            "BackupAndRestore cannot run under multi-worker training (every worker would "
            "write): give gpu_fit() backup_dir instead, which the chief writes."
        )
    writers = (cb.ModelCheckpoint, cb.TensorBoard, cb.CSVLogger)
    return [c for c in callbacks if is_chief or not isinstance(c, writers)]


# One worker's run ---------------------------------------------------------------------
@dataclass
class _Run:
    """What one worker's training needs, gathered as ``fit`` learns it: the checked request
    first, then the seed the workers agreed on and the backup they resume from, then the data
    and the model to train. ``_failure`` reads it too, however far ``fit`` got."""

    keras: Keras
    tf: Any  # the tensorflow module
    strategy: Strategy
    request: fit_request.FitRequest
    callbacks: list[object]  # the ones this worker runs (``_check_callbacks``)
    info: dict[str, object]  # this worker's view of the cluster (``cluster.describe``)
    collectives: cluster.Collectives
    heartbeat: float  # seconds of silence after which a worker counts as lost
    seed: int = 0
    state: backup.BackupState | None = None
    # where training is, for messages: 0-based epoch and batch (-1: before the first)
    position: dict[str, int] = field(default_factory=lambda: {"epoch": 0, "batch": -1})
    adapter: adapters.DataAdapter | None = None
    dataset: Dataset = None  # the tf.data dataset of global batches
    validation: Dataset | None = None  # the same for validation, or None
    model: Model = None  # the model trained (in the strategy's scope)


# Failures ---------------------------------------------------------------------------
def _kept(backup_dir: str | None) -> str:
    if backup_dir is None:
        return "Nothing was kept: with backup_dir, a restart continues from the last epoch."
    with contextlib.suppress(GpukerasError):
        state = backup.read_state(backup_dir)
        if state is not None:
            return (
                f"The chief's backup in {backup_dir} holds {state.epoch} finished "
                f"epoch(s): run the same call again with it to continue from epoch "
                f"{state.epoch + 1}."
            )
    return f"No backup had been written to {backup_dir} yet: training starts over."


def _failure(run: _Run, error: BaseException) -> BaseException:
    """The error to raise for ``error``; reports this worker's own failures to the others."""
    tf, position, request = run.tf, run.position, run.request
    where = f"epoch {position['epoch'] + 1}, batch {position['batch'] + 1}"
    own = int(run.info["index"])  # type: ignore[call-overload]
    if isinstance(error, PreemptedError):  # every worker stops at the same step: none failed
        return error
    if isinstance(error, Exception) and cluster.lost_peer(tf, error):
        return WorkerLostError(
            f"Training stopped at {where} on worker {own}: {cluster.peer_message(error, own)}. "
            "A worker that exits or fails stops the others at once; one that freezes or is "
            f"cut off, within the heartbeat timeout ({run.heartbeat:g} s) of its last heartbeat. "
            f"{_kept(request.backup_dir)} {cluster.RESTART}"
            + (", with the same backup_dir." if request.backup_dir else ".")
        )
    cluster.report_failure(tf, own, where, error)
    if isinstance(error, Exception) and not isinstance(error, GpukerasError):
        given_dataset = run.adapter is not None and run.adapter.given_dataset
        translated = failures.callback_error(
            error, run.callbacks, position["epoch"], request.backup_dir
        ) or failures.data_error(error, position, request.backup_dir, given_dataset)
        if translated is not None:
            return translated
    return error


# Training ---------------------------------------------------------------------------
def fit(
    strategy: object,
    model: object,
    data: object,
    validation_data: object = None,
    request: Mapping[str, object] | fit_request.FitRequest | None = None,
    **fields: object,
) -> dict[str, object]:
    """Train under a multi-worker strategy; every worker runs this same call.

    Args:
        strategy: from ``cluster.make_strategy``.
        model: a compiled Keras 3 model; one built outside the strategy's
            scope is copied into it and the trained weights copied back
            (``strategies.training_model``). Every worker starts from the
            chief's weights.
        data: arrays ``(x, y)`` or a tf.data dataset of global batches.
        validation_data: arrays ``(x, y)`` or a dataset, evaluated every epoch.
        request: gpu_fit()'s request (``fit_request.FitRequest``, or a mapping of its
            fields), as ``fit.fit`` takes it; ``batch_size`` is the global rows per
            step, ``backup_dir`` the chief's, shared by all workers; ``seed`` None:
            one the chief draws. This loop runs one batch per call, without XLA, and
            backs up at epoch ends: other steps_per_execution, jit_compile or
            backup_freq are refused.
        **fields: the request's fields by name, as Python callers write them.

    Returns:
        As ``fit.fit``: ``history`` (the cluster's epoch logs; the same on
        every worker), ``monitor`` (this worker's report plus ``workers``),
        ``timeline`` and ``settings`` (with ``strategy``: the cluster, and the
        global and per-replica batch size).

    Raises:
        BadArgumentError, BadModelError, ModelNotCompiledError, BadDataError,
        BackupMismatchError; StrategyError when the workers' calls differ or
        one does not call in time; WorkerLostError when another worker dies
        or fails during training; PreemptedError on every worker when a signal
        stopped them.
    """
    keras = config.keras()
    if strategies.kind_of(strategy) != "multi_worker":
        raise BadArgumentError(
            "strategy must be a multi-worker strategy (gpu_strategy(workers = , index = ))."
        )
    request = fit_request.check_request(keras, model, fields if request is None else request)
    # Its own distributed step runs one batch per call, without XLA, and backs up at
    # epoch ends: asking for more must not be silently ignored.
    unsupported = fit_request.refused_by("multi_worker", request)
    if unsupported:
        raise BadArgumentError(
            f"Multi-worker training does not take {', '.join(unsupported)}: it runs its "
            "own distributed step, one batch per call, and backs up at every epoch's end. "
            "Leave them at their defaults."
        )
    request = dataclasses.replace(request, jit_compile=False)
    info = cluster.describe(strategy)
    own_callbacks = _check_callbacks(keras, request.callbacks, bool(info["is_chief"]))
    tf = config.backend_module()
    start_timeout, heartbeat = cluster.timeouts(strategy)
    state = backup.resume_state(request.backup_dir) if request.backup_dir else None
    collectives = cluster.Collectives.of(tf, strategy)
    # The first exchange: every worker has called (within start_timeout), sees the same
    # backup, and takes the chief's seed. Until it, an error is this worker's alone; after
    # it, the others wait for this one, so its errors are reported to them (_failure).
    candidate = request.seed
    if candidate is None and state is not None:
        candidate = state.run.get("seed")  # type: ignore[assignment]
    if candidate is None:
        candidate = secrets.randbelow(2**31)
    try:
        rows = collectives.agree(
            {
                "seed": math.nan if request.seed is None else request.seed,
                "backup epoch": state.epoch if state else math.nan,
                "backup generation": state.generation if state else math.nan,
            },
            start_timeout,
            BackupMismatchError,
            extra=[float(candidate)],
        )
    except tf.errors.OpError as error:
        raise StrategyError(
            f"Not every worker called gpu_fit() within {start_timeout:g} s of the others "
            f"(this is worker {info['index']}). Run the same gpu_fit() call on every worker. "
            f"{cluster.RESTART}."
        ) from error
    run = _Run(keras, tf, strategy, request, own_callbacks, info, collectives, heartbeat)
    run.seed = int(rows[0, -1])
    run.state = state
    try:
        compat.set_random_seed(keras, run.seed, model)
        # the model is built in the strategy's scope once every worker has agreed (_train)
        context = adapters.FeedContext(
            keras.backend.backend(),
            batch_size=request.batch_size,
            seed=run.seed,
            class_weight=request.class_weight,
            tf_data_only=True,
        )
        adapter = run.adapter = feed(model, data, validation_data, context, build=False)
        run.dataset = adapter.tf_dataset
        run.validation = adapter.validation.get("validation_data")
        collectives.agree(
            {
                "epochs": request.epochs,
                "batch_size": adapter.batch_size or math.nan,
                "batches per epoch": adapter.steps_per_epoch or math.nan,
                "validation": run.validation is not None,
                "monitor": request.monitor,
                # every worker takes part in the agreements on a stop, or none does
                "signals": float(sum(1 << int(getattr(signal, n)) for n in request.signals)),
            },
            None,
            StrategyError,
        )
        with strategies.training_model(model, strategy) as trained:
            run.model = trained
            return _train(run)
    except BaseException as error:
        failure = _failure(run, error)
        if failure is error:
            raise
        raise failure from error


def _train(run: _Run) -> dict[str, object]:
    """``fit`` once every worker agreed and the model is the one to train."""
    keras, tf, strategy, model, request = run.keras, run.tf, run.strategy, run.model, run.request
    adapter, state, info, collectives = run.adapter, run.state, run.info, run.collectives
    assert adapter is not None  # fit made it before the model
    validation = run.validation
    with strategy.scope():
        adapter.build(model)
        applied = fit_request.apply_settings(keras, model, request)
    applied["steps_per_execution"] = 1  # one batch per step here, whatever the model has
    facts: dict[str, object] = {  # what a backup must match
        "epochs": request.epochs,
        "steps_per_epoch": adapter.steps_per_epoch,
        "steps_per_execution": 1,
        "seed": run.seed,
        "batch_size": adapter.batch_size,
        "weights": [list(map(int, w.shape)) for w in model.weights],
        "workers": len(info["workers"]),  # type: ignore[arg-type]
    }
    saver = None
    if request.backup_dir is not None:
        if state is not None:
            backup_match.check_matches(state, facts, request.backup_dir)
        saver = backup.backup_callback(request.backup_dir, "epoch", facts, state, keras_fit=False)
        saver.set_model(model)  # type: ignore[attr-defined]
    gpu_rows = training_run.gpus_in_use(keras, model)
    watcher = None
    if request.monitor:
        watcher = training_run.make_monitor(gpu_rows, batch_size=None, measure_input=True)
        record = watcher.timer.record
        record.backend = "tensorflow"
        record.method = "next(iterator) timed before each distributed step" + (
            ""
            if adapter.steps_per_epoch
            else " (with the workers' agreement that each has a batch left)"
        )
    # The chief writes backups; the others only restore from them.
    hooks = ([saver] if saver is not None and info["is_chief"] else []) + run.callbacks
    events = keras.callbacks.CallbackList(
        hooks,
        add_progbar=request.verbose != 0,
        model=model,
        verbose=request.verbose,
        epochs=request.epochs,
        steps=adapter.steps_per_epoch,
    )
    distributed = strategies.distribute_dataset(strategy, run.dataset, adapter.steps_per_epoch)
    checked = None
    if validation is not None:
        checked = strategies.distribute_dataset(
            strategy, validation, strategies.batches_in(validation)
        )

    @tf.function(reduce_retracing=True)
    def train_step(batch: object) -> object:
        return strategy.run(model.train_step, args=(batch,))

    @tf.function(reduce_retracing=True)
    def test_step(batch: object) -> None:
        strategy.run(model.test_step, args=(batch,))

    @tf.function
    def results() -> dict[str, object]:
        # Metric variables sync on read: read here, they are summed over every replica.
        return model.get_metrics_result()

    def read() -> dict[str, float]:
        return {str(name): float(value) for name, value in results().items()}

    history = list(state.history) if state is not None else []
    first_epoch = state.epoch if state is not None else 0
    skip = state.batches_done if state is not None else 0  # of the resumed epoch
    started = time.perf_counter()
    logs: dict[str, float] = {}
    # Not in the strategy's scope: there, a variable a callback makes on the chief alone
    # (Keras' saving makes one) would be a collective the other workers never join.
    with (
        watcher if watcher is not None else contextlib.nullcontext(),
        preempt.handling(request.signals) as stop,
    ):
        if request.signals:  # the same on every worker (agreed)
            stop.exchange = collectives.gather
        try:
            model.stop_training = False
            if saver is not None and not info["is_chief"]:
                saver.on_train_begin()  # type: ignore[attr-defined]  # restore only
            events.on_train_begin()  # the chief's saver restores here
            collectives.from_chief([*model.weights, *model.optimizer.variables])
            read()  # traced here, not in the first epoch's timed steps
            for _ in range(first_epoch):  # the resumed epoch gets the order it had
                iter(distributed)
            for epoch in range(first_epoch, request.epochs):
                run.position.update(epoch=epoch, batch=-1)
                model.reset_metrics()
                events.on_epoch_begin(epoch)
                for step, (begin, fetched, batch) in enumerate(
                    strategies.timed_batches(distributed, adapter.steps_per_epoch)
                ):
                    if skip:  # a batch the backup holds: drawn, so the rest come in order
                        skip -= 1
                        continue
                    run.position["batch"] = step
                    received = stop.check()
                    if received is not None:
                        if saver is not None and info["is_chief"]:
                            saver.save_now()  # type: ignore[attr-defined]
                        raise preempt.stopped(received, epoch, step, request.backup_dir)
                    events.on_train_batch_begin(step)
                    outputs = train_step(batch)
                    if watcher is not None:
                        parts = strategy.experimental_local_results(batch)
                        rows = [timing.batch_rows(part, keras.tree.flatten) for part in parts]
                        record.steps.append(
                            timing.Step(
                                epoch=epoch,
                                begin=begin,
                                fetch_seconds=fetched - begin,
                                returned=time.perf_counter(),
                                samples=None if None in rows else sum(rows),  # type: ignore[arg-type]
                            )
                        )
                    events.on_train_batch_end(
                        step,
                        strategy.experimental_local_results(outputs)[0],
                    )
                logs = read()
                if watcher is not None:
                    record.epoch_ends[epoch] = time.perf_counter()
                if checked is not None:
                    events.on_test_begin()
                    model.reset_metrics()
                    for _, _, batch in strategies.timed_batches(
                        checked, strategies.batches_in(validation)
                    ):
                        test_step(batch)
                    scores = read()
                    events.on_test_end(scores)
                    logs.update({f"val_{name}": value for name, value in scores.items()})
                events.on_epoch_end(epoch, logs)
                history.append({"epoch": epoch + 1, **logs})
                # A callback may ask to stop on one worker: all stop, or none.
                if collectives.gather([float(bool(model.stop_training))]).max() > 0:
                    break
            model.optimizer.finalize_variable_values(model.trainable_weights)
            events.on_train_end(logs)
        finally:
            compat.set_initial_epoch(model, None)  # the saver sets it
    seconds = time.perf_counter() - started

    # the seed the workers agreed on; backup_freq is "epoch", the one this loop takes
    trained = dataclasses.replace(request, seed=run.seed)
    plan = strategies.plan_of(strategy)
    settings = training_run.settings(
        trained, adapter, applied, model, gpu_rows, plan, state, stop, seconds,
        auto_shard_policy="DATA",
    )  # fmt: skip
    # every worker has the monitor or none (agreed), so all make _report's exchange
    report = _report(watcher, model, gpu_rows, settings, collectives) if watcher else None
    result = training_run.result(
        training_run.history_columns(None, history), report, watcher, started, settings
    )
    result["warnings"] = adapter.warnings
    return result


def _report(
    watcher: monitor.TrainingMonitor,
    model: object,
    gpu_rows: list[dict[str, object]],
    settings: dict[str, object],
    collectives: cluster.Collectives,
) -> dict[str, object]:
    """This worker's monitor report, with every worker's step numbers under ``workers``."""
    report = training_run.monitor_report(watcher, model, gpu_rows, settings)
    report["advice"] = _advice(report["advice"])
    names = ("step_time_mean_ms", "input_wait_share", "samples_per_second", "steps_timed")
    mine = [math.nan if report.get(n) is None else float(report[n]) for n in names]
    rows = collectives.gather(mine)
    workers: dict[str, object] = {"index": list(range(len(rows)))}
    for column, name in enumerate(names):
        workers[name] = [None if math.isnan(v) else float(v) for v in rows[:, column]]
    means = [v for v in rows[:, 0] if not math.isnan(v) and v > 0]
    rates = [v for v in rows[:, 2] if not math.isnan(v)]
    workers["samples_per_second_total"] = sum(rates) if len(rates) == len(rows) else None
    workers["step_time_skew"] = max(means) / min(means) - 1 if len(means) == len(rows) else None
    report["workers"] = workers
    return report


def _advice(items: list[str]) -> list[str]:
    """gpu_fit()'s advice without what this loop has no option for (steps_per_execution, XLA),
    and the multi-worker form of "steps are short"."""
    kept = [i for i in items if "steps_per_execution" not in i and "jit_compile" not in i]
    if len(kept) < len(items) and any("steps_per_execution" in i for i in items):
        kept.append(
            "Steps are short: every step waits for an all-reduce across the workers, so a "
            "larger global batch (batch_size) gives each synchronisation more work."
        )
    return kept
