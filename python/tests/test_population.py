"""gpu_cv()'s folds as one population (gpukeras.train.population, tools/cv_population.py):
each fold the same as a separate gpu_fit() of its rows with its seed, folds of unequal size
exact, and the cases that train a process per fold instead.

The training runs are ``scripts/population_cv.py`` in a fresh Python on the JAX backend.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import run_jax_script
from gpukeras.tools import cv_population

SCRIPT = Path(__file__).with_name("scripts") / "population_cv.py"


def run(spec: dict, script: Path) -> dict:
    return run_jax_script(script, spec)


@pytest.fixture(scope="module")
def folds() -> dict:
    """The cv_population runs, in one child: the folds trained as a population against
    their separate fits, and the two cases that train a process per fold instead (folds of
    another architecture, members that do not fit the memory)."""
    # 1037 rows in 3 folds: 691, 691 and 692 training rows, so last batches of 51 and 52
    # rows (two sizes, each its own step); dropout draws from each member's seed generator;
    # every row has a sample weight
    spec = {"rows": 1037, "folds": 3, "batch_size": 64, "epochs": 3, "dropout": True}
    together, other, unfit = run_jax_script(
        SCRIPT,
        [
            {**spec, "learning_rate": 0.01, "sample_weight": True},
            {"rows": 300, "folds": 3, "batch_size": 32, "epochs": 1, "other_units": True},
            {"rows": 300, "folds": 2, "batch_size": 32, "epochs": 1, "memory_share": 1e-12},
        ],
        timeout=400,  # the three runs' time, with room on a busy machine
    )
    return {"population": together, "other_units": other, "memory_share": unfit}


@pytest.mark.slow
def test_each_member_trains_as_a_separate_fit_of_its_fold(folds: dict) -> None:
    result = folds["population"]
    population, separate = result["population"], result["separate"]
    assert population["trained"] == "population"
    assert result["built"] == 1  # one model for the 3 folds
    assert len(population["folds"]) == 3
    for member, fit in zip(population["folds"], separate):
        assert fit["data"] == "device arrays"  # the separate fit trained on the device too
        assert set(member["history"]) == set(fit["history"])
        assert {"val_loss", "val_accuracy"} <= set(member["history"])
        for name, values in fit["history"].items():
            np.testing.assert_allclose(member["history"][name], values, atol=1e-5, err_msg=name)
        for name, value in fit["metrics"].items():
            assert member["metrics"][name] == pytest.approx(value, abs=1e-5), name
        np.testing.assert_allclose(member["predictions"], fit["predictions"], atol=1e-5)
    # the members shared nothing: each fold's scores are its own
    assert len({member["metrics"]["loss"] for member in population["folds"]}) == 3


@pytest.mark.slow
def test_models_of_another_architecture_train_a_process_each(folds: dict) -> None:
    population = folds["other_units"]["population"]
    assert population["trained"] == "processes"
    assert "model 3's variables differ" in population["reason"]
    assert "folds" not in population


@pytest.mark.slow
def test_members_that_do_not_fit_the_memory_train_a_process_each(folds: dict) -> None:
    population = folds["memory_share"]["population"]
    assert population["trained"] == "processes"
    assert "2 members need about" in population["reason"]
    assert "of the device's free" in population["reason"]


@pytest.mark.slow
def test_members_starting_states_are_drawn_from_one_model_as_their_own_models_start() -> None:
    found = run({}, Path(__file__).with_name("scripts") / "population_starts.py")
    # each member's weights, seed generators' states, optimizer (its own learning rate) and
    # metrics: those of its own model made after its seed, value for value, type for type
    for kind in ("mlp", "built_later", "seeded"):
        assert found[kind]["equal"] == [True, True, True], kind
    # each member its own draw of a kernel (a bias starts at 0), but of a seeded one the same
    assert found["mlp"]["differ"] == [True, False, False, False, True, False]
    assert found["built_later"]["differ"] == [True, False, True, False]
    assert found["seeded"]["differ"] == [False, False, True, False]
    refused = found["lstm"]["reason"]
    assert "lstm_cell/bias's starting value is not its layer's initializer's" in refused


MEMBERS = Path(__file__).with_name("scripts") / "population_members.py"


def largest_difference(a: list, b: list) -> float:
    return max(float(np.max(np.abs(np.array(u) - np.array(v)))) for u, v in zip(a, b))


@pytest.mark.slow
def test_members_have_their_own_learning_rates_and_a_stopped_one_keeps_its_weights() -> None:
    result = run({"rows": 203, "batch_size": 16, "epochs": 3}, MEMBERS)
    # learning rates 0.001, 0.01, 0.05 (optimizer variables), rows of unequal counts: each
    # member ends with the weights of gpu_fit() of its rows with its seed and rate
    for whole, separate in zip(result["whole"], result["separate"]):
        assert largest_difference(whole, separate) <= 1e-5
    stopped = result["stopped"]
    # member 1 stopped after the first epoch: its weights stay; the others train on as if
    # nothing happened, their epochs numbered on from the first call
    assert largest_difference(stopped["weights"][1], stopped["after_first"][1]) == 0.0
    for i in (0, 2):
        assert largest_difference(stopped["weights"][i], result["whole"][i]) <= 1e-6
    assert stopped["epochs"] == [[2, 3], [], [2, 3]]
    # orders drawn on the device (as on a GPU): each member's rows in EpochOrder's order
    assert result["device_rows"] is True


def test_the_core_decides_whether_to_try_a_population() -> None:
    plan = cv_population.plan
    assert plan("auto", ["epochs", "batch_size"], backend="jax")["population"] is True
    assert plan("auto", "learning_rate", 0.01, backend="jax")["population"] is True
    off = plan(False, backend="jax")
    assert off["population"] is False
    assert "population = FALSE" in off["reason"]
    assert "runs on tensorflow" in plan("auto", backend="tensorflow")["reason"]
    other = plan("auto", ["epochs", "class_weight"], backend="jax")
    assert other["population"] is False
    assert "class_weight" in other["reason"]
    schedule = plan("auto", ["learning_rate"], {"type": "exponential"}, backend="jax")
    assert "schedule" in schedule["reason"]
    assert plan("auto", tracking=True, backend="jax")["population"] is False
    trials = plan("auto", ["epochs", "learning_rate"], backend="jax", kind="trials")
    assert trials["population"] is True
    assert "trials train in batches" in trials["reason"]
    tracked = plan("auto", tracking=True, backend="jax", kind="trials")["reason"]
    assert tracked == "each tracked trial is a run of its own fit"
    with pytest.raises(Exception, match="population must be"):
        plan("sometimes", backend="jax")


def test_a_small_models_population_compiles_without_gemm_autotuning_on_a_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jax

    from gpukeras.core.runtime import config
    from gpukeras.gpu.simulated import VARIABLE
    from gpukeras.train import population

    keras = config.keras()

    def mlp(units: int) -> object:
        return keras.Sequential(
            [keras.Input((20,)), keras.layers.Dense(units), keras.layers.Dense(2)]
        )

    small, large = mlp(128), mlp(60_000)  # 2,946 and 1,380,002 parameters
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setenv(VARIABLE, "true")  # the "auto" rules decide as on a GPU
    assert population.compile_options(jax, small) == population.SMALL_MODEL_OPTIONS
    assert population.compile_options(jax, large) == {}  # its steps may gain from them
    # the user's own XLA flags win
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=4")
    assert population.compile_options(jax, small) == {"xla_gpu_enable_triton_gemm": False}
    monkeypatch.setenv(VARIABLE, "false")  # on this machine's CPU: XLA's defaults
    assert population.compile_options(jax, small) == {}
