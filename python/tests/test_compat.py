"""compat: the private Keras, TensorFlow and JAX attributes gpukeras uses, and the train
function's wrappers.

The attributes are looked for on real objects of the installed versions: when
a release moves one, a test here fails naming that release and the one
compat.py was written for.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gpukeras.core import compat
from gpukeras.core.runtime import config

CORE = Path(__file__).resolve().parents[2] / "inst" / "python" / "gpukeras"
PRIVATE_MODULES = ("keras.src", "tensorflow.python", "tensorflow.tsl", "jax._src")


def private_uses(source: str) -> set[str]:
    """Private attributes ``source`` reads or sets on objects other than its own (``self``),
    by name or through getattr/hasattr/setattr, and private modules it imports. gpukeras'
    own marks on framework objects (``_gpukeras_*``) are not private to the framework."""

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith(("__", "_gpukeras_"))

    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.add(node.attr)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
            "getattr",
            "hasattr",
            "setattr",
        ):
            name = node.args[1] if len(node.args) > 1 else None
            if (
                isinstance(name, ast.Constant)
                and isinstance(name.value, str)
                and private(name.value)
            ):
                found.add(name.value)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PRIVATE_MODULES):
            found.add(str(node.module))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(PRIVATE_MODULES))
    return found


def test_private_framework_attributes_are_used_in_compat_alone() -> None:
    found = {
        (str(path.relative_to(CORE)), use)
        for path in CORE.rglob("*.py")
        if path != CORE / "core" / "compat.py"
        for use in private_uses(path.read_text(encoding="utf-8"))
    }
    assert found == set(), "use these through gpukeras.core.compat"


def test_private_uses_are_found_in_every_form() -> None:
    source = """
import tensorflow.python.eager
from keras.src.backend import global_state
model._flatten_layers()
getattr(layer, "_inbound_nodes", [])
self._own = 1
strategy._gpukeras_cluster = None
x.__class__
"""
    assert private_uses(source) == {
        "tensorflow.python.eager",
        "keras.src.backend",
        "_flatten_layers",
        "_inbound_nodes",
    }


def tiny_model() -> object:
    keras = config.keras()
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dropout(0.5, seed=1), keras.layers.Dense(2)]
    )
    model.compile(optimizer="sgd", loss="mse")
    return model


def has(owner: object, name: str, library: str, version: str) -> None:
    """Fail naming the installed ``library`` ``version`` when ``owner`` lacks ``name``."""
    assert hasattr(owner, name), (
        f"{library} {version} has no {type(owner).__name__}.{name}, which gpukeras.core.compat "
        f"uses (written for {library} {compat.WRITTEN_FOR[library.lower()]}): update compat.py."
    )


def test_the_private_keras_attributes_compat_uses_are_there() -> None:
    keras = config.keras()
    version = keras.__version__
    model = tiny_model()
    for name in (
        "_flatten_layers",
        "_initial_epoch",
        "_resolve_auto_jit_compile",
        "_symbolic_build",
    ):
        has(model, name, "Keras", version)
    has(model, "_compile_config", "Keras", version)
    has(model._compile_config, "config", "Keras", version)
    has(model.layers[0], "_seed_generators", "Keras", version)
    model.optimizer.build(model.trainable_variables)
    for name in ("_learning_rate", "_tracker", "_track_variable"):
        has(model.optimizer, name, "Keras", version)
    has(model.variables[0], "_value", "Keras", version)
    try:
        from keras.src.backend.common import global_state
    except ImportError as error:  # the message names the version, as for the attributes
        pytest.fail(f"Keras {version} has no keras.src.backend.common.global_state: {error}")
    has(global_state, "get_global_attribute", "Keras", version)


def test_the_private_tensorflow_attributes_compat_uses_are_there() -> None:
    tf = pytest.importorskip("tensorflow")
    dataset = tf.data.Dataset.range(8).batch(4).prefetch(1)
    has(dataset, "_input_dataset", "TensorFlow", tf.__version__)
    has(dataset._input_dataset, "_batch_size", "TensorFlow", tf.__version__)
    from tensorflow.python.eager import context
    from tensorflow.python.profiler import trace
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    has(xplane_pb2, "XSpace", "TensorFlow", tf.__version__)
    has(trace, "_pywrap_traceme", "TensorFlow", tf.__version__)
    has(trace._pywrap_traceme, "traceme_enabled", "TensorFlow", tf.__version__)

    for name in ("_context_handle", "configure_coordination_service", "report_error_to_cluster"):
        has(context.context(), name, "TensorFlow", tf.__version__)


def test_the_private_jax_attributes_compat_uses_are_there() -> None:
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed in this Python")
    import jax
    from jax._src import xla_bridge

    has(xla_bridge, "backends_are_initialized", "JAX", jax.__version__)


def test_what_compat_reads_and_sets_on_a_model() -> None:
    keras = config.keras()
    model = tiny_model()
    assert [g.state.shape for g in compat.seed_generators(model)] == [(2,)]  # the Dropout's
    inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="deep")])
    outer = keras.Sequential([keras.Input((4,)), inner, keras.layers.Dense(1)])
    assert "deep" in [layer.name for layer in compat.flatten_layers(outer)]
    assert "deep" not in [layer.name for layer in outer.layers]
    compat.set_initial_epoch(model, 2)
    history = model.fit(np.zeros((8, 4)), np.zeros((8, 2)), epochs=3, verbose=0)
    assert history.epoch == [2]  # started where it was told to
    compat.set_initial_epoch(model, None)
    optimizer = keras.optimizers.SGD(keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9))
    optimizer.build(model.trainable_variables)
    assert not isinstance(compat.learning_rate_of(optimizer), keras.Variable)  # a schedule
    rate = keras.Variable(0.25, name="learning_rate", trainable=False)
    compat.replace_learning_rate(optimizer, rate)
    assert compat.learning_rate_of(optimizer) is rate
    assert float(optimizer.learning_rate) == pytest.approx(0.25)
    assert any(variable is rate for variable in optimizer.variables)  # tracked, so saved


# The train function's wrappers ------------------------------------------------------
def layered(calls: list[str], name: str) -> Callable[[Callable], Callable]:
    """A wrapper_of whose wrapper notes ``name`` and calls the function it wraps."""

    def wrapper_of(inner: Callable) -> Callable:
        def wrapper(*args: object) -> object:
            calls.append(name)
            return inner(*args)

        return wrapper

    return wrapper_of


def test_train_function_wrappers_stack_innermost_first_whatever_the_order() -> None:
    model = tiny_model()
    calls: list[str] = []

    def own(*args: object) -> str:
        calls.append("keras")
        return "logs"

    model.train_function = own
    compat.wrap_train_function(model, "step_timer", layered(calls, "step_timer"))
    compat.wrap_train_function(model, "resume", layered(calls, "resume"))  # added last
    assert model.train_function() == "logs"
    assert calls == ["step_timer", "resume", "keras"]  # TRAIN_FUNCTION_LAYERS, outside in
    assert compat.TRAIN_FUNCTION_LAYERS == ("resume", "step_timer")

    calls.clear()
    compat.wrap_train_function(model, "step_timer", layered(calls, "timer again"))
    model.train_function()
    assert calls == ["timer again", "resume", "keras"]  # replaced, not stacked twice

    calls.clear()
    compat.unwrap_train_function(model, "resume")
    model.train_function()
    assert calls == ["timer again", "keras"]
    compat.unwrap_train_function(model)
    assert model.train_function is own
    compat.unwrap_train_function(model)  # nothing to take off
    assert model.train_function is own
    with pytest.raises(ValueError, match="not one of"):
        compat.wrap_train_function(model, "logger", layered(calls, "logger"))
