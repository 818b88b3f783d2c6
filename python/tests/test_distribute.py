"""Strategies on one machine: MirroredStrategy (TensorFlow) and DataParallel (JAX) over 2
logical CPU devices, against one device, in a fresh process per backend."""

from __future__ import annotations

import pytest

from conftest import CoreRun, requires, run_setup
from gpukeras.core.errors import BadArgumentError
from gpukeras.distribute import strategies

# scripts/train_both_ways.py runs after gpu_setup(cpu_devices = 2) in the child.
# One model's initial weights trained twice, on one device and replicated on
# both logical CPUs, with the same global batch and the same batches in the
# same order: an unshuffled pipeline, because under a strategy Keras peeks at
# a batch through an extra iterator before training, which moves a shuffled
# dataset's epochs on by one pass (see gpukeras.distribute).


@pytest.fixture(scope="module", params=["tensorflow", "jax"])
def two_cpus(request: pytest.FixtureRequest) -> CoreRun:
    requires("tensorflow")  # the batches come from a gpu_dataset() (tf.data) on both backends
    return run_setup(request.param, {"cpu_devices": 2}, "import train_both_ways")


def _backend(run: CoreRun) -> str:
    return run.readback["plan"]["backend"]


def test_mirrored_over_two_logical_cpus_describes_itself(two_cpus: CoreRun) -> None:
    plan = two_cpus.readback["plan"]
    engine = "MirroredStrategy" if _backend(two_cpus) == "tensorflow" else "DataParallel"
    assert plan["engine"] == engine
    assert plan["type"] == "mirrored"
    assert plan["replicas"] == 2
    assert plan["devices"] == ["CPU:0", "CPU:1"]
    assert plan["is_chief"] is True


def test_settings_say_which_batch_is_global_and_which_per_replica(two_cpus: CoreRun) -> None:
    settings = two_cpus.readback["settings"]
    assert settings["global_batch_size"] == 32
    assert settings["per_replica_batch_size"] == 16
    assert settings["replicas"] == 2


def test_two_replicas_match_one_device_for_the_same_global_batch(two_cpus: CoreRun) -> None:
    readback = two_cpus.readback
    assert readback["moved"] > 1e-3  # training did change the user's model
    assert readback["max_diff"] < 1e-5
    assert readback["loss_two"] == pytest.approx(readback["loss_one"], rel=1e-5)
    assert readback["loss_two"][-1] < readback["loss_two"][0]
    first, second = readback["shuffled_repeat"]
    assert first == second
    # The copy's optimizer state came back too: 3 epochs of 8 steps.
    assert readback["iterations"] == 24


def test_a_model_built_in_the_scope_is_trained_as_it_is(two_cpus: CoreRun) -> None:
    assert two_cpus.readback["inside_in_scope"] is (_backend(two_cpus) == "tensorflow")
    assert two_cpus.readback["inside_diff"] < 1e-5


def test_auto_one_device_and_named_devices(two_cpus: CoreRun) -> None:
    readback = two_cpus.readback
    assert readback["one_device"]["type"] == "one_device"
    assert readback["one_device"]["devices"] == ["CPU:0"]
    # No GPU: auto is one device; naming several devices makes it mirrored.
    assert readback["auto"]["type"] == "one_device"
    assert readback["named"]["type"] == "mirrored"
    assert sorted(readback["named"]["devices"]) == ["CPU:0", "CPU:1"]


def test_bad_strategy_arguments_are_classed(two_cpus: CoreRun) -> None:
    readback = two_cpus.readback
    assert readback["unknown"]["r_class"] == "gpukeras_error_unknown_device"
    assert readback["unknown"]["message"].startswith("No such device: CPU:7. Devices here:")
    assert readback["two_for_one"]["r_class"] == "gpukeras_error_bad_argument"
    assert "takes one device, not 2" in readback["two_for_one"]["message"]
    assert readback["workers_for_mirrored"]["r_class"] == "gpukeras_error_bad_argument"


def test_jax_needs_batches_that_split_evenly(two_cpus: CoreRun) -> None:
    uneven = two_cpus.readback["uneven"]
    if _backend(two_cpus) == "tensorflow":
        assert uneven["ok"], uneven  # tf.distribute splits a last batch of 25 itself
        return
    assert uneven["r_class"] == "gpukeras_error_bad_argument"
    assert "a last one of 25 rows" in uneven["message"]


def test_an_object_that_is_no_strategy_is_refused() -> None:
    with pytest.raises(BadArgumentError, match="strategy must come from gpu_strategy"):
        strategies.kind_of(object())


def test_check_batch_rules() -> None:
    jax_two = strategies.StrategyPlan("mirrored", "jax", "DataParallel", 2)
    strategies.check_batch(jax_two, 32, 256)
    with pytest.raises(BadArgumentError, match="batch_size 33 gives batches of 33 and a last"):
        strategies.check_batch(jax_two, 33, 256)
    with pytest.raises(BadArgumentError, match="a last one of 25 rows"):
        strategies.check_batch(jax_two, 32, 249)
    tf_two = strategies.StrategyPlan("mirrored", "tensorflow", "MirroredStrategy", 2)
    strategies.check_batch(tf_two, 33, 249)  # tf.distribute splits uneven batches


def test_a_strategy_prints_its_replicas_devices_and_for_multi_worker_its_cluster() -> None:
    one = strategies.StrategyPlan("one_device", "jax", "DataParallel", 1, devices=["CPU:0"])
    assert strategies.plan_lines(one) == [
        "<gpukeras strategy> one_device (DataParallel, jax): 1 replica",
        "Devices: CPU:0",
    ]
    network = {"reach": "only these workers", "firewall": ["iptables -A ...", "iptables -A ..."]}
    worker = strategies.StrategyPlan(
        "multi_worker", "tensorflow", "MultiWorkerMirroredStrategy", 2,
        workers=["a:1", "b:2"], index=1, is_chief=False, found_by="TF_CONFIG", network=network,
    )  # fmt: skip
    assert strategies.plan_lines(worker) == [
        "<gpukeras strategy> multi_worker (MultiWorkerMirroredStrategy, tensorflow): 2 replicas",
        "Workers: a:1, b:2; this is worker 1",
        "Cluster from: TF_CONFIG",
        "Who can reach its ports: only these workers",
        "Firewall rules that let only the workers in (run as root on this machine):",
        "  iptables -A ...",
        "  iptables -A ...",
    ]
