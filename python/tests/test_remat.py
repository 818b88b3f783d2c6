"""gpu_fit(remat = TRUE) (issue #26, item 3): layers recompute in the backward pass for the
length of the fit (Keras' RematScope: every layer on JAX, the activations on TensorFlow),
the updates are those of the same fit without it, and the model is given back as it was."""

from __future__ import annotations

import pytest

from conftest import CoreRun, run_setup
from gpukeras.core import compat

pytestmark = pytest.mark.slow  # a fresh process per backend


@pytest.fixture(scope="module", params=["tensorflow", "jax"])
def recomputed(request: pytest.FixtureRequest) -> CoreRun:
    run = run_setup(request.param, {}, "import remat_fit")
    assert "apart" in run.readback, run.stderr[-3000:]
    return run


def test_rematerialized_training_updates_as_without_it(recomputed: CoreRun) -> None:
    assert recomputed.readback["apart"] < 1e-6


def test_layers_recompute_while_training_and_not_after(recomputed: CoreRun) -> None:
    readback = recomputed.readback
    mode = readback["settings"]["remat"]
    assert mode in compat.REMAT_MODES.values()
    assert readback["during"] == [mode]
    assert readback["after"] is None
    assert readback["again"] is None
