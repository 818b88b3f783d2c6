"""The checked fit request: gpu_fit()'s arguments checked at once, then applied to the model.

Every argument is checked before anything is changed (``check_request``),
so a wrong one leaves the model as it was; both training loops (``fit.fit``
and ``multiworker.fit``) take the same ``FitRequest``. ``apply_settings``
then puts on the already compiled model, keeping its loss and metrics:

- the speed options: ``model.jit_compile`` (Keras' setter, which falls back
  to False for models XLA cannot compile) and ``model.steps_per_execution``,
  then ``train_function = None`` so Keras rebuilds the step with them (Keras
  3.15 builds it once per compile, in ``make_train_function``).
  ``jit_compile = "auto"`` takes gpu_setup()'s default and otherwise Keras'
  own choice (``resolve_jit``). ``steps_per_execution = "auto"`` keeps what
  the model was compiled with (Keras' default is 1): several batches per
  call only pay when steps are short, and on TensorFlow the step timer's
  input measurement turns the graph loop into a Python loop (see
  ``gpukeras.train.timing``), so the monitor's advice says when to raise it rather
  than raising it blindly;
- a learning rate (a number, a schedule spec, see ``gpukeras.core.schedules``) and
  gradient clipping, set on the optimizer (its inner one under loss scaling).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpukeras.core import arguments, compat, schedules
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.runtime import config
from gpukeras.train import backup, preempt

VERBOSE_VALUES = ("auto", 0, 1, 2)


@dataclass
class FitRequest:
    """gpu_fit()'s arguments, checked and normalised (see ``fit``)."""

    epochs: int
    batch_size: int | None
    steps_per_execution: int | str
    jit_compile: bool | str
    learning_rate: object
    clipnorm: float | None
    clipvalue: float | None
    monitor: bool
    backup_dir: str | None
    backup_freq: int | str
    callbacks: list[object]
    seed: int | None
    verbose: int | str
    signals: list[str]


def check_request(keras: object, model: object, **given: object) -> FitRequest:
    """Check every argument before anything is changed; raise the classed error for the first
    one that is wrong.

    Args:
        keras: the Keras module.
        model: the model to train (a compiled Keras 3 model).
        **given: gpu_fit()'s other arguments by name, every one of the
            fields of ``FitRequest``.
    """
    arguments.check_compiled_model(keras, model)
    a = given
    spe = a["steps_per_execution"]
    if spe != "auto" and not (arguments.whole(spe) and 1 <= int(spe) <= arguments.MAX_COUNT):  # type: ignore[call-overload]
        raise BadArgumentError(
            f'steps_per_execution must be "auto" or a whole number >= 1, not {spe!r}.'
        )
    jit = a["jit_compile"]
    if jit != "auto" and not isinstance(jit, bool):
        raise BadArgumentError(f'jit_compile must be TRUE, FALSE or "auto", not {jit!r}.')
    clipnorm = arguments.positive("clipnorm", a["clipnorm"])
    clipvalue = arguments.positive("clipvalue", a["clipvalue"])
    if clipnorm is not None and clipvalue is not None:
        raise BadArgumentError("Give clipnorm or clipvalue, not both.")
    verbose = a["verbose"]
    if verbose not in VERBOSE_VALUES or isinstance(verbose, bool):
        raise BadArgumentError(f'verbose must be "auto", 0, 1 or 2, not {verbose!r}.')
    if not isinstance(a["monitor"], bool):
        raise BadArgumentError(f"monitor must be TRUE or FALSE, not {a['monitor']!r}.")
    freq = a["backup_freq"]
    return FitRequest(
        epochs=arguments.count("epochs", a["epochs"]),
        batch_size=None
        if a["batch_size"] is None
        else arguments.count("batch_size", a["batch_size"]),
        steps_per_execution="auto" if spe == "auto" else int(spe),  # type: ignore[call-overload]
        jit_compile=jit,
        learning_rate=arguments.check_learning_rate(keras, a["learning_rate"]),
        clipnorm=clipnorm,
        clipvalue=clipvalue,
        monitor=a["monitor"],
        backup_dir=None if a["backup_dir"] is None else backup.check_dir(a["backup_dir"]),
        backup_freq="epoch" if freq == "epoch" else arguments.count("backup_freq", freq),
        callbacks=arguments.check_callbacks(keras, a["callbacks"]),
        seed=arguments.seed(a["seed"]),
        verbose=verbose,
        signals=preempt.check_signals(a["signals"]),
    )


# Settings on the model ----------------------------------------------------------
def inner_optimizer(model: object) -> object:
    """The model's optimizer; under loss scaling, the one it wraps (which holds the settings)."""
    optimizer = model.optimizer  # type: ignore[attr-defined]
    return getattr(optimizer, "inner_optimizer", optimizer)


def set_learning_rate(keras: object, optimizer: object, learning_rate: object) -> None:
    """Put a number or a schedule on the optimizer, whatever it had before."""
    if isinstance(learning_rate, dict):
        optimizer.learning_rate = schedules.build(learning_rate)  # type: ignore[attr-defined]
        return
    if not isinstance(learning_rate, float):
        optimizer.learning_rate = learning_rate  # type: ignore[attr-defined]
        return
    current = compat.learning_rate_of(optimizer)
    if isinstance(current, keras.Variable):  # type: ignore[attr-defined]
        current.assign(learning_rate)
        return
    # The optimizer had a schedule: Keras' setter refuses a number then, so
    # make the variable its constructor would have made.
    with keras.name_scope(optimizer.name, caller=optimizer):  # type: ignore[attr-defined]
        variable = keras.Variable(  # type: ignore[attr-defined]
            learning_rate,
            name="learning_rate",
            dtype=keras.backend.floatx(),  # type: ignore[attr-defined]
            trainable=False,
            aggregation="only_first_replica",
        )
    compat.replace_learning_rate(optimizer, variable)


def resolve_jit(model: object, asked: object) -> bool:
    """Whether the model's step is XLA-compiled for ``asked`` (True, False or "auto").

    "auto" takes gpu_setup()'s default, and where that is "auto" too, Keras'
    own choice (XLA on a GPU, and on JAX; not for TensorFlow on a CPU). A
    model that runs eagerly is never compiled.
    """
    choice = asked if asked != "auto" else config.setup.jit_compile
    if getattr(model, "run_eagerly", False):
        return False
    if choice == "auto":
        return compat.auto_jit_compile(model)
    return bool(choice)


def apply_settings(keras: object, model: object, request: FitRequest) -> dict[str, object]:
    """Apply the speed options, learning rate and clipping to a compiled model.

    Keeps the compiled loss and metrics; drops the built train/test/predict
    functions when anything they were traced with changed, so Keras rebuilds
    them. Returns what is in force, read back from the model and optimizer.
    """
    learning_rate, clipnorm, clipvalue = request.learning_rate, request.clipnorm, request.clipvalue
    before = (model.jit_compile, model.steps_per_execution)  # type: ignore[attr-defined]
    if request.steps_per_execution != "auto":
        model.steps_per_execution = int(request.steps_per_execution)  # type: ignore[attr-defined]
    model.jit_compile = resolve_jit(model, request.jit_compile)  # type: ignore[attr-defined]
    in_force = (model.jit_compile, model.steps_per_execution)  # type: ignore[attr-defined]
    optimizer = inner_optimizer(model)
    if learning_rate is not None:
        set_learning_rate(keras, optimizer, learning_rate)
    if clipnorm is not None:
        optimizer.clipnorm, optimizer.clipvalue, optimizer.global_clipnorm = clipnorm, None, None  # type: ignore[attr-defined]
    if clipvalue is not None:
        optimizer.clipvalue, optimizer.clipnorm, optimizer.global_clipnorm = clipvalue, None, None  # type: ignore[attr-defined]
    changed = in_force != before
    if changed or learning_rate is not None or clipnorm is not None or clipvalue is not None:
        compat.forget_step_functions(model, all_of_them=changed)
    if changed:
        compat.record_compile_settings(model, in_force[0], in_force[1])
    return {
        "jit_compile": bool(in_force[0]),
        "steps_per_execution": int(in_force[1]),
        "learning_rate": learning_rate
        if isinstance(learning_rate, (dict, float))
        else schedules.describe(compat.learning_rate_of(optimizer)),
        "clipnorm": optimizer.clipnorm,  # type: ignore[attr-defined]
        "clipvalue": optimizer.clipvalue,  # type: ignore[attr-defined]
        "global_clipnorm": optimizer.global_clipnorm,  # type: ignore[attr-defined]
    }
