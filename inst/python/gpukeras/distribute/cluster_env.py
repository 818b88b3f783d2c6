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

Every value read is checked, and a host list is counted before it is expanded:
a value that is no whole number, a rank past the size, a port base that
leaves no ports, or a node list of more than ``MAX_HOSTS`` hosts is a
BadArgumentError naming the variable and its value.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpukeras.core.errors import BadArgumentError

# The port of a node's first task, as TensorFlow's SlurmClusterResolver has it.
DEFAULT_PORT_BASE = 8888
LAST_PORT = 65535
# The most hosts a node list, and tasks a step, may name. Both are counted before anything
# is expanded: a list such as node[1-999999999] would otherwise fill the memory.
MAX_HOSTS = 4096
MAX_TASKS = 65536

_RANGE = r"[0-9]+(?:-[0-9]+)?"
# A host list's entry: host-name characters and bracketed ranges, such as gpu[01-03,07]-ib;
# its pieces: a text, or what one bracket holds.
_ENTRY = rf"(?:[^,\[\]\s]|\[{_RANGE}(?:,{_RANGE})*\])+"
_PIECE = r"([^\[]+)|\[([^\]]*)\]"


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


def _whole(name: str, text: str, what: str, minimum: int = 0, maximum: int | None = None) -> int:
    """The value ``text`` of the variable ``name`` as a whole number from ``minimum`` (to
    ``maximum``).

    Raises:
        BadArgumentError: naming the variable, its value and ``what`` it is, when the value is
            no whole number or out of range ('SLURM_PROCID is 'abc'; it must be ...').
    """
    bounds = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
    value = int(text) if re.fullmatch(r"\s*[0-9]+\s*", text) else None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        raise BadArgumentError(f"{name} is {text!r}; it must be a whole number {bounds} ({what}).")
    return value


def expand_hostlist(hostlist: str, name: str = "The host list") -> list[str]:
    """SLURM's compressed host list as host names: 'a[01-02,5],b' -> ['a01', 'a02', 'a5', 'b'].

    The hosts are counted before they are expanded, so a list naming more than ``MAX_HOSTS``
    is refused at once, whatever its ranges.

    Args:
        hostlist: the list, as ``scontrol show hostnames`` reads it.
        name: the variable it came from, for the errors.

    Raises:
        BadArgumentError: a list that is not one, a range that runs backwards, or more than
            ``MAX_HOSTS`` hosts; each naming ``name`` and the list.
    """
    if not re.fullmatch(rf"{_ENTRY}(?:,{_ENTRY})*", hostlist):
        raise BadArgumentError(
            f"{name} is {hostlist!r}; it must be a SLURM host list such as "
            "'gpu[01-04,07],login1' (srun sets it)."
        )
    # Each entry as its pieces: a text, or one bracket's ranges (first, last, zero-padded width).
    entries = [
        [text or _ranges(ranges, hostlist, name) for text, ranges in re.findall(_PIECE, entry)]
        for entry in re.findall(_ENTRY, hostlist)
    ]
    count = sum(math.prod(map(_size, entry)) for entry in entries)
    if count > MAX_HOSTS:
        raise BadArgumentError(
            f"{name} is {hostlist!r}; it names {count} hosts, more than {MAX_HOSTS}, the most "
            "gpukeras takes (is it the step's node list?)."
        )
    hosts: list[str] = []
    for entry in entries:
        expanded = [""]
        for piece in entry:
            texts = (
                [piece]
                if isinstance(piece, str)
                else [
                    str(n).zfill(width)
                    for first, last, width in piece
                    for n in range(first, last + 1)
                ]
            )
            expanded = [head + text for head in expanded for text in texts]
        hosts.extend(expanded)
    return hosts


def _size(piece: str | list[tuple[int, int, int]]) -> int:
    """How many texts a host list's piece stands for."""
    return 1 if isinstance(piece, str) else sum(last - first + 1 for first, last, _ in piece)


def _ranges(ranges: str, hostlist: str, name: str) -> list[tuple[int, int, int]]:
    """'01-03,7' -> [(1, 3, 2), (7, 7, 1)]: each range's first and last number and its zero
    padding."""
    parsed = []
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        if int(last or first) < int(first):
            raise BadArgumentError(
                f"{name} is {hostlist!r}; its range {part} runs backwards (srun sets it)."
            )
        parsed.append((int(first), int(last or first), len(first)))
    return parsed


def expand_tasks_per_node(text: str, name: str = "The tasks per node") -> list[int]:
    """SLURM's tasks per node: '2(x3),1' -> [2, 2, 2, 1].

    Args:
        text: the counts, as SLURM writes them.
        name: the variable they came from, for the errors.

    Raises:
        BadArgumentError: counts that are not SLURM's, or for more than ``MAX_HOSTS`` nodes
            (counted before the list is made); each naming ``name`` and its value.
    """
    parts = []
    for part in text.split(","):
        match = re.fullmatch(r"([0-9]+)(?:\(x([0-9]+)\))?", part.strip())
        if match is None or int(match.group(1)) < 1:
            raise BadArgumentError(
                f"{name} is {text!r}; it must be SLURM's tasks per node, such as '2(x3),1': "
                "2 tasks on each of 3 nodes, then 1 (srun sets it)."
            )
        parts.append((int(match.group(1)), int(match.group(2) or 1)))
    nodes = sum(repeat for _, repeat in parts)
    if nodes > MAX_HOSTS:
        raise BadArgumentError(
            f"{name} is {text!r}; it names {nodes} nodes, more than {MAX_HOSTS}, the most "
            "gpukeras takes."
        )
    return [tasks for tasks, repeat in parts for _ in range(repeat)]


def _port_base(environ: Mapping[str, str], port_base: int | None, tasks_on_a_node: int) -> int:
    """The port of each node's first worker, checked to leave ports for its other workers."""
    if port_base is not None:
        name, text = "port_base", str(port_base)
    else:
        name, text = (
            "GPUKERAS_PORT_BASE",
            environ.get("GPUKERAS_PORT_BASE") or str(DEFAULT_PORT_BASE),
        )
    base = _whole(name, text, "the port of each node's first worker", 1, LAST_PORT)
    if base + tasks_on_a_node - 1 > LAST_PORT:
        raise BadArgumentError(
            f"{name} is {text!r}, and a node runs {tasks_on_a_node} tasks on ports from there "
            f"up: ports end at {LAST_PORT}, so it must be at most "
            f"{LAST_PORT - tasks_on_a_node + 1}."
        )
    return base


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
    if not 0 <= index < len(workers):
        raise BadArgumentError(
            f"TF_CONFIG names this task as worker {index}, but its cluster has {len(workers)} "
            f"workers: the task's index must be one of 0 to {len(workers) - 1}."
        )
    return FoundCluster("TF_CONFIG", workers, index, f"worker {index} of {len(workers)}")


def _from_slurm(
    environ: Mapping[str, str], tasks_name: str, count: int, port_base: int | None
) -> FoundCluster:
    nodes_name = next(
        (name for name in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST") if name in environ), None
    )
    if nodes_name is None:
        raise BadArgumentError(
            f"SLURM_PROCID and {tasks_name} are set, but neither SLURM_STEP_NODELIST nor "
            "SLURM_JOB_NODELIST names the nodes: start the workers with srun, one task per "
            "worker."
        )
    nodes = expand_hostlist(environ[nodes_name], nodes_name)
    per_node_name = next(
        (
            name
            for name in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
            if environ.get(name)
        ),
        None,
    )
    per_node = (
        expand_tasks_per_node(environ[per_node_name], per_node_name) if per_node_name else [1]
    )
    if len(per_node) != len(nodes) or sum(per_node) != count:
        raise BadArgumentError(
            f"SLURM's step has {count} tasks on nodes {', '.join(nodes)} with tasks per node "
            f"{per_node}, which do not add up: start the workers with srun, one task per worker."
        )
    index = _whole("SLURM_PROCID", environ["SLURM_PROCID"], "this task's rank; srun sets it")
    if index >= count:
        raise BadArgumentError(
            f"SLURM_PROCID is {environ['SLURM_PROCID']!r}, but the step has {count} tasks "
            f"({tasks_name}): it must be 0 to {count - 1}, this task's rank (srun sets both)."
        )
    base = _port_base(environ, port_base, max(per_node))
    workers = [
        f"{node}:{base + local}" for node, tasks in zip(nodes, per_node) for local in range(tasks)
    ]
    job = environ.get("SLURM_JOB_ID", "?")
    return FoundCluster(
        "SLURM", workers, index, f"job {job}, {count} tasks on {len(nodes)} node(s)"
    )


def _from_open_mpi(environ: Mapping[str, str], size: int, port_base: int | None) -> FoundCluster:
    local = environ.get("OMPI_COMM_WORLD_LOCAL_SIZE")
    on_one_node = local is not None and (
        _whole("OMPI_COMM_WORLD_LOCAL_SIZE", local, "the ranks on this node; mpirun sets it", 1)
        == size
    )
    if not on_one_node:
        raise BadArgumentError(
            "Open MPI started the workers on several nodes, and it does not tell a process "
            "where the others run: give every worker's address, gpu_strategy('multi_worker', "
            "workers = c('host1:port', 'host2:port'), index = ), or set TF_CONFIG."
        )
    rank_text = environ["OMPI_COMM_WORLD_RANK"]
    rank = _whole("OMPI_COMM_WORLD_RANK", rank_text, "this process's rank; mpirun sets it")
    if rank >= size:
        raise BadArgumentError(
            f"OMPI_COMM_WORLD_RANK is {rank_text!r}, but OMPI_COMM_WORLD_SIZE is {size}: it "
            f"must be 0 to {size - 1}, this process's rank (mpirun sets both)."
        )
    base = _port_base(environ, port_base, size)
    workers = [f"127.0.0.1:{base + n}" for n in range(size)]
    return FoundCluster("Open MPI", workers, rank, f"{size} ranks on one node")


def find(
    environ: Mapping[str, str] | None = None, port_base: int | None = None
) -> FoundCluster | None:
    """The cluster this process's environment describes, or None when it describes none.

    TF_CONFIG wins (the user set it on purpose), then SLURM (a step with more
    than one task), then Open MPI. Each variable read is checked: a value that
    is no whole number, a rank past the size, a port base that leaves no ports,
    or a node list of more than ``MAX_HOSTS`` hosts is an error naming the
    variable and its value.

    Args:
        environ: the environment to read (``os.environ`` when None).
        port_base: the port of each node's first worker (``GPUKERAS_PORT_BASE``
            or 8888 when None).

    Raises:
        BadArgumentError: an environment that names a cluster but cannot describe it.
    """
    environ = os.environ if environ is None else environ
    if environ.get("TF_CONFIG"):
        return _from_tf_config(environ["TF_CONFIG"])
    tasks_name = "SLURM_STEP_NUM_TASKS" if environ.get("SLURM_STEP_NUM_TASKS") else "SLURM_NTASKS"
    if "SLURM_PROCID" in environ and environ.get(tasks_name):
        tasks = _whole(
            tasks_name,
            environ[tasks_name],
            "the step's number of tasks; srun sets it",
            1,
            MAX_TASKS,
        )
        if tasks > 1:
            return _from_slurm(environ, tasks_name, tasks, port_base)
    if "OMPI_COMM_WORLD_RANK" in environ:
        size = _whole(
            "OMPI_COMM_WORLD_SIZE",
            environ.get("OMPI_COMM_WORLD_SIZE", "1"),
            "the number of ranks; mpirun sets it",
            1,
            MAX_TASKS,
        )
        if size > 1:
            return _from_open_mpi(environ, size, port_base)
    return None
