"""Multi-worker training: several machines (processes) train one model in step, on TensorFlow.

gpu_strategy(workers = , index = ) and gpu_fit(strategy = ) with it. Each
worker is its own process (an R session per machine) that runs the same
calls: ``make_strategy`` joins the cluster, ``fit`` trains.

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
replicas. The auto-shard policy is DATA (``distribute.shard_by_data``):
every worker reads the same stream of global batches and keeps its share of
each, so a step trains on exactly the batch one process would. (AUTO tries
FILE sharding first, which needs at least as many files as workers and
changes which rows meet in a batch; in-memory arrays have no files, so AUTO
falls back to DATA with a warning.) DATA needs every worker to draw the same
order: arrays go through the seeded pipeline of ``data_adapters``, and
without a seed all workers take one the chief draws. A dataset given by the
user must be the same on every worker, its shuffle seeded (gpu_dataset(seed
= )). Where the number of batches is known, each worker takes exactly that
many per epoch, and tf.distribute's per-batch check that every worker has
one left (an all-reduce in each ``next()``) is turned off: measured here (2
CPU workers, the tests' digits model) it made steps 54 ms instead of 15, and
counted the wait for the slowest worker as input wait (25 % instead of 10 %).

The model. One built outside the strategy's scope is copied into it
(``distribute.training_model``), and the trained weights copied back. Every
worker then starts from the chief's weights and optimizer state (broadcast
at the start): a model copied in, or weights set, on each worker alone would
otherwise train different replicas that never agree (measured).

Joining the cluster. TensorFlow configures its collectives once per
process, when MWMS is made, so ``make_strategy`` must come before anything
starts TensorFlow's runtime (RuntimeStartedError otherwise); a process
joins one cluster. Workers find each other through TensorFlow's
coordination service, led by the chief, which ``make_strategy`` configures
before MWMS does: the others wait up to ``start_timeout_seconds`` (at least
about 10 s) for the chief, and the chief, whom TensorFlow would let wait
for ever (in C++ that holds Python's lock, so a thread cannot bound it),
first waits up to that long for every other worker's port to answer.

Losing a worker, measured with 2 CPU workers on 127.0.0.1 (TF 2.21). A
worker that exits (SIGKILL, a crash, R quitting) resets its connections: the
others stop at their next collective, 0.06 s later. One that freezes or is
cut off (SIGSTOP, a lost network) stops sending heartbeats: the others stop
within ``heartbeat_timeout_seconds`` of its last one (2.7 and 5.1 s with a
4 s timeout; TensorFlow's default is 10 s). A worker whose own call fails
(an error in a callback, bad data, an interrupt) reports the error to the
cluster, and the others stop at once, naming it. The others raise
WorkerLostError. Collectives get no timeout of their own: it would also end
legitimate long waits (a slow first step, the chief writing a backup), and
lost workers are caught by the heartbeat. The exception is ``fit``'s first
exchange, which waits at most ``start_timeout_seconds`` for every worker to
call it. A worker that stalls while its process runs (stuck in a callback)
is not noticed. After any such failure TensorFlow's collectives cannot be
used again in that process: restart R on every worker.

Backups. With ``backup_dir``, the chief writes the weights, the
optimizer's state, the epoch and the history at every epoch's end with
``gpukeras.backup`` (atomic: written, then committed by a rename); the
others never write there. At start every worker restores from it, and all
must see the same backup: for several machines backup_dir must be storage
they all share (NFS, a mounted bucket). Training continues at the next
epoch with the data order it would have had (the dataset is iterated once
per finished epoch), so a killed run started again with the same call ends
with the weights of an unbroken run (bit for bit here, tested). When
training completes, the chief removes the backup.

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
samplers, ``timing.summarize``, ``monitor.training_report``), for this
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
import json
import math
import os
import re
import secrets
import socket
import time
from collections.abc import Iterator

import numpy as np

from gpukeras import (
    arguments,
    backup,
    data_adapters,
    distribute,
    failures,
    fit_request,
    timing,
    training_run,
)
from gpukeras import monitor as monitoring
from gpukeras.errors import (
    BackupMismatchError,
    BadArgumentError,
    BadDataError,
    GpukerasError,
    RuntimeStartedError,
    StrategyError,
    WorkerLostError,
)
from gpukeras.runtime import config

START_TIMEOUT_SECONDS = 300.0
HEARTBEAT_TIMEOUT_SECONDS = 10.0  # TensorFlow's default
JOBS = ("chief", "worker")  # the tasks MWMS trains with; an evaluator or ps is not supported
ADDRESS = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):(\d+)")
# TensorFlow's errors when a peer died, hung up or reported a failure.
LOST_PEER_ERRORS = ("UnavailableError", "AbortedError", "DeadlineExceededError", "CancelledError")
RESTART = (
    "Restart R on every worker, call gpu_strategy() first (before anything else that "
    "uses Python) with the same workers, and run the same gpu_fit() call again"
)

# Strategies made in this process, by their TF_CONFIG: TensorFlow joins one cluster per process.
_made: dict[str, object] = {}


# The cluster --------------------------------------------------------------------
def _check_workers(workers: object) -> list[str]:
    if isinstance(workers, str):
        workers = [workers]
    if not isinstance(workers, (list, tuple)) or not workers:
        raise BadArgumentError(
            f'workers must be the "host:port" of every worker, e.g. c("10.0.0.1:12345", '
            f'"10.0.0.2:12345"), not {workers!r}.'
        )
    for address in workers:
        match = ADDRESS.fullmatch(address) if isinstance(address, str) else None
        if match is None or not 0 < int(match.group(3)) < 65536:
            raise BadArgumentError(
                f'Each worker must be "host:port" (a host name or IP address and a port '
                f'1-65535, e.g. "10.0.0.1:12345"), not {address!r}.'
            )
    repeated = sorted({address for address in workers if workers.count(address) > 1})
    if repeated:
        raise BadArgumentError(
            f"workers name {', '.join(repeated)} more than once: each worker needs its own "
            "host:port."
        )
    return list(workers)


def tf_config(workers: list[str], index: int) -> dict[str, object]:
    """The TF_CONFIG that makes this process worker ``index`` of ``workers``.

    Args:
        workers: "host:port" of every worker, the same list (same order) on
            every worker; the first is the chief.
        index: this worker's place in ``workers``, 0-based.

    Returns:
        ``{"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}``.
    """
    workers = _check_workers(workers)
    index = arguments.count("index", index, minimum=0)
    if index >= len(workers):
        raise BadArgumentError(
            f"index must be this worker's place in workers, 0 to {len(workers) - 1} "
            f"(0 is the chief), not {index}."
        )
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}


def _read_tf_config() -> dict[str, object]:
    """TF_CONFIG from the environment, checked to be a cluster gpukeras can train with."""
    text = os.environ.get("TF_CONFIG")
    if not text:
        raise StrategyError(
            "No workers were given and TF_CONFIG is not set: give every worker's "
            'address and this worker\'s place, gpu_strategy(workers = c("host1:port", '
            '"host2:port"), index = 0) on the first machine, index = 1 on the second, ...'
        )
    try:
        cluster = json.loads(text)
        jobs = {str(job): list(tasks) for job, tasks in cluster["cluster"].items()}
        task = (str(cluster["task"]["type"]), int(cluster["task"]["index"]))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise StrategyError(
            f"TF_CONFIG cannot be read ({type(error).__name__}: {error}): it must be JSON "
            '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", '
            '"index": 0}}. Or give workers and index to gpu_strategy() instead.'
        ) from error
    others = sorted(set(jobs) - set(JOBS))
    if others or task[0] not in JOBS or not 0 <= task[1] < len(jobs.get(task[0], [])):
        raise StrategyError(
            f"TF_CONFIG names jobs {', '.join(sorted(jobs))} and this task as {task[0]} "
            f"{task[1]}: gpukeras trains with chief and worker tasks only, and the task must "
            "be one of them. Or give workers and index to gpu_strategy() instead."
        )
    for tasks in jobs.values():
        _check_workers(tasks)
    return cluster


def _leader(cluster: dict[str, object]) -> str:
    """The "host:port" of the coordination service's leader: the chief if there is one, else
    worker 0 (as MWMS chooses)."""
    jobs = cluster["cluster"]
    return (jobs.get("chief") or jobs["worker"])[0]  # type: ignore[attr-defined,index]


def _addresses(cluster: dict[str, object]) -> list[str]:
    jobs = cluster["cluster"]
    return [*jobs.get("chief", []), *jobs.get("worker", [])]  # type: ignore[attr-defined]


def _own_address(cluster: dict[str, object]) -> str:
    task = cluster["task"]
    return cluster["cluster"][task["type"]][int(task["index"])]  # type: ignore[index]


def _listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=1):
            return True
    except OSError:
        return False


def _wait_for_workers(cluster: dict[str, object], timeout: float) -> None:
    """On the leader: wait until every other worker listens (is in its gpu_strategy()).

    TensorFlow's leader waits for the others without a limit, in C++ that holds
    Python's lock (measured: a thread cannot bound it), while the others give up
    after the coordination service's register timeout. So the leader starts only
    once all the others are there, and otherwise fails with TensorFlow untouched.
    """
    own = _own_address(cluster)
    if own != _leader(cluster):
        return
    deadline = time.monotonic() + timeout
    waiting = [address for address in _addresses(cluster) if address != own]
    while True:
        waiting = [address for address in waiting if not _listening(address)]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise StrategyError(
                f"Not all workers joined within {timeout:g} s: {', '.join(waiting)} did not "
                f"answer (this is {own}, the chief). Run gpu_strategy() with the same workers "
                "on every machine, each with its own index, within start_timeout_seconds of "
                "each other, and check that every address can be reached from the other "
                "machines (host name, firewall); then call gpu_strategy() here again."
            )
        time.sleep(0.2)


def _started(tf: object, cluster: dict[str, object], timeout: float) -> object:
    """The strategy, or a StrategyError for TensorFlow's errors in joining the cluster."""
    own = _own_address(cluster)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy()  # type: ignore[attr-defined]
    except tf.errors.OpError as error:  # type: ignore[attr-defined]
        if "Could not start gRPC server" in str(error):
            raise StrategyError(
                f"This worker cannot listen on {own}: the port is in use, or the host is not "
                f"this machine. Choose a free port for it (the same list on every worker). "
                f"{RESTART}."
            ) from error
        if type(error).__name__ not in LOST_PEER_ERRORS:
            raise
        raise StrategyError(
            f"This worker ({own}) could not reach the chief ({_leader(cluster)}) in time "
            f"(start_timeout_seconds = {timeout:g}; TensorFlow waits at least about 10 s). "
            "Run gpu_strategy() with the same workers on every machine within "
            "start_timeout_seconds of each other, and check that the chief's address can be "
            f"reached from this machine (host name, firewall). {RESTART}."
        ) from error


def _seconds(name: str, value: object) -> float:
    seconds = arguments.positive(name, value)
    if seconds is None:
        raise BadArgumentError(f"{name} must be a positive number of seconds, not None.")
    return seconds


def make_strategy(
    workers: list[str] | None = None,
    index: int | None = None,
    start_timeout_seconds: float = START_TIMEOUT_SECONDS,
    heartbeat_timeout_seconds: float = HEARTBEAT_TIMEOUT_SECONDS,
) -> object:
    """Join the cluster: a MultiWorkerMirroredStrategy for this worker.

    Args:
        workers: "host:port" of every worker, the same list on every worker
            (the first is the chief); None reads an existing TF_CONFIG.
        index: this worker's place in ``workers`` (0-based); with ``workers``.
        start_timeout_seconds: how long to wait for every worker to join.
        heartbeat_timeout_seconds: a worker silent this long counts as lost
            (see the module's notes).

    Returns:
        The strategy (the same one when called again with the same cluster).

    Raises:
        BadArgumentError: bad workers, index or timeouts, or not the
            TensorFlow backend; StrategyError: no TF_CONFIG, one gpukeras
            cannot use, a port in use, workers that did not join in time;
            RuntimeStartedError: TensorFlow's runtime has already started, or
            this process already joined another cluster.
    """
    if config.backend != "tensorflow":
        raise BadArgumentError(
            f"Multi-worker training needs the TensorFlow backend; this is {config.backend}. "
            'On JAX, train on several GPUs of one machine with gpu_strategy("mirrored").'
        )
    if (workers is None) != (index is None):
        raise BadArgumentError(
            "Give workers and index together (index: this worker's place in workers, 0 for "
            "the first), or neither to use TF_CONFIG."
        )
    start = _seconds("start_timeout_seconds", start_timeout_seconds)
    heartbeat = _seconds("heartbeat_timeout_seconds", heartbeat_timeout_seconds)
    cluster = tf_config(workers, index) if workers is not None else _read_tf_config()  # type: ignore[arg-type]
    key = json.dumps(cluster, sort_keys=True)
    if key in _made:
        return _made[key]
    if _made:
        raise RuntimeStartedError(
            "This session already joined another cluster, and TensorFlow joins one per "
            f"process. Restart R to join this one (workers {', '.join(_addresses(cluster))})."
        )
    tf = config.backend_module()
    from tensorflow.python.eager import context

    runtime = context.context()
    if runtime._context_handle is not None:
        raise RuntimeStartedError(
            "TensorFlow has already started in this session, and multi-worker training must "
            "be set up before it starts (TensorFlow configures its collectives once, at "
            "start). Restart R and call gpu_strategy() first, before anything else that uses "
            "Python (gpu_check(), gpu_devices(), models)."
        )
    _wait_for_workers(cluster, start)
    os.environ["TF_CONFIG"] = key
    # Before MWMS, which then keeps this configuration: bounded waits (see the module's notes).
    runtime.configure_coordination_service(
        service_type="standalone",
        service_leader="/job:{}/replica:0/task:0".format(
            "chief" if "chief" in cluster["cluster"] else "worker"  # type: ignore[operator]
        ),
        cluster_register_timeout_in_ms=int(start * 1000),
        heartbeat_timeout_in_ms=int(heartbeat * 1000),
    )
    strategy = _started(tf, cluster, start)
    strategy._gpukeras_timeouts = (start, heartbeat)  # type: ignore[attr-defined]
    _made[key] = strategy
    return strategy


def describe(strategy: object) -> dict[str, object]:
    """This worker's view of the cluster, as plain data.

    Returns:
        ``replicas`` (in all workers), ``devices`` (this worker's, as
        'GPU:0', 'CPU:0'), ``workers`` ("host:port", chief first), ``index``
        (this worker's place in ``workers``) and ``is_chief``.
    """
    from gpukeras import tensors

    resolver = strategy.cluster_resolver  # type: ignore[attr-defined]
    jobs = resolver.cluster_spec().as_dict()
    chiefs = len(jobs.get("chief", []))
    task_index = int(resolver.task_id)
    return {
        "replicas": int(strategy.num_replicas_in_sync),  # type: ignore[attr-defined]
        "devices": [tensors.normalize_device(d) for d in strategy.extended.worker_devices],  # type: ignore[attr-defined]
        "workers": [*jobs.get("chief", []), *jobs.get("worker", [])],
        "index": task_index if resolver.task_type == "chief" else chiefs + task_index,
        "is_chief": bool(strategy.extended.should_checkpoint),  # type: ignore[attr-defined]
    }


# Exchanges between the workers -----------------------------------------------------
class _Cluster:
    """Small collectives on plain numbers. Every worker must make the same calls in the same
    order (each is an all-gather or all-reduce across the workers). One per strategy, so its
    functions are traced once per process."""

    WIDTH = 8  # numbers per gather, padded: one shape, one trace

    def __init__(self, tf: object, strategy: object) -> None:
        self.tf = tf
        self.strategy = strategy
        self.local = len(strategy.extended.worker_devices)  # type: ignore[attr-defined]
        self._gathers: dict[float | None, object] = {}

    @classmethod
    def of(cls, tf: object, strategy: object) -> _Cluster:
        cluster = getattr(strategy, "_gpukeras_cluster", None)
        if cluster is None:
            cluster = cls(tf, strategy)
            strategy._gpukeras_cluster = cluster  # type: ignore[attr-defined]
        return cluster

    def gather(self, values: list[float], timeout: float | None = None) -> np.ndarray:
        """Every worker's ``values``, one row per worker (by index); within ``timeout`` s."""
        tf, strategy = self.tf, self.strategy
        if timeout not in self._gathers:
            options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout)  # type: ignore[attr-defined]

            def on_replica(row: object) -> object:
                # identity: a value of this replica's own, which the collective needs
                context = tf.distribute.get_replica_context()  # type: ignore[attr-defined]
                return context.all_gather(tf.identity(row), axis=0, options=options)  # type: ignore[attr-defined]

            @tf.function  # type: ignore[attr-defined]
            def gather(row: object) -> object:
                return strategy.experimental_local_results(strategy.run(on_replica, args=(row,)))[0]  # type: ignore[attr-defined]

            self._gathers[timeout] = gather
        padded = [*values, *[math.nan] * (self.WIDTH - len(values))]
        rows = self._gathers[timeout](tf.constant([padded], dtype=tf.float64)).numpy()  # type: ignore[attr-defined,operator]
        return rows[:: self.local, : len(values)]

    def from_chief(self, variables: list[object]) -> None:
        """Give every worker the chief's values of ``variables`` (weights set per worker, as by
        a copy into the scope, would otherwise differ between the workers' replicas)."""
        tf, strategy = self.tf, self.strategy
        values = [v.value if hasattr(v, "value") else v for v in variables]

        def on_replica() -> list[object]:
            context = tf.distribute.get_replica_context()  # type: ignore[attr-defined]
            first = tf.equal(context.replica_id_in_sync_group, 0)  # type: ignore[attr-defined]
            own = [tf.where(first, tf.identity(v), tf.zeros_like(v)) for v in values]  # type: ignore[attr-defined]
            summed: list[object] = list(own)
            for dtype in {v.dtype for v in own}:  # an all-reduce takes one dtype
                chosen = [i for i, v in enumerate(own) if v.dtype == dtype]
                for i, value in zip(chosen, context.all_reduce("sum", [own[i] for i in chosen])):
                    summed[i] = value
            return summed

        @tf.function  # type: ignore[attr-defined]
        def broadcast() -> None:
            summed = strategy.experimental_local_results(strategy.run(on_replica))[0]  # type: ignore[attr-defined]
            for variable, value in zip(values, summed):
                variable.assign(value)

        broadcast()


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


def _tf_dataset(data: object, what: str) -> object:
    if not data_adapters.is_tf_dataset(data):
        raise BadDataError(
            f"Multi-worker training takes {what} as arrays (x, y) or a tf.data dataset "
            f"(gpu_dataset()), not {type(data).__name__}."
        )
    return data


def _validation_dataset(validation_data: object, batch_size: int | None) -> object | None:
    """Validation data as a tf.data dataset of global batches, in order."""
    given = data_adapters.validation_args(validation_data, batch_size)
    if not given:
        return None
    data = given["validation_data"]
    if isinstance(data, tuple):
        from gpukeras import pipeline

        x, y = (*data, None)[:2]
        data = pipeline.from_arrays(x, y, batch_size=given["validation_batch_size"], shuffle=False)[
            "dataset"
        ]
    return _tf_dataset(data, "validation_data")


def _agree(
    cluster: _Cluster,
    values: dict[str, float],
    timeout: float | None,
    error: type,
    extra: list[float] = (),  # type: ignore[assignment]
) -> np.ndarray:
    """Gather ``values`` (then ``extra``, not compared) from every worker; raise ``error`` on
    all of them where ``values`` differ."""
    rows = cluster.gather([*values.values(), *extra], timeout)
    differ = [
        f"{name}: " + ", ".join(f"worker {i} {_plain(v)}" for i, v in enumerate(rows[:, column]))
        for column, name in enumerate(values)
        if len({_plain(v) for v in rows[:, column]}) > 1
    ]
    if differ:
        raise error(
            f"The workers do not agree ({'; '.join(differ)}). Every worker must run the "
            "same gpu_fit() call on the same data, and for a backup share one backup_dir "
            f"(storage every machine sees). {RESTART}."
        )
    return rows


def _plain(value: float) -> object:
    if math.isnan(value):
        return "none"
    return int(value) if float(value).is_integer() else value


# Failures ---------------------------------------------------------------------------
def _peer_message(error: Exception, own: int) -> str:
    """What a lost-peer error says happened, in a line (from TensorFlow's message)."""
    text = getattr(error, "message", None) or str(error)
    tasks = sorted({int(t) for t in re.findall(r"/job:\w+/(?:replica:\d+/)?task:(\d+)", text)})
    others = [t for t in tasks if t != own]
    who = f"worker {', '.join(map(str, others))}" if others else "another worker"
    if "unhealthy" in text or "heartbeat" in text:
        return f"{who} stopped sending heartbeats (it died, or its machine cannot be reached)"
    reported = re.search(r"gpukeras (worker \d+ failed[^\n]*)", text)  # see _failure
    if reported:
        return reported.group(1).strip()
    cause = re.search(r"aborted by: ([^\n]*)", text) or re.search(r'grpc_message:"([^"]*)"', text)
    return f"{who} cannot be reached ({cause.group(1).strip() if cause else failures.cause(error)})"


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


def _failure(
    tf: object,
    error: BaseException,
    position: dict[str, int],
    request: fit_request.FitRequest,
    given_dataset: bool,
    info: dict[str, object],
    heartbeat: float,
) -> BaseException:
    """The error to raise for ``error``; reports this worker's own failures to the others."""
    where = f"epoch {position['epoch'] + 1}, batch {position['batch'] + 1}"
    own = int(info["index"])  # type: ignore[call-overload]
    if isinstance(error, tf.errors.OpError) and type(error).__name__ in LOST_PEER_ERRORS:  # type: ignore[attr-defined]
        return WorkerLostError(
            f"Training stopped at {where} on worker {own}: {_peer_message(error, own)}. "
            "A worker that exits or fails stops the others at once; one that freezes or is "
            f"cut off, within the heartbeat timeout ({heartbeat:g} s) of its last heartbeat. "
            f"{_kept(request.backup_dir)} {RESTART}"
            + (", with the same backup_dir." if request.backup_dir else ".")
        )
    from tensorflow.python.eager import context

    summary = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    # Fails when the cluster is in error already (another worker reported first).
    with contextlib.suppress(tf.errors.OpError):  # type: ignore[attr-defined]
        context.context().report_error_to_cluster(
            tf.errors.ABORTED,  # type: ignore[attr-defined]
            f"gpukeras worker {own} failed at {where} ({summary[:500]})",
        )
    if isinstance(error, Exception) and not isinstance(error, GpukerasError):
        translated = failures.data_error(error, position, request.backup_dir, given_dataset)
        if translated is not None:
            return translated
    return error


# Training ---------------------------------------------------------------------------
def fit(
    strategy: object,
    model: object,
    data: object,
    epochs: int = 1,
    validation_data: object = None,
    batch_size: int | None = None,
    learning_rate: object = None,
    clipnorm: float | None = None,
    clipvalue: float | None = None,
    monitor: bool = True,
    backup_dir: str | None = None,
    callbacks: object = None,
    seed: int | None = None,
    verbose: int | str = "auto",
) -> dict[str, object]:
    """Train under a multi-worker strategy; every worker runs this same call.

    Args:
        strategy: from ``make_strategy``.
        model: a compiled Keras 3 model; one built outside the strategy's
            scope is copied into it and the trained weights copied back
            (``distribute.training_model``). Every worker starts from the
            chief's weights.
        data: arrays ``(x, y)`` or a tf.data dataset of global batches.
        epochs: epochs in all, counting those a backup already holds.
        validation_data: arrays ``(x, y)`` or a dataset, evaluated every epoch.
        batch_size: global rows per step, for arrays (default 32).
        learning_rate, clipnorm, clipvalue: as ``fit.fit``.
        monitor: measure steps, input wait, GPUs and host CPU.
        backup_dir: folder for the chief's backups, shared by all workers.
        callbacks: Keras callbacks (see the module's notes).
        seed: the data order and Keras' seeds; None: one the chief draws.
        verbose: "auto", 0, 1 or 2, as Keras' (a progress bar per worker).

    Returns:
        As ``fit.fit``: ``history`` (the cluster's epoch logs; the same on
        every worker), ``monitor`` (this worker's report plus ``workers``),
        ``timeline`` and ``settings`` (with ``strategy``: the cluster, and the
        global and per-replica batch size).

    Raises:
        BadArgumentError, BadModelError, ModelNotCompiledError, BadDataError,
        BackupMismatchError; StrategyError when the workers' calls differ or
        one does not call in time; WorkerLostError when another worker dies
        or fails during training.
    """
    keras = config.keras()
    if distribute.kind_of(strategy) != "multi_worker":
        raise BadArgumentError(
            "strategy must be a multi-worker strategy (gpu_strategy(workers = , index = ))."
        )
    request = fit_request.check_request(
        keras,
        model,
        epochs=epochs,
        batch_size=batch_size,
        steps_per_execution="auto",
        jit_compile=False,
        learning_rate=learning_rate,
        clipnorm=clipnorm,
        clipvalue=clipvalue,
        monitor=monitor,
        backup_dir=backup_dir,
        backup_freq="epoch",
        callbacks=callbacks,
        seed=seed,
        verbose=verbose,
    )
    info = describe(strategy)
    own_callbacks = _check_callbacks(keras, request.callbacks, bool(info["is_chief"]))
    tf = config.backend_module()
    start_timeout, heartbeat = getattr(
        strategy, "_gpukeras_timeouts", (START_TIMEOUT_SECONDS, HEARTBEAT_TIMEOUT_SECONDS)
    )
    state = backup.read_state(request.backup_dir) if request.backup_dir else None
    if state is not None and state.batches_done:
        raise BackupMismatchError(
            f"The backup in {request.backup_dir} was written in the middle of an epoch (by "
            "gpu_fit() without multi-worker training, backup_freq = n); multi-worker "
            "training resumes at epoch ends only. Finish that run as it was started, or "
            "delete the folder to start over."
        )
    cluster = _Cluster.of(tf, strategy)
    # The first exchange: every worker has called (within start_timeout), sees the same
    # backup, and takes the chief's seed. Until it, an error is this worker's alone; after
    # it, the others wait for this one, so its errors are reported to them (_failure).
    candidate = request.seed
    if candidate is None and state is not None:
        candidate = state.run.get("seed")  # type: ignore[assignment]
    if candidate is None:
        candidate = secrets.randbelow(2**31)
    try:
        rows = _agree(
            cluster,
            {
                "seed": math.nan if request.seed is None else request.seed,
                "backup epoch": state.epoch if state else math.nan,
                "backup generation": state.generation if state else math.nan,
            },
            start_timeout,
            BackupMismatchError,
            extra=[float(candidate)],
        )
    except tf.errors.OpError as error:  # type: ignore[attr-defined]
        raise StrategyError(
            f"Not every worker called gpu_fit() within {start_timeout:g} s of the others "
            f"(this is worker {info['index']}). Run the same gpu_fit() call on every worker. "
            f"{RESTART}."
        ) from error
    seed = int(rows[0, -1])
    position = {"epoch": 0, "batch": -1}
    given_dataset = False
    try:
        keras.utils.set_random_seed(seed)
        source = data_adapters.get_data_adapter(data, request.batch_size, seed)
        given_dataset = source.given_dataset
        dataset = _tf_dataset(
            source.fit_args["x"] if source.tf_dataset is None else source.tf_dataset, "data"
        )
        validation = _validation_dataset(validation_data, request.batch_size)
        _agree(
            cluster,
            {
                "epochs": request.epochs,
                "batch_size": source.batch_size or math.nan,
                "batches per epoch": source.steps_per_epoch or math.nan,
                "validation": validation is not None,
                "monitor": request.monitor,
            },
            None,
            StrategyError,
        )
        with distribute.training_model(model, strategy) as trained:
            return _train(
                keras, tf, strategy, trained, request, own_callbacks, dataset, validation,
                source, seed, state, info, cluster, position,
            )  # fmt: skip
    except BaseException as error:
        failure = _failure(tf, error, position, request, given_dataset, info, heartbeat)
        if failure is error:
            raise
        raise failure from error


def _train(
    keras: object,
    tf: object,
    strategy: object,
    model: object,
    request: fit_request.FitRequest,
    callbacks: list[object],
    dataset: object,
    validation: object | None,
    source: data_adapters.DataAdapter,
    seed: int,
    state: backup.BackupState | None,
    info: dict[str, object],
    cluster: _Cluster,
    position: dict[str, int],
) -> dict[str, object]:
    """``fit`` once every worker agreed and the model is the one to train."""
    with strategy.scope():  # type: ignore[attr-defined]
        data_adapters.build_from_spec(model, dataset)
        applied = fit_request.apply_settings(keras, model, request)
    applied["steps_per_execution"] = 1  # one batch per step here, whatever the model has
    run = {
        "epochs": request.epochs,
        "steps_per_epoch": source.steps_per_epoch,
        "steps_per_execution": 1,
        "seed": seed,
        "batch_size": source.batch_size,
        "weights": [list(map(int, w.shape)) for w in model.weights],  # type: ignore[attr-defined]
        "workers": len(info["workers"]),  # type: ignore[arg-type]
    }
    saver = None
    if request.backup_dir is not None:
        if state is not None:
            backup.check_matches(state, run, request.backup_dir)
        saver = backup.backup_callback(request.backup_dir, "epoch", run, state)
        saver.set_model(model)  # type: ignore[attr-defined]
    gpu_rows = training_run.gpus_in_use(keras, model)
    watcher = None
    if request.monitor:
        watcher = training_run.make_monitor(gpu_rows, batch_size=None, measure_input=True)
        record = watcher.timer.record  # type: ignore[attr-defined]
        record.backend = "tensorflow"
        record.method = "next(iterator) timed before each distributed step" + (
            ""
            if source.steps_per_epoch
            else " (with the workers' agreement that each has a batch left)"
        )
    # The chief writes backups; the others only restore from them.
    hooks = ([saver] if saver is not None and info["is_chief"] else []) + callbacks
    events = keras.callbacks.CallbackList(  # type: ignore[attr-defined]
        hooks,
        add_progbar=request.verbose != 0,
        model=model,
        verbose=request.verbose,
        epochs=request.epochs,
        steps=source.steps_per_epoch,
    )
    distributed = _distribute(strategy, dataset, source.steps_per_epoch)
    checked = None
    if validation is not None:
        checked = _distribute(strategy, validation, _length(validation))

    @tf.function(reduce_retracing=True)  # type: ignore[attr-defined]
    def train_step(batch: object) -> object:
        return strategy.run(model.train_step, args=(batch,))  # type: ignore[attr-defined]

    @tf.function(reduce_retracing=True)  # type: ignore[attr-defined]
    def test_step(batch: object) -> None:
        strategy.run(model.test_step, args=(batch,))  # type: ignore[attr-defined]

    @tf.function  # type: ignore[attr-defined]
    def results() -> dict[str, object]:
        # Metric variables sync on read: read here, they are summed over every replica.
        return model.get_metrics_result()  # type: ignore[attr-defined]

    def read() -> dict[str, float]:
        return {str(name): float(value) for name, value in results().items()}

    history = list(state.history) if state is not None else []
    first_epoch = state.epoch if state is not None else 0
    started = time.perf_counter()
    logs: dict[str, float] = {}
    # Not in the strategy's scope: there, a variable a callback makes on the chief alone
    # (Keras' saving makes one) would be a collective the other workers never join.
    with watcher if watcher is not None else contextlib.nullcontext():
        try:
            model.stop_training = False  # type: ignore[attr-defined]
            if saver is not None and not info["is_chief"]:
                saver.on_train_begin()  # type: ignore[attr-defined]  # restore only
            events.on_train_begin()  # the chief's saver restores here
            cluster.from_chief([*model.weights, *model.optimizer.variables])  # type: ignore[attr-defined]
            read()  # traced here, not in the first epoch's timed steps
            for _ in range(first_epoch):  # the resumed epoch gets the order it had
                iter(distributed)
            for epoch in range(first_epoch, request.epochs):
                position.update(epoch=epoch, batch=-1)
                model.reset_metrics()  # type: ignore[attr-defined]
                events.on_epoch_begin(epoch)
                for step, (begin, fetched, batch) in enumerate(
                    _batches(distributed, source.steps_per_epoch)
                ):
                    position["batch"] = step
                    events.on_train_batch_begin(step)
                    outputs = train_step(batch)
                    if watcher is not None:
                        parts = strategy.experimental_local_results(batch)  # type: ignore[attr-defined]
                        rows = [timing._rows(part, keras.tree.flatten) for part in parts]  # type: ignore[attr-defined]
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
                        strategy.experimental_local_results(outputs)[0],  # type: ignore[attr-defined]
                    )
                logs = read()
                if watcher is not None:
                    record.epoch_ends[epoch] = time.perf_counter()
                if checked is not None:
                    events.on_test_begin()
                    model.reset_metrics()  # type: ignore[attr-defined]
                    for _, _, batch in _batches(checked, _length(validation)):
                        test_step(batch)
                    scores = read()
                    events.on_test_end(scores)
                    logs.update({f"val_{name}": value for name, value in scores.items()})
                events.on_epoch_end(epoch, logs)
                history.append({"epoch": epoch + 1, **logs})
                # A callback may ask to stop on one worker: all stop, or none.
                if cluster.gather([float(bool(model.stop_training))]).max() > 0:  # type: ignore[attr-defined]
                    break
            model.optimizer.finalize_variable_values(model.trainable_weights)  # type: ignore[attr-defined]
            events.on_train_end(logs)
        finally:
            model._initial_epoch = None  # type: ignore[attr-defined]  # the saver sets it
    seconds = time.perf_counter() - started

    settings = {
        "epochs": request.epochs,
        "batch_size": source.batch_size,
        "steps_per_epoch": source.steps_per_epoch,
        **applied,
        "backup_dir": request.backup_dir,
        "backup_freq": "epoch" if request.backup_dir is not None else None,
        "resumed_from": None if state is None else {"epoch": state.epoch + 1, "batches_done": 0},
        "seed": seed,
        "backend": "tensorflow",
        "device": training_run.device_setting(gpu_rows),
        "strategy": distribute.strategy_settings(distribute.describe(strategy), source.batch_size),
        "auto_shard_policy": "DATA",
        "dtype_policy": model.dtype_policy.name,  # type: ignore[attr-defined]
        "data": source.kind,
        "monitor": request.monitor,
        "seconds": seconds,
    }
    # every worker has the monitor or none (agreed), so all make _report's exchange
    report = _report(watcher, model, gpu_rows, settings, cluster) if watcher is not None else None
    return training_run.result(
        training_run.history_columns(None, history), report, watcher, started, settings
    )


def _length(dataset: object) -> int | None:
    """Batches in one pass over a dataset; None where tf.data does not know."""
    batches = int(dataset.cardinality())  # type: ignore[attr-defined]
    return batches if batches >= 0 else None


def _distribute(strategy: object, dataset: object, batches: int | None) -> object:
    """The dataset sharded by DATA over the workers (see the module's notes).

    Where the number of batches is known, every worker takes exactly that many
    (``_batches``), so tf.distribute's per-batch agreement that each worker has
    one left (an all-reduce in every ``next()``, on by default for multi-worker)
    is turned off for this dataset: it would cost a collective per step and
    count the wait for the slowest worker as input wait.
    """
    extended = strategy.extended  # type: ignore[attr-defined]
    default = extended.experimental_enable_get_next_as_optional
    extended.experimental_enable_get_next_as_optional = batches is None
    try:
        return strategy.experimental_distribute_dataset(distribute.shard_by_data(dataset))  # type: ignore[attr-defined]
    finally:
        extended.experimental_enable_get_next_as_optional = default


def _batches(distributed: object, batches: int | None) -> Iterator[tuple[float, float, object]]:
    """``(began, fetched, batch)`` for one pass: ``batches`` of them where known, else until
    every worker's data has ended (times from ``perf_counter``, around ``next()``)."""
    iterator = iter(distributed)  # type: ignore[call-overload]
    taken = 0
    while batches is None or taken < batches:
        began = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            if batches is None:
                return
            raise BadDataError(
                f"This worker's data ended after {taken} of {batches} batches: every worker "
                "must read the same data (the same arrays, or the same dataset)."
            ) from None
        yield began, time.perf_counter(), batch
        taken += 1


def _report(
    watcher: monitoring.TrainingMonitor,
    model: object,
    gpu_rows: list[dict[str, object]],
    settings: dict[str, object],
    cluster: _Cluster,
) -> dict[str, object]:
    """This worker's monitor report, with every worker's step numbers under ``workers``."""
    report = training_run.monitor_report(watcher, model, gpu_rows, settings)
    report["advice"] = _advice(report["advice"])  # type: ignore[arg-type]
    names = ("step_time_mean_ms", "input_wait_share", "samples_per_second", "steps_timed")
    mine = [math.nan if report.get(n) is None else float(report[n]) for n in names]  # type: ignore[arg-type]
    rows = cluster.gather(mine)
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
