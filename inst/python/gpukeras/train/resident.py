"""The device-resident training loop on JAX: k of Keras' own train steps per dispatch.

Keras 3.15's JAX trainer runs one compiled step per call from the host; its
``steps_per_execution`` is a Python loop around that same step
(keras/src/backend/jax/trainer.py, ``_make_function``). On a GPU a small
model's step is then mostly host time (measured on an H100: Keras' fit() on
NumPy arrays at 0.55 of a batch already on the device). For rows on the device
(``data.adapters.resident.DeviceRows``), ``ResidentLoop`` gives ``model.fit()``
a train function that runs k of Keras' own ``train_step``s per call, in calls of one
compiled loop of ``BLOCK_STEPS`` steps (``lax.fori_loop`` with its count compiled in,
the epoch's left-over steps a loop of their own count), each on a batch gathered on
the device by index from the epoch's order, and the epoch's last, partial batch as a
step of its own, last, as Keras trains it. With a traced count (one program for every
count, as this loop was first) XLA reads the loop's condition back on the host at every
step, and a GPU idles between steps (bench/utilization.py); with the count compiled in,
XLA knows the trip count. Validation runs the same way, with Keras' ``test_step``, in
order, its count traced. The programs the first epoch's end needs (its last, partial
batch; its left-over steps; validation) are compiled on threads while the whole batches'
loop compiles (a GPU) or trains (the CPU): ``ResidentLoop.compile_ahead``.

Keras' fit() stays in charge of the rest: it counts steps, calls the callbacks
at dispatch boundaries (as for any ``steps_per_execution``), shows progress,
runs validation, keeps the history. A callback tells the functions the epoch
and the step each dispatch begins at (Keras' own step count), which is also
how a resumed epoch starts where its backup left off.

k ("auto") is the number of steps that take ``DISPATCH_SECONDS`` on the
device, timed on a copy of the training state before training (the time of a
dispatch is then mostly device work, whatever the host's per-dispatch cost),
whole calls of the loop, at least 1 and at most an epoch's steps.
"""

from __future__ import annotations

import functools
import math
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpukeras.core import compat
from gpukeras.core.handles import Model, Strategy
from gpukeras.data.adapters.resident import DeviceRows, least_free_bytes
from gpukeras.train import timing

# The device time one dispatch should hold, for k = "auto": the host's cost per dispatch
# (Keras' loop and callbacks, ~0.1-1 ms) is then a few percent of it.
DISPATCH_SECONDS = 0.02
# k for "auto" is timed on a copy of the training state only while that copy takes at most
# this share of the free memory of a device that holds it: past it, the copy would raise the
# fit's peak above Keras' own fit() by a whole state (bench/results/lora-NVIDIA-H200-2026-11-30.md),
# and k is one call of the loop, which the host enqueues while the device runs the last one
# (the steps of a model with such a state are long: 43 ms for a 1B-parameter LoRA fine-tune).
PROBE_SHARE = 0.01
# The whole batches' loop runs this many steps per call, its count compiled in (see the
# notes); a dispatch of k steps is k / BLOCK_STEPS calls, queued one after another.
BLOCK_STEPS = 8


@dataclass
class Programs:
    """The compiled loops for one model, batch size and distribution (see ``programs``).

    ``train_steps(state, data, order, begin, count)`` runs ``count`` steps from
    step ``begin`` of the epoch's ``order``; ``train_last(state, data, order,
    full)`` the partial batch after ``full`` whole ones; ``test_steps`` and
    ``test_last`` the same for validation, in order. ``step_seconds``: a
    step's time, once measured (``ResidentLoop.choose_steps``). ``ahead``: the threads
    compiling the ones the first epoch's end needs (``ResidentLoop.compile_ahead``), None
    before they start; ``started``: which (a name, or the whole batches' loop's count).
    """

    key: tuple
    train_steps: Callable
    train_last: Callable
    test_steps: Callable
    test_last: Callable
    step_seconds: float | None = None
    ahead: list[threading.Thread] | None = None
    started: set[object] = field(default_factory=set)

    def settle(self) -> None:
        """Wait for the programs being compiled ahead, before calling one of them."""
        for thread in self.ahead or ():
            thread.join()


# Compiled programs by model, kept as Keras keeps its train function between fit() calls.
_PROGRAMS: weakref.WeakKeyDictionary[Any, Programs] = weakref.WeakKeyDictionary()


def _settings_key(model: Model) -> tuple:
    """What a traced train step bakes in: the compiled loss and metrics (a new compile), the
    optimizer, its learning rate (a schedule is traced in), clipping and gradient accumulation,
    the dtype policy, rematerialization."""
    optimizer = model.optimizer
    return (
        compat.compile_identity(model),
        id(optimizer),
        id(compat.learning_rate_of(optimizer)),
        optimizer.clipnorm,
        optimizer.clipvalue,
        optimizer.global_clipnorm,
        # gradient accumulation (on the inner optimizer under loss scaling) adds variables
        len(optimizer.variables),
        getattr(optimizer, "inner_optimizer", optimizer).gradient_accumulation_steps,
        model.dtype_policy.name,
        compat.remat_mode(model),
    )


def programs(
    model: Model,
    size: int,
    distribution: Strategy | None,
    batch: Callable[..., Any],
    step_key: tuple[object, ...] = (),
    expansions: tuple[object, object] = (None, None),
) -> Programs:
    """The compiled loops for ``model`` at batch ``size`` under ``distribution``, each step's
    batch made by ``batch(gathered, validation)`` (``DeviceRows.batch``: the model's features
    from the rows as they are kept, laid out): the ones made before when nothing they were
    traced with has changed (the model's settings, ``step_key``: the request's values traced
    into the step, and ``expansions``: how the training and validation rows' coded frames
    become the model's columns), else new ones."""
    key = (size, id(distribution), _settings_key(model), step_key, expansions)
    made = _PROGRAMS.get(model)
    if made is not None and made.key == key:
        return made
    import jax

    out_shardings = compat.jax_state_shardings(model) if distribution is not None else None
    # Each step jitted on its own: the logs' shapes (eval_shape) and the loop's body then
    # share one trace of it, where they traced Keras' step twice (a quarter of a fresh
    # process's time to its first step on JAX); XLA inlines the call.
    train_step, test_step = jax.jit(model.train_step), jax.jit(model.test_step)

    def gather(data: Any, rows: Any, validation: bool) -> Any:
        return batch(jax.tree.map(lambda a: jax.numpy.take(a, rows, axis=0), data), validation)

    def logs_like(step: Callable, state: Any, data: Any, validation: bool) -> Any:
        like = jax.tree.map(lambda a: jax.ShapeDtypeStruct((size, *a.shape[1:]), a.dtype), data)
        shapes = jax.eval_shape(lambda s, b: step(s, batch(b, validation)), state, like)[0]
        return jax.tree.map(lambda s: jax.numpy.zeros(s.shape, s.dtype), shapes)

    def loop(
        step: Callable, state: Any, data: Any, rows_of: Callable, count: Any, validation: bool
    ) -> Any:
        def body(i: Any, carry: Any) -> Any:
            logs, state = step(carry[0], gather(data, rows_of(i), validation))
            return state, logs

        logs = logs_like(step, state, data, validation)
        state, logs = jax.lax.fori_loop(0, count, body, (state, logs))
        return logs, state

    def train_steps(state: Any, data: Any, order: Any, begin: Any, count: Any) -> Any:
        def rows_of(i: Any) -> Any:
            return jax.lax.dynamic_slice_in_dim(order, (begin + i) * size, size)

        return loop(train_step, state, data, rows_of, count, False)

    def train_last(state: Any, data: Any, order: Any, full: int) -> Any:
        return train_step(state, gather(data, order[full * size :], False))

    def test_steps(state: Any, data: Any, begin: Any, count: Any) -> Any:
        def rows_of(i: Any) -> Any:
            return (begin + i) * size + jax.numpy.arange(size)

        return loop(test_step, state, data, rows_of, count, True)

    def test_last(state: Any, data: Any, full: int, partial: int) -> Any:
        rows = full * size + jax.numpy.arange(partial)
        return test_step(state, gather(data, rows, True))

    # Under a distribution the state keeps its layout, as in Keras' own train function.
    shardings: Any = (None, out_shardings) if out_shardings is not None else None
    made = Programs(
        key,
        jax.jit(train_steps, donate_argnums=0, static_argnums=4, out_shardings=shardings),
        jax.jit(train_last, donate_argnums=0, static_argnums=3, out_shardings=shardings),
        jax.jit(test_steps),
        jax.jit(test_last, static_argnums=(2, 3)),
    )
    _PROGRAMS[model] = made
    return made


@functools.cache
def _copy_program(jax: Any) -> Any:
    """One program that copies a whole tree of arrays on the device (a leaf at a time took a
    compilation per shape); one for the process."""
    return jax.jit(lambda tree: jax.tree.map(jax.numpy.copy, tree))


def _compile(lowered: Any) -> None:
    """XLA's compiling of a lowered program, whose first call then finds it compiled."""
    try:
        lowered.compile()
    except Exception:
        return  # the call itself compiles it then, and raises what went wrong there


def state_variables(model: Model) -> tuple[list, ...]:
    """The variables of Keras' JAX ``train_step``'s state, in its order: trainable,
    non-trainable, the optimizer's, the metrics'."""
    return (
        list(model.trainable_variables),
        list(model.non_trainable_variables),
        list(model.optimizer.variables),
        list(model.metrics_variables),
    )


def training_state(model: Model) -> tuple[list, ...]:
    """The values Keras' JAX ``train_step`` takes as its state, in its order."""
    return tuple([v.value for v in group] for group in state_variables(model))


def _copy_fits(jax: Any, state: Any) -> bool:
    """Whether a copy of ``state`` takes at most ``PROBE_SHARE`` of the free memory of each
    device its arrays are on (true where that memory is not known)."""
    leaves = jax.tree.leaves(state)
    size = sum(leaf.nbytes for leaf in leaves)
    least = least_free_bytes({device for leaf in leaves for device in leaf.devices()})
    return least is None or size <= PROBE_SHARE * least


class ResidentLoop:
    """The train and test functions ``model.fit()`` calls for rows on the device.

    Use: the ``ResidentAdapter``'s ``fit_args`` and ``validation`` for ``model.fit()``,
    the callback from ``callback()`` among its callbacks, ``install(model, k)``
    before it and ``uninstall(model)`` after it (Keras then makes its own
    functions again).
    """

    def __init__(self, rows: DeviceRows, step_key: tuple[object, ...] = ()) -> None:
        self.rows = rows
        # the request's values traced into the step (fit_request.step_key): part of the
        # compiled programs' key, beside what the model itself says
        self.step_key = step_key
        self.position = {"epoch": 0, "begin": 0, "test_begin": 0}
        self.order: Any = None
        self._model_steps = 1
        # whether compile_ahead applies, and whether before the whole batches' loop
        # compiles (see there): decided once, not at every dispatch
        self._ahead = rows.distribution is None
        self._ahead_first = rows.jax.default_backend() != "cpu"
        # the steps per dispatch (``train_function``), and whether every program an epoch
        # calls has been started by compile_ahead (then it does nothing more)
        self._k: int | None = None
        self._all_ahead = False
        # each step a call of the whole batches' loop begins at, on the device (``start``)
        self._starts: dict[int, Any] = {}

    def callback(self, keras: Any) -> object:
        """The callback that tells the functions the epoch and each dispatch's first step."""
        loop = self

        class Position(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
                loop.start_epoch(epoch)

            def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
                loop.position["begin"] = batch

            def on_test_batch_begin(self, batch: int, logs: dict | None = None) -> None:
                loop.position["test_begin"] = batch

        return Position()

    def start_epoch(self, epoch: int) -> None:
        """Draw epoch ``epoch``'s order of the rows, on the device."""
        self.position["epoch"] = epoch
        self.order = self.rows.order(epoch)

    def _compiled(self, model: Model) -> Programs:
        rows = self.rows
        return programs(
            model, rows.batch_size, rows.distribution, rows.batch, self.step_key,
            (rows.expansion, rows.val_expansion),
        )  # fmt: skip

    def train_function(self, model: Model, k: int) -> Callable:
        """Keras' ``train_function(state, iterator)``: the dispatch's steps, up to ``k``."""
        compiled, rows = self._compiled(model), self.rows
        self._k = k

        def train(state: Any, iterator: object) -> Any:
            begin = self.position["begin"]
            return self._dispatch(compiled, state, begin, min(begin + k, rows.steps))

        return timing.mark_input_on_device(train)

    def _dispatch(self, compiled: Programs, state: Any, begin: int, end: int) -> Any:
        """Steps ``begin`` to ``end`` of the epoch: whole batches in calls of the loop
        (``blocks``), the last, partial batch (when among them) after them."""
        rows, order, logs = self.rows, self.order, None
        if self._ahead_first:
            self.compile_ahead(compiled, state)
        for first, count in self.blocks(begin, min(end, rows.full)):
            if count in compiled.started:  # compiled ahead, maybe still compiling
                compiled.settle()
            logs, state = compiled.train_steps(state, rows.data, order, self.start(first), count)
            self.compile_ahead(compiled, state)
        if end > rows.full:  # the epoch's last, partial batch
            compiled.settle()
            logs, state = compiled.train_last(state, rows.data, order, rows.full)
        return logs, state

    def start(self, step: int) -> Any:
        """Step ``step`` of the epoch as the whole batches' loop takes its first step: an
        int32 on the device, made once per step. A Python int was copied to the device at
        every call, on the host's time: on an H200 a call of 8 steps of the MLP 20-128-128-2
        took the host 375 us with it, 294 with this (the device's time for them: about
        310; bench/fit_vs_loop.py), so the host, not the GPU, set the pace."""
        started = self._starts.get(step)
        if started is None:
            started = self._starts[step] = self.rows.jax.device_put(np.int32(step))
        return started

    def blocks(self, begin: int, end: int) -> list[tuple[int, int]]:
        """The calls of the whole batches' loop that run steps ``begin`` to ``end``: ``(first
        step, steps)``, ``BLOCK_STEPS`` each (fewer for an epoch shorter than that), then
        what is left."""
        size = min(BLOCK_STEPS, max(1, self.rows.full))
        whole, left = divmod(max(0, end - begin), size)
        calls = [(begin + i * size, size) for i in range(whole)]
        return calls + ([(begin + whole * size, left)] if left else [])

    def test_function(self, model: Model, k: int) -> Callable:
        """Keras' ``test_function(state, iterator)``: the dispatch's validation steps."""
        compiled, rows = self._compiled(model), self.rows

        def test(state: Any, iterator: object) -> Any:
            begin = self.position["test_begin"]
            end = min(begin + k, rows.val_steps)
            logs = None
            compiled.settle()
            if begin < min(end, rows.val_full):
                logs, state = compiled.test_steps(
                    state, rows.validation, begin, min(end, rows.val_full) - begin
                )
            if end > rows.val_full:
                logs, state = compiled.test_last(
                    state, rows.validation, rows.val_full, rows.val_partial
                )
            return logs, state

        return test

    def compile_ahead(self, compiled: Programs, state: Any) -> None:
        """Start compiling the programs the first epoch's end calls (the last, partial
        batch; validation's), once per ``compiled``: each traced and lowered here, one
        after another (tracing reads and sets the model's Python state), then compiled by
        XLA on a thread of its own, beside this thread's compiling and training (XLA's
        compiler releases the GIL). JAX then finds them compiled (tracing and compilation
        are cached by function and argument types); ``Programs.settle`` waits for them
        before one is called. Under a distribution the state's layout is part of the
        arguments' types: not done there.

        When: on a GPU before the whole batches' loop compiles; on the CPU after its
        first dispatch, beside the training.
        - On a GPU compiling, not training, is most of a small model's fit in a fresh
          process: a gpu_search() trial of an MLP 20-u-u-2 on an H100 compiled for 5-8 s
          of its 7-10 s, these programs and the loop one after another, 0.9-2.3 s each.
          Compiled at once each took about twice as long, and a trial's fit was still 2 s
          shorter (6.9-8.5 s against 8.7-10.7); two workers sharing the GPU ran 812-869
          trials an hour, not 708-726 (with one thread for all three, 738). Seen there,
          cause not found: in a few trials of a search compiling at once took 9-13 s, not
          4-5 (bench/results/gpu-visit-NVIDIA-H100-80GB-HBM3-2026-11-25-compiling.md).
        - On a 2-core CPU the compilers and the training share the cores, and starting
          them first shortened nothing measurable (a fresh process's fit of that MLP: 2.5-
          3.5 s either way); after the first dispatch they save the first epoch's end
          0.15-0.4 s there.

        ``state``: the training state (its shapes and dtypes are read).
        """
        rows = self.rows
        if not self._ahead or self._all_ahead:
            return
        compiled.ahead = compiled.ahead or []
        jax = rows.jax
        # Keras passes uncommitted arrays on one device, and Python ints as begin and count
        spec = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state)
        test_state = (spec[0], spec[1], spec[3])  # Keras' test state has no optimizer
        whole = jax.ShapeDtypeStruct((), "int32", weak_type=True)
        first = jax.ShapeDtypeStruct((), "int32")  # ``start``'s
        order = jax.eval_shape(lambda: jax.numpy.arange(rows.rows))  # an epoch's order's type
        # (name, program, its arguments): each a jitted function, whose ``lower`` takes types
        jobs: list[tuple[object, Any, tuple]] = []
        if rows.partial:
            jobs.append(("train_last", compiled.train_last, (spec, rows.data, order, rows.full)))
        if rows.validation is not None and rows.val_full:
            tested = (test_state, rows.validation, whole, whole)
            jobs.append(("test_steps", compiled.test_steps, tested))
        if rows.validation is not None and rows.val_partial:
            last = (test_state, rows.validation, rows.val_full, rows.val_partial)
            jobs.append(("test_last", compiled.test_last, last))
        for count in self._later_counts():
            jobs.append((count, compiled.train_steps, (spec, rows.data, order, first, count)))
        self._all_ahead = self._k is not None
        for name, program, arguments in jobs:
            if name in compiled.started:
                continue
            compiled.started.add(name)
            try:
                lowered = program.lower(*arguments)
            except Exception:
                # the call itself traces it then, and raises what went wrong there
                continue
            thread = threading.Thread(
                target=_compile, args=(lowered,), name="gpukeras-compile-ahead"
            )
            thread.start()
            compiled.ahead.append(thread)

    def _later_counts(self) -> set[int]:
        """The step counts of the whole batches' loop an epoch calls beyond its first
        dispatch's (which compile on the training thread), once ``k`` is known."""
        k, full = self._k, self.rows.full
        if k is None:
            return set()
        first = {count for _, count in self.blocks(0, min(k, full))}
        later = {c for b in range(0, full, k) for _, c in self.blocks(b, min(b + k, full))}
        return later - first

    def choose_steps(self, model: Model) -> int:
        """k for "auto": the steps that take ``DISPATCH_SECONDS`` on the device (see the notes),
        1 to an epoch's steps. A step is timed once per compiled program, on a copy of the
        training state; a state past ``PROBE_SHARE`` of the free memory is not copied, and k
        is one call of the loop."""
        rows = self.rows
        if rows.full == 0:
            return 1
        compiled = self._compiled(model)
        block = min(BLOCK_STEPS, rows.full)  # whole calls of the loop
        if compiled.step_seconds is None:
            jax = rows.jax
            state = training_state(model)
            if not _copy_fits(jax, state):
                return block
            ((_, probe),) = self.blocks(0, block)  # a call of the loop
            # a step's time does not depend on the order: the rows' own, copied (an arange
            # on the device compiles a program per row count)
            order = jax.device_put(np.arange(rows.rows, dtype=np.int32))
            if self._ahead_first:
                self.compile_ahead(compiled, state)
            copy = _copy_program(jax)
            seconds = []
            began = self.start(0)
            for _ in range(2):  # the first call compiles
                copied = copy(state)
                started = time.perf_counter()
                jax.block_until_ready(compiled.train_steps(copied, rows.data, order, began, probe))
                seconds.append(time.perf_counter() - started)
            compiled.step_seconds = seconds[-1] / probe
        wanted = math.ceil(DISPATCH_SECONDS / max(compiled.step_seconds, 1e-9))
        return max(1, min(rows.steps, block * math.ceil(wanted / block)))

    def install(self, model: Model, k: int) -> None:
        """Make ``model.fit()`` train on these rows on the device, ``k`` steps per dispatch."""
        self._model_steps = model.steps_per_execution
        model.steps_per_execution = k
        model.train_function = self.train_function(model, k)
        if self.rows.validation is not None:
            model.test_function = self.test_function(model, k)

    def uninstall(self, model: Model) -> None:
        """Give the model back its own steps per execution and Keras' own step functions
        (made again at their next use)."""
        model.steps_per_execution = self._model_steps
        installed = _PROGRAMS.get(model)
        if installed is not None:
            installed.settle()
        compat.forget_step_functions(model, all_of_them=True)
