"""The memory plan by precision and training (tools/precision_plan.py), and gpu_fit()'s "auto"
precision chosen from it on a simulated GPU whose memory (``GPUKERAS_SIMULATE_GPU_MIB``) a small
model's mixed_bfloat16 does not fit but its bfloat16 weights do; then gpu_fit(batch_size =
"auto"), the largest power of two the plan fits in the policy the model then has."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import run_setup
from gpukeras.core.errors import OutOfMemoryError
from gpukeras.core.runtime import config
from gpukeras.data import batch_rules
from gpukeras.gpu import simulated
from gpukeras.tools import memory_plan, precision_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "testthat" / "python"))

# 265,730 weights: Adam's full training holds 16 bytes a weight in float32 and in
# mixed_bfloat16 (4.05 MiB), 8 in bfloat16 (2.03 MiB); 3 MiB fits only bfloat16.
SMALL_GPU = {simulated.VARIABLE: "1", simulated.MEMORY_VARIABLE: "3"}

FIT = """
from gpukeras.core.runtime import config
import numpy as np
keras = config.keras()
model = keras.Sequential([
    keras.Input((4,)), keras.layers.Dense(512), keras.layers.Dense(512),
    keras.layers.Dense(2, activation="softmax", dtype="float32"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
x, y = np.ones((64, 4), "float32"), np.zeros(64, "int32")
answer = bridge.call(
    "fit", {"model": model, "data": (x, y), "epochs": 1, "batch_size": 8, "verbose": 0}
)
assert answer["ok"], answer
value = answer["value"]
readback["choice"] = value["settings"]["precision_choice"]
readback["policy"] = value["settings"]["dtype_policy"]
readback["lines"] = bridge.call("fit_lines", {"settings": value["settings"]})["value"]["settings"]
readback["loss"] = float(value["history"]["loss"][0])
readback["weights"] = sorted({str(v.dtype) for v in model.layers[0].weights})
readback["output"] = [str(v.dtype) for v in model.layers[-1].weights]
readback["output_policy"] = model.layers[-1].dtype_policy.name
readback["slots"] = sorted({str(v.dtype) for v in model.optimizer.variables if len(v.shape)})
"""


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_auto_gives_bfloat16_weights_where_mixed_bfloat16_does_not_fit(
    backend: str, no_gpu: None
) -> None:
    run = run_setup(backend, {}, FIT, env=SMALL_GPU)
    assert run.value["dtype_policy"] == "mixed_bfloat16"  # gpu_setup()'s "auto", for the GPU
    back = run.readback
    assert back["policy"] == "bfloat16"
    assert back["choice"]["changed"] is True
    reason = back["choice"]["reason"]
    assert reason == (
        "auto: bfloat16 (bfloat16 weights), 2.05 MiB by the memory plan; mixed_bfloat16 needs "
        "4.08 MiB at batch 8, 3 MiB free; the largest batch in bfloat16: 491"
    )
    # Keras' bfloat16: weights and the optimizer's slots in 16 bits; the float32 output kept
    assert back["weights"] == ["bfloat16"]
    assert back["slots"] == ["bfloat16", "float32"]
    assert back["output"] == ["float32", "float32"] and back["output_policy"] == "float32"
    assert back["loss"] == pytest.approx(back["loss"]) and back["loss"] < 10
    assert f"Precision:      bfloat16 ({reason})" in back["lines"]


def test_a_policy_the_user_asked_for_is_kept(no_gpu: None) -> None:
    run = run_setup("jax", {"mixed_precision": "bfloat16"}, FIT, env=SMALL_GPU)
    back = run.readback
    assert back["policy"] == "mixed_bfloat16" and back["weights"] == ["float32"]
    assert back["choice"]["changed"] is False
    assert back["choice"]["reason"].endswith(
        "; kept: gpu_setup(mixed_precision = ) asked for mixed_bfloat16"
    )


def test_a_model_built_under_a_policy_gpu_setup_did_not_choose_keeps_it(
    monkeypatch: pytest.MonkeyPatch, no_gpu: None
) -> None:
    keras = config.keras()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(512), keras.layers.Dense(512)])
    model.compile(optimizer="adam", loss="mse")
    monkeypatch.setattr(config.setup, "precision", None)  # no gpu_setup(): the user's policy
    for name, value in SMALL_GPU.items():
        monkeypatch.setenv(name, value)
    policy = model.dtype_policy.name
    chosen = precision_plan.choose(model, 8)
    assert chosen is not None and chosen["changed"] is False and chosen["policy"] == policy
    assert chosen["reason"].endswith(
        f'3 MiB free; kept: the model was built under {policy}, which gpu_setup()\'s "auto" '
        "did not choose"
    )
    assert model.dtype_policy.name == policy
    assert {str(v.dtype) for v in model.weights} == {"float32"}


def test_nothing_is_chosen_where_the_policy_fits(no_gpu: None) -> None:
    run = run_setup("jax", {}, FIT, env={simulated.VARIABLE: "1"})  # 80 GB
    assert run.readback["policy"] == "mixed_bfloat16"
    assert run.readback["choice"] is None


def test_the_table_counts_weights_gradients_and_slots_by_precision_and_training() -> None:
    keras = config.keras()
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(512), keras.layers.Dense(512), keras.layers.Dense(2)]
    )
    model.compile(optimizer="adam", loss="mse")
    plan, _ = memory_plan.plan_of(keras, model)
    table = precision_plan.options(model, plan, 8, 3.0)
    weights = 4 * 512 + 512 + 512 * 512 + 512 + 512 * 2 + 2
    by = {(row["precision"], row["training"]): row for row in table["rows"]}
    assert set(by) == {("float32", "full"), ("mixed_bfloat16", "full"), ("bfloat16", "full")}
    activations = 8 * (512 + 512 + 2)
    assert by["float32", "full"]["peak_mib"] * 2**20 == 16 * weights + 4 * activations + 8 * 16
    assert by["mixed_bfloat16", "full"]["peak_mib"] * 2**20 == (
        16 * weights + 2 * activations + 8 * 16
    )
    assert by["bfloat16", "full"]["peak_mib"] * 2**20 == 8 * weights + 2 * activations + 8 * 16
    assert [row["fits"] for row in table["rows"]] == [False, False, True]
    # frozen layers: no gradients, no slots for them
    model.layers[0].trainable = model.layers[1].trainable = False
    frozen = {
        (r["precision"], r["training"]): r
        for r in precision_plan.options(model, plan, 8, 3.0)["rows"]
    }
    assert frozen["float32", "as set"]["trainable"] == 512 * 2 + 2
    assert frozen["float32", "as set"]["peak_mib"] * 2**20 == (
        4 * weights + 12 * (512 * 2 + 2) + 4 * activations + 8 * 16
    )
    assert frozen["float32", "full"]["trainable"] == weights
    lines = precision_plan.option_lines(precision_plan.options(model, plan, 8, 3.0))
    assert lines[0] == "By precision (estimate by layer):"
    assert "does not fit" in lines[2] and lines[4].split()[:2] == ["bfloat16", "full"]


@pytest.mark.slow
def test_lora_rows_count_only_the_adapters_kerashub_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_gpu: None
) -> None:
    pytest.importorskip("keras_hub")
    from tiny_preset import save_tiny_preset

    from gpukeras.train import pretrained

    keras = config.keras()
    before = keras.config.dtype_policy()
    # (KerasHub cannot load a preset saved under mixed_bfloat16: the simulated-GPU run's policy)
    keras.config.set_dtype_policy("float32")
    try:
        preset = save_tiny_preset(str(tmp_path / "tiny"))
    finally:
        keras.config.set_dtype_policy(before)
    loaded = pretrained.text_classifier(preset, num_classes=2, lora_rank=2)
    model = loaded["model"]
    plan = precision_plan.memory_plan_by_precision(model, 8)
    # sequences of the preprocessor's 8 tokens: the input batch counted, and on JAX the step
    # measured by XLA on a copy that has the same LoRA (full training's weights, gradients
    # and Adam's slots would be 4 x the parameters)
    assert "input batch" not in plan["uncounted"]
    parameters = next(part["mib"] for part in plan["parts"] if part["part"] == "parameters")
    if config.backend == "jax":
        assert plan["method"] == "XLA's compiled step"
        assert parameters < plan["fixed_mib"] < 2 * parameters
    by = {(row["precision"], row["training"]): row for row in plan["precisions"]}
    assert by["float32", "LoRA"]["trainable"] == loaded["trainable"]
    full = sum(int(np.prod(v.shape)) for v in model.weights if "lora_kernel" not in v.path)
    assert by["float32", "full"]["trainable"] == full
    assert by["bfloat16", "LoRA"]["peak_mib"] < by["bfloat16", "full"]["peak_mib"]
    # the adapters stay float32 in bfloat16, with their gradients and slots
    adapters = sum(int(np.prod(v.shape)) for v in model.weights if "lora_kernel" in v.path)
    others = loaded["parameters"] - adapters
    lora = loaded["trainable"] - adapters
    expected = others * 2 + adapters * 4 + 3 * (lora * 2 + adapters * 4)
    layers, _ = memory_plan.plan_of(config.keras(), model)
    assert by["bfloat16", "LoRA"]["peak_mib"] * 2**20 == pytest.approx(
        expected + 8 * (2 * layers.activation_values + layers.per_sample["input batch"])
    )
    assert "By precision (estimate by layer):" in plan["lines"]
    # on a GPU of 0.03 MiB (mixed_bfloat16 needs 0.039), the fine-tune goes to bfloat16 weights
    for name, value in {**SMALL_GPU, simulated.MEMORY_VARIABLE: "0.03"}.items():
        monkeypatch.setenv(name, value)
    chosen = precision_plan.choose(model, 8)
    assert chosen is not None and chosen["policy"] == "bfloat16" and chosen["changed"]
    # from float32 (mixed_bfloat16 tried), or from the simulated-GPU run's mixed_bfloat16
    assert re.search(r"(, |; )mixed_bfloat16 (needs )?39.8 KiB", chosen["reason"])
    dtypes = {v.path.split("/")[-1]: str(v.dtype) for v in model.weights}
    assert dtypes["lora_kernel_a"] == dtypes["lora_kernel_b"] == "float32"
    assert dtypes["kernel"] == "bfloat16" and model.dtype_policy.name == "bfloat16"
    made = pretrained.text_dataset(["good movie", "bad movie"] * 4, [1, 0] * 4, ["n", "p"], 8)
    loss = model.fit(made["dataset"], epochs=2, verbose=0).history["loss"]
    assert np.isfinite(loss).all()
    assert {str(v.dtype) for v in model.optimizer.variables if "lora" in v.path} == {"float32"}


# gpu_fit(batch_size = "auto") -------------------------------------------------------------------
AUTO_FIT = """
from gpukeras.core.runtime import config
from gpukeras.tools import memory_plan, precision_plan
import numpy as np
keras = config.keras()

def make():
    model = keras.Sequential([
        keras.Input((4,)), keras.layers.Dense(512), keras.layers.Dense(512),
        keras.layers.Dense(2, activation="softmax", dtype="float32"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model

x, y = np.ones((4096, 4), "float32"), np.zeros(4096, "int32")
model = make()
plan, _ = memory_plan.plan_of(keras, model)
rows = precision_plan.options(model, plan, 1, 3.0)["rows"]
readback["plan_largest"] = {row["precision"]: row["largest_batch"] for row in rows}
# accumulating: Keras' accumulators, one more copy of the gradients, as one more slot
found, slots = precision_plan.counts(model), precision_plan.slot_copies(model)
row = precision_plan.option(found, plan, slots + 1, "bfloat16", "full", 1, 3.0)
readback["plan_largest_accumulating"] = row["largest_batch"]
for name, fields in {
    "auto": {"batch_size": "auto"},
    "fixed": {"batch_size": 8},
    "accumulated": {"batch_size": "auto", "accumulate": 2},
    "auto_accumulate": {"batch_size": "auto", "accumulate": "auto"},
}.items():
    model = make() if name != "auto" else model
    answer = bridge.call("fit", {
        "model": model, "data": (x, y), "epochs": 1, "verbose": 0, "monitor": False, **fields
    })
    assert answer["ok"], answer
    settings = answer["value"]["settings"]
    keep = ("batch_size", "micro_batch_size", "accumulate", "accumulate_reason", "batch_choice",
            "dtype_policy", "steps_per_epoch")
    readback[name] = {key: settings.get(key) for key in keep}
    lines = bridge.call("fit_lines", {"settings": settings})["value"]
    readback[name + "_lines"] = lines["settings"]
"""


def test_auto_batch_is_the_largest_power_of_two_the_plan_fits_in_the_chosen_policy(
    no_gpu: None,
) -> None:
    run = run_setup("jax", {}, AUTO_FIT, env=SMALL_GPU)
    back = run.readback
    largest = back["plan_largest"]["bfloat16"]  # 3 MiB: mixed_bfloat16 fits no batch
    assert back["plan_largest"]["mixed_bfloat16"] == 0 and largest == 491
    auto = back["auto"]
    assert auto["dtype_policy"] == "bfloat16"  # the precision first, then the batch in it
    assert auto["batch_size"] == 2 ** int(np.log2(largest)) == 256
    assert auto["steps_per_epoch"] == 4096 // 256 and auto["accumulate"] == 1
    reason = (
        "auto: 256, the largest power of two within the 491 rows that fit 3 MiB free in bfloat16"
    )
    assert auto["batch_choice"] == {"batch_size": 256, "micro_batch_size": 256, "reason": reason}
    assert f"Batch size:     {reason}" in back["auto_lines"]
    # a batch the user gave is theirs: kept, and nothing said
    assert back["fixed"]["batch_size"] == 8 and back["fixed"]["batch_choice"] is None
    assert not any(line.startswith("Batch size:") for line in back["fixed_lines"])
    # accumulating holds one more copy of the gradients (bfloat16: 0.5 MiB), so a smaller
    # micro-batch fits: 233 rows, 128 a micro-batch, 2 of them an update
    accumulated, fitting = back["accumulated"], back["plan_largest_accumulating"]
    assert fitting == 233
    assert accumulated["micro_batch_size"] == 2 ** int(np.log2(fitting)) == 128
    assert accumulated["batch_size"] == 256 and accumulated["accumulate"] == 2
    assert accumulated["batch_choice"]["reason"] == (
        "auto: 256 = 2 x 128, the largest power of two within the 233 rows that fit 3 MiB "
        "free in bfloat16"
    )
    # accumulate = "auto" with it: nothing to split, the batch fits
    both = back["auto_accumulate"]
    assert both["batch_size"] == 256 and both["accumulate"] == 1
    assert both["accumulate_reason"] == 'auto: 1, batch_size = "auto" took a batch that fits'


def _dense(units: int = 512) -> object:
    keras = config.keras()
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(units), keras.layers.Dense(units)]
    )
    model.compile(optimizer="adam", loss="mse")
    return model


def test_auto_batch_is_capped_by_the_rows_and_by_auto_most(
    monkeypatch: pytest.MonkeyPatch, no_gpu: None
) -> None:
    for name, value in {**SMALL_GPU, simulated.MEMORY_VARIABLE: "1000"}.items():
        monkeypatch.setenv(name, value)
    model = _dense(8)
    assert precision_plan.auto_batch(model, None)["reason"] == (
        f"auto: {batch_rules.AUTO_MOST:,}, the largest power of two within "
        f'{batch_rules.AUTO_MOST:,}, the most "auto" takes'
    )
    # 8 updates per epoch of 100 rows: 14 rows or fewer a batch; 8 the power of two
    chosen = precision_plan.auto_batch(model, 100)
    assert chosen["batch_size"] == 8 and chosen["reason"] == (
        "auto: 8, the largest power of two within 14, for 8 or more updates per epoch of 100 rows"
    )
    # with 2 micro-batches an update, 7 rows a micro-batch at most: 4
    assert precision_plan.auto_batch(model, 100, 2)["batch_size"] == 8
    assert precision_plan.auto_batch(model, 100, 2)["micro_batch_size"] == 4
    assert precision_plan.auto_batch(model, 3)["batch_size"] == 1


def test_auto_batch_on_the_cpu_is_the_default_and_says_why(no_gpu: None) -> None:
    chosen = precision_plan.auto_batch(_dense(8), 4096, 2)
    assert chosen == {
        "batch_size": 64,
        "micro_batch_size": 32,
        "reason": "auto: 64 = 2 x 32, as with no batch_size (no GPU: the memory plan is for a "
        "GPU's memory)",
    }


def test_auto_batch_where_not_one_row_fits_is_an_out_of_memory_error(
    monkeypatch: pytest.MonkeyPatch, no_gpu: None
) -> None:
    for name, value in {**SMALL_GPU, simulated.MEMORY_VARIABLE: "0.5"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(OutOfMemoryError, match=r'^`batch_size = "auto"`: not even one row fits'):
        precision_plan.auto_batch(_dense(), 4096)
