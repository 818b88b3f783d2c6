"""gpu_fit()'s request: declared once here, checked on one side, crossing the bridge as one object.

``FitRequest`` is the declaration: one field per argument of gpu_fit() that
reaches the training loop, with its default and, in the field's metadata,
which side checks it:

- ``"R"``: gpu_fit() checks it before Python starts (a mistake fails at once,
  without starting TensorFlow); R's check returns the value in the type the
  field declares (an integer, a double; a list or a dict with whole-number keys
  by ``as_python()`` in R/python.R), and the core takes it as it is;
- ``"core"``: only the core can check it (it needs the model, Keras' classes or
  the file system); ``check_request`` does, every one of them before anything
  is changed, so a wrong one leaves the model as it was.

R builds the request from gpu_fit()'s own formals (every formal but the
model, the data, the strategy and how the call runs; an option object,
``step = gpu_step()`` or ``backup = gpu_backup()``, as its fields, by
``option_fields`` in R/fit.R), so gpu_fit()'s formals and these fields are
the same list, as python/tests/test_fit_request.py checks. Adding an argument
therefore touches: its formal and ``@param`` in R/fit.R (or its option
object's constructor in R/fit-options.R), its check there if R checks it,
its field here, and the code that uses it. Background jobs and every training
loop carry the request whole.

``apply_settings`` then puts on the already compiled model, keeping its loss
and metrics:

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

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpukeras.core import arguments, compat, schedules
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.runtime import config
from gpukeras.train import backup_files

# The training loops a field can be honoured by: Keras' own model.fit() (one device, one
# machine's strategy, a Keras distribution on JAX) and multiworker.fit's own loop.
LOOPS = ("keras", "multi_worker")


def _by(side: str, *, changes_step: bool, loops: tuple[str, ...] = LOOPS) -> dict[str, object]:
    """A field's metadata: which side checks it, whether it changes the traced training step
    (Keras builds the step again for another value; every field must say), and the loops that
    honour a value other than its default (any other loop refuses it: ``refused_by``)."""
    return {"checked_by": side, "changes_step": changes_step, "loops": loops}


@dataclass
class FitRequest:
    """gpu_fit()'s arguments for the training loops, checked (see the module's notes)."""

    epochs: int = dataclasses.field(default=1, metadata=_by("R", changes_step=False))
    # None: the dataset's own batches, or the arrays adapter's default for arrays (the fit
    # verb, tools/training.py, decided "auto")
    batch_size: int | None = dataclasses.field(default=None, metadata=_by("R", changes_step=False))
    # micro-batches per update (the fit verb, tools/training.py, decided "auto"); batch_size
    # is then their sum
    accumulate: int = dataclasses.field(default=1, metadata=_by("R", changes_step=True))
    # gpu_step(): how the training step is compiled and run
    steps_per_execution: int | str = dataclasses.field(
        default="auto", metadata=_by("R", changes_step=True, loops=("keras",))
    )
    jit_compile: bool | str = dataclasses.field(
        default="auto", metadata=_by("R", changes_step=True, loops=("keras",))
    )
    remat: bool = dataclasses.field(default=False, metadata=_by("R", changes_step=True))
    # gpu_step(ema = ): the momentum of a moving average of the weights (Keras' optimizer
    # EMA, ``gpukeras.train.ema``)
    ema: float | None = dataclasses.field(
        default=None, metadata=_by("R", changes_step=True, loops=("keras",))
    )
    # numbers and schedule specs R checked; a Keras schedule object the core does
    learning_rate: object = dataclasses.field(default=None, metadata=_by("core", changes_step=True))
    clipnorm: float | None = dataclasses.field(default=None, metadata=_by("R", changes_step=True))
    clipvalue: float | None = dataclasses.field(default=None, metadata=_by("R", changes_step=True))
    monitor: bool = dataclasses.field(default=True, metadata=_by("R", changes_step=False))
    # gpu_backup(dir, every, signals)
    backup_dir: str | None = dataclasses.field(
        default=None, metadata=_by("core", changes_step=False)
    )
    backup_freq: int | str = dataclasses.field(
        default="epoch", metadata=_by("R", changes_step=False, loops=("keras",))
    )
    signals: list[str] = dataclasses.field(
        default_factory=lambda: ["SIGTERM"], metadata=_by("R", changes_step=False)
    )
    # gpu_backup(keep_best = , monitor = ): the k best models by the monitored value, kept
    # in the backup folder (``gpukeras.train.backup``)
    keep_best: int | None = dataclasses.field(
        default=None, metadata=_by("R", changes_step=False, loops=("keras",))
    )
    keep_best_monitor: str = dataclasses.field(
        default="val_loss", metadata=_by("R", changes_step=False, loops=("keras",))
    )
    callbacks: list[object] = dataclasses.field(
        default_factory=list, metadata=_by("core", changes_step=False)
    )
    seed: int | None = dataclasses.field(default=None, metadata=_by("R", changes_step=False))
    verbose: int | str = dataclasses.field(default="auto", metadata=_by("R", changes_step=False))
    # what gpu_tune() chose, applied by R to batch_size & co.: precision, batch_size (None
    # where not applied), steps_per_execution, jit_compile; the advice leaves them alone
    tuned: dict[str, object] | None = dataclasses.field(
        default=None, metadata=_by("R", changes_step=False)
    )
    # {class number: weight}; R turned a factor's level names into its codes
    class_weight: dict[int, float] | None = dataclasses.field(
        default=None, metadata=_by("R", changes_step=False)
    )


# The core's checks, each needing Python: the value, checked and normalised.
_CHECK: dict[str, Callable[[object, object], object]] = {
    "learning_rate": arguments.check_learning_rate,
    "backup_dir": lambda keras, value: None if value is None else backup_files.check_dir(value),
    "callbacks": arguments.check_callbacks,
}

# Which side checks each field, by name: "R" or "core".
CHECKED_BY: dict[str, str] = {
    field.name: field.metadata["checked_by"] for field in dataclasses.fields(FitRequest)
}

# The fields whose value is traced into the training step (their metadata says so).
CHANGES_STEP: tuple[str, ...] = tuple(
    field.name for field in dataclasses.fields(FitRequest) if field.metadata["changes_step"]
)


def refused_by(loop: str, request: FitRequest) -> list[str]:
    """The request's fields, as ``name = value``, that ``loop`` (one of ``LOOPS``) does not
    honour and that are not at their default: the loop raises rather than ignore them."""
    refused = []
    for field in dataclasses.fields(FitRequest):
        value = getattr(request, field.name)
        default = field.default
        if default is dataclasses.MISSING:
            default = field.default_factory()  # type: ignore[operator]
        if loop not in field.metadata["loops"] and value != default:
            refused.append(f"{field.name} = {value!r}")
    return refused


def step_key(request: FitRequest) -> tuple[object, ...]:
    """The request's values traced into the training step (``CHANGES_STEP``), for a cache of
    compiled steps: another value of any of them needs another step."""
    return tuple(repr(getattr(request, name)) for name in CHANGES_STEP)


def check_request(
    keras: object, model: object, given: Mapping[str, object] | FitRequest
) -> FitRequest:
    """The request from ``given`` (gpu_fit()'s fields by name, a missing one at its default),
    with the core's checks made; a ``FitRequest`` comes back as it is.

    Every check runs before anything is changed; the first wrong argument raises its
    classed error.
    """
    if isinstance(given, FitRequest):
        return given
    unknown = sorted(set(given) - set(CHECKED_BY))
    if unknown:
        raise BadArgumentError(f"gpu_fit() has no argument {', '.join(unknown)}.")
    arguments.check_compiled_model(keras, model)
    values: dict[str, object] = {}
    for field in dataclasses.fields(FitRequest):
        if field.name not in given:
            continue
        value = given[field.name]
        if field.metadata["checked_by"] == "core":
            value = _CHECK[field.name](keras, value)
        values[field.name] = value
    _check_tuned_precision(model, values.get("tuned"))
    return FitRequest(**values)  # type: ignore[arg-type]


def apply_tuned(
    recommended: Mapping[str, Any] | None, tuned_kind: str, data_kind: str, given: Mapping[str, Any]
) -> dict[str, object]:
    """gpu_fit(tuned = ): the batch size, steps_per_execution and jit_compile a gpu_tune()
    recommends (``recommended``, of a tune on ``tuned_kind`` data), in place of the
    arguments ``given`` left at their defaults (BadArgumentError where one was given, or
    where nothing is recommended). The batch size is applied only to R data tuned on R data:
    a dataset's own batches were not the tune's choice. ``record`` is what the request
    carries (the advice leaves these alone; a background fit's child gets it back as
    ``tuned``), with the precision, which cannot be applied to a built model:
    ``_check_tuned_precision`` refuses a model of another policy."""
    if recommended is None:
        raise BadArgumentError(
            "`tuned` recommends nothing: no run of gpu_tune() was numerically sound."
        )
    defaults = {"batch_size": None, "steps_per_execution": "auto", "jit_compile": "auto"}
    named = [f"`{name}`" for name, default in defaults.items() if given.get(name) != default]
    if named:
        raise BadArgumentError(f"Give `tuned` or {', '.join(named)}, not both: `tuned` sets them.")
    applied = {
        "batch_size": (
            int(recommended["batch_size"]) if data_kind == "r" and tuned_kind == "r" else None
        ),
        "steps_per_execution": int(recommended["steps_per_execution"]),
        "jit_compile": recommended.get("jit_compile") is True,
    }
    return {**applied, "record": {"precision": recommended.get("precision"), **applied}}


def _check_tuned_precision(model: object, tuned: object) -> None:
    """Refuse a model built under another dtype policy than the one gpu_tune() recommended
    (``tuned``'s ``precision``): a built model's policy cannot be changed, and training it
    in a precision that was not chosen would not be what was tuned."""
    wanted = tuned.get("precision") if isinstance(tuned, dict) else None
    policy = getattr(getattr(model, "dtype_policy", None), "name", None)
    if wanted is None or policy is None or policy == wanted:
        return
    raise BadArgumentError(
        f"The model was built under the {policy} dtype policy; `tuned` recommends {wanted}. "
        "gpu_fit() cannot change a built model's policy: build it again after "
        f'gpu_setup(mixed_precision = "{str(wanted).removeprefix("mixed_")}") (or keras3\'s '
        f'config_set_dtype_policy("{wanted}")).'
    )


def micro_batch_size(request: FitRequest) -> int | None:
    """Rows per training step: ``batch_size`` split into ``accumulate`` micro-batches (None
    where the data makes its own batches, which are then the micro-batches)."""
    return None if request.batch_size is None else request.batch_size // request.accumulate


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


def jit_in_force(model: object, asked: object) -> bool:
    """Whether the model's step will be XLA-compiled once ``apply_settings`` asks for
    ``asked`` (``resolve_jit``): on JAX, Keras' setter turns it off where a layer cannot run
    under XLA (``compat.set_jit_compile``), which the data's placement needs to know first."""
    wanted = resolve_jit(model, asked)
    if config.backend == "jax":
        return wanted and compat.auto_jit_compile(model)
    return wanted


def apply_settings(keras: object, model: object, request: FitRequest) -> dict[str, object]:
    """Apply the speed options, learning rate and clipping to a compiled model.

    Keeps the compiled loss and metrics; drops the built train/test/predict
    functions when anything they were traced with changed, so Keras rebuilds
    them. Returns what is in force, read back from the model and optimizer.
    """
    learning_rate, clipnorm, clipvalue = (
        request.learning_rate,
        request.clipnorm,
        request.clipvalue,
    )
    before = (model.jit_compile, model.steps_per_execution)  # type: ignore[attr-defined]
    if request.steps_per_execution != "auto":
        model.steps_per_execution = int(request.steps_per_execution)  # type: ignore[attr-defined]
    compat.set_jit_compile(model, resolve_jit(model, request.jit_compile))
    in_force = (model.jit_compile, model.steps_per_execution)  # type: ignore[attr-defined]
    optimizer: Any = inner_optimizer(model)
    if learning_rate is not None:
        set_learning_rate(keras, optimizer, learning_rate)
    if clipnorm is not None:
        optimizer.clipnorm, optimizer.clipvalue, optimizer.global_clipnorm = clipnorm, None, None
    if clipvalue is not None:
        optimizer.clipvalue, optimizer.clipnorm, optimizer.global_clipnorm = clipvalue, None, None
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
        "clipnorm": optimizer.clipnorm,
        "clipvalue": optimizer.clipvalue,
        "global_clipnorm": optimizer.global_clipnorm,
    }
