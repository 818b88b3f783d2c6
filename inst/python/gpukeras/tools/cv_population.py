"""gpu_cv()'s folds as one population (JAX): whether they train so, and the training.

``plan`` decides, in the R session and before any worker starts, whether gpu_cv() tries a
population: ``population = "auto"`` (gpu_workers()' default) on the JAX backend, with fit
arguments a population honours (``SUPPORTED``) and no tracking (a tracked fold is a run of its
own, sent by its own fit); anything else trains a process per fold, as before, and the
reason says why. ``train`` runs in one worker: one model, made there by model_fn after the
first fold's seed, gives each fold's starting state (``population.starts``; where it cannot,
nothing trains and the worker makes each fold's model after its seed, which are checked to
be one architecture, ``population.mismatch``); the folds are checked to fit the memory
(``MEMORY_SHARE`` of the device's free memory for every member's step, by the memory plan),
then trained as one (``train.population``) and each scored on its held-out rows in it: as
``scoring.score`` scores a fold's fit (Keras' evaluate() and predict()), the metrics being
the last epoch's validation of those rows and the predictions ``Population.predict``'s, one
program for all folds where each fold's model would compile its own (on a GPU, seconds
each). Where they are not one architecture or do not fit, nothing trains, and the answer
says so: the session then gives each fold a process of its own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gpukeras.core.backend import configured_backend
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.data.adapters.base import DEFAULT_BATCH_SIZE
from gpukeras.data.adapters.resident import data_bytes, free_bytes
from gpukeras.serve import scoring
from gpukeras.tools import memory_plan
from gpukeras.train.population import Member, Population, mismatch, prepare, starts

# gpu_fit()'s arguments a population honours; any other makes gpu_cv() train a process per fold.
SUPPORTED = ("epochs", "batch_size", "learning_rate", "monitor")
# The share of the device's free memory the members' steps and the data may take.
MEMORY_SHARE = 0.5


def plan(
    population: str | bool = "auto",
    fit: Sequence[str] = (),
    learning_rate: object = None,
    tracking: bool = False,
    backend: str | None = None,
    kind: str = "folds",
) -> Record:
    """Whether gpu_cv() tries its folds as one population (or gpu_search() its trials as
    populations, ``kind = "trials"``): ``population`` (True or False) and ``reason``.
    ``population``: gpu_workers()' (``"auto"`` or False); ``fit``: the names of the call's
    gpu_fit() arguments (searched ones too), ``learning_rate`` the one given (or None);
    ``tracking``: whether the fits are tracked runs; ``backend``: Keras' (None: as
    configured, read without importing Keras)."""
    if population is False:
        return {
            "population": False,
            "reason": "populations are off: gpu_workers(population = FALSE)",
        }
    if population != "auto":
        raise BadArgumentError(f'population must be "auto" or FALSE, not {population!r}.')
    backend = backend or configured_backend()
    if backend != "jax":
        return {"population": False, "reason": f"populations train on JAX; Keras runs on {backend}"}
    others = sorted(set([fit] if isinstance(fit, str) else fit) - set(SUPPORTED))
    if others:
        names = ", ".join(others)
        return {"population": False, "reason": f"a population does not take gpu_fit()'s {names}"}
    if learning_rate is not None and not isinstance(learning_rate, (int, float)):
        return {
            "population": False,
            "reason": "a population takes a learning rate as a number, not a schedule",
        }
    if tracking:
        return {"population": False, "reason": f"each tracked {kind[:-1]} is a run of its own fit"}
    trained = {
        "folds": "the folds train as one population (one program, one process)",
        "trials": "the trials train in batches, as a population for each architecture",
    }
    return {"population": True, "reason": trained[kind]}


def taken(tree: object, rows: np.ndarray) -> object:
    """Rows of an array, or of each array of a dict."""
    if isinstance(tree, dict):
        return {name: np.asarray(value)[rows] for name, value in tree.items()}
    return np.asarray(tree)[rows]


def first_batch(data: tuple, rows: np.ndarray) -> tuple:
    """``(x, y)`` of the data's ``rows``: the batch a member's model is built from."""
    return tuple(taken(part, rows) for part in data[:2])


def fits_memory(models: Sequence[Model], data: tuple, size: int) -> str | None:
    """Why the members' steps and the data do not fit ``MEMORY_SHARE`` of the device's free
    memory by the memory plan, or None when they do (or the free memory is unknown)."""
    import jax

    one = memory_plan.plan_of(config.keras(), models[0])[0].peak_mib(size)
    needed = len(models) * one + data_bytes(*data) / 2**20
    free = free_bytes(jax.devices()[0])
    if free is not None and needed > MEMORY_SHARE * free / 2**20:
        return (
            f"{len(models)} members need about {needed:.0f} MiB, more than "
            f"{MEMORY_SHARE:.0%} of the device's free {free / 2**20:.0f} MiB"
        )
    return None


def train(
    models: Sequence[Model],
    x: object,
    y: object,
    members: Sequence[Mapping[str, Any]],
    sample_weight: object = None,
    epochs: int = 1,
    batch_size: int | None = None,
    learning_rate: float | None = None,
    monitor: object = None,
) -> Record:
    """Train gpu_cv()'s folds as one population and score each on its held-out rows.

    Args:
        models: one model, compiled, made by model_fn after the first fold's seed: the
            others' starting states are drawn from their seeds (``population.starts``); or
            each fold's model, made by model_fn after its fold's seed.
        x, y, sample_weight: every row of the data (arrays, ``x`` a dict of them too).
        members: per fold ``seed``, ``rows`` (its training rows) and ``held_out`` (0-based
            row indices), in the order of ``models``.
        epochs, batch_size, learning_rate: gpu_fit()'s, for every fold (``monitor``, which
            changes no update, is taken and ignored).

    Returns:
        ``trained`` ("population"; "processes" where they cannot train as one, or
        "models" where one model was given and the folds' states cannot be drawn from it:
        each fold then needs its own; nothing trained), ``reason``, and with a population
        ``folds``: per fold ``history`` (as gpu_fit()'s), ``metrics`` and ``predictions``
        (as ``scoring.score``'s) and ``seconds`` (the population's training time, shared by
        its folds).
    """
    size = int(batch_size or DEFAULT_BATCH_SIZE)
    data = tuple(part for part in (x, y, sample_weight) if part is not None)
    held = [np.asarray(m["held_out"], np.int64) for m in members]
    batches = [first_batch(data, np.asarray(m["rows"][:size], np.int64)) for m in members]
    drawn: list[tuple] | None = None
    if len(models) == 1 < len(members):
        seeds = [int(m["seed"]) for m in members]
        made = starts(models[0], seeds, batches[0], [learning_rate] * len(members))
        if isinstance(made, str):
            return {"trained": "models", "reason": f"each fold needs its own model: {made}"}
        drawn = made
        why = fits_memory([models[0]] * len(members), data, size)
    else:
        for model, member, batch in zip(models, members, batches):
            prepare(model, member["seed"], batch, learning_rate)
        why = mismatch(models) or fits_memory(models, data, size)
    if why is not None:
        return {"trained": "processes", "reason": why}
    population = Population(
        models,
        [
            Member(int(m["seed"]), np.asarray(m["rows"], np.int64), rows)
            for m, rows in zip(members, held)
        ],
        data,
        size,
        starts=drawn,
    )
    started = time.perf_counter()
    histories = population.train(int(epochs))
    seconds = time.perf_counter() - started
    folds = []  # scored in the population (see the module's notes)
    for history, predicted in zip(histories, population.predict()):
        metrics = {name[4:]: values[-1] for name, values in history.items() if name[:4] == "val_"}
        names = sorted(metrics, key=lambda name: name != "loss")  # the loss first
        folds.append(
            {
                "history": history,
                "seconds": seconds,
                "metrics": {name: float(metrics[name]) for name in names},
                "predictions": scoring.outputs(predicted),
            }
        )
    reason = "the folds trained as one population: one architecture, one program, one process"
    return {"trained": "population", "reason": reason, "folds": folds}
