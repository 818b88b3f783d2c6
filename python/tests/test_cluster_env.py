"""Clusters read from a scheduler's environment: SLURM, Open MPI, TF_CONFIG."""

from __future__ import annotations

import json

import pytest

from gpukeras.core.errors import BadArgumentError
from gpukeras.distribute import cluster_env


@pytest.mark.parametrize(
    ("hostlist", "hosts"),
    [
        ("node1", ["node1"]),
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("a[1-2],b,c[09-10]", ["a1", "a2", "b", "c09", "c10"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ],
)
def test_slurm_host_lists_expand_as_scontrol_show_hostnames_does(
    hostlist: str, hosts: list[str]
) -> None:
    assert cluster_env.expand_hostlist(hostlist) == hosts


def test_slurm_tasks_per_node_expand() -> None:
    assert cluster_env.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert cluster_env.expand_tasks_per_node("4") == [4]
    with pytest.raises(BadArgumentError, match="tasks per node"):
        cluster_env.expand_tasks_per_node("two")


SLURM = {
    "SLURM_JOB_ID": "812",
    "SLURM_PROCID": "3",
    "SLURM_NTASKS": "4",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_NODELIST": "gpu[01-02]",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
}


def test_a_slurm_step_gives_every_task_an_address_filling_nodes_in_order() -> None:
    found = cluster_env.find(SLURM)
    assert found is not None
    assert found.source == "SLURM"
    # Two tasks per node: the second on a node takes the next port.
    assert found.workers == ["gpu01:8888", "gpu01:8889", "gpu02:8888", "gpu02:8889"]
    assert found.index == 3
    assert found.detail == "job 812, 4 tasks on 2 node(s)"
    assert cluster_env.find({**SLURM, "GPUKERAS_PORT_BASE": "20000"}).workers[1] == "gpu01:20001"


def test_a_slurm_step_whose_counts_disagree_is_refused() -> None:
    with pytest.raises(BadArgumentError, match="do not add up"):
        cluster_env.find({**SLURM, "SLURM_STEP_TASKS_PER_NODE": "3,2"})


def test_one_slurm_task_or_no_scheduler_is_no_cluster() -> None:
    assert cluster_env.find({**SLURM, "SLURM_NTASKS": "1", "SLURM_STEP_NUM_TASKS": "1"}) is None
    assert cluster_env.find({}) is None


def test_tf_config_wins_over_the_scheduler() -> None:
    config = {"cluster": {"worker": ["h1:1", "h2:2"]}, "task": {"type": "worker", "index": 1}}
    found = cluster_env.find({**SLURM, "TF_CONFIG": json.dumps(config)})
    assert (found.source, found.workers, found.index) == ("TF_CONFIG", ["h1:1", "h2:2"], 1)
    with pytest.raises(BadArgumentError, match="TF_CONFIG cannot be read"):
        cluster_env.find({"TF_CONFIG": "{not json"})


def test_open_mpi_on_one_node_and_on_several() -> None:
    one_node = {
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_SIZE": "2",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    }
    found = cluster_env.find(one_node)
    assert (found.source, found.workers, found.index) == (
        "Open MPI",
        ["127.0.0.1:8888", "127.0.0.1:8889"],
        1,
    )
    with pytest.raises(BadArgumentError, match="does not tell a process where the others run"):
        cluster_env.find({**one_node, "OMPI_COMM_WORLD_LOCAL_SIZE": "1"})


def test_gpu_strategy_without_workers_joins_the_cluster_a_slurm_step_describes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What make_strategy() joins when `srun` started the workers (joining needs them all)."""
    from gpukeras.distribute import cluster

    monkeypatch.delenv("TF_CONFIG", raising=False)
    for name, value in SLURM.items():
        monkeypatch.setenv(name, value)
    config, found_by = cluster._from_environment()
    assert config == cluster.tf_config(["gpu01:8888", "gpu01:8889", "gpu02:8888", "gpu02:8889"], 3)
    assert found_by == "SLURM (job 812, 4 tasks on 2 node(s))"


def test_gpu_strategy_without_workers_or_a_cluster_says_how_to_give_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpukeras.core.errors import StrategyError
    from gpukeras.distribute import cluster

    for name in ("TF_CONFIG", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(StrategyError, match="neither TF_CONFIG nor a SLURM or Open MPI job"):
        cluster._from_environment()


OPEN_MPI = {
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
}
TWO_WORKERS = {"cluster": {"worker": ["h1:1", "h2:2"]}, "task": {"type": "worker", "index": 0}}


def row(environ: dict[str, str], message: str, **values: str | None) -> object:
    """A test case: ``environ`` with ``values`` set (None: removed), named by them, and the
    message its error must match."""
    changed = {**environ, **values}
    return pytest.param(
        {name: value for name, value in changed.items() if value is not None},
        message,
        id=",".join(f"{name}={value}" for name, value in values.items()),
    )


# One row per variable and bad value: the environment, and what the error must say (it names
# the variable, its value, and what the value must be).
BAD_ENVIRONMENTS = [
    row(SLURM, r"^SLURM_PROCID is 'abc'; it must be a whole number >= 0", SLURM_PROCID="abc"),
    row(SLURM, r"^SLURM_PROCID is '-1'; it must be a whole number >= 0", SLURM_PROCID="-1"),
    row(SLURM, r"^SLURM_PROCID is '1.5'; it must be a whole number", SLURM_PROCID="1.5"),
    row(SLURM, r"^SLURM_PROCID is '4', but the step has 4 tasks", SLURM_PROCID="4"),
    row(
        SLURM,
        r"^SLURM_NTASKS is 'four'; it must be a whole number from 1 to 65536",
        SLURM_STEP_NUM_TASKS=None,
        SLURM_NTASKS="four",
    ),
    row(
        SLURM,
        r"^SLURM_STEP_NUM_TASKS is '0x4'; it must be a whole number from 1 to 65536",
        SLURM_STEP_NUM_TASKS="0x4",
    ),
    row(
        SLURM,
        r"^SLURM_STEP_NUM_TASKS is '999999999999'; it must be a whole number from 1 to 65536",
        SLURM_STEP_NUM_TASKS="999999999999",
    ),
    row(
        SLURM,
        r"^SLURM_STEP_TASKS_PER_NODE is 'two'; it must be SLURM's tasks per node",
        SLURM_STEP_TASKS_PER_NODE="two",
    ),
    row(
        SLURM,
        r"^SLURM_TASKS_PER_NODE is '2\(x\)'; it must be SLURM's tasks per node",
        SLURM_STEP_TASKS_PER_NODE=None,
        SLURM_TASKS_PER_NODE="2(x)",
    ),
    row(
        SLURM,
        r"^SLURM_STEP_TASKS_PER_NODE is '2\(x999999999\)'; it names 999999999 nodes, "
        r"more than 4096",
        SLURM_STEP_TASKS_PER_NODE="2(x999999999)",
    ),
    row(
        SLURM,
        r"^SLURM_STEP_NODELIST is 'node\[1-999999999\]'; it names 999999999 hosts, more "
        r"than 4096",
        SLURM_STEP_NODELIST="node[1-999999999]",
    ),
    row(
        SLURM,
        r"^SLURM_STEP_NODELIST is 'n\[1-100\]-m\[1-100\]'; it names 10000 hosts",
        SLURM_STEP_NODELIST="n[1-100]-m[1-100]",
    ),
    row(
        SLURM,
        r"^SLURM_JOB_NODELIST is 'gpu\[02-01\]'; its range 02-01 runs backwards",
        SLURM_STEP_NODELIST=None,
        SLURM_JOB_NODELIST="gpu[02-01]",
    ),
    row(
        SLURM,
        r"^SLURM_STEP_NODELIST is 'gpu\[01-02'; it must be a SLURM host list",
        SLURM_STEP_NODELIST="gpu[01-02",
    ),
    row(
        SLURM,
        r"^SLURM_STEP_NODELIST is 'gpu\[a-b\]'; it must be a SLURM host list",
        SLURM_STEP_NODELIST="gpu[a-b]",
    ),
    row(
        SLURM,
        r"^SLURM_STEP_NODELIST is ''; it must be a SLURM host list",
        SLURM_STEP_NODELIST="",
    ),
    row(
        SLURM,
        r"^SLURM_PROCID and SLURM_STEP_NUM_TASKS are set, but neither SLURM_STEP_NODELIST "
        r"nor SLURM_JOB_NODELIST",
        SLURM_STEP_NODELIST=None,
    ),
    row(
        SLURM,
        r"^GPUKERAS_PORT_BASE is 'abc'; it must be a whole number from 1 to 65535",
        GPUKERAS_PORT_BASE="abc",
    ),
    row(
        SLURM,
        r"^GPUKERAS_PORT_BASE is '0'; it must be a whole number from 1 to 65535",
        GPUKERAS_PORT_BASE="0",
    ),
    row(
        SLURM,
        r"^GPUKERAS_PORT_BASE is '70000'; it must be a whole number from 1 to 65535",
        GPUKERAS_PORT_BASE="70000",
    ),
    row(
        SLURM,
        r"^GPUKERAS_PORT_BASE is '65535', and a node runs 2 tasks on ports from there up: "
        r"ports end at 65535, so it must be at most 65534",
        GPUKERAS_PORT_BASE="65535",
    ),
    row(
        OPEN_MPI,
        r"^OMPI_COMM_WORLD_RANK is 'x'; it must be a whole number >= 0",
        OMPI_COMM_WORLD_RANK="x",
    ),
    row(
        OPEN_MPI,
        r"^OMPI_COMM_WORLD_RANK is '-1'; it must be a whole number >= 0",
        OMPI_COMM_WORLD_RANK="-1",
    ),
    row(
        OPEN_MPI,
        r"^OMPI_COMM_WORLD_RANK is '2', but OMPI_COMM_WORLD_SIZE is 2: it must be 0 to 1",
        OMPI_COMM_WORLD_RANK="2",
    ),
    row(
        OPEN_MPI,
        r"^OMPI_COMM_WORLD_SIZE is 'two'; it must be a whole number from 1 to 65536",
        OMPI_COMM_WORLD_SIZE="two",
    ),
    row(
        OPEN_MPI,
        r"^OMPI_COMM_WORLD_LOCAL_SIZE is '2.0'; it must be a whole number >= 1",
        OMPI_COMM_WORLD_LOCAL_SIZE="2.0",
    ),
    row(
        OPEN_MPI,
        r"^GPUKERAS_PORT_BASE is '65535', and a node runs 2 tasks",
        GPUKERAS_PORT_BASE="65535",
    ),
    row(
        {},
        r"^TF_CONFIG names this task as worker 2, but its cluster has 2 workers",
        TF_CONFIG=json.dumps({**TWO_WORKERS, "task": {"type": "worker", "index": 2}}),
    ),
]


@pytest.mark.parametrize(("environ", "message"), BAD_ENVIRONMENTS)
def test_every_bad_variable_is_named_with_its_value(environ: dict[str, str], message: str) -> None:
    with pytest.raises(BadArgumentError, match=message):
        cluster_env.find(environ)


def test_host_lists_are_counted_before_they_are_expanded() -> None:
    """A range of a billion hosts is refused at once, without a list of a billion names."""
    with pytest.raises(BadArgumentError, match="it names 1000000000 hosts, more than 4096"):
        cluster_env.expand_hostlist("node[0-999999999]", "SLURM_JOB_NODELIST")
    hosts = cluster_env.expand_hostlist(f"n[1-{cluster_env.MAX_HOSTS}]", "SLURM_JOB_NODELIST")
    assert len(hosts) == cluster_env.MAX_HOSTS
    with pytest.raises(BadArgumentError, match="4097 hosts, more than 4096"):
        cluster_env.expand_hostlist(f"n[1-{cluster_env.MAX_HOSTS}],extra", "SLURM_JOB_NODELIST")


@pytest.mark.parametrize("caller", ["cluster", "jax_cluster"])
def test_both_multi_worker_engines_pass_a_bad_variable_on_as_it_is(
    caller: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TensorFlow's and JAX's joining read the environment through ``find``: the same error."""
    from gpukeras.distribute import cluster, jax_cluster

    monkeypatch.delenv("TF_CONFIG", raising=False)
    for name, value in {**SLURM, "SLURM_PROCID": "abc"}.items():
        monkeypatch.setenv(name, value)
    read = (
        cluster._from_environment
        if caller == "cluster"
        else lambda: jax_cluster._cluster(None, None)
    )
    with pytest.raises(BadArgumentError, match=r"^SLURM_PROCID is 'abc'"):
        read()
