"""Rows in memory put on the device, for training there (JAX): whether they go, and how.

Keras 3.15's JAX trainer copies each batch to the device before its step. For
rows in memory (R data, NumPy arrays, or a gpu_dataset() of them that batches
them as they are) that fit in ``MEMORY_SHARE`` of the device's free memory,
``DeviceRows`` instead puts them on the device once (replicated on every
device of a one-process ``DataParallel``, each batch then laid out as the
distribution says) and gives each epoch's order of them there, drawn from (seed,
epoch), so a run and its resumption see the same order (``DeviceRows.order``: on a
GPU ``jax.random``'s permutation on the device, on the CPU NumPy's on the host). The
loop that trains on them is ``train.resident``; Keras' fit() gets one token row per
step (``fit_args``), which nothing reads.

Where it does not apply (another backend, a model run without XLA, several
processes, or more than ``MEMORY_SHARE`` of the device's free memory),
``decide`` says why, and the data streams as before.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from gpukeras.core import compat
from gpukeras.core.handles import Model, Strategy
from gpukeras.data import failures
from gpukeras.data.adapters.base import DataAdapter, Decision, Rows
from gpukeras.data.indicators import FrameCodes, expand_inputs, split_codes

# The share of the device's free memory the data (with validation) may take on it.
MEMORY_SHARE = 0.5


def _leaves(tree: object) -> list[np.ndarray]:
    if tree is None:
        return []
    if isinstance(tree, FrameCodes):  # kept on the device as its dense columns and codes
        return [tree.dense, tree.codes]
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    if isinstance(tree, (tuple, list)):
        return [leaf for value in tree for leaf in _leaves(value)]
    return [np.asarray(tree)]


def _kept(x: object) -> tuple[object, object]:
    """Features as they are kept on the device, and their expansion (``indicators.split_codes``;
    features without a coded frame as they are, without asking it)."""
    parts = x.values() if isinstance(x, dict) else [x]
    if any(isinstance(part, FrameCodes) for part in parts):
        return split_codes(x)
    return x, None


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


def least_free_bytes(devices: Any) -> int | None:
    """The least free memory (``free_bytes``) among ``devices``; None where none is known."""
    known = [free for free in (free_bytes(device) for device in devices) if free is not None]
    return min(known) if known else None


def decide(
    backend: str,
    jit_compile: bool,
    rows: Rows,
    validation: tuple | None,
    devices: list[object],
    several_processes: bool,
) -> Decision:
    """Whether ``rows`` (and validation arrays) train on the device (see the notes).

    Args:
        backend: the Keras backend.
        jit_compile: whether the model's step is XLA-compiled, as it will train.
        rows: the training rows.
        validation: validation arrays ``(x, y)`` (and their sample weights) or None.
        devices: the JAX devices the data would be put on (one copy each).
        several_processes: whether this process trains with others.
    """
    if backend != "jax":
        return Decision(False, f"data streams from host memory on {backend}")
    if several_processes:
        return Decision(False, "with several processes Keras reads a sharded tf.data pipeline")
    if not jit_compile:
        return Decision(False, "the model runs without XLA, so steps cannot be compiled together")
    size = data_bytes(rows.x, rows.y, rows.sample_weight, validation)
    least = least_free_bytes(devices)
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


def draws_on_host(jax: Any) -> bool:
    """Whether an epoch's order is drawn by NumPy on the host and copied to the device, rather
    than by ``jax.random`` on the device: on JAX's CPU backend. There the device is the host's
    cores, and XLA's CPU sort makes ``jax.random.permutation`` slow: 43-54 ms for 102,400 rows
    (two key-value sorts), a quarter of an epoch of issue #63's MLP (0.2 s), during which
    training waits; NumPy's permutation and the copy take 1.3 ms (that MLP's two epochs after
    a warm-up, idle 2-core CPU, alternating rounds: 0.44 -> 0.33 s; bench/resident.R measures
    both ways from R). On a GPU the permutation is a kernel on the device, and an order drawn
    on the host would have to cross to it at every epoch's start: drawn there as before (a
    GPU's figures do not change). The two draw different orders for one seed, each the same
    in every run (a backup resumes on the backend that made it in the order it had)."""
    return bool(jax.default_backend() == "cpu")


@functools.cache
def _order_program(jax: Any) -> Any:
    """The program that draws an epoch's order on the device (a GPU: ``draws_on_host``): one
    compiled dispatch per epoch (drawn op by op, the host's part of it took 1.4 ms of its ~5 ms
    between epochs, measured on a 2-core CPU). One for the process, so a session's later fits
    find it compiled (made per fit, each compiled it anew: 0.24-0.6 s of a fit's start on a
    2-core CPU)."""

    def draw(key: Any, epoch: Any, count: int) -> Any:
        return jax.random.permutation(jax.random.fold_in(key, epoch), count)

    return jax.jit(draw, static_argnums=2)


class EpochOrder:
    """Each epoch's order of ``count`` rows, drawn from (seed, epoch): by NumPy on the host
    where ``on_host`` (the CPU backend), else by ``jax.random`` on the device (see
    ``draws_on_host``). The one way an epoch's order is drawn: a fit's rows on the device
    (``DeviceRows``) and each member of a population (``train.population``), so that a
    member trains in the order a fit of its rows with its seed would."""

    def __init__(self, jax: Any, count: int, seed: int, on_host: bool | None = None) -> None:
        """``on_host``: None for as ``draws_on_host`` says on this backend."""
        self.jax = jax
        self.count = int(count)
        self.seed = int(seed)
        self.on_host = draws_on_host(jax) if on_host is None else on_host
        self.key = None if self.on_host else jax.random.key(self.seed)

    def draw(self, epoch: int, host: bool = False) -> Any:
        """Epoch ``epoch``'s permutation of the rows, int32 (the type the loops' programs
        were compiled for), on the device; with ``host`` and ``on_host``, left on the host
        (NumPy's), for a caller that gathers several orders there first."""
        if self.on_host:
            drawn = np.random.default_rng([self.seed, epoch]).permutation(self.count)
            drawn = drawn.astype(np.int32)
            return drawn if host else self.jax.device_put(drawn)
        return _order_program(self.jax)(self.key, epoch, self.count)


class DeviceRows:
    """Rows (and validation rows) on the device, and each epoch's order of them.

    Attributes:
        batch_size, rows, full (whole batches), partial (rows of the last,
        partial batch; 0 with ``drop_remainder``), steps (batches an epoch),
        data and validation (the arrays on the device; validation None; a data.frame's
        one-hot factors as their codes, ``indicators.split_codes``), expansion and
        val_expansion (how a batch of them becomes the model's: ``batch``),
        val_full, val_partial, val_steps, distribution.
    """

    def __init__(
        self,
        rows: Rows,
        validation: tuple | None = None,
        distribution: Strategy | None = None,
        on_host: bool | None = None,
    ) -> None:
        """``on_host``: whether each epoch's order is drawn on the host; None: as
        ``draws_on_host`` says for this backend (tests draw both ways on one)."""
        import jax

        self.jax = jax
        self.batch_size = int(rows.batch_size)
        self.rows = rows.count
        self.shuffle = rows.shuffle
        self.full, self.partial = divmod(self.rows, self.batch_size)
        if rows.drop_remainder:
            self.partial = 0
        self.steps = self.full + (1 if self.partial else 0)
        self.distribution = distribution
        # Keras' train_step reads (x, y, sample_weight) batches as fit() gives them
        x, self.expansion = _kept(rows.x)
        parts = (x, rows.y, rows.sample_weight)
        self.data = self._place(tuple(part for part in parts if part is not None))
        self.validation = None
        self.val_expansion: object = None
        self.val_full = self.val_partial = self.val_steps = 0
        if validation is not None:
            x, self.val_expansion = _kept(validation[0])
            parts = tuple(part for part in (x, *validation[1:]) if part is not None)
            self.validation = self._place(parts)
            val_rows = len(_leaves(parts[0])[0])
            self.val_full, self.val_partial = divmod(val_rows, self.batch_size)
            self.val_steps = self.val_full + (1 if self.val_partial else 0)
        seed = rows.seed
        self.seed = int(seed) if seed is not None else int(np.random.default_rng().integers(2**31))
        # where each epoch's order is drawn (see draws_on_host), decided once
        self.orders = EpochOrder(jax, self.rows, self.seed, on_host)

    def _place(self, data: object) -> object:
        jax = self.jax
        if self.distribution is None:
            return jax.device_put(data)
        mesh = self.distribution.device_mesh.backend_mesh
        return jax.device_put(data, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))

    def batch(self, gathered: tuple, validation: bool = False) -> object:
        """A batch gathered from ``data`` (``validation``: from ``validation``) as the step
        reads it: its features the model's (each coded frame's indicator columns made here,
        inside the step: ``indicators.expand_inputs``), laid out as the distribution lays out
        its data (``laid_out``)."""
        expansion = self.val_expansion if validation else self.expansion
        if expansion is None:  # nothing coded
            return self.laid_out(gathered)
        x = expand_inputs(gathered[0], expansion, self.jax.numpy)
        return self.laid_out((x, *gathered[1:]))

    def laid_out(self, batch: object) -> object:
        """A gathered batch laid out as the distribution lays out its data (batch split)."""
        distribution = self.distribution
        if distribution is None:
            return batch
        jax = self.jax

        def constrain(leaf: Any) -> Any:
            layout = distribution.get_data_layout(leaf.shape)
            return jax.lax.with_sharding_constraint(leaf, layout.backend_layout)

        return jax.tree.map(constrain, batch)

    @property
    def on_host(self) -> bool:
        """Whether each epoch's order is drawn on the host (``EpochOrder``)."""
        return self.orders.on_host

    def order(self, epoch: int) -> Any:
        """Epoch ``epoch``'s order of the rows, on the device (their own order unshuffled):
        a permutation drawn from (seed, epoch), by NumPy on the host where ``on_host`` (the
        CPU backend), else by ``jax.random`` on the device (``EpochOrder``)."""
        return self.orders.draw(epoch) if self.shuffle else self.unshuffled()

    @functools.cached_property
    def _in_order(self) -> Any:
        return self.jax.device_put(np.arange(self.rows, dtype=np.int32))

    def unshuffled(self) -> Any:
        """The rows in their own order, on the device: copied there from the host once (JAX's
        ``arange`` compiled a program per row count in the process, 25-60 ms each on a 2-core
        CPU; gpu_tune()'s trials, unshuffled, have several row counts). No program donates it."""
        return self._in_order

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


def build(model: Model, batch: tuple) -> None:
    """Build ``model``, its compiled loss and metrics and its optimizer from ``batch`` (a
    first batch's ``(x, y)``, or ``(x,)``) as Keras' fit() builds them on the first batch it
    takes (``compat.symbolic_build``: the model's call and its loss are traced on it).

    Raises:
        BadDataError: data the model refuses (``failures.refused_data``): a fit of rows on
            the device and a population's members (a fit each) refuse the same data in the
            same words.
    """
    try:
        compat.symbolic_build(model, batch)
    except (ValueError, TypeError) as error:
        refused = failures.refused_data(error)
        assert refused is not None  # a ValueError or TypeError always is refused data
        raise refused from error


class ResidentAdapter(DataAdapter):
    """Rows put on the device once and trained there (``device_rows``, a ``DeviceRows``).

    ``model.fit()`` gets one token row per step, which it never copies to the
    device; the device-resident loop (``train.resident``) trains on the rows.
    """

    kind = "device arrays"

    def __init__(
        self,
        rows: Rows,
        validation: tuple | None,
        distribution: Strategy | None,
        decision: Decision,
    ) -> None:
        self.device_rows = DeviceRows(rows, validation, distribution)
        super().__init__(
            self.device_rows.fit_args(),
            batch_size=rows.batch_size,
            steps_per_epoch=self.device_rows.steps,
            rows=rows.count,
        )
        self.first = (rows.x, rows.y) if rows.y is not None else (rows.x,)
        self.decision = decision
        self.validation = self.device_rows.validation_args()

    def build(self, model: Model) -> None:
        """Build ``model`` from a batch of the rows: Keras would build it from the tokens it
        gets. Data that does not fit the model meets it here first.

        Raises:
            BadDataError: rows the model refuses (``build``).
        """
        size = self.batch_size or 1
        build(model, tuple(_head(part, size) for part in self.first))

    def gpu_dataset(self) -> dict[str, object] | None:
        """In-memory rows on the device: nothing to cache, map or wait for."""
        return {"source": "arrays", "cache": False, "user_map": False, "on_device": True}


def _head(part: object, rows: int) -> object:
    """The first ``rows`` rows of an array, or of each array of a dict (a ``FrameCodes``'s
    as the model's columns)."""
    if isinstance(part, dict):
        return {name: _head(value, rows) for name, value in part.items()}
    if isinstance(part, FrameCodes):
        return part.rows(slice(0, rows))
    return part[:rows]  # type: ignore[index]
