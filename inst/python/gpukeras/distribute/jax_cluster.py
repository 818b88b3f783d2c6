"""Multi-worker training on JAX: joining the cluster, the chief's weights, losing a worker.

On JAX, gpu_strategy("multi_worker") is what Keras' maintainers point users
with several hosts to: ``jax.distributed.initialize()`` joins the processes
(the first worker's address is the coordinator, this worker's index its
process id), and ``keras.distribution.DataParallel`` over ``jax.devices()``
(every device of every process) trains with Keras' own ``fit()``, so the
monitor, schedules, backups and callbacks work as in one process. On CPUs
the collectives go through Gloo (``jax_cpu_collectives_implementation``),
which is how it is tested on 127.0.0.1.

Joining. JAX learns the cluster once, before its backends start: ``join``
must come before anything that runs JAX (RuntimeStartedError otherwise), and
a process joins one cluster. Every worker waits up to
``start_timeout_seconds`` for all of them to connect to the coordinator.

Data. Under a multi-process distribution Keras reads a tf.data dataset (it
refuses NumPy arrays), which ``data.adapters`` gives it (``multi_process``).
Keras then shards it itself: each global batch is re-batched into one piece
per process and process i keeps piece i. Every worker builds the same
seeded pipeline, so one step trains on exactly the global batch one process
would take, ``batch_size`` rows in all (the meaning it has on TensorFlow).
That needs every batch, the last included, to split evenly
(``distribute.check_batch``).

Losing a worker, measured with 2 CPU workers on 127.0.0.1 (jax 0.7.1). A
worker that dies resets its Gloo connections: the others' next collective
fails 0.2 s later, and ``lost_worker`` makes that error WorkerLostError.
Besides, JAX's coordination service ends every process of a cluster in
which one stopped sending heartbeats ("all processes shut down if any
process dies", jax.distributed's documentation): a process cannot go on
alone, and JAX terminates it (SIGABRT, from C++, which Python cannot catch)
within ``heartbeat_timeout_seconds`` of the lost worker's last heartbeat,
also when it waits outside a collective. So no worker hangs: each raises
WorkerLostError or is ended within that bound. Restart every worker. Not
covered: a worker whose own call fails while its process lives on (an
error in a callback, then R carries on) leaves the others waiting in their
next exchange until it exits; gpu_launch() stops all workers when one fails.

Backups. With gpu_fit(backup = gpu_backup(dir)) on storage every worker sees, the chief
alone writes them there (``gpukeras.train.backup``) and every worker restores from
them: started again with the same call, all workers resume to the weights
of an uninterrupted run, bit for bit on the CPU (as the tests check).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from gpukeras.core import compat
from gpukeras.core.errors import (
    BadArgumentError,
    RuntimeStartedError,
    StrategyError,
    WorkerLostError,
)
from gpukeras.core.handles import Model, Record, Strategy
from gpukeras.core.runtime import config
from gpukeras.distribute import cluster, cluster_env, network

START_TIMEOUT_SECONDS = 300
# A worker silent this long counts as lost (JAX's default is 100 s; TensorFlow's 10 s).
HEARTBEAT_TIMEOUT_SECONDS = 10
# What JAX's collectives and coordination service say when a peer is gone.
LOST_PEER = re.compile(
    r"Gloo .*(Connection reset|Connection closed|Connection refused|Broken pipe|Read error|"
    r"Timed out)|heartbeat|UNAVAILABLE:"
)
RESTART = (
    "Restart R on every worker, call gpu_strategy() first (before anything else that uses "
    "JAX) with the same workers, and run the same gpu_fit() call again"
)


@dataclass
class Joined:
    """The cluster this process joined: its workers, its place, and what described it."""

    workers: list[str]
    index: int
    found_by: str
    heartbeat_timeout_seconds: int
    distribution: Strategy


# The cluster this process joined (JAX joins one per process).
_joined: list[Joined] = []


def multi_process() -> bool:
    """Whether this process trains with others (``jax.distributed`` is initialised)."""
    jax = sys.modules.get("jax")
    return jax is not None and bool(jax.distributed.is_initialized())


def _cluster(workers: list[str] | None, index: int | None) -> tuple[list[str], int, str]:
    """The workers, this worker's index and what described them, checked."""
    if workers is None and index is None:
        found = cluster_env.find()
        if found is None:
            raise StrategyError(
                "No workers were given, and neither TF_CONFIG nor a SLURM or Open MPI job with "
                "several tasks describes a cluster: give every worker's address and this "
                'worker\'s place, gpu_strategy(workers = c("host1:port", "host2:port"), '
                "index = 0) on the first machine, index = 1 on the second, ... (or start the "
                "workers with srun, or gpu_launch() on one machine)."
            )
        workers, index, found_by = found.workers, found.index, f"{found.source} ({found.detail})"
    else:
        found_by = "gpu_strategy(workers = )"
    checked = cluster.tf_config(workers, index)  # type: ignore[arg-type]
    task: dict = checked["task"]  # type: ignore[assignment]
    return list(workers), int(task["index"]), found_by  # type: ignore[arg-type]


def join(
    workers: list[str] | None = None,
    index: int | None = None,
    start_timeout_seconds: int = START_TIMEOUT_SECONDS,
    heartbeat_timeout_seconds: int = HEARTBEAT_TIMEOUT_SECONDS,
    trusted_network: bool = False,
) -> Strategy:
    """Join the cluster: ``jax.distributed.initialize`` and a DataParallel over every device.

    Args:
        workers: "host:port" of every worker, the same list on every worker
            (the first is the coordinator and the chief); None reads the
            cluster from the environment (``cluster_env.find``).
        index: this worker's place in ``workers`` (0-based); with ``workers``.
        start_timeout_seconds: how long to wait for every worker to join.
        heartbeat_timeout_seconds: a worker silent this long counts as lost,
            and JAX ends the others (see the module's notes).
        trusted_network: accepted as on TensorFlow; JAX needs no such word, as
            its ports listen on the workers' own addresses alone.

    Returns:
        A ``keras.distribution.DataParallel`` (the same one when called again
        with the same cluster).

    Raises:
        BadArgumentError: bad workers or index; StrategyError: no cluster
            described, or workers that did not join in time;
            RuntimeStartedError: JAX has started, or this process joined
            another cluster.
    """
    if (workers is None) != (index is None):
        raise BadArgumentError(
            "Give workers and index together (index: this worker's place in workers, 0 for "
            "the first), or neither to read the cluster from the environment."
        )
    workers, index, found_by = _cluster(workers, index)
    if _joined:
        if (_joined[0].workers, _joined[0].index) == (workers, index):
            return _joined[0].distribution
        raise RuntimeStartedError(
            "This session already joined another cluster, and JAX joins one per process. "
            f"Restart R to join this one (workers {', '.join(workers)})."
        )
    import jax

    if jax.distributed.is_initialized() or compat.jax_backends_started():
        raise RuntimeStartedError(
            "JAX has already started in this session, and multi-worker training must be set "
            "up before it starts (jax.distributed learns the cluster once, at start). Restart "
            "R and call gpu_strategy() first, before anything else that uses Python "
            "(gpu_check(), gpu_devices(), models)."
        )
    # CPU devices exchange through Gloo; without it JAX has no collectives across CPU processes.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    network.loopback_nccl(workers)
    try:
        jax.distributed.initialize(
            coordinator_address=workers[0],
            # JAX's default is every interface ([::]:port); the coordinator needs only its own.
            coordinator_bind_address=network.bind_address(workers[0]),
            num_processes=len(workers),
            process_id=index,
            initialization_timeout=int(start_timeout_seconds),
            heartbeat_timeout_seconds=int(heartbeat_timeout_seconds),
        )
    except Exception as error:  # JAX's errors here are plain RuntimeErrors and XlaRuntimeErrors
        raise StrategyError(
            f"This worker ({workers[index]}, index {index}) could not join the cluster "
            f"coordinated by {workers[0]} within {start_timeout_seconds} s "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}). "
            "Run gpu_strategy() with the same workers on every machine within that time, "
            "check that the first worker's address can be reached from this machine (host "
            f"name, firewall) and that its port is free. {RESTART}."
        ) from error
    gloo_host = network.bind_host(workers[index])
    if gloo_host is not None:
        compat.bind_gloo(gloo_host)
    keras = config.keras()
    distribution = keras.distribution.DataParallel(devices=jax.devices())
    _joined.append(Joined(workers, index, found_by, int(heartbeat_timeout_seconds), distribution))
    return distribution


def leave() -> bool:
    """Leave the cluster this process joined, waiting for every worker to leave it too.

    Called as R ends (R exits without finalizing Python, so JAX's own exit
    handler never runs). ``jax.distributed.shutdown()`` meets the others at the
    coordination service's shutdown barrier before the chief stops the
    service. Without it, a chief whose R ended first took the service with
    it, and JAX ended a worker still finishing (SIGABRT, "the leader task was
    preempted/died") after its work was done: gpu_launch() then reported it
    lost (seen with 2 R workers on a busy 2-core machine).

    Returns:
        Whether there was a cluster to leave.
    """
    if not _joined:
        return False
    import jax

    jax.distributed.shutdown()
    return True


def joined(strategy: Strategy) -> Joined | None:
    """The cluster ``strategy`` was made for by ``join``; None for another distribution."""
    return next((j for j in _joined if j.distribution is strategy), None)


def describe(strategy: Strategy, found: Joined) -> Record:
    """This worker's view of the cluster: replicas in all, its own devices, the workers."""
    import jax

    from gpukeras.gpu import tensors

    own = set(jax.local_devices())
    devices = list(strategy.device_mesh.devices.flat)
    return {
        "replicas": len(devices),
        "devices": [tensors.normalize_device(str(d)) for d in devices if d in own],
        "workers": list(found.workers),
        "index": found.index,
        "is_chief": found.index == 0,
        "found_by": found.found_by,
        "network": network.exposure(found.workers, found.index, "jax"),
    }


def from_chief(model: Model) -> None:
    """Give ``model`` the chief's weights and optimizer state on every worker.

    A model built outside the scope is copied into it with each worker's own
    values, which need not agree (a different seed, a different start); JAX
    would not notice, and the replicas would train apart.
    """
    from jax.experimental import multihost_utils

    keras = config.keras()
    optimizer = model.optimizer
    variables = [*model.weights, *(optimizer.variables if optimizer and optimizer.built else [])]
    values = [keras.ops.convert_to_numpy(variable.value) for variable in variables]
    for variable, value in zip(variables, multihost_utils.broadcast_one_to_all(values)):
        variable.assign(value)


def lost_worker(error: BaseException) -> WorkerLostError | None:
    """WorkerLostError for JAX saying another worker is gone; None for other errors."""
    if not multi_process() or isinstance(error, WorkerLostError):
        return None
    text = str(error)
    if LOST_PEER.search(text) is None:
        return None
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    heartbeat = _joined[0].heartbeat_timeout_seconds if _joined else HEARTBEAT_TIMEOUT_SECONDS
    return WorkerLostError(
        f"Another worker was lost: the cluster's exchange failed ({line[:300]}). It died, or "
        f"its machine cannot be reached; JAX ends every worker within {heartbeat} s of the "
        f"lost one's last heartbeat. This worker's model keeps the weights it had before "
        f"gpu_fit(); gpu_fit(backup = gpu_backup(dir)) keeps the progress. {RESTART}."
    )
