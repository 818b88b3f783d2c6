"""gpu_search()'s study: Optuna's sampler, pruner and storage, asked and told from R.

Optuna does the searching: its samplers (TPE by default, random, grid) choose each
trial's parameters, its pruners (median by default, Hyperband, successive halving)
judge a trial's epoch-by-epoch objective, and its RDB storage (an SQLite file, or a
PostgreSQL server that several machines share) keeps the study. gpukeras writes no
sampler or pruner. What it adds:

- the request declared once: the study's ``gpukeras_request`` attribute holds the
  space, the model function's digest, the objective and its direction, so the same
  call on the same storage resumes, and a different one is refused (``open_study``);
- a budget shared by every process on the storage: ``trials`` counts the study's
  trials in the order the storage numbered them, so two machines asking at once
  never run more than the budget between them (``ask``);
- trials a dead search left running are marked failed ("interrupted") and their
  parameters asked again, so a resumed search retries them and runs no finished
  one twice. A search owns its running trials by host and process id, and touches
  them every ``SEEN_SECONDS``; a trial of this host whose process is gone, or of
  another host unseen for ``STALE_SECONDS``, is interrupted;
- pruning in the process that trains: ``pruning_callback`` reports the objective
  after each epoch through the storage and stops training when the pruner says so.

Optuna's own INFO lines ("Trial 3 finished ...") are silenced during these calls
only; the user's Optuna logging settings are given back after each.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import time
from typing import Any

from gpukeras.core.compat import optuna_trial_id
from gpukeras.core.errors import BadArgumentError, GpukerasError
from gpukeras.tools import study_storage

# A running trial is touched this often by the search that runs it, and is taken
# for interrupted when a search on another host finds it untouched for STALE_SECONDS.
SEEN_SECONDS = 20.0
STALE_SECONDS = 120.0
# Objectives that are better when higher (``direction = "auto"``); others are minimized.
MAXIMIZED = ("accuracy", "auc", "precision", "recall", "f1", "r2", "iou")

REQUEST_ATTR = "gpukeras_request"
OWNER_ATTR = "gpukeras_owner"
SEEN_ATTR = "gpukeras_seen"
UNCOUNTED_ATTR = "gpukeras_uncounted"
REASON_ATTR = "gpukeras_reason"
RETRY_OF_ATTR = "gpukeras_retry_of"
SEED_ATTR = "gpukeras_seed"


class SearchMismatchError(GpukerasError):
    """The storage holds a study made by another search (space, model function or objective)."""

    r_class = "gpukeras_error_search_mismatch"


def direction_for(objective: str, direction: str = "auto") -> str:
    """``"minimize"`` or ``"maximize"``: as given, or for ``"auto"`` by the metric's name
    (accuracy, AUC, precision, recall, F1, R2 and IoU are maximized, the rest minimized)."""
    if direction != "auto":
        return direction
    name = objective.lower().removeprefix("val_")
    return "maximize" if any(part in name for part in MAXIMIZED) else "minimize"


def _distribution(optuna: Any, spec: dict[str, Any]) -> Any:
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


def _grid(space: dict[str, dict[str, Any]]) -> dict[str, list[Any]]:
    """The grid sampler's values: every choice, every whole number of an int range."""
    grid: dict[str, list[Any]] = {}
    for name, spec in space.items():
        if spec["type"] == "choice":
            grid[name] = list(spec["choices"])
        elif spec["type"] == "int" and not spec["log"] and spec["upper"] - spec["lower"] < 1000:
            grid[name] = list(range(int(spec["lower"]), int(spec["upper"]) + 1))
        else:
            raise BadArgumentError(
                f'sampler = "grid" needs a finite set of values, and `{name}` is a '
                f"{'log-scaled ' if spec['log'] else ''}{spec['type']} range. "
                f'Give it as search_choice(...), or use sampler = "tpe" or "random".'
            )
    return grid


def _sampler(optuna: Any, name: str, space: dict[str, dict[str, Any]], seed: int) -> Any:
    """Optuna's sampler ``name``. TPE and random are seeded afresh for each trial from
    ``seed`` and the trial's number (``_per_trial_seed``); the grid sampler keeps ``seed``,
    which orders the grid for every process alike, and gives trial ``n`` grid point ``n``."""
    if name == "grid":
        return _seeded_sampler(optuna, name, space, seed)
    return _per_trial_seed(optuna, lambda each: _seeded_sampler(optuna, name, space, each), seed)


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


def _seeded_sampler(optuna: Any, name: str, space: dict[str, dict[str, Any]], seed: int) -> Any:
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        return optuna.samplers.GridSampler(_grid(space), seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def _pruner(optuna: Any, name: str) -> Any:
    """Optuna's pruner by name, each with Optuna's defaults: median waits for 5 trials and
    judges a trial from its first epoch. Judging from its second, as gpukeras once did, kept
    the same 10 of bench/search.R's 20 trials 8 epochs longer in all (120 of 200 epochs
    against 112) for the same best."""
    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner()
    if name == "asha":
        return optuna.pruners.SuccessiveHalvingPruner()
    return optuna.pruners.MedianPruner()


class Search:
    """An open study as this process searches it: what R holds and passes back to each
    verb (an object, not a dataclass, so the bridge hands it over as it is)."""

    def __init__(
        self,
        study: Any,
        url: str,
        name: str,
        space: dict[str, dict[str, Any]],
        budget: int,
        pruner: str,
        objective: str,
        seed: int,
    ) -> None:
        self.study = study
        self.url = url
        self.name = name
        self.space = space
        self.budget = budget
        self.pruner = pruner
        self.objective = objective
        self.seed = seed
        # the interrupted trials this search runs again: found so when it opened the study,
        # and those another search's stop left to be asked again, as this one asks them
        self.resumed: set[int] = set()

    def owner(self) -> dict[str, Any]:
        return {"host": socket.gethostname(), "pid": os.getpid()}


def _request_digest(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


# What each part of a search's request is, in a mismatch's message.
REQUEST_PARTS = {
    "space": "the search space",
    "model_fn": "the model function",
    "objective": "the objective",
    "direction": "the direction",
    "data": "the data",
    "fit": "gpu_fit()'s",
}
# The longest value a mismatch's message shows whole.
SHOWN_CHARACTERS = 60


def _differences(stored: dict[str, Any], request: dict[str, Any]) -> list[str]:
    """What differs between the study's request and this call's, each part or argument
    named with both values: "gpu_fit()'s `epochs` is 3 in the study, 5 in this call"."""
    said = []
    for key in request:
        before, now = stored.get(key), request.get(key)
        if before == now:
            continue
        name = REQUEST_PARTS.get(key, key)
        if key == "model_fn":
            said.append("the model function differs (its arguments or body)")
        elif isinstance(before, dict) and isinstance(now, dict):
            shown = _shown_spec if key == "space" else _shown
            of = name if key == "fit" else f"{name}'s"
            said.extend(
                f"{of} `{part}` is {shown(before.get(part))} in the study, "
                f"{shown(now.get(part))} in this call"
                for part in [*now, *(part for part in before if part not in now)]
                if before.get(part) != now.get(part)
            )
        else:
            said.append(
                f"{name} is {_shown(before, True)} in the study, {_shown(now, True)} in this call"
            )
    return said


def _shown(value: Any, quoted: bool = False) -> str:
    """A request's value as a message shows it: "not given" for none, a string as it is
    (gpu_fit()'s arguments come deparsed by R) or ``quoted``, a long one cut short."""
    if value is None:
        return "not given"
    text = value if isinstance(value, str) and not quoted else json.dumps(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[: SHOWN_CHARACTERS - 3] + "..."


def _shown_spec(spec: Any) -> str:
    """A searched value's spec as the R call that makes it: search_int(4, 32)."""
    if not isinstance(spec, dict):
        return "not searched" if spec is None else _shown(spec)
    log = ", log = TRUE" if spec.get("log") and spec.get("type") != "choice" else ""
    if spec.get("type") == "choice":
        return f"search_choice({', '.join(json.dumps(c) for c in spec.get('choices', []))})"
    return f"search_{spec.get('type')}({spec.get('lower')}, {spec.get('upper')}{log})"


def open_study(
    storage: str,
    study: str,
    space: dict[str, dict[str, Any]],
    request: dict[str, Any],
    trials: int,
    objective: str,
    direction: str = "auto",
    sampler: str = "tpe",
    pruner: str = "median",
    seed: int = 1,
) -> Search:
    """Create the study ``study`` at ``storage`` (an SQLAlchemy URL), or open it to resume.

    ``request`` (plain data: the space, a digest of the model function, the objective,
    the data's shape and gpu_fit()'s arguments) is recorded at creation; opening a study
    whose request differs raises ``SearchMismatchError`` naming what differs. Trials
    that a search no longer running left running are marked failed and asked again.
    """
    request = {**request, "direction": direction_for(objective, direction)}
    with study_storage.quiet() as optuna:
        rdb = study_storage.open_storage(storage)
        made = optuna.create_study(
            storage=rdb,
            study_name=study,
            direction=request["direction"],
            sampler=_sampler(optuna, sampler, space, seed),
            pruner=_pruner(optuna, pruner),
            load_if_exists=True,
        )
        stored = made.user_attrs.get(REQUEST_ATTR)
        if stored is None:
            made.set_user_attr(REQUEST_ATTR, request)
            # another process creating the study at once may have set its own first
            stored = made.user_attrs.get(REQUEST_ATTR)
        if _request_digest(stored) != _request_digest(request):
            differ = _differences(stored, request) or ["its request differs"]
            where = study_storage.safe_url(storage)
            raise SearchMismatchError(
                f"The storage {where} holds the study '{study}' of another search: "
                f"{'; '.join(differ)}. Resume it with the call that made it, or give a new "
                "`storage` (or `study` name) for this search."
            )
        if sampler == "grid":
            # Optuna's grid repeats itself once every point ran: the grid is the budget's end.
            trials = min(trials, math.prod(len(values) for values in _grid(space).values()))
        search = Search(made, storage, study, space, trials, pruner, objective, seed)
        _retry_interrupted(search)
        return search


def _interrupted(trial: Any, now: float) -> str | None:
    """Why a running trial is taken for interrupted, or None while its search may live."""
    owner = trial.user_attrs.get(OWNER_ATTR)
    if not owner:
        return None
    if owner.get("host") == socket.gethostname():
        try:
            os.kill(int(owner["pid"]), 0)
        except ProcessLookupError:
            return "its search's R session ended"
        except PermissionError:
            pass
        return None
    seen = float(trial.user_attrs.get(SEEN_ATTR, 0))
    if now - seen > STALE_SECONDS:
        return f"its search on {owner.get('host')} was not heard from for {now - seen:.0f} s"
    return None


def _retry_interrupted(search: Search) -> None:
    """Mark each interrupted running trial failed (uncounted) and ask its parameters again."""
    import optuna

    now = time.time()
    for trial in search.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        why = _interrupted(trial, now)
        if why is not None and _interrupt(search, trial, why):
            search.resumed.add(trial.number)


def _interrupt(search: Search, trial: Any, why: str) -> bool:
    """Mark ``trial`` failed (uncounted) and ask its parameters again; False when another
    search got to it first."""
    import optuna

    try:
        running = optuna.trial.Trial(search.study, optuna_trial_id(trial))
        running.set_user_attr(REASON_ATTR, f"interrupted: {why}; asked again")
        running.set_user_attr(UNCOUNTED_ATTR, True)
        search.study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
    except (RuntimeError, ValueError):
        return False
    search.study.enqueue_trial(
        trial.params, user_attrs={RETRY_OF_ATTR: trial.number}, skip_if_exists=False
    )
    return True


def interrupt(search: Search, numbers: list[int], why: str) -> None:
    """The running trials ``numbers`` of this search end unfinished (the search stopped):
    failed, uncounted, and asked again by the next search on the storage."""
    with study_storage.quiet():
        for trial in search.study.get_trials(deepcopy=False):
            if trial.number in numbers and trial.state.name == "RUNNING":
                _interrupt(search, trial, why)


def ask(search: Search) -> dict[str, Any] | None:
    """The next trial to run: its ``number``, ``trial_id``, ``params``, ``seed`` and ``left``
    (trials the budget holds after it, as far as this process knows); None when the study
    holds ``trials`` counted trials already (by any process)."""
    with study_storage.quiet() as optuna:
        if _counted(search) >= search.budget:
            return None
        distributions = {name: _distribution(optuna, spec) for name, spec in search.space.items()}
        trial = search.study.ask(distributions)
        rank = sum(
            1
            for other in search.study.get_trials(deepcopy=False)
            if other.number <= trial.number and not other.user_attrs.get(UNCOUNTED_ATTR)
        )
        if rank > search.budget:
            # Another process asked for the last one meanwhile.
            trial.set_user_attr(UNCOUNTED_ATTR, True)
            trial.set_user_attr(REASON_ATTR, "over the budget of trials")
            search.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return None
        seed = trial_seed(search.seed, trial.number)
        retry_of = trial.user_attrs.get(RETRY_OF_ATTR)
        if retry_of is not None:
            search.resumed.add(int(retry_of))
        trial.set_user_attr(OWNER_ATTR, search.owner())
        trial.set_user_attr(SEEN_ATTR, time.time())
        trial.set_user_attr(SEED_ATTR, seed)
        return {
            "number": trial.number,
            "trial_id": optuna_trial_id(trial),  # the worker reports through it
            "params": trial.params,
            "seed": seed,
            "left": search.budget - rank,
        }


def _counted(search: Search) -> int:
    return sum(
        1
        for trial in search.study.get_trials(deepcopy=False)
        if not trial.user_attrs.get(UNCOUNTED_ATTR) and trial.state.name not in ("WAITING",)
    )


def trial_seed(seed: int, number: int) -> int:
    """A trial's (or a fold's) seed, from the search's seed and its number: distinct for
    each number, the same on every machine, within R's integers."""
    digest = hashlib.sha256(f"{int(seed)}:{int(number)}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 2_147_483_647


def seen(search: Search, numbers: list[int]) -> None:
    """Touch the running trials ``numbers``: their search is alive."""
    import optuna

    now = time.time()
    for trial in search.study.get_trials(deepcopy=False):
        if trial.number in numbers and trial.state.name == "RUNNING":
            optuna.trial.Trial(search.study, optuna_trial_id(trial)).set_user_attr(SEEN_ATTR, now)


def tell(
    search: Search,
    number: int,
    state: str,
    value: float | None = None,
    reason: str | None = None,
    seconds: float | None = None,
    device: str | None = None,
) -> str:
    """Record how trial ``number`` ended: ``state`` "complete" (with ``value``), "pruned" or
    "failed" (with ``reason``). A value that is not finite fails the trial: NaN is never
    best. Returns the state recorded."""
    with study_storage.quiet() as optuna:
        states = optuna.trial.TrialState
        if state == "complete" and (value is None or not math.isfinite(value)):
            state, reason = "failed", f"the objective {search.objective} was {value}"
        running = optuna.trial.Trial(search.study, _trial_id(search, number))
        for key, attr in (("reason", reason), ("seconds", seconds), ("device", device)):
            if attr is not None:
                running.set_user_attr(f"gpukeras_{key}", attr)
        try:
            if state == "complete":
                search.study.tell(number, value)
            elif state == "pruned":
                search.study.tell(number, state=states.PRUNED)
            else:
                search.study.tell(number, state=states.FAIL)
        except RuntimeError as error:
            # The grid sampler asks the study to stop once its last point ran, which
            # Optuna allows only inside optimize(); the trial's end is stored all the same.
            if "Study.stop" not in str(error):
                raise
        return state


def _trial_id(search: Search, number: int) -> int:
    trial = next(t for t in search.study.get_trials(deepcopy=False) if t.number == number)
    return optuna_trial_id(trial)


def trials(search: Search) -> dict[str, Any]:
    """The study's counted trials as columns: ``number``, ``params`` (one list per
    parameter), ``value``, ``state`` (complete, pruned, failed, running, waiting),
    ``reason``, ``seconds``, ``device``, ``seed``, ``epochs`` (epochs reported),
    ``retry_of`` (the interrupted trial it runs again); then the best complete trial
    (``best``: its number, or None), the numbers of the ``interrupted`` trials this search
    runs again (not counted; a later search that runs none lists none), the direction,
    and the ``storage`` as it may be shown (no password)."""
    states = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed"}
    rows = [
        trial
        for trial in search.study.get_trials(deepcopy=False)
        if not trial.user_attrs.get(UNCOUNTED_ATTR)
    ]
    top = _best(search.study, rows)
    best = top.number if top is not None else None
    return {
        "number": [t.number for t in rows],
        "params": {name: [t.params.get(name) for t in rows] for name in search.space},
        "value": [t.value for t in rows],
        "state": [states.get(t.state.name, t.state.name.lower()) for t in rows],
        "reason": [t.user_attrs.get(REASON_ATTR) for t in rows],
        "seconds": [t.user_attrs.get("gpukeras_seconds") for t in rows],
        "device": [t.user_attrs.get("gpukeras_device") for t in rows],
        "seed": [t.user_attrs.get(SEED_ATTR) for t in rows],
        "epochs": [len(t.intermediate_values) for t in rows],
        "retry_of": [t.user_attrs.get(RETRY_OF_ATTR) for t in rows],
        "best": best,
        "interrupted": sorted(search.resumed),
        "direction": search.study.direction.name.lower(),
        "storage": study_storage.safe_url(search.url),
    }


def _best(study: Any, counted: list[Any]) -> Any:
    """The best complete trial with a finite value among ``counted``, or None."""
    complete = [
        t
        for t in counted
        if t.state.name == "COMPLETE" and t.value is not None and math.isfinite(t.value)
    ]
    if not complete:
        return None
    pick = max if study.direction.name == "MAXIMIZE" else min
    return pick(complete, key=lambda t: t.value)


def pruning_callback(
    storage: str, study: str, trial_id: int, objective: str, pruner: str = "median"
) -> Any:
    """A Keras callback for the process that trains trial ``trial_id``: after each epoch it
    reports the objective (``logs[objective]``) to the study and stops training when
    ``pruner`` says the trial is poor. Afterwards ``values`` holds the values reported,
    ``pruned`` whether it stopped the trial, ``missing`` the log names when the objective
    was not among them."""
    import keras

    with study_storage.quiet() as optuna:
        opened = study_storage.take_warmed(storage) or study_storage.open_storage(storage)
        loaded = optuna.load_study(study_name=study, storage=opened, pruner=_pruner(optuna, pruner))
    trial = optuna.trial.Trial(loaded, trial_id)

    class Pruning(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.values: list[float] = []
            self.pruned = False
            self.missing: list[str] | None = None

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            logs = logs or {}
            if objective not in logs:
                self.missing = sorted(logs)
                self.model.stop_training = True
                return
            value = float(logs[objective])
            self.values.append(value)
            with study_storage.quiet():
                trial.report(value, epoch)
                if math.isfinite(value) and trial.should_prune():
                    self.pruned = True
                    self.model.stop_training = True

    return Pruning()


def pruning_outcome(callback: Any) -> dict[str, Any]:
    """What ``pruning_callback``'s callback saw: ``values``, ``pruned``, ``missing``."""
    return {"values": callback.values, "pruned": callback.pruned, "missing": callback.missing}


def progress(storage: str, study: str) -> dict[str, Any]:
    """Where the study ``study`` at ``storage`` is, read without changing it: ``done``
    (counted trials that ended), ``running``, and ``best`` (``number``, ``value``,
    ``params``; None before a trial completed). A study not made yet has done nothing."""
    with study_storage.quiet() as optuna:
        try:
            loaded = optuna.load_study(
                study_name=study, storage=study_storage.open_storage(storage)
            )
        except KeyError:
            return {"done": 0, "running": 0, "best": None}
        counted = [
            t for t in loaded.get_trials(deepcopy=False) if not t.user_attrs.get(UNCOUNTED_ATTR)
        ]
        top = _best(loaded, counted)
        best = (
            None
            if top is None
            else {"number": top.number, "value": top.value, "params": top.params}
        )
        return {
            "done": sum(t.state.name in ("COMPLETE", "PRUNED", "FAIL") for t in counted),
            "running": sum(t.state.name == "RUNNING" for t in counted),
            "best": best,
        }
