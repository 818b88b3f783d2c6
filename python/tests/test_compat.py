"""compat: the private Keras, TensorFlow and JAX attributes gpukeras uses, and the train
function's wrappers.

The attributes are looked for on real objects of the installed versions: when
a release moves one, a test here fails naming that release and the one
compat.py was written for.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TypeGuard

import numpy as np
import pytest

from gpukeras.core import compat
from gpukeras.core.runtime import config

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "inst" / "python" / "gpukeras"
# Where gpukeras' own code is: the package, the benchmarks, the tests and their scripts;
# not this file, which names private things to check them, nor the NVML double (ctypes').
CHECKED = (CORE, ROOT / "bench", ROOT / "python" / "tests")
HERE = Path(__file__).resolve()
NOT_CHECKED = (CORE / "core" / "compat.py", HERE, HERE.with_name("nvml_double.py"))
PRIVATE_MODULES = (
    "keras.src",
    "tensorflow.python",
    "tensorflow.tsl",
    "jax._src",
    "optuna.storages._",
)
# Names the standard library documents with a leading underscore: not a framework's
# (os._exit ends a forked worker without the parent's exit handlers).
STDLIB_DOCUMENTED = {("os", "_exit")}
# A base class's dotted name starts with one of these (its module, or the usual alias).
FRAMEWORKS = {"keras": "keras", "tf": "tensorflow", "tensorflow": "tensorflow", "jax": "jax"}


def private(name: str) -> bool:
    """A private name; gpukeras' own marks on framework objects (``_gpukeras_*``) are not
    private to the framework."""
    return name.startswith("_") and not name.startswith(("__", "_gpukeras_"))


def on_self(node: ast.AST) -> TypeGuard[ast.Attribute]:
    return isinstance(node, ast.Attribute) and getattr(node.value, "id", None) in ("self", "cls")


def class_names(cls: ast.ClassDef) -> set[str]:
    """The private names a class's code sets or defines on itself: ``self._x = ...``, its
    methods, its class attributes."""
    names = {
        node.attr for node in ast.walk(cls) if on_self(node) and isinstance(node.ctx, ast.Store)
    }
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(item.name)
        elif isinstance(item, (ast.Assign, ast.AnnAssign)):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {name for name in names if private(name)}


def dotted(node: ast.AST, assigned: dict[str, ast.AST]) -> str | None:
    """``node`` as a dotted name (``keras.callbacks.Callback``); a name the module assigns
    one (``callback_base = keras.callbacks.Callback``) stands for what it was given."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    value = assigned.get(node.id)
    root = dotted(value, {k: v for k, v in assigned.items() if k != node.id}) if value else None
    return ".".join([root or node.id, *reversed(parts)])


@functools.cache
def framework_names(base: str) -> frozenset[str]:
    """The private names the framework class ``base`` (a dotted name) and the classes it
    extends define: methods, class attributes, and what their code sets on ``self``."""
    root, *path = base.split(".")
    owner = config.keras() if root == "keras" else importlib.import_module(FRAMEWORKS[root])
    for part in path:
        owner = getattr(owner, part)
    names: set[str] = set()
    for cls in inspect.getmro(owner)[:-1]:  # object is not the framework's
        names.update(name for name in vars(cls) if private(name))
        with contextlib.suppress(OSError, TypeError):
            source = ast.parse(textwrap.dedent(inspect.getsource(cls)))
            names.update(
                n for c in source.body if isinstance(c, ast.ClassDef) for n in class_names(c)
            )
    return frozenset(names)


def framework_bases(cls: ast.ClassDef, assigned: dict[str, ast.AST]) -> list[str]:
    bases = (dotted(base, assigned) for base in cls.bases)
    return [base for base in bases if base and base.split(".")[0] in FRAMEWORKS]


def module_assignments(tree: ast.Module) -> dict[str, ast.AST]:
    return {
        target.id: node.value
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }


def own_names(source: str) -> set[str]:
    """The private names ``source`` itself defines: module-level ones, functions, classes,
    and what it sets on ``self``, less those a framework base class defines."""
    tree = ast.parse(source)
    assigned = module_assignments(tree)
    names = {name for name in assigned if private(name)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif on_self(node) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {name for name in names if private(name)} - framework_uses(tree, assigned)


def framework_uses(tree: ast.Module, assigned: dict[str, ast.AST]) -> set[str]:
    """The private names classes in ``tree`` set or define that a framework base class of
    theirs defines too."""
    return {
        name
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
        for base in framework_bases(cls, assigned)
        for name in class_names(cls) & framework_names(base)
    }


def own_modules(tree: ast.Module) -> set[str]:
    """The names ``tree`` binds to gpukeras' own modules (a test reading one's private
    function reads gpukeras', not a framework's)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpukeras"):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.asname or a.name for a in node.names if a.name.startswith("gpukeras"))
    return names


def private_uses(source: str, own: set[str] | None = None) -> set[str]:
    """Private framework names ``source`` uses: attributes it reads or sets on objects,
    by name or through getattr/hasattr/setattr, and private modules it imports.

    On ``self`` (or ``cls``) a private name is the framework's where a framework base
    class of the class defines it (an override included), or where gpukeras' own code
    (``own``: by default ``own_names(source)``) defines it nowhere.
    """
    tree = ast.parse(source)
    own = own_names(source) if own is None else own
    assigned = module_assignments(tree)
    found = framework_uses(tree, assigned)
    ours = own_modules(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            of_our_module = isinstance(node.value, ast.Name) and node.value.id in ours
            documented = (getattr(node.value, "id", None), node.attr) in STDLIB_DOCUMENTED
            if not (of_our_module or documented) and (not on_self(node) or node.attr not in own):
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
    sources = {
        path: path.read_text(encoding="utf-8")
        for folder in CHECKED
        for path in folder.rglob("*.py")
        if path not in NOT_CHECKED
    }
    own = set().union(*map(own_names, sources.values()))
    found = {
        (str(path.relative_to(ROOT)), use)
        for path, source in sources.items()
        for use in private_uses(source, own)
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
from gpukeras.distribute import cluster
cluster._leader({})
os._exit(0)
"""
    assert private_uses(source) == {
        "tensorflow.python.eager",
        "keras.src.backend",
        "_flatten_layers",
        "_inbound_nodes",
    }


def test_private_names_of_a_framework_base_class_are_found_on_self() -> None:
    source = """
base = keras.callbacks.BackupAndRestore
class Saver(base):
    def __init__(self):
        self._mine = 0  # not the base's
    def on_epoch_end(self, epoch, logs=None):
        self._last_batch_seen = self._mine  # the base's
    def _save_model(self):  # overrides the base's
        pass
class Own:
    def size(self):
        return self._inherited  # set nowhere in gpukeras
"""
    assert private_uses(source) == {"_last_batch_seen", "_save_model", "_inherited"}


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
        "_jit_compile",
        "_resolve_auto_jit_compile",
        "_symbolic_build",
    ):
        has(model, name, "Keras", version)
    has(model, "_compile_config", "Keras", version)
    has(model._compile_config, "config", "Keras", version)
    has(model.layers[0], "_seed_generators", "Keras", version)
    for name in ("_trainable_variables", "_non_trainable_variables"):
        has(model.layers[0], name, "Keras", version)
    has(keras.random.SeedGenerator(1), "_initial_seed", "Keras", version)
    assert isinstance(keras.initializers.GlorotUniform(), compat.random_initializer_type())
    model.optimizer.build(model.trainable_variables)
    for name in ("_learning_rate", "_tracker", "_track_variable"):
        has(model.optimizer, name, "Keras", version)
    for name in ("_value", "_dtype", "_initialize"):
        has(model.variables[0], name, "Keras", version)
    backup = keras.callbacks.BackupAndRestore("unused", save_freq=2)
    for name in ("_should_save_on_batch", "_last_batch_seen", "_batches_seen_since_last_saving"):
        has(backup, name, "Keras", version)
    try:
        from keras.src.backend.common import global_state
    except ImportError as error:  # the message names the version, as for the attributes
        pytest.fail(f"Keras {version} has no keras.src.backend.common.global_state: {error}")
    has(global_state, "get_global_attribute", "Keras", version)
    from keras.src.trainers.data_adapters import data_adapter_utils, tf_dataset_adapter

    has(data_adapter_utils, "class_weight_to_sample_weights", "Keras", version)
    has(tf_dataset_adapter, "make_class_weight_map_fn", "Keras", version)


def test_the_private_tensorflow_attributes_compat_uses_are_there() -> None:
    tf = pytest.importorskip("tensorflow")
    dataset = tf.data.Dataset.range(8).batch(4).prefetch(1)
    has(dataset, "_input_dataset", "TensorFlow", tf.__version__)
    has(dataset._input_dataset, "_batch_size", "TensorFlow", tf.__version__)
    from tensorflow.python.eager import context
    from tensorflow.python.framework import config as tf_config
    from tensorflow.python.profiler import trace
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    has(xplane_pb2, "XSpace", "TensorFlow", tf.__version__)
    has(tf_config, "is_op_determinism_enabled", "TensorFlow", tf.__version__)
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


def test_the_private_optuna_names_compat_uses_are_there() -> None:
    import optuna

    base = compat.optuna_heartbeat_base()
    for name in ("record_heartbeat", "_get_stale_trial_ids", "get_heartbeat_interval"):
        has(base, name, "Optuna", optuna.__version__)
    assert issubclass(optuna.storages.RDBStorage, base)
    frozen = optuna.create_study().ask()
    assert compat.optuna_trial_id(frozen) == 0


def test_the_private_python_names_compat_uses_are_there() -> None:
    import threading

    assert callable(getattr(threading, "_register_atexit", None)), (
        "this Python has no threading._register_atexit, which gpukeras.core.compat uses"
    )


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


def test_backup_batches_count_toward_the_next_save_as_keras_counts() -> None:
    backup = config.keras().callbacks.BackupAndRestore("unused", save_freq=2)
    assert [compat.backup_due(backup, batch) for batch in range(4)] == [False, True, False, True]
    compat.backup_count_restart(backup)  # a new epoch
    compat.backup_batch_passed(backup, 2)  # batches 0 to 2 went by
    assert [compat.backup_due(backup, batch) for batch in (3, 4)] == [False, True]
    assert compat.backup_due(backup, 8)  # steps_per_execution's leap counts its batches


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
