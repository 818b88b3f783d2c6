"""Distribution strategies for gpu_fit(): one device, several devices, several machines.

gpukeras trains on each backend's own distribution engine, not a home-made
one:

- TensorFlow: ``tf.distribute.OneDeviceStrategy``, ``MirroredStrategy``
  (one replica per device, gradients all-reduced every step; logical CPU
  devices from gpu_setup(cpu_devices = ) work as devices, which is how it is
  tested without GPUs) and ``MultiWorkerMirroredStrategy`` (joined in
  ``gpukeras.distribute.cluster``; Keras 3's ``fit()`` cannot train under it, so
  ``gpukeras.train.multiworker`` has its own distributed step).
- JAX: ``keras.distribution.DataParallel`` over the devices (variables
  replicated, each batch split along its first axis); for several machines
  over every process's devices, once ``jax.distributed`` has joined them
  (``gpukeras.distribute.jax_cluster``), and Keras' own ``fit()`` trains under it.

A Keras model trains under a strategy only if its variables were created in
the strategy's scope (TensorFlow records the strategy when the model is made;
JAX lays variables out when they are created). ``in_scope_copy`` makes such a
copy of a model built outside (``clone_model``, the same weights, compiled
from the same compile config, with the optimizer's state), and ``copy_back``
puts the trained weights and optimizer state back into the user's model, so
the model the user holds is the trained one either way.

The batch size is global: ``batch_size`` rows per step in all, split over the
replicas (``batch_size / replicas`` each), the convention of tf.distribute
and of Keras' DataParallel. One step then sees what one device would see, so
results match one device for the same batches (up to the order of the
floating-point sums). Not for the same seed with shuffled data, though: on
TensorFlow, under a strategy, Keras builds the model from a batch it takes
through an iterator of its own before training, and a seeded tf.data shuffle
draws a new order for every iterator, so the epochs see the orders a
one-device run would see one pass later. Runs under the same strategy with
the same seed repeat exactly.

Several machines on JAX. The global batch means the same: every worker
builds the same seeded tf.data pipeline, and Keras' auto-sharding
(``DataParallel.distribute_dataset``) re-batches each global batch into one
piece per process, process i keeping piece i, so a step trains on the rows
one process would take in that step, ``batch_size / workers`` on each (an
explicit ``Dataset.shard`` per process would instead give each worker whole
batches of its own, so a step would see ``workers x batch_size`` rows).
Measured with two CPU workers: the same history as one process with a
one-device strategy on the same pipeline, weights within 3e-7. Every batch,
the last one included, must then be the whole global batch
(``check_batch``). A model copied into the scope starts from the chief's
weights on every worker (JAX refuses replicated values that differ).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gpukeras.core import compat
from gpukeras.core.errors import (
    BadArgumentError,
    BadDataError,
    BadModelError,
    UnknownDeviceError,
)
from gpukeras.core.handles import Dataset, Model, Optimizer, Record, Strategy
from gpukeras.core.runtime import config
from gpukeras.distribute import cluster, jax_cluster
from gpukeras.gpu import scope, tensors

TYPES = ("auto", "one_device", "mirrored", "multi_worker")


@dataclass
class StrategyPlan:
    """A strategy's plan, as plain data: what it is, and how the data is laid out for it
    (``check_batch``, ``shard``: what the data adapters ask of it, as ``adapters.StrategyPlan``).

    Attributes:
        type: "one_device", "mirrored" or "multi_worker".
        backend: the Keras backend it is for.
        engine: the class that does the work (e.g. "MirroredStrategy").
        replicas: model copies that train in step (devices x workers).
        devices: the devices of this process, as 'GPU:0', 'CPU:1', ...
        workers: "host:port" of every worker (multi-worker only).
        index: this worker's place in ``workers`` (multi-worker only).
        is_chief: whether this process writes checkpoints and backups.
        found_by: what described the cluster (multi-worker only): gpu_strategy()'s
            workers, TF_CONFIG, or a SLURM or Open MPI job.
        network: who can reach this worker's ports, and the firewall rules that
            keep others out (multi-worker only; ``network.exposure``).
    """

    type: str
    backend: str
    engine: str
    replicas: int
    devices: list[str] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)
    index: int | None = None
    is_chief: bool = True
    found_by: str | None = None
    network: Record | None = None

    def check_batch(self, batch_size: int | None, rows: int | None) -> None:
        """See ``check_batch``: the data adapters ask the plan they are given."""
        check_batch(self, batch_size, rows)

    def shard(self, dataset: Dataset) -> object:
        """A tf.data dataset as this plan shards it: by data on TensorFlow
        (``shard_by_data``); JAX's distribution shards the batches itself."""
        return shard_by_data(dataset) if self.backend == "tensorflow" else dataset


def _gpu_names() -> list[str]:
    return [name for name in scope.logical_devices() if name.startswith("GPU:")]


def _check_devices(devices: list[str] | None) -> list[str] | None:
    """Device names normalised ('gpu:0' -> 'GPU:0') and checked to exist."""
    if devices is None:
        return None
    if isinstance(devices, str):
        devices = [devices]
    names = [tensors.normalize_device(str(device)) for device in devices]
    available = scope.logical_devices()
    unknown = [name for name in names if name not in available]
    if unknown:
        raise UnknownDeviceError(
            f"No such device: {', '.join(unknown)}. Devices here: {', '.join(available)}. "
            "gpu_devices() lists them; gpu_setup(cpu_devices = ) splits the CPU into "
            "several logical devices."
        )
    if len(set(names)) != len(names):
        raise BadArgumentError(f"devices name a device twice: {', '.join(names)}.")
    return names


def _resolve_type(kind: str, devices: list[str] | None, workers: object) -> str:
    if kind not in TYPES:
        raise BadArgumentError(f"type must be one of {', '.join(TYPES)}, not {kind!r}.")
    if kind != "auto":
        return kind
    if workers is not None:
        return "multi_worker"
    count = len(devices) if devices is not None else len(_gpu_names())
    return "mirrored" if count > 1 else "one_device"


def _default_devices(kind: str) -> list[str]:
    gpus = _gpu_names()
    if kind == "one_device":
        return [gpus[0] if gpus else "CPU:0"]
    cpus = [name for name in scope.logical_devices() if name.startswith("CPU:")]
    return gpus or cpus


def make(
    type: str = "auto",
    devices: list[str] | None = None,
    workers: list[str] | None = None,
    index: int | None = None,
    trusted_network: bool = False,
) -> dict[str, object]:
    """A strategy for gpu_fit(strategy = ), and its plan.

    Args:
        type: "auto" (mirrored over the GPUs when more than one is visible,
            or over ``devices`` when several are named; multi-worker when
            ``workers`` are given; else one device), "one_device",
            "mirrored" or "multi_worker".
        devices: device names ('GPU:0', 'CPU:1', ...); None for the default:
            the first GPU (else the CPU) for one device, every GPU (else every
            logical CPU device) for mirrored.
        workers: "host:port" of every worker, for multi-worker (None reads
            an existing TF_CONFIG).
        index: this worker's place in ``workers``.
        trusted_network: for multi-worker, the user's word that every host that
            can reach this machine may reach the workers' ports (see
            ``gpukeras.distribute.network``).

    Returns:
        ``{"strategy": <the backend's object>, "plan": StrategyPlan}``.
    """
    backend = config.backend
    kind = _resolve_type(type, _check_devices(devices), workers)
    if kind != "multi_worker" and (workers is not None or index is not None):
        raise BadArgumentError(f'workers and index are for type = "multi_worker", not "{kind}".')
    if kind == "multi_worker":
        if devices is not None:
            raise BadArgumentError(
                "devices cannot be chosen for multi-worker training: each worker uses "
                "the GPUs it sees (choose them per worker with gpu_setup(devices = ))."
            )
        if backend == "jax":
            strategy = jax_cluster.join(
                workers=workers, index=index, trusted_network=trusted_network
            )
        elif backend == "tensorflow":
            strategy = cluster.make_strategy(
                workers=workers, index=index, trusted_network=trusted_network
            )
        else:
            raise BadArgumentError(
                f"Multi-worker training needs the TensorFlow or JAX backend; this is {backend}."
            )
        return _made(strategy)
    names = _check_devices(devices) or _default_devices(kind)
    if kind == "one_device" and len(names) != 1:
        raise BadArgumentError(
            f'type = "one_device" takes one device, not {len(names)}: {", ".join(names)}.'
        )
    if backend == "jax":
        keras = config.keras()
        # list_devices() alone lists the GPUs when there are any, and CPU:n may be asked for too
        by_name = {
            tensors.normalize_device(str(device)): device
            for kind in sorted({name.split(":")[0].lower() for name in names})
            for device in keras.distribution.list_devices(kind)
        }
        strategy = keras.distribution.DataParallel(devices=[by_name[name] for name in names])
    elif backend == "tensorflow":
        tf = config.backend_module()
        paths = [f"/{name.lower()}" for name in names]
        if kind == "one_device":
            strategy = tf.distribute.OneDeviceStrategy(paths[0])
        else:
            strategy = tf.distribute.MirroredStrategy(paths)
    else:
        raise BadArgumentError(f"gpu_strategy() supports TensorFlow and JAX, not {backend}.")
    return _made(strategy)


def _made(strategy: Strategy) -> dict[str, object]:
    """``make``'s answer: the strategy, its plan and print(gpu_strategy())'s lines."""
    plan = plan_of(strategy)
    return {"strategy": strategy, "plan": plan, "lines": plan_lines(plan)}


def plan_lines(plan: StrategyPlan) -> list[str]:
    """print(gpu_strategy())'s lines: the type, engine, backend and replicas, the devices,
    and for multi-worker training the workers, this one's place, what described the
    cluster, who can reach its ports and the firewall rules that keep others out."""
    replicas = f"{plan.replicas} replica{'' if plan.replicas == 1 else 's'}"
    lines = [f"<gpukeras strategy> {plan.type} ({plan.engine}, {plan.backend}): {replicas}"]
    if plan.devices:
        lines.append(f"Devices: {', '.join(plan.devices)}")
    if plan.type != "multi_worker":
        return lines
    chief = " (the chief)" if plan.is_chief else ""
    lines.append(f"Workers: {', '.join(plan.workers)}; this is worker {plan.index}{chief}")
    if plan.found_by is not None:
        lines.append(f"Cluster from: {plan.found_by}")
    network = plan.network or {}
    if plan.network is not None:
        lines.append(f"Who can reach its ports: {network['reach']}")
    if network.get("firewall"):
        lines.append("Firewall rules that let only the workers in (run as root on this machine):")
        lines += [f"  {rule}" for rule in network["firewall"]]
    return lines


def kind_of(strategy: Strategy) -> str:
    """ "multi_worker", "tf" (another tf.distribute strategy) or "jax" (a Keras Distribution)."""
    name = type(strategy).__name__
    if "MultiWorkerMirroredStrategy" in name or "CollectiveAllReduceStrategy" in name:
        return "multi_worker"
    module = type(strategy).__module__
    if module.startswith("tensorflow"):
        return "tf"
    if module.startswith("keras") and hasattr(strategy, "distribute_dataset"):
        return "jax"
    raise BadArgumentError(
        f"strategy must come from gpu_strategy() (or be a tf.distribute strategy or a "
        f"keras.distribution Distribution), not a {module}.{name}."
    )


def plan_of(strategy: Strategy) -> StrategyPlan:
    """A strategy's type, devices and replicas (works on strategies the user made too)."""
    kind = kind_of(strategy)
    name = type(strategy).__name__
    if kind == "multi_worker":
        # TensorFlow's class is CollectiveAllReduceStrategy; users know it by its public name.
        return StrategyPlan(
            type="multi_worker", backend="tensorflow", engine="MultiWorkerMirroredStrategy",
            **cluster.describe(strategy),
        )  # fmt: skip
    if kind == "jax" and (joined := jax_cluster.joined(strategy)) is not None:
        return StrategyPlan(
            type="multi_worker", backend="jax", engine=name,
            **jax_cluster.describe(strategy, joined),
        )  # fmt: skip
    if kind == "jax":
        names = [tensors.normalize_device(str(d)) for d in strategy.device_mesh.devices.flat]
        return StrategyPlan(
            type="one_device" if len(names) == 1 else "mirrored",
            backend="jax", engine=name, replicas=len(names), devices=names,
        )  # fmt: skip
    extended = strategy.extended
    names = [tensors.normalize_device(d) for d in getattr(extended, "worker_devices", ())]
    return StrategyPlan(
        type="one_device" if strategy.num_replicas_in_sync == 1 else "mirrored",
        backend="tensorflow", engine=name,
        replicas=int(strategy.num_replicas_in_sync), devices=names,
    )  # fmt: skip


def strategy_scope(strategy: Strategy) -> contextlib.AbstractContextManager:
    """The scope in which models are built for ``strategy`` (with_gpu_strategy())."""
    kind_of(strategy)  # BadArgumentError for an object that is no strategy
    return strategy.scope()


def in_scope(model: Model, strategy: Strategy) -> bool:
    """Whether ``model``'s variables were made for ``strategy`` (TensorFlow records it).

    On JAX it is not recorded, so a copy is always made: cheap next to training.
    """
    return kind_of(strategy) != "jax" and compat.distribute_strategy_of(model) is strategy


def _copy_optimizer_state(
    source: Optimizer | None, target: Optimizer | None, target_variables: list
) -> None:
    """Copy optimizer variables (step count, moments) when the source has any state."""
    if source is None or target is None or not source.built:
        return
    if not target.built:
        target.build(target_variables)
    if len(source.variables) != len(target.variables):
        return
    keras = config.keras()
    for from_variable, to_variable in zip(source.variables, target.variables):
        to_variable.assign(keras.ops.convert_to_numpy(from_variable.value))


def in_scope_copy(model: Model, strategy: Strategy) -> Model:
    """A copy of a compiled model with its variables in ``strategy``'s scope.

    Same architecture (``clone_model``), weights, compile settings and
    optimizer state. Models ``clone_model`` cannot copy (subclassed models)
    or whose compile settings cannot be serialised must be built and
    compiled inside the scope by the user; the error says how.
    """
    keras = config.keras()
    try:
        with strategy_scope(strategy):
            copy = keras.models.clone_model(model)  # compiled from the model's compile config
            if not copy.compiled:
                raise ValueError("the copy could not be compiled from the model's compile config")
            copy.set_weights(model.get_weights())
            _copy_optimizer_state(model.optimizer, copy.optimizer, copy.trainable_variables)
    except Exception as error:
        raise BadModelError(
            "gpu_fit(strategy = ) could not copy the model into the strategy's scope "
            f"({type(error).__name__}: {error}). Build and compile the model inside "
            "with_gpu_strategy(strategy, { ... }) and pass that model."
        ) from error
    return copy


def copy_back(trained: Model, model: Model) -> None:
    """Put the trained copy's weights and optimizer state into the user's model."""
    model.set_weights(trained.get_weights())
    _copy_optimizer_state(trained.optimizer, model.optimizer, model.trainable_variables)


@contextlib.contextmanager
def training_model(model: Model, strategy: Strategy) -> Iterator[object]:
    """The model to train under ``strategy``; trained weights reach ``model`` even on an error.

    Copying back in ``finally`` keeps what an interrupted run had learnt, except
    when a JAX worker was lost (WorkerLostError): then ``model`` keeps the
    weights it had, and a backup is what keeps the progress.
    """
    if in_scope(model, strategy):
        yield model
        return
    if jax_cluster.joined(strategy) is not None:
        # Before the copy: JAX refuses replicated values that differ between processes.
        jax_cluster.from_chief(model)
    copy = in_scope_copy(model, strategy)
    lost = None
    try:
        with strategy_scope(strategy) if kind_of(strategy) == "jax" else contextlib.nullcontext():
            yield copy
    except Exception as error:
        lost = jax_cluster.lost_worker(error)
        if lost is None:
            raise
        raise lost from error
    finally:
        # Once a worker is lost, JAX cannot read the copy's values (the failed step made them).
        if lost is None:
            copy_back(copy, model)


def check_batch(plan: StrategyPlan, batch_size: int | None, rows: int | None) -> None:
    """A global batch that splits evenly over the replicas where the backend needs it.

    JAX's DataParallel shards each batch along its first axis, so every batch,
    the last one of an epoch included, must be a multiple of the replicas.
    tf.distribute splits uneven batches itself.
    """
    replicas = plan.replicas
    if plan.backend != "jax" or replicas == 1 or batch_size is None:
        return
    last = rows % batch_size if rows else 0
    if plan.type == "multi_worker" and (batch_size % replicas or last):
        # Keras splits each global batch into one piece per process: an uneven one
        # would give the processes pieces of different sizes.
        raise BadArgumentError(
            f"On JAX every worker takes its share of every batch, so each batch must be the "
            f"whole global batch, a multiple of the {replicas} devices: batch_size "
            f"{batch_size} gives batches of {batch_size}"
            + (f" and a last one of {last}" if last else "")
            + f" rows. Use a batch_size that is a multiple of {replicas} and divides the "
            f"number of rows ({rows}), or gpu_dataset(drop_remainder = TRUE)."
        )
    if batch_size % replicas or last % replicas:
        raise BadArgumentError(
            f"On JAX every batch must split evenly over the {replicas} devices: batch_size "
            f"{batch_size} gives batches of {batch_size}"
            + (f" and a last one of {last}" if last else "")
            + f" rows. Use a batch_size that is a multiple of {replicas} and a number of "
            "rows that leaves no uneven last batch (or gpu_dataset(drop_remainder = TRUE))."
        )


def shard_by_data(dataset: Dataset) -> object:
    """``dataset`` with its auto-shard policy set to DATA, explicitly.

    tf.distribute shards a dataset across workers by its AUTO policy, which
    tries files first and, for in-memory data, falls back to DATA with a
    warning. gpu_fit() feeds in-memory pipelines and whole-dataset pipelines
    alike, so it says DATA: each worker reads the same stream and keeps every
    n-th batch. (On one machine nothing is sharded either way.)
    """
    from gpukeras.data import sources

    tf = sources.tensorflow()
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


# Multi-worker data ---------------------------------------------------------------
def batches_in(dataset: object) -> int | None:
    """Batches in one pass over a dataset; None where tf.data does not know."""
    batches = int(dataset.cardinality())  # type: ignore[attr-defined]
    return batches if batches >= 0 else None


def distribute_dataset(strategy: Strategy, dataset: Dataset, batches: int | None) -> Any:
    """The dataset sharded by DATA over the workers of a multi-worker strategy.

    Where the number of batches is known, every worker takes exactly that many
    (``timed_batches``), so tf.distribute's per-batch agreement that each worker has
    one left (an all-reduce in every ``next()``, on by default for multi-worker)
    is turned off for this dataset: it would cost a collective per step and
    count the wait for the slowest worker as input wait.
    """
    extended = strategy.extended
    default = extended.experimental_enable_get_next_as_optional
    extended.experimental_enable_get_next_as_optional = batches is None
    try:
        return strategy.experimental_distribute_dataset(shard_by_data(dataset))
    finally:
        extended.experimental_enable_get_next_as_optional = default


def timed_batches(
    distributed: object, batches: int | None
) -> Iterator[tuple[float, float, object]]:
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


def strategy_settings(plan: StrategyPlan, batch_size: int | None) -> dict[str, object]:
    """The strategy part of gpu_fit()'s settings: what it is and which batch is which."""
    per_replica = None
    if batch_size is not None:
        per_replica = batch_size / plan.replicas
        per_replica = int(per_replica) if per_replica.is_integer() else per_replica
    return {
        **dataclasses.asdict(plan),
        "global_batch_size": batch_size,
        "per_replica_batch_size": per_replica,
    }
