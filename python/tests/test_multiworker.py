"""Multi-worker training: real worker processes on 127.0.0.1 train the digits model together.

Each cluster test starts ``scripts/multiworker_worker.py`` processes (TensorFlow backend,
free ports, every process killed and the test failed past its time limit) in a
private network of their own, as gpu_launch() does (TensorFlow's servers listen on
every interface: see gpukeras.distribute.network), and reads back what each wrote: the
bridge's answer, its final weights, when it failed, and the sockets it listened
on, none of which another host may reach. The workers use TensorFlow whatever
this process runs on, so they skip only where TensorFlow is not installed;
argument checks run in this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import child_pythonpath, in_process_backend, requires, run_core
from gpukeras import bridge
from gpukeras.core.errors import StrategyError
from gpukeras.distribute import cluster
from private_network import private_network
from scripts.sockets import reachable_from_other_hosts

pytestmark = pytest.mark.slow  # several worker processes

WORKER = Path(__file__).with_name("scripts") / "multiworker_worker.py"
LIMIT = 150  # seconds a cluster may take before its processes are killed
HEARTBEAT = 4.0  # the heartbeat timeout of the freeze test
# Slack on top of the heartbeat timeout for a frozen worker to be noticed (measured:
# 2.7 and 5.1 s with a 4 s timeout) and for a busy 2-core machine.
NOTICE_SLACK = 8.0
EPOCHS = 4


def free_ports(count: int) -> list[int]:
    """Ports nothing listens on now (TensorFlow listens on all interfaces)."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_cluster(
    out: Path,
    ports: list[int],
    specs: list[dict],
    freeze_wait: bool = False,
    private: bool = True,
) -> list[dict]:
    """Run one worker per spec and return what each wrote (by index).

    A spec is worker ``index`` = its position of the cluster on ``ports``
    unless it names its own ``workers`` and ``index``. Every process must end
    within LIMIT; a worker frozen by SIGSTOP is killed once the others have
    ended (``freeze_wait``). The workers share a private network, unless not
    ``private``; either way, no socket of theirs may be reachable from another host.
    """
    with private_network() if private else contextlib.nullcontext([]) as prefix:
        results = _run_cluster(out, ports, specs, freeze_wait, prefix)
    for index, result in enumerate(results):
        if result is not None:
            assert not reachable_from_other_hosts(result["sockets"]), (index, result["sockets"])
    return results


def _run_cluster(
    out: Path, ports: list[int], specs: list[dict], freeze_wait: bool, prefix: list[str]
) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    workers = [f"127.0.0.1:{port}" for port in ports]
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "KERAS_BACKEND": "tensorflow"}
    processes = []
    for index, spec in enumerate(specs):
        full = {"workers": workers, "index": index, "out": str(out), **spec}
        processes.append(
            subprocess.Popen(
                [*prefix, sys.executable, str(WORKER), json.dumps(full)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=(out / f"stderr-{index}.txt").open("w"),
            )
        )
    deadline = time.monotonic() + LIMIT
    try:
        for index, process in enumerate(processes):
            if freeze_wait and specs[index].get("signal") == "SIGSTOP":
                continue
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
            assert process.returncode in (0, -signal.SIGKILL), (
                f"worker {index} exited with {process.returncode}:\n"
                + (out / f"stderr-{index}.txt").read_text()[-3000:]
            )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the cluster did not finish within {LIMIT} s")
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    results = []
    for index in range(len(specs)):
        path = out / f"result-{index}.json"
        results.append(json.loads(path.read_text()) if path.exists() else None)
    return results


def fit_value(result: dict) -> dict:
    answer = result["fit"]
    assert answer["ok"], answer
    return answer["value"]


def weights(out: Path, index: int) -> list[np.ndarray]:
    with np.load(out / f"weights-{index}.npz") as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def needs_tensorflow() -> None:
    requires("tensorflow")


# Argument checks (no cluster) ----------------------------------------------------------
def test_tf_config_names_every_worker_and_this_one() -> None:
    assert cluster.tf_config(["10.0.0.1:2222", "node-b.local:2222"], 1.0) == {  # type: ignore[arg-type]
        "cluster": {"worker": ["10.0.0.1:2222", "node-b.local:2222"]},
        "task": {"type": "worker", "index": 1},
    }
    # An R character vector of length one arrives as a string.
    assert cluster.tf_config("[::1]:2222", 0)["cluster"]["worker"] == ["[::1]:2222"]  # type: ignore[arg-type,index]


@pytest.mark.parametrize(
    ("workers", "index", "says"),
    [
        (["10.0.0.1"], 0, "host:port"),
        (["10.0.0.1:0"], 0, "host:port"),
        (["10.0.0.1:70000"], 0, "host:port"),
        (["a:1", 5], 0, "host:port"),
        ([], 0, "every worker"),
        (["a:1", "a:1"], 0, "more than once"),
        (["a:1", "b:1"], 2, "0 to 1"),
        (["a:1", "b:1"], 0.5, "whole number"),
        (["a:1", "b:1"], -1, "whole number"),
    ],
)
def test_tf_config_refuses_bad_workers_and_index(workers: object, index: object, says: str) -> None:
    answer = bridge.answer(
        bridge.function_at("distribute.cluster:tf_config"), {"workers": workers, "index": index}
    )
    assert not answer["ok"]
    assert answer["r_class"] == "gpukeras_error_bad_argument"
    assert says in answer["message"]
    assert answer["traceback"] is None


@pytest.mark.parametrize(
    ("tf_config", "says"),
    [
        (None, "neither TF_CONFIG nor a SLURM or Open MPI job"),
        ("{not json", "cannot be read"),
        ('{"cluster": {"worker": ["a:1"]}}', "cannot be read"),
        (
            '{"cluster": {"worker": ["a:1"], "evaluator": ["b:1"]}, '
            '"task": {"type": "worker", "index": 0}}',
            "chief and worker tasks only",
        ),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}', "worker 3"),
    ],
)
def test_an_existing_tf_config_is_checked(
    monkeypatch: pytest.MonkeyPatch, tf_config: str | None, says: str
) -> None:
    for name in ("TF_CONFIG", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    if tf_config is not None:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(StrategyError, match=says):
        cluster._from_environment()


def test_an_existing_tf_config_with_a_chief_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "TF_CONFIG",
        '{"cluster": {"chief": ["c:1"], "worker": ["w:1", "w:2"]}, '
        '"task": {"type": "worker", "index": 1}}',
    )
    read, found_by = cluster._from_environment()
    assert found_by == "TF_CONFIG"
    assert cluster._addresses(read) == ["c:1", "w:1", "w:2"]
    assert cluster._leader(read) == "c:1"
    assert cluster._own_address(read) == "w:2"


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"workers": ["a:1"]}, "together"),
        ({"workers": ["a:1"], "index": 0, "start_timeout_seconds": 0}, "positive"),
        ({"workers": ["a:1"], "index": 0, "heartbeat_timeout_seconds": None}, "positive"),
    ],
)
def test_make_strategy_checks_its_arguments_first(kwargs: dict, says: str) -> None:
    in_process_backend("tensorflow")  # elsewhere the backend is refused first
    answer = bridge.answer(bridge.function_at("distribute.cluster:make_strategy"), kwargs)
    assert answer["r_class"] == "gpukeras_error_bad_argument", answer
    assert says in answer["message"]


def test_multi_worker_needs_tensorflow() -> None:
    requires("jax")
    run = run_core(
        "distribute.cluster:make_strategy",
        {"workers": ["127.0.0.1:1", "127.0.0.1:2"], "index": 0},
        env={"KERAS_BACKEND": "jax"},
    )
    assert run.result["r_class"] == "gpukeras_error_bad_argument"
    assert "needs the TensorFlow backend" in run.result["message"]
    assert "tensorflow" not in run.loaded


def test_made_after_tensorflow_started_says_restart() -> None:
    needs_tensorflow()
    run = run_core(
        "distribute.cluster:make_strategy",
        {"workers": [f"127.0.0.1:{port}" for port in free_ports(2)], "index": 0},
        env={"KERAS_BACKEND": "tensorflow"},
        setup="import tensorflow as tf; tf.constant(1.0) + 1",
    )
    assert run.result["r_class"] == "gpukeras_error_runtime_started"
    assert "Restart R and call gpu_strategy() first" in run.result["message"]


# Clusters ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """Two workers train EPOCHS epochs on the digits, with validation and a backup_dir.

    Each builds its model outside the strategy's scope, from its own seed (1 + index):
    fit copies it into the scope and starts both from the chief's weights.
    """
    needs_tensorflow()
    out = tmp_path_factory.mktemp("trained")
    spec = {
        "epochs": EPOCHS, "seed": 1, "validation": True, "backup_dir": str(out / "backup"),
        "outside": True,
    }  # fmt: skip
    return out, run_cluster(out, free_ports(2), [spec, spec])


def test_two_workers_train_in_step(trained: tuple[Path, list[dict]]) -> None:
    out, results = trained
    chief, other = (fit_value(result) for result in results)
    assert chief["history"] == other["history"]  # the cluster's epoch logs, on both
    history = chief["history"]
    assert history["epoch"] == list(range(1, EPOCHS + 1))
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    assert history["val_accuracy"][-1] > 0.85
    # The same weights, though the workers' models started from different ones (and these
    # are the user's models: the trained weights were copied back).
    for got, want in zip(weights(out, 1), weights(out, 0)):
        np.testing.assert_array_equal(got, want)
    assert [r["describe"]["is_chief"] for r in results] == [True, False]
    assert [r["describe"]["index"] for r in results] == [0, 1]
    for index, value in enumerate((chief, other)):
        settings = value["settings"]
        assert settings["strategy"]["type"] == "multi_worker"
        assert settings["strategy"]["replicas"] == 2
        assert settings["strategy"]["index"] == index
        assert settings["strategy"]["global_batch_size"] == 64
        assert settings["strategy"]["per_replica_batch_size"] == 32
        assert settings["steps_per_epoch"] == 28
        assert settings["auto_shard_policy"] == "DATA"
        assert settings["resumed_from"] is None
    assert not (out / "backup").exists()  # the chief removes its backup when training completes


def test_the_monitor_reports_every_worker(trained: tuple[Path, list[dict]]) -> None:
    _, results = trained
    reports = [fit_value(result)["monitor"] for result in results]
    assert reports[0]["workers"] == reports[1]["workers"]
    workers = reports[0]["workers"]
    assert workers["index"] == [0, 1]
    for index, report in enumerate(reports):
        assert report["step_time_mean_ms"] == workers["step_time_mean_ms"][index]
        # 28 steps per epoch; the first 2 are left out (tracing)
        assert report["steps_timed"] == EPOCHS * 28 - 2
        assert 0 <= report["input_wait_share"] < 1
        assert not any("steps_per_execution" in item for item in report["advice"])
    assert workers["samples_per_second_total"] == pytest.approx(sum(workers["samples_per_second"]))
    # Synchronous steps: every worker waits for the slowest, so the means agree closely.
    assert 0 <= workers["step_time_skew"] < 0.5


def test_two_workers_match_one_process(trained: tuple[Path, list[dict]]) -> None:
    """The global batch is averaged once: gpu_fit() without a strategy on the same batches
    (same seed, so the same order) ends with the same weights."""
    in_process_backend("tensorflow")
    from gpukeras.core.runtime import config
    from scripts.multiworker_worker import digits, digits_model

    out, results = trained
    keras = config.keras()
    x, y = digits()
    keras.utils.set_random_seed(1)
    model = digits_model(keras)
    answer = bridge.call(
        "fit",
        {"model": model, "data": (x, y), "epochs": EPOCHS, "batch_size": 64, "seed": 1,
         "verbose": 0, "monitor": False},
    )  # fmt: skip
    assert answer["ok"], answer
    np.testing.assert_allclose(
        answer["value"]["history"]["loss"], fit_value(results[0])["history"]["loss"], rtol=1e-5
    )
    for got, want in zip(weights(out, 0), (w.numpy() for w in model.weights)):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_two_workers_weigh_classes_as_one_process(tmp_path: Path) -> None:
    """class_weight under multi-worker training: Keras' map on the sharded pipeline gives the
    weights one process gives (which test_weights.py compares with Keras' own fit())."""
    in_process_backend("tensorflow")
    from gpukeras.core.runtime import config
    from scripts.multiworker_worker import digits, digits_model

    class_weight = {0: 5.0, 3: 0.2}
    spec = {"epochs": 2, "seed": 1, "class_weight": class_weight}
    results = run_cluster(tmp_path, free_ports(2), [spec, spec])
    assert results[0]["fit"]["ok"], results[0]["fit"]
    keras = config.keras()
    x, y = digits()
    trained = {}
    for name, weights_given in (("weighted", class_weight), ("plain", None)):
        keras.utils.set_random_seed(1)
        model = digits_model(keras)
        answer = bridge.call(
            "fit",
            {"model": model, "data": (x, y), "epochs": 2, "batch_size": 64, "seed": 1,
             "verbose": 0, "monitor": False, "class_weight": weights_given},
        )  # fmt: skip
        assert answer["ok"], answer
        trained[name] = [w.numpy() for w in model.weights]
    for got, want in zip(weights(tmp_path, 0), trained["weighted"]):
        np.testing.assert_allclose(got, want, atol=1e-5)
    apart = max(float(np.abs(a - b).max()) for a, b in zip(trained["weighted"], trained["plain"]))
    assert apart > 1e-3


def test_a_killed_worker_stops_the_other_and_both_resume(
    trained: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    uninterrupted, _ = trained
    ports = free_ports(2)
    spec = {"epochs": EPOCHS, "seed": 1, "backup_dir": str(tmp_path / "backup")}
    results = run_cluster(tmp_path / "killed", ports, [spec, {**spec, "die_at": [2, 5]}])
    assert results[1] is None  # SIGKILLed in epoch 3
    answer = results[0]["fit"]
    assert answer["r_class"] == "gpukeras_error_worker_lost", answer
    assert "worker 1" in answer["message"]
    assert "holds 2 finished epoch(s)" in answer["message"]
    died = float((tmp_path / "killed" / "died-1").read_text())
    assert results[0]["failed_at"] - died < HEARTBEAT + NOTICE_SLACK

    # Both start again (the same ports, the same call) and continue from epoch 3.
    results = run_cluster(tmp_path / "resumed", ports, [spec, spec])
    chief, other = (fit_value(result) for result in results)
    assert chief["settings"]["resumed_from"] == {"epoch": 3, "batches_done": 0}
    assert chief["history"] == other["history"]
    assert chief["history"]["epoch"] == list(range(1, EPOCHS + 1))
    for index in (0, 1):
        for got, want in zip(weights(tmp_path / "resumed", index), weights(uninterrupted, 0)):
            np.testing.assert_array_equal(got, want)  # as if never interrupted


def test_a_frozen_worker_is_noticed_within_the_heartbeat_timeout(tmp_path: Path) -> None:
    """SIGSTOP: the process keeps its connections but sends no heartbeats (a machine that
    drops off the network)."""
    needs_tensorflow()
    spec = {"epochs": 3, "seed": 1, "heartbeat": HEARTBEAT}
    frozen = {**spec, "die_at": [1, 3], "signal": "SIGSTOP"}
    results = run_cluster(tmp_path, free_ports(2), [spec, frozen], freeze_wait=True)
    answer = results[0]["fit"]
    assert answer["r_class"] == "gpukeras_error_worker_lost", answer
    assert "worker 1 stopped sending heartbeats" in answer["message"]
    assert "Nothing was kept" in answer["message"]
    elapsed = results[0]["failed_at"] - float((tmp_path / "died-1").read_text())
    # Not at once (its connections stay open), and by the timeout after its last heartbeat.
    assert 1 < elapsed < HEARTBEAT + NOTICE_SLACK


def test_a_failing_worker_stops_the_others_at_once(tmp_path: Path) -> None:
    needs_tensorflow()
    spec = {"epochs": 3, "seed": 1}
    results = run_cluster(tmp_path, free_ports(2), [spec, {**spec, "fail_at": [1, 3]}])
    failing, other = results[1], results[0]
    assert "breaks on purpose" in failing["fit"]["message"]
    answer = other["fit"]
    assert answer["r_class"] == "gpukeras_error_worker_lost", answer
    assert (
        "worker 1 failed at epoch 2, batch 4 (ValueError: worker 1 breaks on purpose)"
        in (answer["message"])
    )
    assert other["failed_at"] - failing["failed_at"] < 5


def test_workers_called_differently_all_stop(tmp_path: Path) -> None:
    needs_tensorflow()
    results = run_cluster(tmp_path, free_ports(2), [{"epochs": 2}, {"epochs": 3}])
    # Every worker stops with a classed error, and at least one says why. The others may
    # say so too, or, on a busy machine, find that worker gone first (it stopped once it
    # had the others' settings): both tell the user to look at it.
    classes = [result["fit"]["r_class"] for result in results]
    assert set(classes) <= {"gpukeras_error_strategy", "gpukeras_error_worker_lost"}, results
    said = [
        result
        for result in results
        if result["fit"]["r_class"] == "gpukeras_error_strategy"
        and "epochs: worker 0 2, worker 1 3" in result["fit"]["message"]
    ]
    assert said, results


def test_workers_in_a_private_network_listen_where_only_they_reach(
    trained: tuple[Path, list[dict]],
) -> None:
    _, results = trained
    for result in results:
        assert result["sockets"], "TensorFlow's server should listen"
        assert all(s["private"] for s in result["sockets"]), result["sockets"]
        assert result["describe"]["network"]["reach"].startswith("only these workers")
        assert result["describe"]["network"]["firewall"] == []


def exposed_here() -> None:
    from gpukeras.distribute import network

    if network.private():
        pytest.skip("this machine's network has loopback alone")


def test_workers_on_loopback_outside_a_private_network_are_refused_before_listening(
    tmp_path: Path,
) -> None:
    needs_tensorflow()
    exposed_here()
    results = run_cluster(tmp_path, free_ports(2), [{"epochs": 1}] * 2, private=False)
    for result in results:
        assert result["joined"]["r_class"] == "gpukeras_error_network_exposed", result
        assert "gpu_launch()" in result["joined"]["message"]
        assert result["sockets"] == []


def test_a_trusted_network_is_what_the_print_says_it_is(tmp_path: Path) -> None:
    """With the user's word, TensorFlow listens on every interface, as describe() warns."""
    needs_tensorflow()
    exposed_here()
    port = free_ports(1)[0]
    (result,) = _run_cluster(
        tmp_path, [port], [{"epochs": 1, "trusted_network": True}], freeze_wait=False, prefix=[]
    )
    assert result["fit"]["ok"], result
    ours = [s for s in result["sockets"] if s["port"] == port]
    assert ours and reachable_from_other_hosts(ours), result["sockets"]
    told = result["describe"]["network"]
    assert f"port {port} of every interface" in told["reach"]
    assert told["firewall"] == [f"iptables -A INPUT -p tcp --dport {port} ! -i lo -j DROP"]


def test_a_worker_alone_gives_up_after_the_start_timeout(tmp_path: Path) -> None:
    """The chief waits for the others' ports; another worker for the chief, in TensorFlow.
    Two clusters, each with one worker missing, side by side."""
    needs_tensorflow()
    chief_cluster, other_cluster = free_ports(2), free_ports(2)
    other = [f"127.0.0.1:{port}" for port in other_cluster]
    spec = {"epochs": 1, "start_timeout": 2}
    results = run_cluster(tmp_path, chief_cluster, [spec, {**spec, "workers": other, "index": 1}])
    chief, worker = (result["joined"] for result in results)
    assert chief["r_class"] == "gpukeras_error_strategy"
    assert f"127.0.0.1:{chief_cluster[1]} did not answer" in chief["message"]
    assert worker["r_class"] == "gpukeras_error_strategy"
    assert f"could not reach the chief ({other[0]})" in worker["message"]


def test_one_worker_checks_fit_arguments(tmp_path: Path) -> None:
    needs_tensorflow()
    (result,) = run_cluster(tmp_path, free_ports(1), [{"epochs": 1, "checks": True}])
    checks = result["checks"]
    for name in ("trains", "unknown length"):
        assert checks[name]["ok"], checks[name]
        assert checks[name]["value"]["epoch"] == [1]
    assert checks["same cluster"]["value"] is True
    expected = {
        "other cluster": "gpukeras_error_runtime_started",
        "not multi-worker": "gpukeras_error_bad_argument",
        "backup callback": "gpukeras_error_bad_argument",
        "mid-epoch backup": "gpukeras_error_backup_mismatch",
        "text data": "gpukeras_error_bad_data",
    }
    for name, r_class in expected.items():
        assert checks[name]["r_class"] == r_class, (name, checks[name])
        assert checks[name]["traceback"] is None
