"""Populations on JAX: models of one architecture trained as one compiled program.

Keras' JAX ``train_step(state, data)`` (keras/src/backend/jax/trainer.py) is a pure function
of the model's state: its trainable, non-trainable, optimizer and metric variables. Models of
one architecture (the same variables' shapes and types, the same layers, loss, metrics and
optimizer) have states of one structure, so one model's step, mapped with ``jax.vmap`` over a
leading axis of their stacked states and of their batches, trains them all: one compilation
and one dispatch per call for every member, on data put on the device once. Each member
gathers its own batches by index: its own rows (a fold's training rows), in its own epoch
order (``EpochOrder``, drawn from its own seed as a fit of its rows would draw it), and
validates on its own rows after each epoch, as Keras' fit() does with validation data.

Each member trains as a fit of its rows alone would, step for step: its whole batches, then
its last, partial batch as a step of its own. Members of different row counts are exact, not
padded into each other (Keras' loss divides by the batch's rows, so zero-weight padding
would change the updates): while the longest epoch's whole batches run (``lax.fori_loop``,
one dispatch for the epoch), a member past its own whole batches keeps its state (``where``),
and the last, partial batch of each size is a vmapped step of its own in which the members of
other sizes keep theirs. The same mask holds a member that was stopped (``stop``): its state
stays as it was while the others train. Optimizer variables are state too, so members may
differ in them (the learning rate, a variable, set per member before the population starts).

A population's members need not be models of their own: one model, made after the first
member's seed, gives every member's starting state (``starts``). Keras draws a weight's
starting value by its initializer from a seed the initializer took as it was made, Keras'
default seed (the next draw of Python's ``random``, which ``set_random_seed`` seeded) where
it was given none, and a seed generator's state likewise. So each weight is matched to the
initializer of its layer that gives its value again, each default seed to its place in the
draws after the first member's seed, and a member's weights are those initializers' values
with the seeds at the same places in the draws after its own seed: the values a model of its
own, made after its seed, would start from. Where a weight is no initializer's of its layer
(an LSTM's bias, a weight loaded), each member needs a model of its own.

On a GPU a small model's programs take seconds to compile and milliseconds an epoch to run,
so a population of one (a search's batch, a cross-validation) is bound by compiling: its
programs are compiled without XLA's GEMM autotuning and Triton GEMM kernels
(``compile_options``), which halves their compiling with steps as fast (DESIGN.md). A larger
model keeps XLA's defaults: its steps may gain from them more than its compiling costs.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpukeras.core import compat
from gpukeras.core.handles import Model
from gpukeras.core.runtime import config
from gpukeras.data.adapters.resident import EpochOrder, build
from gpukeras.gpu import xla_env
from gpukeras.gpu.simulated import simulated_gpu
from gpukeras.train import fit_request
from gpukeras.train.resident import state_variables, training_state
from gpukeras.train.training_run import history_columns

# XLA's options for a small model's population on a GPU (see the module's notes), and what
# "small" is: the parameters of a model whose step is a few small GEMMs (a tabular MLP of
# a few hundred units has some 10^4-10^5).
SMALL_MODEL_OPTIONS = {"xla_gpu_autotune_level": 0, "xla_gpu_enable_triton_gemm": False}
SMALL_MODEL_PARAMETERS = 1_000_000


def compile_options(jax: Any, model: Model) -> dict[str, Any]:
    """XLA's compile options for the programs of a population of ``model``: on a GPU (a
    simulated one too), for a model of at most ``SMALL_MODEL_PARAMETERS`` parameters,
    ``SMALL_MODEL_OPTIONS`` less any the user's XLA_FLAGS sets; else none (XLA's defaults)."""
    on_gpu = jax.devices()[0].platform == "gpu" or simulated_gpu() is not None
    if not on_gpu or model.count_params() > SMALL_MODEL_PARAMETERS:
        return {}
    return {k: v for k, v in SMALL_MODEL_OPTIONS.items() if xla_env.xla_flag(k) is None}


@dataclass
class Member:
    """One member's rows: ``seed`` draws its epochs' order; ``rows`` are the data's rows it
    trains on (indices, in the order a fit of them alone would be given them);
    ``validation`` the rows it is validated on after each epoch, in order (None: none)."""

    seed: int
    rows: np.ndarray
    validation: np.ndarray | None = None


def prepare(model: Model, seed: int, batch: tuple, learning_rate: float | None = None) -> None:
    """``model`` as a member starts, as gpu_fit(seed = ) starts a fit of it: the seed again,
    then the model built as fit() builds it (its metrics and optimizer too) from ``batch``
    (``(x, y)`` of a first batch), and its optimizer's ``learning_rate`` set (None: as
    compiled). Its state then is its member's start.

    Raises:
        BadDataError: data the model refuses, as a fit of it refuses it (``resident.build``).
    """
    keras = config.keras()
    compat.set_random_seed(keras, int(seed), model)
    build(model, batch)
    if learning_rate is not None:
        fit_request.set_learning_rate(
            keras, fit_request.inner_optimizer(model), float(learning_rate)
        )


# Keras' default seed for an initializer or a seed generator made without one
# (keras/src/random/seed_generator.py's ``make_default_seed``): the next draw of Python's
# ``random``, which ``keras.utils.set_random_seed`` seeded; and how far into those draws a
# model's are looked for (``SEED_DRAWS`` past twice its random objects).
DEFAULT_SEED_RANGE = (1, int(1e9))
SEED_DRAWS = 64


def _default_seeds(seed: int, count: int) -> list[int]:
    """The first ``count`` default seeds Keras draws after ``set_random_seed(seed)``."""
    draws = random.Random(seed)
    return [draws.randint(*DEFAULT_SEED_RANGE) for _ in range(count)]


@dataclass
class _Draw:
    """How a variable's starting value is drawn: by ``initializer`` with the default seed at
    ``position`` of a member's draws (a seed generator's state: ``initializer`` None), or the
    same in every member (``position`` None)."""

    variable: Any
    initializer: Any = None
    position: int | None = None


def _drawn_by(keras: Any, variable: Any, candidates: dict[str, Any]) -> _Draw | str | None:
    """How ``variable`` (as its layer made it) was drawn: by the one of its layer's
    ``candidates`` (initializers by attribute) that gives its value again, the one named for
    it tried first (``kernel_initializer`` for ``kernel``: no other is drawn in vain); a
    string where that initializer may draw otherwise in another member (not Keras' own),
    None where none gives it."""
    value = np.asarray(variable.value)
    random_type = compat.random_initializer_type()
    named = f"{variable.name}_initializer"
    for candidate in [candidates[k] for k in sorted(candidates, key=lambda k: k != named)]:
        try:
            given = np.asarray(candidate(variable.shape, dtype=variable.dtype))
        except (ValueError, TypeError):  # an initializer for other shapes (Identity: 2-D)
            continue
        if not np.array_equal(given, value):
            continue
        if isinstance(candidate, random_type):
            seeded = candidate.get_config().get("seed")
            if seeded is None:
                return _Draw(variable, candidate, candidate.seed)  # the seed, placed later
            if isinstance(seeded, int):
                return _Draw(variable)
        elif type(candidate).__module__.startswith("keras."):
            return _Draw(variable)  # Keras' own constant initializers
        return f"{variable.path}'s initializer {type(candidate).__name__} is not Keras' own"
    return None


def _draws(model: Model, seed: int) -> list[_Draw] | str:
    """How each of ``model``'s weights (trainable and not: its state's first two parts) was
    drawn, ``model`` made after ``set_random_seed(seed)``; or why they cannot be drawn again
    for another seed without making the model again."""
    keras = config.keras()
    found: dict[int, _Draw] = {}
    for layer in compat.flatten_layers(model, include_self=True):
        for generator in compat.layer_seed_generators(layer):
            state = generator.state
            unseeded = compat.generator_unseeded(generator)
            drawn = int(np.asarray(state.value)[0]) if unseeded else None
            found[id(state)] = _Draw(state, None, drawn)
        initializer = keras.initializers.Initializer
        candidates = {k: v for k, v in vars(layer).items() if isinstance(v, initializer)}
        for variable in compat.own_variables(layer):
            if id(variable) not in found:
                draw = _drawn_by(keras, variable, candidates)
                if isinstance(draw, str):
                    return draw
                if draw is not None:
                    found[id(variable)] = draw
    weights = [*model.trainable_variables, *model.non_trainable_variables]
    missing = [v.path for v in weights if id(v) not in found]
    if missing:
        return f"{missing[0]}'s starting value is not its layer's initializer's"
    draws = [found[id(v)] for v in weights]
    seeds = [d.position for d in draws if d.position is not None]
    stream = _default_seeds(seed, SEED_DRAWS + 2 * len(seeds))
    for draw in draws:
        if draw.position is not None:
            if draw.position not in stream:
                return f"{draw.variable.path}'s seed is not one Keras drew after the member's seed"
            draw.position = stream.index(draw.position)
    return draws


def _drawn(keras: Any, draw: _Draw, seeds: Sequence[int]) -> Any:
    """``draw``'s variable's starting value in the member whose default seeds are ``seeds``."""
    variable = draw.variable
    if draw.position is None:
        return variable.value
    seed = seeds[draw.position]
    if draw.initializer is None:  # a seed generator's state: its seed, then 0
        return keras.ops.convert_to_tensor([seed, 0], dtype=variable.dtype)
    config = {**draw.initializer.get_config(), "seed": seed}
    value = type(draw.initializer).from_config(config)(variable.shape, dtype=variable.dtype)
    return keras.ops.convert_to_tensor(value, variable.dtype)


def starts(
    model: Model, seeds: Sequence[int], batch: tuple, learning_rates: Sequence[float | None]
) -> list[tuple] | str:
    """Each member's starting state (``training_state``'s parts), as a fit of its own model
    with its seed would start (``prepare``), drawn from one model: ``model`` is prepared as
    the first member, and each other member's weights drawn by the initializers that drew
    its weights, with the default seeds Keras draws after the member's seed (those its own
    model's initializers would have taken); its optimizer's learning rate its own
    (``learning_rates``, None: as compiled, for every member or none), the rest as the first
    member's. A string says why the members' states cannot be drawn so (a weight that no
    initializer of its layer gives, one not Keras' own, a seed Keras did not draw, learning
    rates given to some members only): each member then needs a model of its own.

    Raises:
        BadDataError: as ``prepare``.
    """
    keras = config.keras()
    prepare(model, seeds[0], batch, learning_rates[0])
    draws = _draws(model, int(seeds[0]))
    if isinstance(draws, str):
        return draws
    if len({rate is None for rate in learning_rates}) > 1:
        return "a learning rate is given to some members only"
    base = training_state(model)
    optimizer = state_variables(model)[2]
    rate: Any = compat.learning_rate_of(fit_request.inner_optimizer(model))
    at = next((i for i, variable in enumerate(optimizer) if variable is rate), None)
    if at is None and len(set(learning_rates)) > 1:
        return "the optimizer holds its learning rate otherwise than as a variable"
    length = 1 + max((d.position for d in draws if d.position is not None), default=-1)
    states = []
    for seed, learning_rate in zip(seeds, learning_rates):
        drawn = _default_seeds(int(seed), length)
        weights = [_drawn(keras, draw, drawn) for draw in draws]
        trainable = len(base[0])
        optimizer_state = list(base[2])
        if at is not None and learning_rate is not None:
            optimizer_state[at] = keras.ops.convert_to_tensor(float(learning_rate), rate.dtype)
        states.append((weights[:trainable], weights[trainable:], optimizer_state, base[3]))
    return states


def _unnamed(settings: object) -> object:
    """A config without its names (two models made in one process name their layers apart)."""
    if isinstance(settings, dict):
        return {k: _unnamed(v) for k, v in settings.items() if k not in ("name", "learning_rate")}
    if isinstance(settings, (list, tuple)):
        return [_unnamed(v) for v in settings]
    return settings


def _variables(model: Model) -> list[list[tuple[tuple, str]]]:
    groups = training_state(model)
    return [[(tuple(v.shape), str(v.dtype)) for v in group] for group in groups]


def mismatch(models: Sequence[Model]) -> str | None:
    """Why built, compiled ``models`` cannot train as one population, or None when they can:
    each must have the first one's variables (shapes and types: trainable, non-trainable,
    optimizer, metrics) and its configuration (layers, loss, metrics, optimizer; names and
    the learning rate, a variable, aside)."""
    first = models[0]
    shapes, layers = _variables(first), _unnamed(first.get_config())
    compiled = _unnamed(first.get_compile_config())
    for number, model in enumerate(models[1:], start=2):
        if _variables(model) != shapes:
            return f"model {number}'s variables differ in shape or type from model 1's"
        if _unnamed(model.get_config()) != layers:
            return f"model {number}'s layers are configured otherwise than model 1's"
        if _unnamed(model.get_compile_config()) != compiled:
            return f"model {number} is compiled otherwise than model 1 (loss, metrics, optimizer)"
    return None


def _stacked(jax: Any, trees: Sequence[Any]) -> Any:
    """Trees of one structure as one tree, each leaf stacked on a new leading axis."""
    return jax.tree.map(lambda *leaves: jax.numpy.stack(leaves), *trees)


def _programs(jax: Any, model: Model, size: int) -> dict[str, Callable]:
    """The compiled programs of a population of ``model``'s architecture at batch ``size``:
    ``whole(step)`` runs the whole batches (count compiled in) and ``tail(step)`` one
    partial batch (its rows compiled in), for ``step`` "train" or "test" (see the notes);
    ``predict`` each member's outputs for its rows, ``count`` batches of them (padded)."""
    jnp = jax.numpy
    steps = {"train": jax.vmap(model.train_step), "test": jax.vmap(model.test_step)}
    options = compile_options(jax, model) or None

    def gather(data: Any, rows: Any) -> Any:
        return jax.tree.map(lambda a: jnp.take(a, rows, axis=0), data)

    def keep(mask: Any, new: Any, old: Any) -> Any:
        def pick(n: Any, o: Any) -> Any:
            return jnp.where(mask.reshape(mask.shape + (1,) * (n.ndim - 1)), n, o)

        return jax.tree.map(pick, new, old)

    def whole(kind: str) -> Callable:
        step = steps[kind]

        def run(
            state: Any, logs: Any, data: Any, rows: Any, limits: Any, active: Any, count: int
        ) -> Any:
            def body(s: Any, carry: Any) -> Any:
                state, logs = carry
                batch = gather(data, jax.lax.dynamic_slice_in_dim(rows, s * size, size, axis=1))
                new_logs, new_state = step(state, batch)
                mask = active & (s < limits)
                return keep(mask, new_state, state), keep(mask, new_logs, logs)

            return jax.lax.fori_loop(0, count, body, (state, logs))

        return jax.jit(run, static_argnames="count", compiler_options=options)

    def tail(kind: str) -> Callable:
        step = steps[kind]

        def run(
            state: Any, logs: Any, data: Any, rows: Any, starts: Any, mask: Any, count: int
        ) -> Any:
            taken = jax.vmap(lambda r, s: jax.lax.dynamic_slice_in_dim(r, s, count))(rows, starts)
            new_logs, new_state = step(state, gather(data, taken))
            return keep(mask, new_state, state), keep(mask, new_logs, logs)

        return jax.jit(run, static_argnames="count", compiler_options=options)

    def predicting(state: Any, x: Any, rows: Any, count: int) -> Any:
        step = jax.vmap(model.predict_step)

        def one(s: Any) -> Any:
            batch = gather(x, jax.lax.dynamic_slice_in_dim(rows, s * size, size, axis=1))
            return step(state, (batch,))[0]

        outputs = jax.lax.map(one, jnp.arange(count))  # (batch, member, row, ...)
        return jax.tree.map(
            lambda o: jnp.moveaxis(o, 0, 1).reshape(o.shape[1], count * size, *o.shape[3:]),
            outputs,
        )

    def logs_like(kind: str, state: Any, data: Any, members: int) -> Any:
        batch = jax.tree.map(
            lambda a: jax.ShapeDtypeStruct((members, size, *a.shape[1:]), a.dtype), data
        )
        shapes = jax.eval_shape(steps[kind], state, batch)[0]
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    return {
        "train_whole": whole("train"),
        "train_tail": tail("train"),
        "test_whole": whole("test"),
        "test_tail": tail("test"),
        "predict": jax.jit(predicting, static_argnames="count", compiler_options=options),
        "logs_like": logs_like,
    }


def assign(model: Model, values: Any, index: int) -> None:
    """Member ``index``'s state, of a population's stacked ``values`` (its ``state``), into
    ``model``'s variables (a model of the population's architecture)."""
    for variables, stacked in zip(state_variables(model), values):
        for variable, value in zip(variables, stacked):
            variable.assign(value[index])


class _Batches:
    """Members' rows cut into batches of ``size``: their whole batches (``full``), the rows of
    their last, partial one (``partial``), and the width their row lists are padded to."""

    def __init__(self, counts: Sequence[int], size: int) -> None:
        counts_array = np.asarray(counts, dtype=np.int64)
        self.full, self.partial = (part.astype(np.int32) for part in np.divmod(counts_array, size))
        self.width = int(max(int(counts_array.max()), size))

    def padded(self, rows: Sequence[np.ndarray]) -> np.ndarray:
        """Row lists as one int32 matrix, a member a row (the padding is never trained on)."""
        out = np.zeros((len(rows), self.width), np.int32)
        for i, r in enumerate(rows):
            out[i, : len(r)] = r
        return out


class Population:
    """Models of one architecture (``mismatch`` says None), each a ``Member``, trained as one.

    Use: ``Population(models, members, data, batch_size)``, ``train(epochs)`` (each member's
    history), ``stop(i)`` to hold member ``i`` as it is; ``write_back()`` puts each member's
    state into its own model (for scoring, saving). ``data``: the arrays every member's rows
    index, ``(x, y)`` or ``(x, y, sample_weight)`` as Keras' step reads a batch; each model
    compiled and made ready as a fit of it starts (``prepare``). Or one model for every
    member (given once for each), ``starts`` each member's starting state (``starts()``'s):
    ``assign`` then puts a member's state, of ``state``, into it.

    ``width``: the members the programs are compiled for, where more than the models (None:
    as many). The count of members is a shape of every program, so populations of one
    architecture and one width run the same compiled programs (a later one, in a fresh
    process, finds them in the persistent compilation cache). The members past the models
    are copies of the first, held from the start (as ``stop`` holds one): they cost their
    steps' compute, are never written back, and have no history.
    """

    def __init__(
        self,
        models: Sequence[Model],
        members: Sequence[Member],
        data: tuple,
        batch_size: int,
        on_host: bool | None = None,
        width: int | None = None,
        starts: Sequence[tuple] | None = None,
    ) -> None:
        """``on_host``: where the epochs' orders are drawn (``EpochOrder``); None: as this
        backend draws them. ``starts``: the members' starting states (None: their models')."""
        import jax

        self.jax, self.size = jax, int(batch_size)
        self.models, self.members = list(models), list(members)
        count = len(self.members)
        self.width = max(count, int(width or count))
        padded = self.members + [self.members[0]] * (self.width - count)
        self.data = jax.device_put(data)
        self.active = np.arange(self.width) < count
        self.orders = [EpochOrder(jax, len(m.rows), m.seed, on_host) for m in padded]
        self.train_batches = _Batches([len(m.rows) for m in padded], self.size)
        self._rows = [np.asarray(m.rows, np.int32) for m in padded]
        self._rows_on_device = (
            None if self.orders[0].on_host else [jax.device_put(r) for r in self._rows]
        )
        validated = [m.validation for m in padded]
        self.validated = all(v is not None and len(v) for v in validated)
        if self.validated:
            held = [np.asarray(v, np.int32) for v in validated]
            self.test_batches = _Batches([len(v) for v in held], self.size)
            self._validation = jax.device_put(self.test_batches.padded(held))
        states = list(starts) if starts is not None else [training_state(m) for m in self.models]
        state = _stacked(jax, states + [states[0]] * (self.width - count))
        self.state = state
        self._fresh_metrics = state[3]  # each epoch's training and validation start from them
        self._programs = _programs(jax, self.models[0], self.size)
        self._logs: dict[str, Any] = {}
        self.epochs_done = 0  # a later ``train`` goes on from there

    def stop(self, index: int) -> None:
        """Hold member ``index`` as it is from the next epoch on (its updates masked)."""
        self.active[index] = False

    def epoch_rows(self, epoch: int) -> Any:
        """Each member's rows in epoch ``epoch``'s order, padded, a member a row, on the device."""
        jax = self.jax
        if self._rows_on_device is None:  # orders drawn by NumPy: gathered here, copied once
            drawn = [
                rows[order.draw(epoch, host=True)] for rows, order in zip(self._rows, self.orders)
            ]
            return jax.device_put(self.train_batches.padded(drawn))
        width = self.train_batches.width
        drawn = [
            jax.numpy.pad(jax.numpy.take(rows, order.draw(epoch)), (0, width - len(r)))
            for rows, order, r in zip(self._rows_on_device, self.orders, self._rows)
        ]
        return jax.numpy.stack(drawn)

    def _run(self, kind: str, state: Any, rows: Any, batches: _Batches) -> tuple[Any, Any]:
        """One pass of ``kind`` ("train", "test") over every member's rows: whole batches in
        one call, then each size of last, partial batch in a call of its own."""
        jnp, programs = self.jax.numpy, self._programs
        logs = self._logs.get(kind)
        if logs is None:
            logs = self._logs[kind] = programs["logs_like"](kind, state, self.data, self.width)
        active = jnp.asarray(self.active)
        longest = int(batches.full.max())
        if longest:
            state, logs = programs[f"{kind}_whole"](
                state, logs, self.data, rows, jnp.asarray(batches.full), active, count=longest
            )
        starts = jnp.asarray(batches.full * self.size)
        for size in sorted(set(batches.partial.tolist()) - {0}):
            mask = jnp.asarray(self.active & (batches.partial == size))
            state, logs = programs[f"{kind}_tail"](
                state, logs, self.data, rows, starts, mask, count=size
            )
        return state, logs

    def train(self, epochs: int) -> list[dict[str, list]]:
        """Train ``epochs`` more epochs; each member's history of them as columns (``epoch``,
        then Keras' logs, ``val_`` ones after validation), as gpu_fit() returns a fit's; a
        stopped member's has the epochs it trained."""
        jax = self.jax
        rows: list[list[dict]] = [[] for _ in self.members]
        first = self.epochs_done
        for epoch in range(first, first + epochs):
            trainable, non_trainable, optimizer, _ = self.state
            state = (trainable, non_trainable, optimizer, self._fresh_metrics)
            state, logs = self._run("train", state, self.epoch_rows(epoch), self.train_batches)
            self.state = state
            epoch_logs = {name: np.asarray(v) for name, v in jax.device_get(logs).items()}
            if self.validated:
                tested = (state[0], state[1], self._fresh_metrics)
                tested, val_logs = self._run("test", tested, self._validation, self.test_batches)
                # validation's non-trainable variables go back, as Keras' evaluate() syncs them
                self.state = (state[0], tested[1], state[2], state[3])
                epoch_logs.update(
                    {f"val_{k}": np.asarray(v) for k, v in jax.device_get(val_logs).items()}
                )
            self.epochs_done = epoch + 1
            for i, member_rows in enumerate(rows):
                if self.active[i]:
                    member_rows.append(
                        {"epoch": epoch + 1, **{k: float(v[i]) for k, v in epoch_logs.items()}}
                    )
        return [history_columns(None, member_rows) for member_rows in rows]

    def write_back(self) -> None:
        """Each member's state into its own model's variables."""
        values = self.jax.device_get(self.state)
        for i, model in enumerate(self.models):
            assign(model, values, i)

    def predict(self) -> list[Any]:
        """Each member's outputs for its validation rows, in their order, as Keras'
        ``predict()`` of its model gives them (an array, or the model's structure of them),
        from one program for all members: the last batch padded, its padding's rows (each
        predicted on its own) dropped."""
        jax, size = self.jax, self.size
        count = -(-self.test_batches.width // size)
        padding = ((0, 0), (0, count * size - self.test_batches.width))
        rows = jax.numpy.pad(self._validation, padding)
        state = (self.state[0], self.state[1])
        outputs = jax.device_get(self._programs["predict"](state, self.data[0], rows, count=count))
        held = self.test_batches.full * size + self.test_batches.partial
        return [
            jax.tree.map(lambda o, i=i: np.asarray(o[i, : held[i]]), outputs)
            for i in range(len(self.members))
        ]
