"""precision: the dtype policy that suits a GPU, and output layers it would distort."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from gpukeras import bridge
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.runtime import config
from gpukeras.gpu import precision


@pytest.mark.parametrize(
    ("capability", "policy", "loss_scaling", "reason"),
    [
        ("6.1", "float32", False, "compute capability 6.1 < 7.0: no Tensor Cores"),
        ("7.0", "mixed_float16", True, "compute capability 7.0 is 7.x: float16 Tensor Cores"),
        ("7.5", "mixed_float16", True, "compute capability 7.5 is 7.x: float16 Tensor Cores"),
        ("8.0", "mixed_bfloat16", False, "compute capability 8.0 >= 8.0: bfloat16"),
        ("8.6", "mixed_bfloat16", False, "compute capability 8.6 >= 8.0: bfloat16"),
        ("9.0", "mixed_bfloat16", False, "compute capability 9.0 >= 8.0: bfloat16"),
        ("12.0", "mixed_bfloat16", False, "compute capability 12.0 >= 8.0: bfloat16"),
        (None, "float32", False, "no GPU: mixed precision does not speed up the CPU"),
    ],
)
def test_auto_follows_compute_capability(
    capability: str | None, policy: str, loss_scaling: bool, reason: str
) -> None:
    choice = precision.choose_policy("auto", capability)
    assert choice.policy == policy
    assert choice.loss_scaling is loss_scaling
    assert choice.suits_device is True  # auto only picks what pays
    assert choice.reason.startswith(reason)


@pytest.mark.parametrize(
    ("requested", "capability", "policy", "suits", "why_not"),
    [
        ("float16", "7.5", "mixed_float16", True, None),
        ("float16", "9.0", "mixed_float16", True, None),
        ("float16", "6.1", "mixed_float16", False, "on compute capability 6.1"),
        ("float16", None, "mixed_float16", False, "on the CPU"),
        ("bfloat16", "8.0", "mixed_bfloat16", True, None),
        ("bfloat16", "7.5", "mixed_bfloat16", False, "on compute capability 7.5"),
        ("bfloat16", None, "mixed_bfloat16", False, "on the CPU"),
        ("float32", "9.0", "float32", True, None),
        ("float32", None, "float32", True, None),
        ("mixed_float16", "7.0", "mixed_float16", True, None),
        ("mixed_bfloat16", "6.1", "mixed_bfloat16", False, "on compute capability 6.1"),
    ],
)
def test_explicit_choice_is_applied_and_judged(
    requested: str, capability: str | None, policy: str, suits: bool, why_not: str | None
) -> None:
    choice = precision.choose_policy(requested, capability)
    assert choice.policy == policy
    assert choice.loss_scaling is (policy == "mixed_float16")
    assert choice.suits_device is suits
    if why_not is None:
        assert choice.reason == f"asked for {policy}"
    else:
        needs = "7.0" if policy == "mixed_float16" else "8.0"
        assert choice.reason == (
            f"asked for {policy}; {why_not} it gives no speed-up "
            f"(needs compute capability >= {needs}) and costs precision"
        )


@pytest.mark.parametrize("requested", ["float8", "AUTO", "half", ""])
def test_unknown_choice_is_a_bad_argument(requested: str) -> None:
    with pytest.raises(BadArgumentError) as raised:
        precision.choose_policy(requested, "9.0")
    assert raised.value.r_class == "gpukeras_error_bad_argument"
    assert f"not '{requested}'" in str(raised.value)
    assert "'auto', 'float16', 'bfloat16' or 'float32'" in str(raised.value)


def test_policy_names_are_keras_policies() -> None:
    keras = config.keras()
    for name in set(precision.POLICIES.values()):
        assert keras.DTypePolicy(name).name == name


# ---- output precision ----


@pytest.fixture
def global_policy() -> Iterator[Callable[[str], None]]:
    """Sets Keras' global dtype policy for one test, then puts the old one back."""
    keras = config.keras()
    saved = keras.config.dtype_policy()
    yield keras.config.set_dtype_policy
    keras.config.set_dtype_policy(saved)


def _model(*layers: object) -> object:
    keras = config.keras()
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), *layers])


@pytest.mark.parametrize(
    ("policy", "dtype"), [("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")]
)
@pytest.mark.parametrize("activation", ["softmax", "sigmoid"])
def test_low_precision_probability_output_warns(
    global_policy: Callable[[str], None], policy: str, dtype: str, activation: str
) -> None:
    keras = config.keras()
    global_policy(policy)
    model = _model(keras.layers.Dense(3, activation=activation, name="probabilities"))
    assert model.layers[-1].compute_dtype == dtype
    warning = precision.output_precision_warning(model)
    assert warning is not None
    assert warning.startswith(
        f"The output layer 'probabilities' computes its {activation} in {dtype}"
    )
    assert 'dtype = "float32"' in warning
    assert f'activation = "{activation}"' in warning


def test_the_warning_says_when_gpu_setup_chose_the_precision_for_the_gpu(
    global_policy: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU of compute capability >= 8.0 "auto" sets mixed_bfloat16: the warning says
    gpu_setup() chose it, and both ways out; a policy the user asked for is theirs."""
    keras = config.keras()
    global_policy("mixed_bfloat16")
    model = _model(keras.layers.Dense(3, activation="softmax", name="probabilities"))
    monkeypatch.setattr(config.setup, "precision", precision.choose_policy("auto", "9.0"))
    warning = precision.output_precision_warning(model)
    assert warning is not None
    assert 'gpu_setup() chose mixed_bfloat16 for this GPU (mixed_precision = "auto"' in warning
    assert "compute capability 9.0" in warning
    assert 'dtype = "float32"' in warning
    assert 'gpu_setup(mixed_precision = "float32")' in warning
    monkeypatch.setattr(config.setup, "precision", precision.choose_policy("bfloat16", "9.0"))
    asked = precision.output_precision_warning(model)
    assert asked is not None and "gpu_setup() chose" not in asked


def test_per_layer_policy_warns_without_a_global_one(global_policy: Callable[[str], None]) -> None:
    keras = config.keras()
    global_policy("float32")
    model = _model(keras.layers.Dense(3, activation="softmax", dtype="mixed_float16"))
    assert "softmax in float16" in precision.output_precision_warning(model)


@pytest.mark.parametrize(
    "last",
    [
        lambda keras: keras.layers.Softmax(),
        lambda keras: keras.layers.Activation("softmax"),
        lambda keras: keras.layers.Activation("sigmoid"),
    ],
    ids=["Softmax", "Activation-softmax", "Activation-sigmoid"],
)
def test_separate_probability_layer_warns(
    global_policy: Callable[[str], None], last: Callable[[object], object]
) -> None:
    global_policy("mixed_bfloat16")
    model = _model(last(config.keras()))
    warning = precision.output_precision_warning(model)
    assert warning is not None
    assert "in bfloat16" in warning


def test_float32_policy_does_not_warn(global_policy: Callable[[str], None]) -> None:
    global_policy("float32")
    model = _model(config.keras().layers.Dense(3, activation="softmax"))
    assert precision.output_precision_warning(model) is None


def test_float32_output_layer_under_mixed_policy_does_not_warn(
    global_policy: Callable[[str], None],
) -> None:
    keras = config.keras()
    global_policy("mixed_float16")
    model = _model(keras.layers.Dense(3, activation="softmax", dtype="float32"))
    assert model.layers[0].compute_dtype == "float16"  # the policy is on
    assert model.layers[-1].compute_dtype == "float32"
    assert precision.output_precision_warning(model) is None


def test_float32_activation_after_low_precision_logits_does_not_warn(
    global_policy: Callable[[str], None],
) -> None:
    keras = config.keras()
    global_policy("mixed_float16")
    model = _model(keras.layers.Dense(3), keras.layers.Activation("softmax", dtype="float32"))
    assert precision.output_precision_warning(model) is None


@pytest.mark.parametrize("activation", [None, "relu", "tanh"])
def test_other_outputs_do_not_warn(
    global_policy: Callable[[str], None], activation: str | None
) -> None:
    global_policy("mixed_float16")
    model = _model(config.keras().layers.Dense(1, activation=activation))
    assert model.layers[-1].compute_dtype == "float16"
    assert precision.output_precision_warning(model) is None


def test_the_check_says_to_warn_once_per_model(global_policy: Callable[[str], None]) -> None:
    """gpu_precision_check() and gpu_fit() share the core's memory of the models warned about:
    the finding comes back every time, the warning only the first time for a model."""
    keras = config.keras()
    global_policy("float32")
    model = _model(keras.layers.Dense(3, activation="softmax", dtype="mixed_float16"))
    first, second = precision.precision_check(model), precision.precision_check(model)
    assert first["warn"] is True and second["warn"] is False
    assert first["finding"] == second["finding"] and "softmax in float16" in first["finding"]
    other = _model(keras.layers.Dense(3, activation="softmax", dtype="mixed_float16"))
    assert precision.warn_once(other) is True
    safe = _model(keras.layers.Dense(3, activation="softmax"))
    assert precision.precision_check(safe) == {"finding": None, "warn": False}


@pytest.mark.parametrize(
    "make",
    [
        lambda keras: "model",
        lambda keras: None,
        lambda keras: keras.layers.Dense(3, activation="softmax"),
        lambda keras: keras.Sequential(),
    ],
    ids=["string", "None", "layer", "empty-model"],
)
def test_not_a_model_with_layers_is_a_bad_argument(make: Callable[[object], object]) -> None:
    thing = make(config.keras())
    with pytest.raises(BadArgumentError, match="model must be a Keras 3 model with layers"):
        precision.output_precision_warning(thing)


def test_bad_model_through_the_bridge_is_classed() -> None:
    answer = bridge.call("output_precision_warning", {"model": [1, 2]})
    assert answer["ok"] is False
    assert answer["r_class"] == "gpukeras_error_bad_argument"
    assert answer["message"].endswith("not a list.")
    assert answer["traceback"] is None
