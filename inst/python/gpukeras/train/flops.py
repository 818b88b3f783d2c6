"""Model FLOPs per sample, counted layer by layer, and the peak a GPU can reach.

MFU (model FLOPs utilization) = FLOPs the model needs / time / the device's
peak. The count here is the usual analytic one: a multiply-add is 2 FLOPs,
Dense and convolution layers are counted exactly, layers whose work is small
next to them (activations, pooling, normalization, dropout, reshapes,
embedding lookups) count as 0, and a training step is taken as 3 x the
forward pass (the backward pass costs about twice the forward). A model with a
layer that has weights but no rule here (recurrent, attention, custom
layers) gets no count at all, rather than a wrong one.

Peaks are NVIDIA's spec-sheet dense (no sparsity) numbers for the Tensor Core
dtype the model computes in: bf16/fp16 for mixed precision, TF32 for float32
(TensorFlow and XLA use TF32 for float32 matmuls on Ampere and newer), plain
FP32 before Ampere. Spec peaks are not reached in practice: this project's
bf16 matmul benchmark on an H100/H200 reached about 798 TFLOP/s of the 989
on the spec sheet, so an MFU near 0.8 is already the ceiling there.

A MIG instance (NVML names it after its GPU and profile, "NVIDIA H100 80GB
HBM3 MIG 1g.10gb") computes on its slice of the GPU only: its peak is the
GPU's times the profile's compute slices ("1g", "3g", ...) out of the 7 an
A100, H100 or H200 is divided into. Training on several GPUs is measured
against the sum of their peaks (``combined_peak``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from gpukeras.core import compat
from gpukeras.core.handles import Layer, Model, Record

# Layers that do no significant arithmetic or hold no weights to count.
FREE_LAYERS = {
    "InputLayer",
    "Activation",
    "ReLU",
    "LeakyReLU",
    "Softmax",
    "ELU",
    "PReLU",
    "Dropout",
    "SpatialDropout1D",
    "SpatialDropout2D",
    "SpatialDropout3D",
    "GaussianNoise",
    "GaussianDropout",
    "AlphaDropout",
    "Flatten",
    "Reshape",
    "Permute",
    "RepeatVector",
    "Cropping1D",
    "Cropping2D",
    "Cropping3D",
    "ZeroPadding1D",
    "ZeroPadding2D",
    "ZeroPadding3D",
    "UpSampling1D",
    "UpSampling2D",
    "UpSampling3D",
    "MaxPooling1D",
    "MaxPooling2D",
    "MaxPooling3D",
    "AveragePooling1D",
    "AveragePooling2D",
    "AveragePooling3D",
    "GlobalMaxPooling1D",
    "GlobalMaxPooling2D",
    "GlobalMaxPooling3D",
    "GlobalAveragePooling1D",
    "GlobalAveragePooling2D",
    "GlobalAveragePooling3D",
    "BatchNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "UnitNormalization",
    "Normalization",
    "Rescaling",
    "Embedding",
    "Add",
    "Subtract",
    "Multiply",
    "Average",
    "Maximum",
    "Minimum",
    "Concatenate",
}
CONV_LAYERS = {
    "Conv1D",
    "Conv2D",
    "Conv3D",
    "Conv1DTranspose",
    "Conv2DTranspose",
    "Conv3DTranspose",
}

# Dense (no sparsity) TFLOP/s from NVIDIA's data sheets, by compute dtype.
# Patterns are tried in order against the GPU's name (NVML or the framework).
# NVIDIA's H100 page gives the NVL's Tensor Core figures with sparsity (TF32
# 835, BF16/FP16 1,671 TFLOP/s); dense is half of them.
PEAKS: list[tuple[str, str, dict[str, float]]] = [
    ("H200", r"H200", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    ("H100 PCIe", r"H100.*PCIe", {"bf16": 756.5, "fp16": 756.5, "tf32": 378.0, "fp32": 51.2}),
    ("H100 NVL", r"H100.*NVL", {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    ("H100 SXM", r"H100", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    ("A100", r"A100", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    ("L40S", r"L40S", {"bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp32": 91.6}),
    ("L4", r"\bL4\b", {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3}),
    ("A10", r"\bA10\b", {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2}),
    ("V100", r"V100", {"fp16": 125.0, "fp32": 15.7}),
    ("T4", r"\bT4\b", {"fp16": 65.0, "fp32": 8.1}),
]
MEASURED_BF16 = {"H200": 798.0, "H100 SXM": 798.0}
# A MIG profile's compute slices ("3g" of "MIG 3g.40gb"; "1c" of a compute
# instance "MIG 1c.3g.40gb") and the slices of the whole GPU, for the GPUs in
# the table that MIG divides.
MIG_PROFILE = re.compile(r"\bMIG\s+(?:(\d+)c\.)?(\d+)g\.", re.IGNORECASE)
MIG_SLICES = {"H200": 7, "H100 PCIe": 7, "H100 NVL": 7, "H100 SXM": 7, "A100": 7}


def _dims(shape: Any) -> list[int | None]:
    return [None if d is None else int(d) for d in shape]


def _weight_dims(shape: Any) -> list[int]:
    """A weight's shape, always fully known once the layer is built."""
    return [int(d) for d in shape]


def _product(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return math.prod(known) if len(known) == len(values) else None


def _io_shapes(layer: Layer) -> tuple[list[int | None], list[int | None]] | None:
    """A layer's input and output shapes (batch dimension first), where Keras knows them."""
    try:
        return _dims(layer.input.shape), _dims(layer.output.shape)
    except (AttributeError, ValueError, TypeError):
        return None


def layer_flops(layer: Layer) -> float | None:
    """Forward FLOPs per sample of one leaf layer; None when it cannot be counted."""
    kind = type(layer).__name__
    if kind in FREE_LAYERS or not getattr(layer, "weights", None):
        return 0.0
    shapes = _io_shapes(layer)
    if shapes is None:
        return None
    inputs, outputs = shapes
    if kind == "Dense":
        kernel = _weight_dims(layer.kernel.shape)
        positions = _product(inputs[1:-1])
        if positions is None:
            return None
        return 2.0 * kernel[0] * kernel[1] * positions
    if kind in CONV_LAYERS:
        kernel = _weight_dims(layer.kernel.shape)
        # Forward convolution: every output position does a kernel-sized dot
        # product per output channel; transposed: every input position does.
        spatial = inputs[1:-1] if kind.endswith("Transpose") else outputs[1:-1]
        positions = _product(spatial)
        if positions is None:
            return None
        return 2.0 * math.prod(kernel) * positions
    if kind == "DepthwiseConv2D" or kind == "DepthwiseConv1D":
        kernel = _weight_dims(layer.kernel.shape)
        positions = _product(outputs[1:-1])
        return None if positions is None else 2.0 * math.prod(kernel) * positions
    if kind in ("SeparableConv1D", "SeparableConv2D"):
        depthwise = _weight_dims(layer.depthwise_kernel.shape)
        pointwise = _weight_dims(layer.pointwise_kernel.shape)
        positions = _product(outputs[1:-1])
        if positions is None:
            return None
        return 2.0 * (math.prod(depthwise) + math.prod(pointwise)) * positions
    return None


def leaves(model: Model) -> list[Layer]:
    """Layers without sublayers, through nested models and layers."""
    found = []
    for layer in compat.flatten_layers(model):
        if not compat.flatten_layers(layer, recursive=False):
            found.append(layer)
    return found


def model_flops(model: Model) -> Record:
    """Forward FLOPs per sample of a built model.

    Returns:
        ``per_sample`` (None when some layer with weights has no rule),
        ``method`` (how it was counted) and ``uncounted`` (the class names
        of layers that could not be counted).
    """
    total = 0.0
    uncounted: list[str] = []
    for layer in leaves(model):
        flops = layer_flops(layer)
        if flops is None:
            uncounted.append(type(layer).__name__)
        else:
            total += flops
    if uncounted or total == 0:
        return {
            "per_sample": None,
            "method": None,
            "uncounted": sorted(set(uncounted)),
        }
    return {
        "per_sample": total,
        "method": "per layer: Dense and convolution multiply-adds x 2, training = 3 x forward",
        "uncounted": [],
    }


def dtype_key(compute_dtype: str, capability: str | None) -> str:
    """The peak column for a compute dtype: bf16, fp16, tf32 (Ampere and newer) or fp32."""
    if compute_dtype == "bfloat16":
        return "bf16"
    if compute_dtype == "float16":
        return "fp16"
    try:
        ampere = capability is not None and float(capability) >= 8.0
    except ValueError:
        ampere = False
    return "tf32" if ampere else "fp32"


def peak(gpu_name: str | None, compute_dtype: str, capability: str | None) -> dict | None:
    """The spec-sheet dense peak for a GPU (or MIG instance) and dtype, with its source;
    None if not in the table, or a MIG instance of a GPU whose slices are not known."""
    if not gpu_name:
        return None
    key = dtype_key(compute_dtype, capability)
    for label, pattern, peaks in PEAKS:
        if re.search(pattern, gpu_name, flags=re.IGNORECASE):
            if key not in peaks:
                return None
            tflops = peaks[key]
            source = f"NVIDIA spec sheet, {label} dense {key.upper()}"
            mig = MIG_PROFILE.search(gpu_name)
            if mig is not None:
                if label not in MIG_SLICES:
                    return None
                used, slices = int(mig.group(1) or mig.group(2)), MIG_SLICES[label]
                tflops *= used / slices
                return {
                    "tflops": tflops,
                    "source": f"{source} ({peaks[key]:g} TFLOP/s) x {used}/{slices}: this MIG "
                    f"instance ({mig.group(0).rstrip('.')}) computes on {used} of the GPU's "
                    f"{slices} compute slices",
                    "gpu": f"{label} {mig.group(0).rstrip('.')}",
                    "dtype": key,
                }
            if key == "bf16" and label in MEASURED_BF16:
                source += (
                    f" (this project measured about {MEASURED_BF16[label]:.0f} TFLOP/s "
                    "in a bf16 matmul)"
                )
            return {"tflops": tflops, "source": source, "gpu": label, "dtype": key}
    return None


def combined_peak(gpus: list[tuple[str | None, str | None]], compute_dtype: str) -> dict | None:
    """The sum of the peaks of the GPUs training runs on (name, compute capability each).

    Data-parallel throughput is the work of all of them, so MFU divides by all
    their peaks. None when any of them has no known peak (a part of the sum
    would be missing), or there are none.
    """
    found_peaks = [peak(name, compute_dtype, capability) for name, capability in gpus]
    peaks = [found for found in found_peaks if found is not None]
    if not peaks or len(peaks) != len(found_peaks):
        return None
    if len(peaks) == 1:
        return peaks[0]
    labels = list(dict.fromkeys(str(found["gpu"]) for found in peaks))
    sources = list(dict.fromkeys(str(found["source"]) for found in peaks))
    return {
        "tflops": sum(float(found["tflops"]) for found in peaks),
        "source": f"sum over {len(peaks)} GPUs of: " + "; ".join(sources),
        "gpu": " + ".join(labels) if len(labels) > 1 else f"{len(peaks)} x {labels[0]}",
        "dtype": peaks[0]["dtype"],
    }
