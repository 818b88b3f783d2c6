"""Clusters read from a scheduler's environment: SLURM, Open MPI, TF_CONFIG."""

from __future__ import annotations

import json

import pytest

from gpukeras import cluster_env
from gpukeras.errors import BadArgumentError


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
    from gpukeras import cluster

    monkeypatch.delenv("TF_CONFIG", raising=False)
    for name, value in SLURM.items():
        monkeypatch.setenv(name, value)
    config, found_by = cluster._from_environment()
    assert config == cluster.tf_config(["gpu01:8888", "gpu01:8889", "gpu02:8888", "gpu02:8889"], 3)
    assert found_by == "SLURM (job 812, 4 tasks on 2 node(s))"


def test_gpu_strategy_without_workers_or_a_cluster_says_how_to_give_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpukeras import cluster
    from gpukeras.errors import StrategyError

    for name in ("TF_CONFIG", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(StrategyError, match="neither TF_CONFIG nor a SLURM or Open MPI job"):
        cluster._from_environment()
