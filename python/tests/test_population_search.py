"""gpu_search()'s trials as populations (search/search_population.py) on a real SQLite study:
each trial's objective the same as a gpu_fit() of its parameters alone with its seed, trials
of two shapes in two groups, a pruned member and a member whose loss turns NaN stopped alone,
a batch that does not fit the memory split, a later batch of the same shapes compiling nothing.

The training runs once, ``scripts/population_search.py`` in a fresh Python on the JAX
backend; each test reads its part.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_jax_script

SCRIPT = Path(__file__).with_name("scripts") / "population_search.py"


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("population-search")
    return run_jax_script(SCRIPT, {"folder": str(folder)}, timeout=400)


@pytest.mark.slow
def test_each_trials_objective_is_a_fit_of_its_parameters_alone(result: dict) -> None:
    shapes = result["shapes"]
    assert shapes["states"] == ["complete"] * 4
    assert shapes["values"] == pytest.approx(shapes["refit"], abs=1e-5)
    # the members shared nothing: each trial's objective is its own
    assert len(set(shapes["values"])) == 4
    # only the model that may be the study's best is saved: the lowest val_loss
    best = shapes["values"].index(min(shapes["values"]))
    assert shapes["save"] == [i == best for i in range(4)]


@pytest.mark.slow
def test_trials_of_two_shapes_train_as_two_groups(result: dict) -> None:
    # units 8, 16, 8, 16: the searched units change the variables' shapes
    assert result["shapes"]["groups"] == [[0, 2], [1, 3]]


@pytest.mark.slow
def test_members_train_the_epochs_their_trials_drew(result: dict) -> None:
    own = result["epochs"]
    assert own["groups"] == [[0, 1, 2]]  # one population
    assert own["epochs"] == [1, 3, 2]
    assert own["trained"] == [1, 3, 2]
    assert own["values"] == pytest.approx(own["refit"], abs=1e-5)


@pytest.mark.slow
def test_a_pruned_member_stops_without_stopping_the_others(result: dict) -> None:
    stopped = result["stopped"]
    assert stopped["groups"] == [[0, 1, 2]]  # one population
    assert stopped["states"][:2] == ["pruned", "complete"]
    assert stopped["epochs"][:2] == [1, 3]
    # the worker told the pruned trial at once; the others the session told after the batch
    assert stopped["stored"][:2] == ["PRUNED", "RUNNING"]
    assert stopped["devices"][:2] == ["CPU", None]
    # the member that went on trained as if alone
    assert stopped["values"][1] == pytest.approx(stopped["refit"], abs=1e-5)


@pytest.mark.slow
def test_a_member_whose_loss_turns_nan_fails_alone(result: dict) -> None:
    stopped = result["stopped"]
    assert stopped["states"][2] == "failed"
    assert stopped["reasons"][2] == "its loss was nan at epoch 1"
    assert stopped["epochs"][2] == 1
    assert stopped["states"][1] == "complete"
    # neither the pruned nor the failed member's model is saved
    assert stopped["save"] == [False, True, False]


@pytest.mark.slow
def test_a_batch_that_does_not_fit_the_memory_is_split_not_lost(result: dict) -> None:
    split = result["split"]
    assert split["groups"] == [[0], [1], [2]]
    assert split["states"] == ["complete"] * 3


@pytest.mark.slow
def test_a_later_batch_of_the_same_shapes_compiles_nothing(result: dict) -> None:
    compiled = result["compiled"]
    # the second batch's 2 trials train as the first's 4 members (padded, held copies)
    assert compiled["widths"] == [[4], [4]]
    assert compiled["misses"][0] > 0
    assert compiled["misses"][1] == 0  # every program found in the compilation cache
    assert compiled["states"] == ["complete"] * 2
    # the padding shares nothing with the trials: each is its parameters' fit alone
    assert compiled["values"] == pytest.approx(compiled["refit"], abs=1e-5)
