"""An allocation failure during gpu_fit() on either engine: a classed error that carries the
memory plan (what took the memory, the changes that would fit), and a model still usable.

The failure is a double: a Keras callback raising the engine's own error class with its own
text during a real fit (no GPU runs out of memory here).
"""

from __future__ import annotations

import pytest

from conftest import requires, run_core


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_an_allocation_failure_in_training_is_classed_and_carries_the_plan(backend: str) -> None:
    requires(backend)
    run = run_core(
        "core.backend:configured_backend",
        env={"KERAS_BACKEND": backend},
        after="import out_of_memory_fit",
        timeout=240,
    )
    found = run.readback
    answer = found["answer"]
    assert answer["ok"] is False
    assert answer["r_class"] == "gpukeras_error_out_of_memory"
    assert answer["message"].startswith(
        "The device ran out of memory at epoch 1, batch 3 (batches of 64 rows): "
    )
    assert "RESOURCE_EXHAUSTED" in answer["message"]
    assert "Nothing was kept" in answer["message"]
    details = answer["details"]
    assert details[0].startswith("By the memory plan, a step of batch 64 needs about ")
    assert details[1].startswith("What lowers the peak, and the peak expected")
    assert found["plan_batch_size"] == 64
    assert found["changes"] == [
        "a smaller batch",
        "mixed precision",
        "accumulation",
        "rematerialization",
    ]
    assert any(
        line.startswith("Accumulation: gpu_fit(batch_size = 64, accumulate = 2), about ")
        for line in details
    )
    assert found["predicts"] and found["trains_again"]
