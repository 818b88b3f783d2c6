"""Mixed precision: which dtype policy suits a device, and models it would hurt.

Measured rules (see DESIGN.md): float16 and bfloat16 pay on GPUs with Tensor
Cores, compute capability >= 7.0 for float16 and >= 8.0 for bfloat16;
bfloat16 keeps float32's range, so it needs no loss scaling; the last
softmax/sigmoid should stay float32, where float16 rounding distorts
probabilities and losses.
"""

from __future__ import annotations

import sys
import weakref
from types import ModuleType

from gpukeras.core import compat
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.handles import Layer, Model
from gpukeras.core.runtime import PrecisionChoice, config
from gpukeras.core.stack import parse_version

POLICIES = {
    "float32": "float32",
    "float16": "mixed_float16",
    "mixed_float16": "mixed_float16",
    "bfloat16": "mixed_bfloat16",
    "mixed_bfloat16": "mixed_bfloat16",
}
LOW_PRECISION = ("float16", "bfloat16")
PROBABILITY_ACTIVATIONS = ("softmax", "sigmoid")
# LoRA's adapters (Keras' enable_lora), float32 whatever the policy
LORA_ADAPTERS = ("lora_kernel_a", "lora_kernel_b")


def check_choice(requested: str) -> None:
    """Raise BadArgumentError unless ``requested`` is 'auto' or a known precision."""
    if requested != "auto" and requested not in POLICIES:
        raise BadArgumentError(
            "mixed_precision must be 'auto', 'float16', 'bfloat16' or 'float32', "
            f"not '{requested}'."
        )


def choose_policy(requested: str, compute_capability: str | None) -> PrecisionChoice:
    """The Keras dtype policy for ``requested`` on a GPU of ``compute_capability``.

    Args:
        requested: 'auto', 'float16', 'bfloat16' or 'float32' (or a Keras
            policy name such as 'mixed_float16').
        compute_capability: of the GPU that will train, e.g. '9.0'; None for the CPU.
    """
    capability = parse_version(compute_capability)[:2]
    where = f"compute capability {compute_capability}" if compute_capability else "the CPU"
    if requested == "auto":
        if not capability:
            return PrecisionChoice(
                "float32", "no GPU: mixed precision does not speed up the CPU", False, True
            )
        if capability >= (8, 0):
            return PrecisionChoice(
                "mixed_bfloat16",
                f"{where} >= 8.0: bfloat16 Tensor Cores, float32's range, no loss scaling",
                False,
                True,
                automatic=True,
            )
        if capability >= (7, 0):
            return PrecisionChoice(
                "mixed_float16",
                f"{where} is 7.x: float16 Tensor Cores, with loss scaling",
                True,
                True,
                automatic=True,
            )
        reason = f"{where} < 7.0: no Tensor Cores, so mixed precision gains nothing"
        return PrecisionChoice("float32", reason, False, True)
    check_choice(requested)
    policy = POLICIES[requested]
    needs = {"mixed_float16": (7, 0), "mixed_bfloat16": (8, 0)}.get(policy)
    suits = needs is None or (bool(capability) and capability >= needs)
    reason = f"asked for {policy}"
    if needs is not None and not suits:
        reason += (
            f"; on {where} it gives no speed-up (needs compute capability >= "
            f"{needs[0]}.{needs[1]}) and costs precision"
        )
    return PrecisionChoice(policy, reason, policy == "mixed_float16", suits)


def output_precision_issue(model: Model) -> dict[str, object] | None:
    """The model's output layer when it computes a softmax/sigmoid in float16/bfloat16.

    Returns:
        None when the output is fine; else ``layer`` (the Keras layer),
        ``finding`` (what is wrong) and ``advice`` (the fix), as sentences.
    """
    # A Keras model exists only once Keras is imported, so there is nothing to start.
    keras = sys.modules.get("keras")
    if keras is None or not isinstance(model, keras.Model) or not model.layers:
        raise BadArgumentError(
            f"model must be a Keras 3 model with layers, not a {type(model).__name__}."
        )
    layer = model.layers[-1]
    activation = getattr(getattr(layer, "activation", None), "__name__", None)
    if isinstance(layer, keras.layers.Softmax):
        activation = "softmax"
    dtype = getattr(layer, "compute_dtype", None)
    if activation not in PROBABILITY_ACTIVATIONS or dtype not in LOW_PRECISION:
        return None
    finding = (
        f"The output layer '{layer.name}' computes its {activation} in {dtype}, which "
        "distorts probabilities and the loss."
    )
    advice = (
        f'Give that layer dtype = "float32" (e.g. layer_dense(..., activation = '
        f'"{activation}", dtype = "float32")), or end the model with a separate float32 '
        f'Activation("{activation}") layer.'
    )
    chosen = _chosen_automatically(layer)
    if chosen is not None:
        finding += (
            f' gpu_setup() chose {chosen.policy} for this GPU (mixed_precision = "auto": '
            f"{chosen.reason})."
        )
        advice = advice[:-1] + ', or train in float32: gpu_setup(mixed_precision = "float32").'
    return {"layer": layer, "finding": finding, "advice": advice}


def _chosen_automatically(layer: object) -> PrecisionChoice | None:
    """gpu_setup()'s precision when its "auto" chose the policy ``layer`` follows."""
    chosen = config.setup.precision
    policy = getattr(getattr(layer, "dtype_policy", None), "name", None)
    if chosen is None or not chosen.automatic or chosen.policy != policy:
        return None
    return chosen


def output_precision_warning(model: Model) -> str | None:
    """A warning when the model's output activation runs in float16/bfloat16, else None."""
    issue = output_precision_issue(model)
    return None if issue is None else f"{issue['finding']} {issue['advice']}"


# The models warned about in this session: a WeakSet matches by identity and forgets a model
# when it is freed, so a new model that reuses a freed one's id() is not mistaken for it.
_WARNED: weakref.WeakSet = weakref.WeakSet()


def warn_once(model: Model) -> bool:
    """Whether ``model`` is to be warned about now: True the first time it is asked about."""
    if model in _WARNED:
        return False
    _WARNED.add(model)
    return True


def precision_check(model: Model) -> dict[str, object]:
    """gpu_precision_check(): ``finding``, the output-precision warning (None), and ``warn``,
    whether to raise it (once per model: ``warn_once``, which gpu_fit() shares)."""
    finding = output_precision_warning(model)
    return {"finding": finding, "warn": finding is not None and warn_once(model)}


def precisions_for(compute_capability: str | None) -> list[str]:
    """The policies worth trying where the model trains: those the device computes natively.

    On the CPU float32 and mixed_bfloat16 (which runs there, though rarely
    faster); on a GPU mixed_float16 from compute capability 7.0 (Tensor
    Cores) and mixed_bfloat16 from 8.0.
    """
    if compute_capability is None:
        return ["float32", "mixed_bfloat16"]
    major = int(str(compute_capability).split(".")[0])
    return (
        ["float32"]
        + (["mixed_bfloat16"] if major >= 8 else [])
        + (["mixed_float16"] if major >= 7 else [])
    )


# A built model's policy changed in place ---------------------------------------------------
def set_apart(keras: ModuleType, model: Model, layer: Layer) -> bool:
    """Whether ``layer`` keeps its own policy when ``model``'s changes: a policy other than the
    model's was given it on purpose, and an output layer computing a softmax or sigmoid must
    stay float32."""
    activation = getattr(getattr(layer, "activation", None), "__name__", None)
    probability = activation in PROBABILITY_ACTIVATIONS or isinstance(layer, keras.layers.Softmax)
    output = model.layers[-1] if model.layers else None
    return layer.dtype_policy.name != model.dtype_policy.name or (layer is output and probability)


def change_policy(keras: ModuleType, model: Model, policy: str) -> None:
    """Give a built ``model`` the dtype ``policy`` in place: each of its layers (but those
    ``set_apart``) computes in the policy's dtype, and their float variables (but LoRA's
    adapters, float32 as Keras makes them) are cast to its variable dtype ("bfloat16": weights
    in 16 bits, and then the optimizer's slots Keras makes like them). The optimizer must not
    be built yet (its slots would keep the old dtype)."""
    target = keras.dtype_policies.get(policy)
    layers = compat.flatten_layers(model, include_self=True)
    apart = [layer for layer in layers if set_apart(keras, model, layer)]
    kept = {id(variable) for layer in apart for variable in layer.weights}
    old = model.dtype_policy.variable_dtype
    for layer in layers:
        if layer not in apart:
            layer.dtype_policy = target
    if target.variable_dtype != old:
        for variable in model.weights:
            adapter = variable.path.endswith(LORA_ADAPTERS)
            if id(variable) not in kept and variable.dtype == old and not adapter:
                compat.recast_variable(variable, target.variable_dtype)
    # the traced steps hold the old dtypes (on TensorFlow, the old variables)
    model.train_function = model.test_function = model.predict_function = None
