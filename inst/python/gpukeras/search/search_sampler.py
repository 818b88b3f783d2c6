"""gpu_search()'s samplers: Optuna's, seeded so that a trial's parameters depend on the
search's seed, the trial's number and the study's trials so far, not on which process asks.

``sampler`` makes the study's sampler (TPE, random or grid; TPE with its constant liar where
trials are asked a batch at a time), ``distribution`` a searched value's Optuna distribution,
``trial_seed`` the seed a trial (or a fold) trains with.
"""

from __future__ import annotations

import hashlib
from typing import Any

from gpukeras.core.errors import BadArgumentError


def distribution(optuna: Any, spec: dict[str, Any]) -> Any:
    """Optuna's distribution of a searched value's ``spec`` (R's search_int(), search_float(),
    search_choice(): ``type``, ``lower``, ``upper``, ``log``, ``choices``)."""
    kind = spec["type"]
    if kind == "int":
        return optuna.distributions.IntDistribution(
            int(spec["lower"]), int(spec["upper"]), log=bool(spec["log"])
        )
    if kind == "float":
        return optuna.distributions.FloatDistribution(
            float(spec["lower"]), float(spec["upper"]), log=bool(spec["log"])
        )
    return optuna.distributions.CategoricalDistribution(list(spec["choices"]))


def grid(space: dict[str, dict[str, Any]]) -> dict[str, list[Any]]:
    """The grid sampler's values: every choice, every whole number of an int range."""
    values: dict[str, list[Any]] = {}
    for name, spec in space.items():
        if spec["type"] == "choice":
            values[name] = list(spec["choices"])
        elif spec["type"] == "int" and not spec["log"] and spec["upper"] - spec["lower"] < 1000:
            values[name] = list(range(int(spec["lower"]), int(spec["upper"]) + 1))
        else:
            raise BadArgumentError(
                f'sampler = "grid" needs a finite set of values, and `{name}` is a '
                f"{'log-scaled ' if spec['log'] else ''}{spec['type']} range. "
                f'Give it as search_choice(...), or use sampler = "tpe" or "random".'
            )
    return values


def sampler(
    optuna: Any, name: str, space: dict[str, dict[str, Any]], seed: int, batch: bool = False
) -> Any:
    """Optuna's sampler ``name``. TPE and random are seeded afresh for each trial from
    ``seed`` and the trial's number (``_per_trial_seed``); the grid sampler keeps ``seed``,
    which orders the grid for every process alike, and gives trial ``n`` grid point ``n``.
    ``batch``: trials are asked a batch at a time (a population), so TPE takes the running
    ones for as bad as the worst (its ``constant_liar``) and a batch's trials differ."""
    if name == "grid":
        return _seeded_sampler(optuna, name, space, seed)
    return _per_trial_seed(
        optuna, lambda each: _seeded_sampler(optuna, name, space, each, batch), seed
    )


def _per_trial_seed(optuna: Any, make: Any, seed: int) -> Any:
    """A sampler that draws trial ``n`` with ``make(trial_seed(seed, n))``'s sampler. One
    sampler seeded once would draw the same parameters in every process that runs the same
    gpu_search() call on a shared study (its n-th trial on each machine alike); seeded by
    the trial's number, a trial's parameters depend on the seed, its number and the
    study's trials so far, not on which process asks. The samplers keep no state of their
    own between trials (the study holds it), so a fresh one per trial loses nothing."""

    class PerTrialSeed(optuna.samplers.BaseSampler):
        def __init__(self) -> None:
            self.sampler = make(seed)

        def infer_relative_search_space(self, study: Any, trial: Any) -> Any:
            return self.sampler.infer_relative_search_space(study, trial)

        def sample_relative(self, study: Any, trial: Any, search_space: Any) -> Any:
            return self.sampler.sample_relative(study, trial, search_space)

        def sample_independent(self, study: Any, trial: Any, name: str, distribution: Any) -> Any:
            return self.sampler.sample_independent(study, trial, name, distribution)

        def before_trial(self, study: Any, trial: Any) -> None:
            self.sampler = make(trial_seed(seed, trial.number))
            self.sampler.before_trial(study, trial)

        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            self.sampler.after_trial(study, trial, state, values)

        def reseed_rng(self) -> None:
            self.sampler.reseed_rng()

    return PerTrialSeed()


def _seeded_sampler(
    optuna: Any, name: str, space: dict[str, dict[str, Any]], seed: int, batch: bool = False
) -> Any:
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        return optuna.samplers.GridSampler(grid(space), seed=seed)
    return optuna.samplers.TPESampler(seed=seed, constant_liar=batch)


def trial_seed(seed: int, number: int) -> int:
    """A trial's (or a fold's) seed, from the search's seed and its number: distinct for
    each number, the same on every machine, within R's integers."""
    digest = hashlib.sha256(f"{int(seed)}:{int(number)}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 2_147_483_647
