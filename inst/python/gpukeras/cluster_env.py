"""The cluster a job scheduler started this process in, read from its environment.

``srun Rscript train.R`` starts one process per task; each must learn every
worker's address and its own place among them. SLURM and Open MPI say so in
environment variables, and TensorFlow's TF_CONFIG names it directly. This
module reads them, without importing a framework, into one plain answer:
the workers' ``host:port`` addresses and this process's index (the first
worker is the chief).

- TF_CONFIG: the workers and this task, as TensorFlow defines it.
- SLURM: ``SLURM_PROCID`` (this task), ``SLURM_NTASKS``, the step's node list
  (``SLURM_STEP_NODELIST``, a compressed host list such as ``gpu[01-03,07]``)
  and tasks per node (``SLURM_STEP_TASKS_PER_NODE``, such as ``2(x3),1``).
  Tasks fill nodes in order (SLURM's default block distribution, what
  TensorFlow's SlurmClusterResolver assumes too); a task's port is the base
  port plus its place on its node, so tasks sharing a node do not collide.
- Open MPI: ``OMPI_COMM_WORLD_RANK`` and ``_SIZE``; it does not name the other
  hosts, so only a job on one node (``OMPI_COMM_WORLD_LOCAL_SIZE`` equal to
  the size) can be described; on several nodes the workers must be given.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpukeras.errors import BadArgumentError

# The port of a node's first task, as TensorFlow's SlurmClusterResolver has it.
DEFAULT_PORT_BASE = 8888


@dataclass
class FoundCluster:
    """Where the workers are, and which one this process is.

    Attributes:
        source: what described it: "TF_CONFIG", "SLURM" or "Open MPI".
        workers: every worker's "host:port", the chief first.
        index: this process's place in ``workers``.
        detail: what was read, for the user (e.g. "job 812, 4 tasks on 2 nodes").
    """

    source: str
    workers: list[str]
    index: int
    detail: str


def expand_hostlist(hostlist: str) -> list[str]:
    """SLURM's compressed host list as host names: 'a[01-02,5],b' -> ['a01', 'a02', 'a5', 'b']."""
    hosts: list[str] = []
    for entry in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", hostlist):
        expanded = [""]
        for text, ranges in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", entry):
            pieces = [text]
            if ranges:
                pieces = [text + number for number in _numbers(ranges)]
            expanded = [head + piece for head in expanded for piece in pieces]
        hosts.extend(host for host in expanded if host)
    return hosts


def _numbers(ranges: str) -> list[str]:
    """'01-03,7' -> ['01', '02', '03', '7'], keeping the zero padding of each range."""
    numbers = []
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        if not last:
            numbers.append(first)
            continue
        width = len(first)
        numbers.extend(str(n).zfill(width) for n in range(int(first), int(last) + 1))
    return numbers


def expand_tasks_per_node(text: str) -> list[int]:
    """SLURM's tasks per node: '2(x3),1' -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if match is None:
            raise BadArgumentError(f"Cannot read SLURM's tasks per node {text!r}.")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def _from_tf_config(text: str) -> FoundCluster:
    try:
        config = json.loads(text)
        workers = [str(address) for address in config["cluster"]["worker"]]
        index = int(config["task"]["index"])
    except (ValueError, KeyError, TypeError) as error:
        raise BadArgumentError(
            f"TF_CONFIG cannot be read ({type(error).__name__}: {error}): it must be JSON "
            'with "cluster": {"worker": [...]} and "task": {"type": "worker", "index": i}.'
        ) from error
    return FoundCluster("TF_CONFIG", workers, index, f"worker {index} of {len(workers)}")


def _from_slurm(environ: Mapping[str, str], port_base: int) -> FoundCluster:
    nodes = expand_hostlist(environ.get("SLURM_STEP_NODELIST") or environ["SLURM_JOB_NODELIST"])
    per_node = expand_tasks_per_node(
        environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE", "1")
    )
    count = int(environ.get("SLURM_STEP_NUM_TASKS") or environ["SLURM_NTASKS"])
    if len(per_node) != len(nodes) or sum(per_node) != count:
        raise BadArgumentError(
            f"SLURM's step has {count} tasks on nodes {', '.join(nodes)} with tasks per node "
            f"{per_node}, which do not add up: start the workers with srun, one task per worker."
        )
    workers = [
        f"{node}:{port_base + local}"
        for node, tasks in zip(nodes, per_node)
        for local in range(tasks)
    ]
    job = environ.get("SLURM_JOB_ID", "?")
    return FoundCluster(
        "SLURM",
        workers,
        int(environ["SLURM_PROCID"]),
        f"job {job}, {count} tasks on {len(nodes)} node(s)",
    )


def _from_open_mpi(environ: Mapping[str, str], port_base: int) -> FoundCluster:
    size = int(environ["OMPI_COMM_WORLD_SIZE"])
    if int(environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", -1)) != size:
        raise BadArgumentError(
            "Open MPI started the workers on several nodes, and it does not tell a process "
            "where the others run: give every worker's address, gpu_strategy('multi_worker', "
            "workers = c('host1:port', 'host2:port'), index = ), or set TF_CONFIG."
        )
    workers = [f"127.0.0.1:{port_base + rank}" for rank in range(size)]
    return FoundCluster(
        "Open MPI", workers, int(environ["OMPI_COMM_WORLD_RANK"]), f"{size} ranks on one node"
    )


def find(
    environ: Mapping[str, str] | None = None, port_base: int | None = None
) -> FoundCluster | None:
    """The cluster this process's environment describes, or None when it describes none.

    TF_CONFIG wins (the user set it on purpose), then SLURM (a step with more
    than one task), then Open MPI.

    Args:
        environ: the environment to read (``os.environ`` when None).
        port_base: the port of each node's first worker (``GPUKERAS_PORT_BASE``
            or 8888 when None).

    Raises:
        BadArgumentError: an environment that names a cluster but cannot describe it.
    """
    environ = os.environ if environ is None else environ
    base = (
        port_base
        if port_base is not None
        else int(environ.get("GPUKERAS_PORT_BASE", DEFAULT_PORT_BASE))
    )
    if environ.get("TF_CONFIG"):
        return _from_tf_config(environ["TF_CONFIG"])
    tasks = environ.get("SLURM_STEP_NUM_TASKS") or environ.get("SLURM_NTASKS")
    if "SLURM_PROCID" in environ and tasks and int(tasks) > 1:
        return _from_slurm(environ, base)
    if "OMPI_COMM_WORLD_RANK" in environ and int(environ.get("OMPI_COMM_WORLD_SIZE", 1)) > 1:
        return _from_open_mpi(environ, base)
    return None
