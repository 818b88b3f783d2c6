"""The data's walk through the core stays short (issue #34's goal, kept by issue #63).

``bench/data_walk.py`` follows gpu_fit()'s data through the core's own calls, from the entry
point to Keras' training loop, in a fresh Python per scenario, and counts the stays (runs of
calls in one file), the files and how often each file is entered. The goal is structural, not
a timing: every fit scenario, and gpu_tune()'s walk to its first trial, within ``GOAL`` (at
most 20 stays, 10 files, no file entered more than twice). A change that sends the data
back into a file it has left (a helper of train/fit.py handed the adapter between two calls
of train/resident.py, a second look at the data in tools/tune.py) fails here, with the walk
in the message.

The multi-worker scenario is the bench's alone: its loop is another entry point, outside the
goal (the bench reports it).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import requires

ROOT = Path(__file__).resolve().parents[2]


def data_walk() -> ModuleType:
    """bench/data_walk.py as a module (its scenarios run in child processes of their own)."""
    if "data_walk" not in sys.modules:
        spec = importlib.util.spec_from_file_location("data_walk", ROOT / "bench" / "data_walk.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["data_walk"] = module
        spec.loader.exec_module(module)
    return sys.modules["data_walk"]


# Each scenario with the modules it needs (a gpu_dataset() is tf.data, also on JAX).
NEEDS = {
    "fit_tensorflow_arrays": ("tensorflow",),
    "fit_tensorflow_dataset": ("tensorflow",),
    "fit_tensorflow_mirrored": ("tensorflow",),
    "fit_jax_arrays": ("jax",),
    "fit_jax_dataset": ("jax", "tensorflow"),
    "fit_jax_streamed": ("jax",),
    "fit_jax_mirrored": ("jax",),
    "tune_jax_arrays": ("jax",),
}


def test_every_goal_scenario_of_the_bench_is_here() -> None:
    scenarios = data_walk().SCENARIOS
    assert set(NEEDS) == {name for name in scenarios if not name.startswith("multiworker")}
    assert data_walk().GOAL == {"stays": 20, "files": 10, "max_entered": 2}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(NEEDS))
def test_the_data_walk_stays_within_the_goal(name: str) -> None:
    for module in NEEDS[name]:
        requires(module)
    walk = data_walk()
    got = walk.run_scenario(name)
    assert not got["hook_errors"], got["hook_errors"][:3]
    assert got["reached_keras"], f"{name} never reached Keras' training loop"
    assert got["calls"], f"{name} recorded no call"
    said = " -> ".join(got["walk"])
    for key, most in walk.GOAL.items():
        assert got[key] <= most, f"{name}: {key} {got[key]} > {most}: {said}"
