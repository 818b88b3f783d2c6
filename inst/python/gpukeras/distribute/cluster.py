"""The cluster of multi-worker training: TF_CONFIG, joining it, exchanges, losing a worker.

gpu_strategy(workers = , index = ) runs ``make_strategy`` on every worker:
it checks the workers' addresses (or reads TF_CONFIG), waits for the other
workers, and makes TensorFlow's ``MultiWorkerMirroredStrategy`` with bounded
waits. The training loop (``gpukeras.train.multiworker``) then exchanges small
numbers between the workers (``Collectives``), tells the others when this
worker fails (``report_failure``), and says in a line which worker was lost
and how (``peer_message``).

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
lost workers are caught by the heartbeat. The exception is ``multiworker.fit``'s
first exchange, which waits at most ``start_timeout_seconds`` for every worker to
call it. A worker that stalls while its process runs (stuck in a callback)
is not noticed. After any such failure TensorFlow's collectives cannot be
used again in that process: restart R on every worker.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import socket
import time
from typing import Any

import numpy as np

from gpukeras.core import arguments, compat, messages
from gpukeras.core.errors import BadArgumentError, RuntimeStartedError, StrategyError
from gpukeras.core.handles import Record
from gpukeras.core.runtime import config
from gpukeras.distribute import cluster_env, network
from gpukeras.gpu import tensors

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
# What described each cluster joined (for the user), by the same key.
_found_by: dict[str, str] = {}


# Joining the cluster ----------------------------------------------------------------
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


def _from_environment() -> tuple[dict[str, object], str]:
    """The cluster TF_CONFIG, or else a SLURM or Open MPI job, describes; and what described it."""
    if os.environ.get("TF_CONFIG"):
        return _read_tf_config(os.environ["TF_CONFIG"]), "TF_CONFIG"
    found = cluster_env.find()
    if found is None:
        raise StrategyError(
            "No workers were given, and neither TF_CONFIG nor a SLURM or Open MPI job with "
            "several tasks describes a cluster: give every worker's address and this "
            'worker\'s place, gpu_strategy(workers = c("host1:port", "host2:port"), index = 0) '
            "on the first machine, index = 1 on the second, ... (or start the workers with "
            "srun, or gpu_launch() on one machine)."
        )
    return tf_config(found.workers, found.index), f"{found.source} ({found.detail})"


def _read_tf_config(text: str) -> dict[str, object]:
    """TF_CONFIG's text, checked to be a cluster gpukeras can train with."""
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
    trusted_network: bool = False,
) -> object:
    """Join the cluster: a MultiWorkerMirroredStrategy for this worker.

    Args:
        workers: "host:port" of every worker, the same list on every worker
            (the first is the chief); None reads an existing TF_CONFIG.
        index: this worker's place in ``workers`` (0-based); with ``workers``.
        start_timeout_seconds: how long to wait for every worker to join.
        heartbeat_timeout_seconds: a worker silent this long counts as lost
            (see the module's notes).
        trusted_network: the user's word that every host that can reach this
            machine may reach the workers' ports (``network.check_tensorflow``).

    Returns:
        The strategy (the same one when called again with the same cluster).

    Raises:
        BadArgumentError: bad workers, index or timeouts, or not the
            TensorFlow backend; StrategyError: no TF_CONFIG, one gpukeras
            cannot use, a port in use, workers that did not join in time;
            NetworkExposedError: workers on loopback whose ports other hosts
            could reach (see ``gpukeras.distribute.network``); RuntimeStartedError:
            TensorFlow's runtime has already started, or this process already
            joined another cluster.
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
    if workers is not None:
        cluster, found_by = tf_config(workers, index), "gpu_strategy(workers = )"  # type: ignore[arg-type]
    else:
        cluster, found_by = _from_environment()
    key = json.dumps(cluster, sort_keys=True)
    if key in _made:
        return _made[key]
    if _made:
        raise RuntimeStartedError(
            "This session already joined another cluster, and TensorFlow joins one per "
            f"process. Restart R to join this one (workers {', '.join(_addresses(cluster))})."
        )
    tf = config.backend_module()
    if compat.tensorflow_context_started():
        raise RuntimeStartedError(
            "TensorFlow has already started in this session, and multi-worker training must "
            "be set up before it starts (TensorFlow configures its collectives once, at "
            "start). Restart R and call gpu_strategy() first, before anything else that uses "
            "Python (gpu_check(), gpu_devices(), models)."
        )
    network.check_tensorflow(_addresses(cluster), trusted_network)
    network.loopback_nccl(_addresses(cluster))
    _wait_for_workers(cluster, start)
    os.environ["TF_CONFIG"] = key
    # Before MWMS, which then keeps this configuration: bounded waits (see the module's notes).
    compat.configure_coordination_service(
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
    _found_by[key] = found_by
    return strategy


def describe(strategy: object) -> Record:
    """This worker's view of the cluster, as plain data.

    Returns:
        ``replicas`` (in all workers), ``devices`` (this worker's, as
        'GPU:0', 'CPU:0'), ``workers`` ("host:port", chief first), ``index``
        (this worker's place in ``workers``), ``is_chief``, ``found_by`` (what
        described the cluster: gpu_strategy()'s workers, TF_CONFIG, SLURM or Open MPI)
        and ``network`` (who can reach this worker's port: ``network.exposure``).
    """
    resolver = strategy.cluster_resolver  # type: ignore[attr-defined]
    jobs = resolver.cluster_spec().as_dict()
    chiefs = len(jobs.get("chief", []))
    task_index = int(resolver.task_id)
    workers = [*jobs.get("chief", []), *jobs.get("worker", [])]
    index = task_index if resolver.task_type == "chief" else chiefs + task_index
    return {
        "replicas": int(strategy.num_replicas_in_sync),  # type: ignore[attr-defined]
        "devices": [tensors.normalize_device(d) for d in strategy.extended.worker_devices],  # type: ignore[attr-defined]
        "workers": workers,
        "index": index,
        "is_chief": bool(strategy.extended.should_checkpoint),  # type: ignore[attr-defined]
        "found_by": next((_found_by[k] for k, made in _made.items() if made is strategy), None),
        "network": network.exposure(workers, index, "tensorflow"),
    }


def timeouts(strategy: object) -> tuple[float, float]:
    """The start and heartbeat timeouts (seconds) ``make_strategy`` gave ``strategy``."""
    return getattr(
        strategy, "_gpukeras_timeouts", (START_TIMEOUT_SECONDS, HEARTBEAT_TIMEOUT_SECONDS)
    )


# Exchanges between the workers -----------------------------------------------------
class Collectives:
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
    def of(cls, tf: object, strategy: object) -> Collectives:
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
        values: list[Any] = [v.value if hasattr(v, "value") else v for v in variables]

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

    def agree(
        self,
        values: dict[str, float],
        timeout: float | None,
        error: type,
        extra: list[float] = (),  # type: ignore[assignment]
    ) -> np.ndarray:
        """Gather ``values`` (then ``extra``, not compared) from every worker; raise ``error`` on
        all of them where ``values`` differ."""
        rows = self.gather([*values.values(), *extra], timeout)
        differ = [
            f"{name}: " + ", ".join(f"worker {i} {_plain(v)}" for i, v in enumerate(column))
            for name, column in zip(values, rows.T)
            if len({_plain(v) for v in column}) > 1
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


# Losing a worker ----------------------------------------------------------------------
def lost_peer(tf: object, error: BaseException) -> bool:
    """Whether ``error`` is TensorFlow saying another worker died, hung up or failed."""
    return isinstance(error, tf.errors.OpError) and type(error).__name__ in LOST_PEER_ERRORS  # type: ignore[attr-defined]


def peer_message(error: Exception, own: int) -> str:
    """What a lost-peer error says happened, in a line (from TensorFlow's message)."""
    text = getattr(error, "message", None) or str(error)
    tasks = sorted({int(t) for t in re.findall(r"/job:\w+/(?:replica:\d+/)?task:(\d+)", text)})
    others = [t for t in tasks if t != own]
    who = f"worker {', '.join(map(str, others))}" if others else "another worker"
    if "unhealthy" in text or "heartbeat" in text:
        return f"{who} stopped sending heartbeats (it died, or its machine cannot be reached)"
    reported = re.search(r"gpukeras (worker \d+ failed[^\n]*)", text)  # see report_failure
    if reported:
        return reported.group(1).strip()
    cause = re.search(r"aborted by: ([^\n]*)", text) or re.search(r'grpc_message:"([^"]*)"', text)
    return f"{who} cannot be reached ({cause.group(1).strip() if cause else messages.cause(error)})"


def report_failure(tf: object, own: int, where: str, error: BaseException) -> None:
    """Tell the other workers that this one failed at ``where``: they stop at once, and their
    ``peer_message`` names this worker and the error."""
    summary = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    # Fails when the cluster is in error already (another worker reported first).
    with contextlib.suppress(tf.errors.OpError):  # type: ignore[attr-defined]
        compat.report_error_to_cluster(
            tf.errors.ABORTED,  # type: ignore[attr-defined]
            f"gpukeras worker {own} failed at {where} ({summary[:500]})",
        )
