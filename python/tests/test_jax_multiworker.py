"""Multi-worker training on JAX: real worker processes on 127.0.0.1 train the digits model together.

Each cluster test starts ``scripts/jax_worker.py`` processes (JAX backend on the CPU,
Gloo collectives, free ports, every process killed and the test failed past its time
limit) and reads back what each wrote: the bridge's answers, the final weights,
when the fit returned, and the sockets it listened on (all on loopback). The
workers use JAX whatever this process runs on, so they skip only where JAX or
TensorFlow (for the tf.data input) is not installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import child_pythonpath, requires, run_on_jax
from gpukeras import bridge
from gpukeras.core.errors import StrategyError
from gpukeras.distribute import jax_cluster, network, strategies
from test_multiworker import free_ports, weights

pytestmark = pytest.mark.slow  # several worker processes

WORKER = Path(__file__).with_name("scripts") / "jax_worker.py"
LIMIT = 120  # seconds a cluster may take before its processes are killed
HEARTBEAT = 5  # the heartbeat timeout of the killed-worker test
# Slack for a busy 2-core machine on top of the bound the killed-worker test checks.
NOTICE_SLACK = 10.0
EPOCHS = 2


def run_workers(out: Path, specs: list[dict]) -> tuple[list[dict | None], list[int]]:
    """Run one worker per spec (a cluster when specs name ``workers``; a spec may name
    its own ``out``) and return what each wrote and its exit status, in the specs' order
    (the standard error of the i-th is ``out/stderr-<i>.txt``)."""
    requires("jax")
    requires("tensorflow")
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "KERAS_BACKEND": "jax"}
    processes = [
        subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps({"out": str(out), **spec})],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(out / f"stderr-{index}.txt").open("w"),
        )
        for index, spec in enumerate(specs)
    ]
    deadline = time.monotonic() + LIMIT
    try:
        for process in processes:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the workers did not finish within {LIMIT} s")
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    results = []
    for spec in specs:
        path = Path(spec.get("out", out)) / f"result-{spec.get('index', 0)}.json"
        results.append(json.loads(path.read_text()) if path.exists() else None)
    return results, [process.returncode for process in processes]


def cluster_specs(count: int, **spec: object) -> list[dict]:
    workers = [f"127.0.0.1:{port}" for port in free_ports(count)]
    return [{"workers": workers, "index": index, **spec} for index in range(count)]


def fit_value(result: dict | None, stderr: Path) -> dict:
    assert result is not None, stderr.read_text()[-3000:]
    answer = result["fit"]
    assert answer["ok"], answer
    return answer["value"]


# Models built differently on each worker (seed 1 + index): training starts from the chief's.
TRAIN = {"epochs": EPOCHS, "seed": 5, "outside_seed": 1, "batch_size": 64}


@pytest.fixture(scope="module")
def in_step(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict | None]]:
    """Two workers train TRAIN unbroken (their files in the folder returned, indices 0 and 1)
    and, beside them, one process on one device (index 2, its files in ``alone/``): the
    in-step test reads all three, the killed-worker test compares its resumed cluster with
    the first two (a cluster of its own for that cost 2 worker processes, ~21 s of CPU)."""
    out = tmp_path_factory.mktemp("in-step")
    # One process on one device: the same seeded pipeline, the chief's start.
    alone = out / "alone"
    alone.mkdir()
    reference = {
        **TRAIN,
        "index": 0,
        "as_dataset": True,
        "strategy": "one_device",
        "out": str(alone),
    }
    results, codes = run_workers(out, [*cluster_specs(2, **TRAIN), reference])
    assert codes == [0, 0, 0], codes
    return out, results


def test_two_jax_workers_train_in_step_as_one_process_on_the_same_global_batches(
    in_step: tuple[Path, list[dict | None]],
) -> None:
    tmp_path, results = in_step
    alone = tmp_path / "alone"
    chief, other, one = (
        fit_value(result, tmp_path / f"stderr-{i}.txt") for i, result in enumerate(results)
    )
    described = [result["describe"] for result in results[:2]]  # type: ignore[index]
    assert [d["type"] for d in described] == ["multi_worker"] * 2
    assert [d["replicas"] for d in described] == [2, 2]
    assert [d["is_chief"] for d in described] == [True, False]
    assert chief["history"] == other["history"]
    for mine, theirs in zip(weights(tmp_path, 0), weights(tmp_path, 1)):
        np.testing.assert_array_equal(mine, theirs)
    # The global batch is what it is on TensorFlow: 64 rows a step, 32 on each worker.
    assert chief["settings"]["strategy"]["global_batch_size"] == 64
    assert chief["settings"]["strategy"]["per_replica_batch_size"] == 32
    assert chief["settings"]["steps_per_epoch"] == 28
    assert chief["settings"]["data"] == "arrays"  # the tf.data pipeline Keras shards
    assert chief["history"]["loss"][-1] < chief["history"]["loss"][0]
    for name in ("loss", "accuracy"):
        np.testing.assert_allclose(chief["history"][name], one["history"][name], rtol=1e-5)
    # The same steps up to the order of the floating-point sums (measured: 2.2e-7 at most).
    for mine, alone_weights in zip(weights(tmp_path, 0), weights(alone, 0)):
        np.testing.assert_allclose(mine, alone_weights, atol=1e-5)
    # On this machine's own network, the coordinator and Gloo listen on loopback alone.
    coordinator = network.port_of(results[0]["describe"]["workers"][0])  # type: ignore[index]
    for index, result in enumerate(results[:2]):
        sockets = result["sockets"]  # type: ignore[index]
        assert sockets, "the coordinator and Gloo should listen"
        assert all(s["loopback"] for s in sockets), (index, sockets)
        assert result["describe"]["network"]["reach"].startswith("this machine only")  # type: ignore[index]
    chief_sockets = results[0]["sockets"]  # type: ignore[index]
    assert {"address": "127.0.0.1", "port": coordinator} in [
        {"address": s["address"], "port": s["port"]} for s in chief_sockets
    ]
    assert len(chief_sockets) >= 2  # the coordinator's and Gloo's


def test_a_killed_jax_worker_stops_the_other_and_a_restart_resumes_exactly(
    in_step: tuple[Path, list[dict | None]], tmp_path: Path
) -> None:
    whole, unbroken = in_step  # the same call, never interrupted
    broken = tmp_path / "broken"
    backup = {
        **TRAIN,
        "heartbeat": HEARTBEAT,
        "out": str(broken),
        "backup_dir": str(broken / "backup"),
    }
    specs = cluster_specs(2, **backup)
    specs[1]["die_at"] = [1, 5]  # worker 1, in its second epoch
    results, codes = run_workers(tmp_path, specs)
    # JAX ends the survivor as it exits (its shutdown finds the cluster broken): none hangs.
    assert codes[1] == -signal.SIGKILL, codes
    assert codes[0] in (0, -signal.SIGABRT), codes
    survivor = results[0]
    assert survivor is not None, (tmp_path / "stderr-0.txt").read_text()[-3000:]
    answer = survivor["fit"]
    assert answer["r_class"] == "gpukeras_error_worker_lost", answer
    assert "Another worker was lost" in answer["message"]
    assert f"within {HEARTBEAT} s" in answer["message"]
    died = float((broken / "died-1").read_text())
    assert survivor["failed_at"] - died < HEARTBEAT + NOTICE_SLACK
    # The chief alone wrote the backup, into the shared folder: the end of the first epoch.
    assert json.loads((broken / "backup" / "gpukeras-backup.json").read_text())["epoch"] == 1

    # Every worker started again with the same call resumes from the chief's backup.
    restarted, codes = run_workers(tmp_path / "again", cluster_specs(2, **backup))
    assert codes == [0, 0], codes
    uninterrupted = fit_value(unbroken[0], whole / "stderr-0.txt")
    for index, result in enumerate(restarted):
        resumed = fit_value(result, tmp_path / "again" / f"stderr-{index}.txt")
        assert resumed["settings"]["resumed_from"] == {"epoch": 2, "batches_done": 0}
        assert resumed["history"] == uninterrupted["history"]
        for mine, theirs in zip(weights(broken, index), weights(whole, 0)):
            np.testing.assert_array_equal(mine, theirs)
    assert not (broken / "backup").exists()  # the chief removed it once training completed


# Checks before any cluster is joined ------------------------------------------------------
def test_workers_leave_together_so_a_chief_that_ends_first_ends_no_one(tmp_path: Path) -> None:
    # The chief leaves at once and ends with no Python exit handler run (as R ends); the
    # other worker is still busy for 3 s. The chief's leave waits for it at JAX's shutdown
    # barrier, so the coordination service outlives it and JAX ends no one (without it,
    # JAX ended the other worker with SIGABRT before it could leave).
    specs = cluster_specs(2, epochs=1, seed=5, batch_size=64, leave_after=3)
    _, codes = run_workers(tmp_path, specs)
    stderr = [(tmp_path / f"stderr-{i}.txt").read_text()[-2000:] for i in range(2)]
    assert codes == [-signal.SIGKILL] * 2, stderr
    left = [json.loads((tmp_path / f"left-{i}").read_text()) for i in range(2)]
    assert [entry["answer"]["value"] for entry in left] == [True, True]
    assert left[0]["at"] >= float((tmp_path / "leaving-1").read_text())


def test_leaving_without_a_cluster_does_nothing() -> None:
    assert not jax_cluster._joined
    assert jax_cluster.leave() is False


def test_join_checks_workers_and_index_before_starting_jax() -> None:
    for kwargs, r_class, says in (
        ({"workers": ["127.0.0.1:1"]}, "gpukeras_error_bad_argument", "together"),
        ({"workers": ["127.0.0.1"], "index": 0}, "gpukeras_error_bad_argument", "host:port"),
        ({"workers": ["a:1", "b:2"], "index": 2}, "gpukeras_error_bad_argument", "0 to 1"),
    ):
        answer = bridge.answer(bridge.function_at("distribute.jax_cluster:join"), kwargs)
        assert answer["r_class"] == r_class, answer
        assert says in answer["message"]
    assert not jax_cluster.multi_process()


def test_join_without_workers_needs_a_cluster_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("TF_CONFIG", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(StrategyError, match="neither TF_CONFIG nor a SLURM or Open MPI job"):
        jax_cluster.join()


def test_join_after_jax_started_says_to_call_gpu_strategy_first() -> None:
    run = run_on_jax(
        "import jax\n"
        "jax.devices()\n"
        "answer = bridge.call('strategy', {'type': 'multi_worker', "
        "'workers': ['127.0.0.1:1', '127.0.0.1:2'], 'index': 0})\n"
        "readback['answer'] = {k: answer.get(k) for k in ('ok', 'r_class', 'message')}\n"
    )
    answer = run.readback["answer"]
    assert answer["r_class"] == "gpukeras_error_runtime_started", answer
    assert "call gpu_strategy() first" in answer["message"]


def test_every_batch_must_be_the_whole_global_batch_across_workers() -> None:
    plan = strategies.StrategyPlan(type="multi_worker", backend="jax", engine="DataParallel",
                                       replicas=2)  # fmt: skip
    strategies.check_batch(plan, 64, 1792)  # 28 whole batches
    with pytest.raises(Exception, match="a last one of 32"):
        strategies.check_batch(plan, 64, 1760)
    with pytest.raises(Exception, match="multiple of 2"):
        strategies.check_batch(plan, 63, 63 * 4)
