"""flops: FLOPs per sample counted per layer, and the peak table by GPU name."""

from __future__ import annotations

import pytest

from gpukeras.core.runtime import config
from gpukeras.train import flops


def test_dense_and_conv_layers_are_counted() -> None:
    keras = config.keras()
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(4, 3),  # 6 x 6 x 4 outputs, each 3 x 3 x 1 multiply-adds
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),  # 3 x 3 x 4 = 36
            keras.layers.Dense(10, activation="relu"),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(2),
        ]
    )
    counted = flops.model_flops(model)
    conv = 2 * 6 * 6 * 4 * 3 * 3 * 1
    dense = 2 * 36 * 10 + 2 * 10 * 2
    assert counted["per_sample"] == conv + dense
    assert counted["uncounted"] == []


def test_dense_on_sequences_counts_every_position() -> None:
    keras = config.keras()
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.Dense(4)])
    assert flops.model_flops(model)["per_sample"] == 2 * 5 * 3 * 4


def test_a_layer_without_a_rule_means_no_count() -> None:
    keras = config.keras()
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.GRU(4), keras.layers.Dense(1)])
    counted = flops.model_flops(model)
    assert counted["per_sample"] is None
    assert counted["uncounted"] == ["GRUCell"]  # the GRU layer computes in its cell


@pytest.mark.parametrize(
    ("name", "dtype", "capability", "tflops", "label"),
    [
        ("NVIDIA H100 80GB HBM3", "bfloat16", "9.0", 989.4, "H100 SXM dense BF16"),
        ("NVIDIA H200", "float16", "9.0", 989.4, "H200 dense FP16"),
        ("NVIDIA H100 PCIe", "float32", "9.0", 378.0, "H100 PCIe dense TF32"),
        ("NVIDIA A100-SXM4-80GB", "float32", "8.0", 156.0, "A100 dense TF32"),
        ("Tesla V100-SXM2-16GB", "float32", "7.0", 15.7, "V100 dense FP32"),
        ("NVIDIA A10", "bfloat16", "8.6", 125.0, "A10 dense BF16"),
    ],
)
def test_peak_by_gpu_name_and_dtype(
    name: str, dtype: str, capability: str, tflops: float, label: str
) -> None:
    found = flops.peak(name, dtype, capability)
    assert found["tflops"] == tflops
    assert label in found["source"]


def test_peak_says_what_this_project_measured_on_hopper() -> None:
    assert "798" in flops.peak("NVIDIA H100 80GB HBM3", "bfloat16", "9.0")["source"]


def test_no_peak_for_unknown_gpus_or_dtypes() -> None:
    assert flops.peak("Some Future GPU", "float32", "12.0") is None
    assert flops.peak(None, "float32", None) is None
    assert flops.peak("Tesla T4", "bfloat16", "7.5") is None  # no bf16 Tensor Cores


def test_h100_nvl_has_its_own_peak_not_the_sxm_one() -> None:
    found = flops.peak("NVIDIA H100 NVL", "bfloat16", "9.0")
    assert found["tflops"] == 835.5  # NVIDIA's 1,671 with sparsity, halved
    assert "H100 NVL dense BF16" in found["source"]
    assert flops.peak("NVIDIA H100 NVL", "float32", "9.0")["tflops"] == 417.5


@pytest.mark.parametrize(
    ("name", "whole", "share"),
    [
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 989.4, 1 / 7),
        ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", 989.4, 3 / 7),
        ("NVIDIA H200 MIG 7g.141gb", 989.4, 1.0),
        ("NVIDIA A100-SXM4-40GB MIG 2g.10gb", 312.0, 2 / 7),
        ("NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb", 989.4, 1 / 7),  # a compute instance
    ],
)
def test_a_mig_instance_gets_its_share_of_the_gpus_peak(
    name: str, whole: float, share: float
) -> None:
    found = flops.peak(name, "bfloat16", "9.0")
    assert found["tflops"] == pytest.approx(whole * share)
    assert f"x {round(share * 7)}/7" in found["source"]
    assert "MIG instance" in found["source"]


def test_a_mig_instance_of_a_gpu_whose_slices_are_not_known_has_no_peak() -> None:
    assert flops.peak("NVIDIA A30 MIG 1g.6gb", "bfloat16", "8.0") is None


def test_several_gpus_are_measured_against_the_sum_of_their_peaks() -> None:
    h100 = ("NVIDIA H100 80GB HBM3", "9.0")
    two = flops.combined_peak([h100, h100], "bfloat16")
    assert two["tflops"] == pytest.approx(2 * 989.4)
    assert two["source"].startswith("sum over 2 GPUs of: NVIDIA spec sheet, H100 SXM")
    assert two["gpu"] == "2 x H100 SXM"
    mixed = flops.combined_peak([h100, ("NVIDIA H100 PCIe", "9.0")], "bfloat16")
    assert mixed["tflops"] == pytest.approx(989.4 + 756.5)
    assert mixed["gpu"] == "H100 SXM + H100 PCIe"
    assert flops.combined_peak([h100], "bfloat16") == flops.peak(*h100[:1], "bfloat16", "9.0")
    # One GPU without a known peak leaves the sum unknown, not too small.
    assert flops.combined_peak([h100, ("Some Future GPU", "12.0")], "bfloat16") is None
    assert flops.combined_peak([], "bfloat16") is None
