"""tools/workers.py: what a worker keeps from one task to the next."""

from __future__ import annotations

import pytest

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


def test_a_warm_worker_collects_only_what_its_tasks_made_and_frees_a_tasks_model() -> None:
    # warm() freezes what the worker holds as it starts (a full collection of it took
    # 0.65 s after each task); reset() still frees what a task made, its model's cycles
    after = "\n".join(
        [
            "import gc, weakref, keras, numpy",
            "readback['frozen'] = gc.get_freeze_count()",
            "model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])",
            "model.compile(optimizer='adam', loss='mse')",
            "model.fit(numpy.ones((4, 3)), numpy.ones((4, 2)), verbose=0)",
            "made = weakref.ref(model)",
            "gc.disable()",  # no collection but reset's between these lines
            "del model",
            "readback['before'] = made() is not None",
            "bridge.call('workers_reset', {})",
            "readback['after'] = made() is not None",
        ]
    )
    run = run_core("workers_warm", env={"KERAS_BACKEND": "jax"}, after=after)
    assert run.value["backend"] == "jax"
    assert run.readback["frozen"] > 1000
    assert run.readback["before"]  # held by its own cycles until a collection
    assert not run.readback["after"]


def test_workers_grow_adds_the_workers_a_fits_memory_plan_says_fit_its_gpu() -> None:
    from gpukeras.tools.workers import MOST_PER_DEVICE, grow

    gpu0 = {"device": "GPU 0", "visible": "GPU-a", "memory_total_mib": 81559}
    gpu1 = {"device": "GPU 1", "visible": "GPU-b", "memory_total_mib": 81559}
    # two fits of 30,000 MiB fit in 80 % of GPU 0: one more worker there, after the others
    grown = grow([gpu0, gpu1], 0, 30000, cores=16)
    assert [slot["visible"] for slot in grown["slots"]] == ["GPU-a", "GPU-b", "GPU-a"]
    assert grown["reason"].startswith("2 workers per GPU: a fit's plan peaks at 30,000 MiB")
    # a tiny fit: at most MOST_PER_DEVICE on the GPU; none taken away where fewer fit
    assert len(grow([gpu0, gpu1], 1, 0.002, cores=16)["slots"]) == 1 + MOST_PER_DEVICE
    assert grow([gpu0, gpu0, gpu1], 0, 70000, cores=16)["slots"] == [gpu0, gpu0, gpu1]
    # a worker needs a core: 2 cores for one GPU hold 2 workers, whatever the memory says
    few = grow([gpu0], 0, 0.002, cores=2)
    assert few["slots"] == [gpu0, gpu0]
    assert few["reason"].startswith("2 workers per GPU: the host's CPU cores shared by its 1 GPU")
    assert grow([gpu0, gpu1], 0, 0.002, cores=2)["slots"] == [gpu0, gpu1]
    # no plan (None, as a worker sends where its memory plan failed): one worker per GPU
    assert grow([gpu0], 0, None) == {
        "slots": [gpu0],
        "reason": "one worker per GPU: no memory plan to share it by",
    }


def test_workers_ahead_are_the_first_pools_slots_and_auto_starts_none_without_a_gpu(
    monkeypatch: pytest.MonkeyPatch, no_gpu: None
) -> None:
    from gpukeras.gpu import simulated
    from gpukeras.tools.workers import ahead, plan

    # no GPU: "auto" starts none, and says how to ask for one; a number starts that many
    none = "none (no GPU is visible: workers_ahead = 1 starts one on the CPU)"
    assert ahead("auto") == {"slots": [], "line": f"  workers ahead:   {none}"}
    assert ahead(0)["slots"] == []
    two = ahead(2)
    assert two["slots"] == plan(workers=2)["slots"]
    assert two["line"] == (
        "  workers ahead:   2 on CPU, loading for the first gpu_cv() or gpu_search()"
    )
    # a GPU (here simulated): one per GPU, the slots of gpu_cv()'s default pool
    monkeypatch.setenv(simulated.VARIABLE, "1")
    auto = ahead("auto")
    assert auto["slots"] == plan()["slots"]
    assert [slot["device"] for slot in auto["slots"]] == ["GPU 0"]
    assert auto["line"].startswith("  workers ahead:   1 on GPU 0, loading")
