"""Device-resident training on JAX: data in memory put on the device once, k steps per dispatch.

Keras 3.15's JAX trainer runs one compiled step per call from the host, and
copies each batch to the device first; its ``steps_per_execution`` is a Python
loop around that same step (keras/src/backend/jax/trainer.py,
``_make_function``), so neither cost goes. On a GPU a small model's step is
then mostly host time (measured on an H100: Keras' fit() on NumPy arrays at
0.55 of a batch already on the device). For data in memory that fits in a
share of the device's free memory, ``ResidentTraining`` instead:

- puts the arrays on the device once (replicated on every device of a
  one-process ``DataParallel``, each batch then laid out as the distribution
  says);
- draws each epoch's order on the device, ``jax.random.permutation`` of the
  rows keyed by (seed, epoch), so a run and its resumption see the same order;
- gives ``model.fit()`` a train function that runs k of Keras' own
  ``train_step``s per call in one compiled loop (``lax.fori_loop`` with the
  count a traced value: one compilation serves every k, the epoch's shorter
  last dispatch included), each on a batch gathered on the device by index,
  and the epoch's last, partial batch (rows not a multiple of the batch) as a
  step of its own, last, as Keras trains it; validation the same way, in
  order, with Keras' ``test_step``.

Keras' fit() stays in charge of the rest: it gets a token array, one row per
step, batch size 1, unshuffled, which the functions never read (so nothing is
copied per step), and counts steps, calls the callbacks at dispatch
boundaries (as for any ``steps_per_execution``), shows progress, runs
validation, keeps the history. A callback tells the functions the epoch and
the step each dispatch begins at (Keras' own step count), which is also how a
resumed epoch starts where its backup left off.

k ("auto") is the number of steps that take ``DISPATCH_SECONDS`` on the
device, timed on a copy of the training state before training (the time of a
dispatch is then mostly device work, whatever the host's per-dispatch cost),
at least 1 and at most an epoch's steps.

Where it does not apply (another backend, a model run without XLA, several
processes, data that is not arrays, or more than ``MEMORY_SHARE`` of the
device's free memory), ``decide`` says why, and the data streams as before.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpukeras import compat
from gpukeras.handles import Model, Strategy

# The share of the device's free memory the data (with validation) may take on it.
MEMORY_SHARE = 0.5
# The device time one dispatch should hold, for k = "auto": the host's cost per dispatch
# (Keras' loop and callbacks, ~0.1-1 ms) is then a few percent of it.
DISPATCH_SECONDS = 0.02
# Steps timed on a copy of the state to choose k.
PROBE_STEPS = 4


@dataclass
class Decision:
    """Whether the data trains on the device, and why (for the fit report).

    Attributes:
        resident: True when the data goes on the device.
        why: one sentence, for the report.
        data_bytes: the bytes the data (with validation) takes.
        free_bytes: the free memory of the device it was compared with (None
            when not known).
    """

    resident: bool
    why: str
    data_bytes: int = 0
    free_bytes: int | None = None


def _leaves(tree: object) -> list[np.ndarray]:
    if tree is None:
        return []
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    if isinstance(tree, (tuple, list)):
        return [leaf for value in tree for leaf in _leaves(value)]
    return [np.asarray(tree)]


def data_bytes(*trees: object) -> int:
    """The bytes of every array in ``trees`` (arrays, dicts or tuples of them, or None)."""
    return int(sum(leaf.nbytes for tree in trees for leaf in _leaves(tree)))


def free_bytes(device: Any) -> int | None:
    """Free memory of a JAX device: the allocator's limit less what it holds on a GPU, the
    host's available memory for the CPU; None when not known."""
    stats = None
    try:
        stats = device.memory_stats()
    except Exception:
        stats = None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def decide(
    backend: str,
    model: Model,
    x: object,
    y: object,
    validation: tuple | None,
    devices: list[object],
    several_processes: bool,
) -> Decision:
    """Whether arrays ``x``/``y`` (and validation arrays) train on the device (see the notes).

    Args:
        backend: the Keras backend.
        model: the compiled model (its ``jit_compile`` resolved).
        x, y: the training arrays (``x`` may be a dict of arrays; ``y`` None).
        validation: validation arrays ``(x, y)`` or None.
        devices: the JAX devices the data would be put on (one copy each).
        several_processes: whether this process trains with others.
    """
    if backend != "jax":
        return Decision(False, f"data streams from host memory on {backend}")
    if several_processes:
        return Decision(False, "with several processes Keras reads a sharded tf.data pipeline")
    if not model.jit_compile:
        return Decision(False, "the model runs without XLA, so steps cannot be compiled together")
    size = data_bytes(x, y, validation)
    free = [free_bytes(device) for device in devices]
    known = [f for f in free if f is not None]
    least = min(known) if known else None
    if least is not None and size > MEMORY_SHARE * least:
        return Decision(
            False,
            f"the data ({size / 2**20:.0f} MiB) is more than {MEMORY_SHARE:.0%} of the device's "
            f"free memory ({least / 2**20:.0f} MiB): it streams from host memory",
            size,
            least,
        )
    return Decision(
        True,
        f"the data ({size / 2**20:.1f} MiB) is on the device: each epoch's order is drawn "
        "there, and several steps run per dispatch",
        size,
        least,
    )


@dataclass
class Programs:
    """The compiled loops for one model, batch size and distribution (see ``programs``).

    ``train_steps(state, data, order, begin, count)`` runs ``count`` steps from
    step ``begin`` of the epoch's ``order``; ``train_last(state, data, order,
    full)`` the partial batch after ``full`` whole ones; ``test_steps`` and
    ``test_last`` the same for validation, in order. ``step_seconds``: a
    step's time, once measured (``ResidentTraining.choose_steps``).
    """

    key: tuple
    train_steps: Callable
    train_last: Callable
    test_steps: Callable
    test_last: Callable
    step_seconds: float | None = None


# Compiled programs by model, kept as Keras keeps its train function between fit() calls.
_PROGRAMS: weakref.WeakKeyDictionary[Any, Programs] = weakref.WeakKeyDictionary()


def _settings_key(model: Model) -> tuple:
    """What a traced train step bakes in: the compiled loss and metrics (a new compile), the
    optimizer, its learning rate (a schedule is traced in) and clipping, the dtype policy."""
    optimizer = model.optimizer
    return (
        compat.compile_identity(model),
        id(optimizer),
        id(compat.learning_rate_of(optimizer)),
        optimizer.clipnorm,
        optimizer.clipvalue,
        optimizer.global_clipnorm,
        model.dtype_policy.name,
    )


def programs(
    model: Model, size: int, distribution: Strategy | None, laid_out: Callable[[Any], Any]
) -> Programs:
    """The compiled loops for ``model`` at batch ``size`` under ``distribution``: the ones
    made before when nothing they were traced with has changed, else new ones."""
    key = (size, id(distribution), _settings_key(model))
    made = _PROGRAMS.get(model)
    if made is not None and made.key == key:
        return made
    import jax

    out_shardings = compat.jax_state_shardings(model) if distribution is not None else None

    def gather(data: Any, rows: Any) -> Any:
        return laid_out(jax.tree.map(lambda a: jax.numpy.take(a, rows, axis=0), data))

    def logs_like(step: Callable, state: Any, data: Any) -> Any:
        batch = jax.tree.map(lambda a: jax.ShapeDtypeStruct((size, *a.shape[1:]), a.dtype), data)
        shapes = jax.eval_shape(step, state, batch)[0]
        return jax.tree.map(lambda s: jax.numpy.zeros(s.shape, s.dtype), shapes)

    def loop(step: Callable, state: Any, data: Any, rows_of: Callable, count: Any) -> Any:
        def body(i: Any, carry: Any) -> Any:
            logs, state = step(carry[0], gather(data, rows_of(i)))
            return state, logs

        state, logs = jax.lax.fori_loop(0, count, body, (state, logs_like(step, state, data)))
        return logs, state

    def train_steps(state: Any, data: Any, order: Any, begin: Any, count: Any) -> Any:
        def rows_of(i: Any) -> Any:
            return jax.lax.dynamic_slice_in_dim(order, (begin + i) * size, size)

        return loop(model.train_step, state, data, rows_of, count)

    def train_last(state: Any, data: Any, order: Any, full: int) -> Any:
        return model.train_step(state, gather(data, order[full * size :]))

    def test_steps(state: Any, data: Any, begin: Any, count: Any) -> Any:
        def rows_of(i: Any) -> Any:
            return (begin + i) * size + jax.numpy.arange(size)

        return loop(model.test_step, state, data, rows_of, count)

    def test_last(state: Any, data: Any, full: int, partial: int) -> Any:
        rows = full * size + jax.numpy.arange(partial)
        return model.test_step(state, gather(data, rows))

    # Under a distribution the state keeps its layout, as in Keras' own train function.
    shardings: Any = (None, out_shardings) if out_shardings is not None else None
    made = Programs(
        key,
        jax.jit(train_steps, donate_argnums=0, out_shardings=shardings),
        jax.jit(train_last, donate_argnums=0, static_argnums=3, out_shardings=shardings),
        jax.jit(test_steps),
        jax.jit(test_last, static_argnums=(2, 3)),
    )
    _PROGRAMS[model] = made
    return made


def training_state(model: Model) -> tuple[list, ...]:
    """The values Keras' JAX ``train_step`` takes as its state, in its order."""
    optimizer = model.optimizer
    return (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
        [v.value for v in model.metrics_variables],
    )


class ResidentTraining:
    """Arrays on the device, and the train and test functions ``model.fit()`` calls.

    Use: ``fit_args()`` and ``validation_args()`` for ``model.fit()``, the
    callback from ``callback()`` among its callbacks, ``install(model, k)`` before
    it and ``uninstall(model)`` after it (Keras then makes its own functions
    again).
    """

    def __init__(
        self,
        x: object,
        y: object,
        batch_size: int,
        seed: int | None,
        validation: tuple | None = None,
        distribution: Strategy | None = None,
        shuffle: bool = True,
        drop_remainder: bool = False,
    ) -> None:
        import jax

        self.jax = jax
        self.batch_size = int(batch_size)
        self.rows = len(_leaves(x)[0])
        self.shuffle = shuffle
        self.full, self.partial = divmod(self.rows, self.batch_size)
        if drop_remainder:
            self.partial = 0
        self.steps = self.full + (1 if self.partial else 0)
        self.distribution = distribution
        self.data = self._place((x,) if y is None else (x, y))
        self.validation = None
        if validation is not None:
            parts = tuple(part for part in validation if part is not None)
            self.validation = self._place(parts)
            val_rows = len(_leaves(parts[0])[0])
            self.val_full, self.val_partial = divmod(val_rows, self.batch_size)
            self.val_steps = self.val_full + (1 if self.val_partial else 0)
        self.key = jax.random.key(
            int(seed) if seed is not None else int(np.random.default_rng().integers(2**31))
        )
        self.position = {"epoch": 0, "begin": 0, "test_begin": 0}
        self.order: Any = None
        self._model_steps = 1

    # Where the data lives ----------------------------------------------------------
    def _place(self, data: object) -> object:
        jax = self.jax
        if self.distribution is None:
            return jax.device_put(data)
        mesh = self.distribution.device_mesh.backend_mesh
        return jax.device_put(data, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))

    def _laid_out(self, batch: object) -> object:
        """A gathered batch laid out as the distribution lays out its data (batch split)."""
        distribution = self.distribution
        if distribution is None:
            return batch
        jax = self.jax

        def constrain(leaf: Any) -> Any:
            layout = distribution.get_data_layout(leaf.shape)
            return jax.lax.with_sharding_constraint(leaf, layout.backend_layout)

        return jax.tree.map(constrain, batch)

    # What model.fit() gets ---------------------------------------------------------
    def fit_args(self) -> dict[str, object]:
        """``model.fit()``'s x, batch_size and shuffle: one token row per step, never read."""
        return {"x": np.zeros((self.steps, 1), np.int8), "batch_size": 1, "shuffle": False}

    def validation_args(self) -> dict[str, object]:
        """``model.fit()``'s validation arguments: one token row per validation step."""
        if self.validation is None:
            return {}
        return {
            "validation_data": (np.zeros((self.val_steps, 1), np.int8),),
            "validation_batch_size": 1,
        }

    def callback(self, keras: Any) -> object:
        """The callback that tells the functions the epoch and each dispatch's first step."""
        training = self

        class Position(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
                training.start_epoch(epoch)

            def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
                training.position["begin"] = batch

            def on_test_batch_begin(self, batch: int, logs: dict | None = None) -> None:
                training.position["test_begin"] = batch

        return Position()

    def start_epoch(self, epoch: int) -> None:
        """Draw epoch ``epoch``'s order of the rows, on the device (their own order unshuffled)."""
        self.position["epoch"] = epoch
        self.order = self._order(epoch)

    def _order(self, epoch: int) -> Any:
        jax = self.jax
        if not self.shuffle:
            return jax.numpy.arange(self.rows)
        return jax.random.permutation(jax.random.fold_in(self.key, epoch), self.rows)

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The order of the rows in epoch ``epoch`` (for tests and reports)."""
        return np.asarray(self._order(epoch))

    # The compiled functions --------------------------------------------------------
    def _compiled(self, model: Model) -> Programs:
        return programs(model, self.batch_size, self.distribution, self._laid_out)

    def train_function(self, model: Model, k: int) -> Callable:
        """Keras' ``train_function(state, iterator)``: the dispatch's steps, up to ``k``."""
        compiled = self._compiled(model)

        def train(state: Any, iterator: object) -> Any:
            begin = self.position["begin"]
            end = min(begin + k, self.steps)
            logs = None
            if begin < min(end, self.full):
                logs, state = compiled.train_steps(
                    state, self.data, self.order, begin, min(end, self.full) - begin
                )
            if end > self.full:  # the epoch's last, partial batch
                logs, state = compiled.train_last(state, self.data, self.order, self.full)
            return logs, state

        return train

    def test_function(self, model: Model, k: int) -> Callable:
        """Keras' ``test_function(state, iterator)``: the dispatch's validation steps."""
        compiled = self._compiled(model)

        def test(state: Any, iterator: object) -> Any:
            begin = self.position["test_begin"]
            end = min(begin + k, self.val_steps)
            logs = None
            if begin < min(end, self.val_full):
                logs, state = compiled.test_steps(
                    state, self.validation, begin, min(end, self.val_full) - begin
                )
            if end > self.val_full:
                logs, state = compiled.test_last(
                    state, self.validation, self.val_full, self.val_partial
                )
            return logs, state

        return test

    def choose_steps(self, model: Model) -> int:
        """k for "auto": the steps that take ``DISPATCH_SECONDS`` on the device (see the notes),
        1 to an epoch's steps. A step is timed once per compiled program, on a copy of the
        training state."""
        if self.full == 0:
            return 1
        compiled = self._compiled(model)
        if compiled.step_seconds is None:
            jax = self.jax
            state = training_state(model)
            probe = min(PROBE_STEPS, self.full)
            order = self.epoch_order(0)
            seconds = []
            for _ in range(2):  # the first call compiles
                copied = jax.tree.map(lambda a: a.copy(), state)
                started = time.perf_counter()
                jax.block_until_ready(compiled.train_steps(copied, self.data, order, 0, probe))
                seconds.append(time.perf_counter() - started)
            compiled.step_seconds = seconds[-1] / probe
        wanted = math.ceil(DISPATCH_SECONDS / max(compiled.step_seconds, 1e-9))
        return max(1, min(self.steps, wanted))

    def install(self, model: Model, k: int) -> None:
        """Make ``model.fit()`` run this data on the device, ``k`` steps per dispatch."""
        self._model_steps = model.steps_per_execution
        model.steps_per_execution = k
        model.train_function = self.train_function(model, k)
        if self.validation is not None:
            model.test_function = self.test_function(model, k)

    def uninstall(self, model: Model) -> None:
        """Give the model back its own steps per execution and Keras' own step functions
        (made again at their next use)."""
        model.steps_per_execution = self._model_steps
        compat.forget_step_functions(model, all_of_them=True)
