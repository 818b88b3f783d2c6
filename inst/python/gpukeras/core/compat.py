"""Every use of a private Keras, TensorFlow, JAX or Optuna attribute in gpukeras, in one
place: when a release moves one, this module is the one to change. Written for (and read
from the sources of) the versions in ``WRITTEN_FOR``; python/tests/test_compat.py fails,
naming the installed version, when an attribute it uses is gone."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpukeras.core.handles import Layer, Model
from gpukeras.core.runtime import config

WRITTEN_FOR = {"keras": "3.15.1", "tensorflow": "2.21.0", "jax": "0.7.1", "optuna": "5.0.0"}

# gpukeras' wrappers of ``model.train_function``, innermost first: a resumed epoch's skipping
# of batches (``backup``) on Keras' function, the step timer (``timing``) around it, so the
# timer takes every batch Keras asks for, those a resumed epoch lets go by too.
TRAIN_FUNCTION_LAYERS = ("resume", "step_timer")
# On a wrapper: its layer, the function it wraps, and how it was made from that function.
_LAYER = "_gpukeras_layer"

Wrapper = tuple[str, Callable[[Callable], Callable], Callable]


# Training: the train function and the model's state --------------------------
def _wrappers(model: object) -> tuple[object, list[Wrapper]]:
    """Keras' own train function under gpukeras' wrappers, and the wrappers, innermost first."""
    function = getattr(model, "train_function", None)
    found: list[Wrapper] = []
    while hasattr(function, _LAYER):
        layer, inner, wrapper_of = getattr(function, _LAYER)
        found.append((layer, wrapper_of, function))  # type: ignore[arg-type]
        function = inner
    return function, found[::-1]


def _stack(model: object, base: object, wrappers: list[Wrapper]) -> None:
    """Put ``wrappers`` on ``base`` in ``TRAIN_FUNCTION_LAYERS`` order, as the model's function.

    A wrapper already made over the function it now wraps is kept; one whose
    inner function changed is made again over the new one.
    """
    function = base
    for layer, wrapper_of, made in sorted(
        wrappers, key=lambda wrapper: TRAIN_FUNCTION_LAYERS.index(wrapper[0])
    ):
        if made is None or getattr(made, _LAYER)[1] is not function:
            made = wrapper_of(function)  # type: ignore[arg-type]
            setattr(made, _LAYER, (layer, function, wrapper_of))
        function = made
    model.train_function = function  # type: ignore[attr-defined]


def wrap_train_function(
    model: object, layer: str, wrapper_of: Callable[[Callable], Callable]
) -> None:
    """Wrap the model's train function in ``wrapper_of(inner)``, as ``layer``.

    Keras 3.15 builds ``model.train_function`` once (``make_train_function``)
    and calls it for every step with the data iterator last (on JAX, with the
    training state first). Wrappers stack in ``TRAIN_FUNCTION_LAYERS`` order
    whatever order they are put on in; one already in place as ``layer`` is
    replaced.
    """
    if layer not in TRAIN_FUNCTION_LAYERS:
        raise ValueError(f"train function layer {layer!r} is not one of {TRAIN_FUNCTION_LAYERS}")
    base, wrappers = _wrappers(model)
    kept = [wrapper for wrapper in wrappers if wrapper[0] != layer]
    _stack(model, base, [*kept, (layer, wrapper_of, None)])  # type: ignore[list-item]


def unwrap_train_function(model: object, layer: str | None = None) -> None:
    """Take gpukeras' wrapper ``layer`` (by default every one) off the model's train function."""
    base, wrappers = _wrappers(model)
    kept = [wrapper for wrapper in wrappers if layer is not None and wrapper[0] != layer]
    if len(kept) != len(wrappers):
        _stack(model, base, kept)


def forget_step_functions(model: object, all_of_them: bool) -> None:
    """Make Keras build the train function (and with ``all_of_them`` the test and predict
    functions) again at its next call, after settings they were traced with changed.

    Keras 3.15 builds each once and keeps it; it builds one again only when it is None.
    """
    model.train_function = None  # type: ignore[attr-defined]
    if all_of_them:
        model.test_function = None  # type: ignore[attr-defined]
        model.predict_function = None  # type: ignore[attr-defined]


def record_compile_settings(model: object, jit_compile: object, steps_per_execution: int) -> None:
    """Keep ``jit_compile`` and ``steps_per_execution`` in the compile config Keras saves
    with the model (private ``_compile_config``), so a reloaded model has them."""
    compile_config = getattr(model, "_compile_config", None)
    if compile_config is not None and isinstance(getattr(compile_config, "config", None), dict):
        compile_config.config.update(
            jit_compile=jit_compile, steps_per_execution=steps_per_execution
        )


# Keras marks its geometric image layers ``supports_jit = False`` for every backend, for
# TensorFlow's sake, and one such layer turns XLA off for the whole model. On JAX they
# trace under ``jax.jit`` and train the same (measured: identical losses, 3x faster on a
# 2-core CPU; op by op, an augmented CNN ran 250x slower than without them on an H100).
# RandomCrop stays out: on JAX its window is a slice with traced bounds, which jit refuses.
JAX_TRACEABLE_LAYERS = (
    "RandomRotation",
    "RandomZoom",
    "RandomTranslation",
    "RandomShear",
    "RandomPerspective",
)


def blocks_xla(layer: Layer) -> bool:
    """Whether ``layer`` keeps its model from XLA compilation on the configured backend."""
    if getattr(layer, "supports_jit", True) is not False:
        return False
    if config.backend != "jax":
        return True
    keras = config.keras()
    traceable = tuple(getattr(keras.layers, name) for name in JAX_TRACEABLE_LAYERS)
    return not isinstance(layer, traceable)


def auto_jit_compile(model: object) -> bool:
    """Keras' own answer to ``jit_compile="auto"`` for this model (its private resolver),
    except that on JAX the layers in ``JAX_TRACEABLE_LAYERS`` do not turn XLA off."""
    if config.backend == "jax":
        # Keras' resolver on JAX is "every layer supports jit" (trainers/trainer.py)
        return not any(blocks_xla(layer) for layer in flatten_layers(model, include_self=True))
    resolve = getattr(model, "_resolve_auto_jit_compile", None)
    return bool(resolve()) if resolve is not None else bool(model.jit_compile)  # type: ignore[attr-defined]


def set_jit_compile(model: object, value: bool) -> bool:
    """Ask for XLA compilation of the model's steps; return what is in force.

    Keras' setter refuses True (with a warning) where a layer says it does not
    support jit; on JAX the layers of ``JAX_TRACEABLE_LAYERS`` are let through
    (private ``_jit_compile``, which the setter writes)."""
    if value and config.backend == "jax" and auto_jit_compile(model):
        model._jit_compile = True  # type: ignore[attr-defined]
    else:
        model.jit_compile = value  # type: ignore[attr-defined]
    return bool(model.jit_compile)  # type: ignore[attr-defined]


def set_initial_epoch(model: object, epoch: int | None) -> None:
    """The epoch the next ``fit()`` starts at, whatever its ``initial_epoch`` (None: its own).

    Keras' ``BackupAndRestore`` resumes this way (``model._initial_epoch``); the
    value sticks to the model until it is set to None again.
    """
    model._initial_epoch = epoch  # type: ignore[attr-defined]


def flatten_layers(layer: Layer, include_self: bool = False, recursive: bool = True) -> list[Layer]:
    """The layers inside ``layer`` (a model too), nested ones included, in a fixed order.

    ``model.layers`` goes one level deep; Keras' private ``_flatten_layers``
    also walks the layers inside layers (a custom block, a model in a model).
    """
    return list(layer._flatten_layers(include_self=include_self, recursive=recursive))


def compile_config_skipped(model: Model) -> bool:
    """Whether Keras, deserializing ``model``'s config, would skip its ``compile_config``
    with a warning: its class overrides ``compile()`` (a KerasHub task does) but not
    ``compile_from_config()`` (keras/src/trainers/trainer.py, 3.15)."""
    config.keras()
    from keras.src.trainers.trainer import Trainer

    cls = type(model)
    return bool(
        cls.compile is not Trainer.compile
        and cls.compile_from_config is Trainer.compile_from_config
    )


def keras_hub_preset(preset: str) -> tuple[str, dict[str, Any]]:
    """The backbone class KerasHub's own preset loader reads from ``preset``'s config (a name,
    a URL or a folder), and its metadata (``{}`` without one), without building the model or
    reading its weights: KerasHub's private ``preset_utils`` is the only way to.

    Raises:
        ValueError, OSError: KerasHub's own, where the preset cannot be read.
    """
    from keras_hub.src.utils import preset_utils

    backbone = preset_utils.get_preset_loader(preset).check_backbone_class()
    metadata = (
        preset_utils.load_json(preset, preset_utils.METADATA_FILE)
        if preset_utils.check_file_exists(preset, preset_utils.METADATA_FILE)
        else {}
    )
    return str(backbone.__name__), dict(metadata)


def symbolic_build(model: Model, data_batch: object) -> None:
    """Build the model, its compiled loss and metrics and its optimizer for batches like
    ``data_batch`` (a batch, or its spec), as ``fit()`` does on the first batch it takes
    (Keras' private ``_symbolic_build``)."""
    model._symbolic_build(data_batch=data_batch)


def created_trainable(layer: Layer) -> list[Any]:
    """The variables ``layer`` itself made trainable (Keras' private ``_trainable_variables``):
    those a full training trains, also while the layer is frozen or LoRA froze them."""
    return list(getattr(layer, "_trainable_variables", []))


def recast_variable(variable: Any, dtype: str) -> None:
    """Give a Keras variable a new dtype in place, its value cast to it: Keras has no public
    way (a variable's ``_dtype`` is fixed at creation; ``_initialize`` makes the backend's
    value anew, a new tf.Variable on TensorFlow; keras/src/backend/*/core.py, 3.15). Traced
    functions that captured the old value must be made again."""
    value = variable.value
    variable._dtype = dtype
    variable._initialize(config.keras().ops.cast(value, dtype))


def inbound_nodes(layer: Layer) -> list[Any]:
    """The nodes that call ``layer`` in a functional graph (Keras' private ``_inbound_nodes``)."""
    return list(getattr(layer, "_inbound_nodes", []))


def distribute_strategy_of(model: Model) -> object:
    """The tf.distribute strategy the model's variables were made under, or None
    (TensorFlow's Keras records it as the private ``_distribute_strategy``)."""
    return getattr(model, "_distribute_strategy", None)


def seed_generators(model: Model) -> list[Any]:
    """The model's seed generators (Dropout and other random layers), in a fixed order.

    ``save_weights`` leaves them out; they hang on each layer as ``_seed_generators``.
    """
    generators: list[Any] = []
    for layer in flatten_layers(model, include_self=True):
        generators.extend(layer_seed_generators(layer))
    return generators


def own_variables(layer: Layer) -> list[Any]:
    """The variables ``layer`` made itself (its weights; not its seed generators' states, nor
    those of the layers inside it): Keras' private ``_trainable_variables`` and
    ``_non_trainable_variables``."""
    return [*layer._trainable_variables, *layer._non_trainable_variables]


def layer_seed_generators(layer: Layer) -> list[Any]:
    """The seed generators ``layer`` holds itself (Keras' private ``_seed_generators``)."""
    return list(getattr(layer, "_seed_generators", []))


def random_initializer_type() -> Any:
    """Keras' base of the initializers that draw from a seed (``RandomInitializer``, not
    exported): given no seed, each takes Keras' default seed as it is made."""
    from keras.src.initializers.random_initializers import RandomInitializer

    return RandomInitializer


def generator_unseeded(generator: object) -> bool:
    """Whether a seed generator was made without a seed (it took Keras' default seed: the
    private ``_initial_seed`` is None)."""
    return generator._initial_seed is None  # type: ignore[attr-defined]


def attached_value(variable: object) -> object:
    """A variable's value as it holds it now; None while Keras' JAX trainer has detached it."""
    return variable._value  # type: ignore[attr-defined]


def reattach_value(variable: object, value: object) -> None:
    """Give a variable ``value`` back if Keras' JAX trainer left it without one."""
    if variable._value is None:  # type: ignore[attr-defined]
        variable._value = value  # type: ignore[attr-defined]


def learning_rate_of(optimizer: object) -> object:
    """What the optimizer holds as its learning rate: a variable or a schedule."""
    return optimizer._learning_rate  # type: ignore[attr-defined]


def replace_learning_rate(optimizer: object, variable: object) -> None:
    """Make ``variable`` the optimizer's learning rate where it held a schedule.

    Keras' setter refuses a number once the optimizer has a schedule; this
    tracks the variable as the optimizer's constructor would have.
    """
    tracker = optimizer._tracker  # type: ignore[attr-defined]
    locked = tracker.locked
    tracker.unlock()
    optimizer._track_variable(variable)  # type: ignore[attr-defined]
    if locked:
        tracker.lock()
    optimizer._learning_rate = variable  # type: ignore[attr-defined]


# Keras' optimizer EMA (gpu_step(ema = )) ------------------------------------------
def ema_averages(optimizer: object) -> list[Any]:
    """The optimizer's moving averages of the trainable variables (Keras' private
    ``_model_variables_moving_average``, made by ``build()`` when ``use_ema``); [] for none."""
    return list(getattr(optimizer, "_model_variables_moving_average", None) or [])


def start_ema(optimizer: object, variables: list[Any]) -> None:
    """Keras' EMA on an optimizer built without it: its averages made now (as ``build()``
    makes them), each starting from its variable's value."""
    averages = optimizer.add_optimizer_variables(variables, "average")  # type: ignore[attr-defined]
    for average, variable in zip(averages, variables):
        average.assign(variable)
    optimizer._model_variables_moving_average = averages  # type: ignore[attr-defined]


def monitor_mode(keras: Any, model: object, monitor: str) -> str:
    """ "min" or "max" for ``monitor``, as Keras' callbacks infer ``mode = "auto"`` (a loss
    is minimized, a compiled metric goes its own direction; its private
    ``_set_monitor_op``). ValueError where Keras cannot tell."""
    probe = keras.callbacks.EarlyStopping(monitor=monitor)
    probe.set_model(model)
    probe._set_monitor_op()
    return "max" if probe.monitor_op is keras.ops.greater else "min"


@contextlib.contextmanager
def accumulating(
    optimizer: object, steps: int, scope: contextlib.AbstractContextManager | None = None
) -> Iterator[None]:
    """Make ``optimizer`` apply one update per ``steps`` micro-batches while the block runs,
    with the mean of their gradients (Keras' ``gradient_accumulation_steps``), then give it
    back as it was.

    Keras counts micro-batches in the private ``_iterations`` (its public
    ``iterations`` is then ``_iterations // steps``, the updates, which Adam's
    bias correction reads; a learning-rate schedule reads ``_iterations``) and
    keeps one accumulator per trainable variable, made by ``build`` only when
    the setting is there from the start. So on entry the counter becomes the
    updates done times ``steps`` (each fit begins a fresh accumulation) and a
    built optimizer gets its accumulators; on exit the counter is the updates
    again, an incomplete accumulation's gradients are dropped with the
    accumulators (so the optimizer's variables are the ones it had), and the
    setting is the user's again. ``scope`` is the strategy's, where the
    accumulators of a built optimizer are made (TensorFlow's need it).
    """
    kept = optimizer.gradient_accumulation_steps  # type: ignore[attr-defined]
    counter = optimizer._iterations  # type: ignore[attr-defined]
    optimizer.gradient_accumulation_steps = steps  # type: ignore[attr-defined]
    if optimizer.built:  # type: ignore[attr-defined]
        tracker = optimizer._tracker  # type: ignore[attr-defined]
        locked = tracker.locked
        tracker.unlock()
        with (
            scope or contextlib.nullcontext(),
            config.keras().name_scope(optimizer.name, caller=optimizer),  # type: ignore[attr-defined]
        ):
            optimizer._accumulated_gradients = [  # type: ignore[attr-defined]
                optimizer.add_variable_from_reference(variable, name="gradient_accumulator")  # type: ignore[attr-defined]
                for variable in optimizer._trainable_variables  # type: ignore[attr-defined]
            ]
        if locked:
            tracker.lock()
    counter.assign(counter * steps)
    try:
        yield
    finally:
        counter.assign(counter // steps)
        for accumulator in getattr(optimizer, "_accumulated_gradients", []):
            optimizer._untrack_variable(accumulator)  # type: ignore[attr-defined]
        optimizer._accumulated_gradients = []  # type: ignore[attr-defined]
        optimizer.gradient_accumulation_steps = kept  # type: ignore[attr-defined]


# Keras' BackupAndRestore: counting batches toward the next save ------------------
def backup_due(callback: object, batch: int) -> bool:
    """Whether a ``BackupAndRestore`` (or subclass) saving every ``save_freq`` batches is due
    to save after ``batch``, counted as Keras counts: the batches since its last save,
    steps_per_execution's leaps included (private ``_should_save_on_batch``,
    keras/src/callbacks/backup_and_restore.py, 3.15)."""
    return bool(callback._should_save_on_batch(batch))  # type: ignore[attr-defined]


def backup_batch_passed(callback: object, batch: int) -> None:
    """Count the batches up to ``batch`` as gone by, not toward the next save (a resumed
    epoch's batches that are let go by; private ``_last_batch_seen``, Keras 3.15)."""
    callback._last_batch_seen = batch  # type: ignore[attr-defined]


def backup_count_restart(callback: object) -> None:
    """Count toward the next save from the next epoch's first batch (after the save at an
    epoch's end; private ``_last_batch_seen`` and ``_batches_seen_since_last_saving``,
    Keras 3.15)."""
    callback._last_batch_seen = -1  # type: ignore[attr-defined]
    callback._batches_seen_since_last_saving = 0  # type: ignore[attr-defined]


# TensorFlow's eager context (multi-worker training) ----------------------------
def _tf_context() -> object:
    from tensorflow.python.eager import context

    return context.context()


def tensorflow_context_started() -> bool:
    """Whether TensorFlow's eager context has been initialised (its devices and collectives set)."""
    return _tf_context()._context_handle is not None  # type: ignore[attr-defined]


def configure_coordination_service(**settings: object) -> None:
    """Configure TensorFlow's coordination service (before the context starts)."""
    _tf_context().configure_coordination_service(**settings)  # type: ignore[attr-defined]


def report_error_to_cluster(code: int, message: str) -> None:
    """Make every worker of the cluster fail with ``message`` (the coordination service)."""
    _tf_context().report_error_to_cluster(code, message)  # type: ignore[attr-defined]


# Setup, data pipelines and other backends ---------------------------------------
def tf_op_determinism_enabled() -> bool:
    """Whether TensorFlow's op determinism is on (``enable_op_determinism()``, or
    TF_DETERMINISTIC_OPS): TensorFlow 2.21 exports the switch but not its reading,
    ``is_op_determinism_enabled`` in ``tensorflow.python.framework.config``."""
    from tensorflow.python.framework import config as tf_config

    return bool(tf_config.is_op_determinism_enabled())


def mend_tensorflow_trace() -> None:
    """Undo what a JAX trace's start and stop do to TensorFlow, where it is installed.

    XLA's Python hooks (python_hooks.cc, EnableTraceMe) import
    ``tensorflow.python.profiler.trace`` and set its ``enabled`` to a bool, as
    older TensorFlow had it; TensorFlow 2.21 calls ``enabled()``, so measured
    here every later TensorFlow op (tf.data included) fails with "'bool'
    object is not callable". Put TensorFlow's function back.
    """
    trace = sys.modules.get("tensorflow.python.profiler.trace")
    if trace is not None and not callable(trace.enabled):
        trace.enabled = trace._pywrap_traceme.traceme_enabled  # type: ignore[attr-defined]


@contextlib.contextmanager
def tensorflow_left_unloaded() -> Iterator[None]:
    """For the block, Keras does not import TensorFlow where it is not loaded yet.

    On another backend Keras imports TensorFlow, wherever it is installed, for a seed
    (``set_random_seed``) or to ask whether an object it saves is a TensorFlow one
    (``serialize_keras_object``: ``tf.TensorShape``, ``tf.DType``; no object can be of a
    module not loaded): 1.7-2.0 s on 2 CPU cores (2026-11-26), and TensorFlow's absl and
    oneDNN start-up lines on stderr, twice, in gpu_save() on JAX. Keras asks
    ``module_utils.tensorflow.available`` (a lazy module) first; in the block it answers no.
    """
    from keras.src.utils import module_utils

    lazy = module_utils.tensorflow
    if lazy._available is not None or "tensorflow" in sys.modules:
        yield
        return
    lazy._available = False
    try:
        yield
    finally:
        lazy._available = None


def set_random_seed(keras: Any, seed: int, model: Model | None = None) -> None:
    """``keras.utils.set_random_seed(seed)`` (Python, NumPy, the backend, Keras' global
    seed), but TensorFlow only where it is loaded already (``tensorflow_left_unloaded``): it
    is seeded when gpukeras loads it for tf.data (``seed_loaded_tensorflow``).

    Seeding a loaded TensorFlow clears its eager kernel cache (``TFE_ContextClearCaches``),
    which frees the resource each tensorflow-text SentencePiece tokenizer made when it was
    built: the next batch through it fails ("Resource localhost/_0_SentencepieceOp/...
    does not exist"). So the KerasHub SentencePiece tokenizers of ``model`` (a Gemma's, a
    T5's, in its preprocessor) are made again from their own proto.
    """
    with tensorflow_left_unloaded():
        keras.utils.set_random_seed(seed)
    hub = sys.modules.get("keras_hub")  # without KerasHub imported there are none
    if model is None or hub is None or "tensorflow" not in sys.modules:
        return
    for layer in flatten_layers(model):
        if isinstance(layer, hub.tokenizers.SentencePieceTokenizer) and layer.proto is not None:
            layer.set_proto(layer.proto)


def seed_loaded_tensorflow(tf: Any) -> None:
    """Give TensorFlow, just loaded, the seed Keras was last given (``set_random_seed``)."""
    from keras.src.utils import rng_utils

    seed = rng_utils.get_random_seed()
    if seed is not None:
        tf.random.set_seed(seed)


# Rematerialization --------------------------------------------------------------------
# The mode gpu_fit(step = gpu_step(remat = TRUE)) asks of each backend: TensorFlow's
# tf.recompute_grad takes no keyword arguments in a graph, so Keras 3.15's "full" fails there
# on every layer called with ``training=``; its "activations" mode recomputes the activation
# functions alone.
REMAT_MODES = {"jax": "full", "tensorflow": "activations"}


def remat_mode(model: Model) -> str | None:
    """The rematerialization mode the model's layers run with (Keras' private
    ``_remat_mode``, set from the RematScope a layer is built in); None for none."""
    for layer in flatten_layers(model, include_self=False):
        scope = getattr(layer, "_remat_mode", None)
        if scope is not None:
            return str(scope.mode)
    return None


@contextlib.contextmanager
def rematerialized(model: Model, mode: str) -> Any:
    """For the block: every layer of ``model`` recomputes in the backward pass by ``mode``
    (as if built inside ``keras.RematScope(mode=mode)``: Keras reads the scope when a layer
    is made, into ``_remat_mode``), and so does every layer made meanwhile (a strategy's copy
    of the model); then each as it was. The step functions are traced again either side."""
    keras = config.keras()
    scope = keras.RematScope(mode=mode)
    layers = flatten_layers(model, include_self=False)
    before = [(layer, getattr(layer, "_remat_mode", None)) for layer in layers]
    for layer in layers:
        layer._remat_mode = scope
    forget_step_functions(model, all_of_them=True)
    try:
        with keras.RematScope(mode=mode):
            yield
    finally:
        for layer, kept in before:
            layer._remat_mode = kept
        forget_step_functions(model, all_of_them=True)


# Class weights, as Keras' fit() applies them ------------------------------------------
def class_weight_to_sample_weights(y: object, class_weight: dict[int, float]) -> Any:
    """Each row's weight for ``class_weight`` ({class number: weight}; a class not in it
    weighs 1) and labels ``y`` (class numbers, or one-hot rows: their argmax), as Keras'
    fit() makes them from arrays (keras/src/trainers/data_adapters/data_adapter_utils.py,
    3.15)."""
    config.keras()
    from keras.src.trainers.data_adapters import data_adapter_utils

    return data_adapter_utils.class_weight_to_sample_weights(y, class_weight)


def class_weight_map(class_weight: dict[int, float]) -> Callable:
    """The function Keras' fit() maps over a tf.data dataset to add ``class_weight`` as each
    batch's sample weights (keras/src/trainers/data_adapters/tf_dataset_adapter.py, 3.15)."""
    config.keras()
    from keras.src.trainers.data_adapters import tf_dataset_adapter

    return tf_dataset_adapter.make_class_weight_map_fn(class_weight)


def global_dtype_policy_set() -> bool:
    """Whether Keras' global dtype policy has been set (or read) in this process.

    ``keras.config.dtype_policy()`` returns the float32 default both when no
    policy was set and when float32 was set on purpose; only Keras' global
    state tells them apart. Reading the policy (as building a layer does) also
    sets it, to the default (keras/src/dtype_policies/dtype_policy.py, 3.15).
    """
    config.keras()
    from keras.src.backend.common import global_state

    return global_state.get_global_attribute("dtype_policy") is not None


def xspace_message() -> Any:
    """TensorFlow's message class for a profiler trace (``.xplane.pb``): ``XSpace``, from the
    protobuf module TensorFlow 2.21 keeps under ``tensorflow.tsl``."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    return xplane_pb2.XSpace


def jax_backends_started() -> bool:
    """Whether JAX has initialised its backends (after which XLA variables no longer act)."""
    from jax._src import xla_bridge

    return bool(xla_bridge.backends_are_initialized())


def dataset_chain(dataset: object, limit: int = 50) -> list[object]:
    """A tf.data dataset and the datasets it was made from, outermost first.

    tf.data keeps each transformation's input in the private ``_input_dataset``
    (TensorFlow 2.21); a source or a merge of several datasets ends the chain.
    """
    chain: list[object] = []
    current = dataset
    while current is not None and len(chain) < limit:
        chain.append(current)
        current = getattr(current, "_input_dataset", None)
    return chain


def dataset_steps(dataset: object) -> list[str]:
    """The transformations of ``dataset``, outermost first: 'Prefetch', 'ParallelMap', ...

    Named by tf.data's private classes (``_PrefetchDataset``, ``CacheDataset``).
    """
    return [
        type(step).__name__.lstrip("_").removesuffix("Dataset") for step in dataset_chain(dataset)
    ]


def static_batch_size(dataset: object) -> int | None:
    """The batch size a batch step in the chain was given (private ``_batch_size``), if any."""
    for step in dataset_chain(dataset):
        size = getattr(step, "_batch_size", None)
        if size is not None:
            with contextlib.suppress(Exception):
                return int(size)
    return None


def jax_memory_fraction_variable() -> str:
    """The variable the installed jaxlib reads for the share of GPU memory it takes: jaxlib
    0.7 reads XLA_CLIENT_MEM_FRACTION, still takes the older XLA_PYTHON_CLIENT_MEM_FRACTION
    alone (deprecated), and refuses both; older ones read only the older. Which it reads is
    seen in its xla_client module, not in any API."""
    spec = importlib.util.find_spec("jaxlib.xla_client")
    with contextlib.suppress(OSError, TypeError):
        if "XLA_CLIENT_MEM_FRACTION" in Path(spec.origin).read_text():  # type: ignore[union-attr,arg-type]
            return "XLA_CLIENT_MEM_FRACTION"
    return "XLA_PYTHON_CLIENT_MEM_FRACTION"


def bind_gloo(hostname: str) -> None:
    """Make JAX's CPU collectives (Gloo) listen on ``hostname``'s address.

    JAX 0.7 makes them with ``make_gloo_tcp_collectives(distributed_client)``
    alone, so Gloo listens on whatever the machine's host name resolves to,
    and no setting changes that. The CPU backend's registration is replaced by
    one whose factory gets collectives made for ``hostname``. Call it after
    ``jax.distributed.initialize`` and before JAX's backends start.
    """
    import dataclasses
    import functools

    from jax._src import distributed, xla_bridge

    try:  # jaxlib >= 0.7 has it in _jax; older releases in xla_client._xla
        from jaxlib._jax import make_gloo_tcp_collectives
    except ImportError:
        from jax._src.lib import xla_client

        make_gloo_tcp_collectives = xla_client._xla.make_gloo_tcp_collectives
    collectives = make_gloo_tcp_collectives(
        distributed_client=distributed.global_state.client, hostname=hostname
    )
    registration = xla_bridge._backend_factories["cpu"]
    factory: Any = registration.factory  # make_cpu_client, which takes collectives=
    xla_bridge._backend_factories["cpu"] = dataclasses.replace(
        registration, factory=functools.partial(factory, collectives=collectives)
    )


def jax_state_shardings(model: Model) -> object:
    """How Keras lays out a JAX model's training state under a distribution (its private
    ``_get_state_sharding_spec``), for a compiled function that returns that state."""
    return model._get_state_sharding_spec()


def compile_identity(model: Model) -> int:
    """Changes with every ``compile()`` of the model: the identity of the compile config
    Keras makes anew each time (private ``_compile_config``)."""
    return id(getattr(model, "_compile_config", None))


# Optuna -----------------------------------------------------------------------------
def optuna_trial_id(trial: Any) -> int:
    """The storage's id of an Optuna trial (a ``Trial`` or ``FrozenTrial``; private
    ``_trial_id``): ``optuna.trial.Trial(study, id)``, the public way to report to and
    annotate a running trial from another process, takes it, and only the number is public."""
    return int(trial._trial_id)


def optuna_heartbeat_base() -> type:
    """Optuna's heartbeat protocol (private ``optuna.storages._heartbeat.BaseHeartbeat``), which
    its RDB storage implements and ``fail_stale_trials()`` and the trial's ``Heartbeat`` ask a
    storage for; a storage that subclasses it gets stale trials failed as RDB's are."""
    from optuna.storages._heartbeat import BaseHeartbeat

    return BaseHeartbeat


# Python ------------------------------------------------------------------------------
def before_threads_stop(function: Callable[[], None]) -> None:
    """Call ``function`` at interpreter exit before the standard library's executors stop
    taking work and its non-daemon threads are joined (private ``threading._register_atexit``,
    which ``concurrent.futures`` itself uses): ``atexit`` runs after that, too late to submit."""
    threading._register_atexit(function)  # type: ignore[attr-defined]
