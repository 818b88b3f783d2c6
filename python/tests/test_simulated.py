"""A simulated GPU (``GPUKERAS_SIMULATE_GPU``): on a CPU, the "auto" rules decide as on an
NVIDIA GPU of compute capability 9.0 with 80 GB, the work runs on the CPU, and what was
decided for it says so; unset (or "0"), nothing changes."""

from __future__ import annotations

import pytest

from conftest import run_setup
from gpukeras.gpu import simulated
from gpukeras.tools import workers

ON = {simulated.VARIABLE: "1"}

FIT = """
from gpukeras.core.runtime import config
import numpy as np
keras = config.keras()
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(2)])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
x, y = np.ones((256, 4), "float32"), np.zeros(256, "int32")
answer = bridge.call("fit", {"model": model, "data": (x, y), "epochs": 1, "verbose": 0})
assert answer["ok"], answer
settings = answer["value"]["settings"]
readback["settings"] = {k: settings[k] for k in ("simulated_gpu", "dtype_policy")}
readback["notes"] = answer["value"]["monitor"]["notes"]
"""


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_auto_precision_is_the_gpus_bfloat16_and_its_reason_says_simulated(
    backend: str, no_gpu: None
) -> None:
    run = run_setup(backend, {}, FIT, env=ON)
    settings = run.value
    assert settings["gpus"] == []  # the work runs on the CPU
    assert settings["dtype_policy"] == "mixed_bfloat16"
    assert settings["precision_reason"].startswith("compute capability 9.0 >= 8.0")
    assert settings["precision_reason"].endswith("; a simulated GPU (GPUKERAS_SIMULATE_GPU)")
    assert settings["precision_suits_device"] is True
    assert run.readback["settings"]["dtype_policy"] == "mixed_bfloat16"
    label = run.readback["settings"]["simulated_gpu"]
    assert label.startswith("simulated NVIDIA H100 80GB HBM3 (compute capability 9.0, 80 GiB")
    assert any(note.startswith("Advice for a simulated") for note in run.readback["notes"])


@pytest.mark.parametrize("value", ["", "0", "false"])
def test_unset_or_off_nothing_is_simulated(value: str, no_gpu: None) -> None:
    run = run_setup("jax", {}, FIT, env={simulated.VARIABLE: value})
    assert run.value["dtype_policy"] == "float32"
    assert run.readback["settings"]["simulated_gpu"] is None
    assert not any(note.startswith("Advice for a simulated") for note in run.readback["notes"])


def test_worker_slots_are_the_simulated_gpus_and_its_memory_plan_decides(
    monkeypatch: pytest.MonkeyPatch, no_gpu: None
) -> None:
    monkeypatch.setenv(simulated.VARIABLE, "1")
    plan = workers.plan()
    assert plan["gpus"] == 1 and plan["plan_memory"] is True
    assert plan["slots"] == [{"device": "GPU 0", "visible": None, "memory_total_mib": 81559.0}]
    assert "simulated NVIDIA H100" in plan["reason"]
    assert [slot["device"] for slot in workers.plan(per_device=2)["slots"]] == ["GPU 0"] * 2
    assert workers.plan(per_device=2)["plan_memory"] is False
    # two or more workers share the simulated GPU for a small model, as on an 80 GB GPU
    assert workers.fitting(plan["slots"][0]["memory_total_mib"], 300.0)["workers"] >= 2
    monkeypatch.setenv(simulated.VARIABLE, "0")
    cpu = workers.plan()
    assert cpu["gpus"] == 0 and cpu["plan_memory"] is False
    assert cpu["slots"][0]["device"] == "CPU"
