"""tools/workers.py: what a worker keeps from one task to the next."""

from __future__ import annotations

from conftest import run_core


def test_a_workers_reset_keeps_the_sessions_dtype_policy() -> None:
    # gpu_setup()'s mixed precision is Keras' global dtype policy, which clear_session()
    # clears: a reused worker's second fit would otherwise train in float32
    run = run_core(
        "tools.workers:reset",
        setup="import keras\nkeras.config.set_dtype_policy('mixed_bfloat16')",
        after="import keras\nreadback['policy'] = keras.config.dtype_policy().name",
    )
    assert run.value is None
    assert run.readback["policy"] == "mixed_bfloat16"
