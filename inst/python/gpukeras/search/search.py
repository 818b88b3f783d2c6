"""gpu_search()'s study: Optuna's sampler, pruner and storage, asked and told from R.

Optuna does the searching: its samplers (TPE by default, random, grid) choose each
trial's parameters, its pruners (median by default, Hyperband, successive halving)
judge a trial's epoch-by-epoch objective, and its storage (a journal file in a folder, or
an RDB: an SQLite file, or a PostgreSQL server that several machines share) keeps the
study. gpukeras writes no sampler or pruner. What it adds:

- the request declared once: the study's ``gpukeras_request`` attribute holds the
  space, the model function's digest, the objective and its direction, so the same
  call on the same storage resumes, and a different one is refused (``open_study``,
  naming what differs: ``search_request``);
- a budget shared by every process on the storage: ``trials`` counts the study's
  trials in the order the storage numbered them, so two machines asking at once
  never run more than the budget between them (``ask``);
- how a trial ended, from its worker's raw result (``tell``): which failures fail the
  trial only (its process lost, out of memory, an objective that is not finite) and which
  stop a search that has completed no trial (any other error: every trial would meet
  it), and which value counts (the objective at the last epoch);
- trials a dead search left running are failed and asked again (a resumed search retries
  them, and runs no finished one twice): Optuna's own heartbeat (``study_storage`` turns
  it on, ``search_trial`` records it), ``fail_stale_trials`` and
  ``RetryHeartbeatStaleTrialCallback``; a trial of a search of this host whose process is
  gone is failed at once, not after the grace period, and so is one a stopped search asked
  for but had not marked as its own yet (``release``). Pruning: ``search_trial``.

Optuna's own INFO lines ("Trial 3 finished ...") are silenced during these calls
only; the user's Optuna logging settings are given back after each.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import socket
from typing import Any

from gpukeras.core.compat import optuna_trial_id
from gpukeras.core.errors import GpukerasError
from gpukeras.core.masking import mask_uri
from gpukeras.search import search_request, search_sampler, search_trial, study_storage

# Objectives that are better when higher (``direction = "auto"``); others are minimized.
MAXIMIZED = ("accuracy", "auc", "precision", "recall", "f1", "r2", "iou")

# A failure that is the trial's own (its process lost, out of memory): the search goes on
# whatever trial meets it first. Any other error stops a search that completed no trial.
OWN_FAILURES = ("gpukeras_error_worker_lost", "gpukeras_error_out_of_memory")

REQUEST_ATTR = "gpukeras_request"
OWNER_ATTR = "gpukeras_owner"
UNCOUNTED_ATTR = "gpukeras_uncounted"
REASON_ATTR = "gpukeras_reason"
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


class Search:
    """An open study as this process searches it: what R holds and passes back to each
    verb (an object, not a dataclass, so the bridge hands it over as it is)."""

    def __init__(
        self,
        study: Any,
        storage: Any,
        url: str,
        name: str,
        space: dict[str, dict[str, Any]],
        budget: int,
        pruner: str,
        objective: str,
        seed: int,
    ) -> None:
        self.study = study
        self.storage = storage
        self.url = url
        self.name = name
        self.space = space
        self.budget = budget
        self.pruner = pruner
        self.objective = objective
        self.seed = seed
        self.sampler = "tpe"  # the sampler's name (open_study sets it)
        # the interrupted trials this search runs again: those waiting to be asked again
        # when it opened the study, and those it asks again after that
        self.resumed: set[int] = set()
        # trials this search told complete: until one is, an error not the trial's own
        # stops the search (``tell``)
        self.completed = 0
        # trials this search asked and has not told: in a worker, or waiting for one
        self.outstanding: set[int] = set()

    def owner(self) -> dict[str, Any]:
        return {"host": socket.gethostname(), "pid": os.getpid()}


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
    batch: bool = False,
) -> Search:
    """Create the study ``study`` at ``storage`` (a folder's journal or an SQLAlchemy URL:
    ``study_storage.open_storage``), or open it to resume.
    ``batch``: this search asks its trials a batch at a time (populations: see
    ``search_sampler.sampler``).

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
            sampler=search_sampler.sampler(optuna, sampler, space, seed, batch),
            pruner=search_trial.pruner_for(optuna, pruner),
            load_if_exists=True,
        )
        stored = made.user_attrs.get(REQUEST_ATTR)
        if stored is None:
            made.set_user_attr(REQUEST_ATTR, request)
            # another process creating the study at once may have set its own first
            stored = made.user_attrs.get(REQUEST_ATTR)
        if search_request.digest(stored) != search_request.digest(request):
            differ = search_request.differences(stored, request) or ["its request differs"]
            where = mask_uri(storage)
            raise SearchMismatchError(
                f"The storage {where} holds the study '{study}' of another search: "
                f"{'; '.join(differ)}. Resume it with the call that made it, or give a new "
                "`storage` (or `study` name) for this search."
            )
        if sampler == "grid":
            # Optuna's grid repeats itself once every point ran: the grid is the budget's end.
            trials = min(
                trials, math.prod(len(values) for values in search_sampler.grid(space).values())
            )
        search = Search(made, rdb, storage, study, space, trials, pruner, objective, seed)
        search.sampler = sampler
        _retry_stale(search)
        search.resumed.update(
            retried
            for trial in made.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
            if (retried := _retry_of(optuna, trial)) is not None
        )
        return search


def _retry_stale(search: Search) -> None:
    """Fail the running trials whose search is gone and ask each again with its parameters
    (uncounted, ``_uncounted``), as Optuna's ``optimize()`` does before each trial: those
    whose heartbeat is older than the grace period (``fail_stale_trials``), and at once
    those a search of this host asked whose process is gone. The shortcut is for speed: a
    search that was killed and run again on the same machine (the common resume) would wait
    ``study_storage.GRACE_SECONDS`` for Optuna's verdict; a process id says it in
    microseconds. A live process id proves nothing (it may be reused), so the heartbeat
    judges every other trial."""
    import optuna

    optuna.storages.fail_stale_trials(search.study)
    here = socket.gethostname()
    gone = []
    for trial in search.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        owner = trial.user_attrs.get(OWNER_ATTR) or {}
        if owner.get("host") == here and not _alive(int(owner["pid"])):
            gone.append(trial)
    gone += _unowned(search.study, older_than=study_storage.GRACE_SECONDS)
    _fail_and_retry(search.storage, search.study, gone)


def _unowned(study: Any, older_than: float = 0.0) -> list[Any]:
    """The running trials no search has marked as its own (``ask``) that started more than
    ``older_than`` seconds ago. A search marks the trial it asked for at once; one left
    unmarked was asked by a search stopped in between, which recorded no heartbeat either,
    so Optuna's ``fail_stale_trials`` would never fail it: it would stay running, counted
    against the budget, for good."""
    import optuna

    now = datetime.datetime.now()
    return [
        trial
        for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        if OWNER_ATTR not in trial.user_attrs
        and trial.datetime_start is not None
        and (now - trial.datetime_start).total_seconds() >= older_than
    ]


def release(storage: str, study: str) -> int:
    """After a search's processes were stopped (``gpu_job_cancel()`` of a search job): the
    running trials no search has marked as its own yet are failed and asked again at once
    (``_unowned``), as the trials the stopped search had marked are by the search that
    resumes it (``_retry_stale``). A live search on the same study that asked one of them
    a moment before marking it asks again (``ask``). Returns how many were released."""
    with study_storage.quiet() as optuna:
        found = _existing(optuna, storage, study)
        if found is None:
            return 0
        rdb, loaded = found
        unowned = _unowned(loaded)
        _fail_and_retry(rdb, loaded, unowned)
        return len(unowned)


def _existing(optuna: Any, storage: str, study: str) -> tuple[Any, Any] | None:
    """The storage at ``storage`` and its study ``study`` as Optuna opens them, or None
    where no search has made that study yet."""
    rdb = study_storage.open_storage(storage)
    try:
        return rdb, optuna.load_study(study_name=study, storage=rdb)
    except KeyError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _fail_and_retry(storage: Any, study: Any, running: list[Any]) -> None:
    """Fail each of the ``running`` trials of ``study`` and hand it to ``storage``'s
    stale-trial callback (Optuna's retry, which queues its parameters again), as
    ``fail_stale_trials`` does; a trial another process finished first is left to it."""
    import optuna

    retry = storage.get_heartbeat_stale_trial_callback()
    for trial in running:
        trial_id = optuna_trial_id(trial)
        try:
            failed = storage.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue
        if failed:
            retry(study, storage.get_trial(trial_id))


def _retry_of(optuna: Any, trial: Any) -> int | None:
    """The trial that ``trial`` runs again (its first, when retried more than once)."""
    return optuna.storages.RetryHeartbeatStaleTrialCallback.retried_trial_number(trial)


def _uncounted(optuna: Any, trials: list[Any]) -> set[int]:
    """The numbers of the trials the budget does not count: those asked again (Optuna's
    retry history), and those asked past the budget."""
    retry_history = optuna.storages.RetryHeartbeatStaleTrialCallback.retry_history
    uncounted = {n for trial in trials for n in retry_history(trial)}
    return uncounted | {t.number for t in trials if t.user_attrs.get(UNCOUNTED_ATTR)}


def interrupt(search: Search) -> None:
    """The trials this search asked and has not told (``Search.outstanding``: in a worker,
    or waiting for one) end unfinished (the search stopped): those still running fail,
    uncounted, and are asked again by the next search on the storage."""
    numbers = search.outstanding
    if not numbers:
        return
    with study_storage.quiet() as optuna:
        running = search.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        _fail_and_retry(
            search.storage, search.study, [trial for trial in running if trial.number in numbers]
        )


def ask(search: Search) -> dict[str, Any] | None:
    """The next trial to run: its ``number``, ``trial_id``, ``params``, ``seed`` and ``left``
    (trials the budget holds after it, as far as this process knows); None when the study
    holds ``trials`` counted trials already (by any process)."""
    with study_storage.quiet() as optuna:
        _retry_stale(search)
        if _counted(optuna, search) >= search.budget:
            return None
        distributions = {
            name: search_sampler.distribution(optuna, spec) for name, spec in search.space.items()
        }
        while True:
            trial = search.study.ask(distributions)
            # This search's at once (a retry came with its first owner's): its owner, and
            # its first heartbeat (the worker that trains it records the next ones).
            try:
                trial.set_user_attr(OWNER_ATTR, search.owner())
                break
            except optuna.exceptions.UpdateFinishedTrialError:
                continue  # released as unowned meanwhile (release): it is asked again
        search.storage.record_heartbeat(optuna_trial_id(trial))
        rank = sum(1 for t in _counted_trials(optuna, search.study) if t.number <= trial.number)
        if rank > search.budget:
            # Another process asked for the last one meanwhile.
            trial.set_user_attr(UNCOUNTED_ATTR, True)
            trial.set_user_attr(REASON_ATTR, "over the budget of trials")
            search.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return None
        seed = search_sampler.trial_seed(search.seed, trial.number)
        retry_of = _retry_of(optuna, search.storage.get_trial(optuna_trial_id(trial)))
        if retry_of is not None:
            search.resumed.add(retry_of)
        trial.set_user_attr(SEED_ATTR, seed)
        search.outstanding.add(trial.number)
        return {
            "number": trial.number,
            "trial_id": optuna_trial_id(trial),  # the worker reports through it
            "params": trial.params,
            "seed": seed,
            "left": search.budget - rank,
        }


def _counted(optuna: Any, search: Search) -> int:
    return sum(1 for t in _counted_trials(optuna, search.study) if t.state.name != "WAITING")


def _counted_trials(optuna: Any, study: Any) -> list[Any]:
    every = study.get_trials(deepcopy=False)
    uncounted = _uncounted(optuna, every)
    return [t for t in every if t.number not in uncounted]


def tell(
    search: Search,
    number: int,
    result: dict[str, Any],
    seconds: float | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """Record how trial ``number`` ended from its worker's raw ``result``: ``error``
    (``class``, ``message``) when it failed, else ``pruning`` (``pruning_outcome``'s).

    The trial is "failed" with its error's first line as the reason, or when the objective
    was not among the logged values, or when its last value is not finite (NaN is never
    best), or with the reason its training gave (``failed``: a population's member whose
    loss turned NaN); "pruned" when the pruner stopped it; else "complete", its value the
    objective at its last epoch. ``seconds`` and ``device`` are recorded with it. A trial
    another process already failed (taken for interrupted, and asked again) is left as it
    is, and so is one its worker told pruned at once (a population's member, ``store_end``).

    Returns ``state``, ``value``, ``reason``, ``epochs`` (epochs reported) and ``stop``:
    None, or the error (``class``, ``message``) that stops the search, because it is not the
    trial's own (``OWN_FAILURES``) and this search has completed no trial: every trial
    would meet it.
    """
    search.outstanding.discard(number)
    state, value, reason, stop = outcome(result, search.objective)
    epochs = len(_reported(result))
    with study_storage.quiet() as optuna:
        trial_id = _trial_id(search, number)
        stored = search.storage.get_trial(trial_id).state
        if stored == optuna.trial.TrialState.PRUNED and state == "pruned":
            return {"state": state, "value": None, "reason": None, "epochs": epochs, "stop": None}
        if stored.is_finished():
            return {
                "state": "failed",
                "value": None,
                "epochs": epochs,
                "stop": None,
                "reason": "taken for interrupted and asked again",
            }
        running = optuna.trial.Trial(search.study, trial_id)
        store_end(search.study, running, state, value, reason, seconds, device)
    search.completed += state == "complete"
    return {
        "state": state,
        "value": value,
        "reason": reason,
        "epochs": epochs,
        "stop": stop if search.completed == 0 else None,
    }


def store_end(
    study: Any,
    trial: Any,
    state: str,
    value: float | None = None,
    reason: str | None = None,
    seconds: float | None = None,
    device: str | None = None,
) -> None:
    """Store running ``trial``'s (Optuna's) end in ``study``: its ``reason``, ``seconds`` and
    ``device`` where given, then its ``state`` ("complete" with ``value``, "pruned",
    "failed"). The session's ``tell``, and a population's worker for a member the pruner
    stopped (told at once, not when its batch ends)."""
    import optuna

    states = optuna.trial.TrialState
    for key, attr in (("reason", reason), ("seconds", seconds), ("device", device)):
        if attr is not None:
            trial.set_user_attr(f"gpukeras_{key}", attr)
    try:
        if state == "complete":
            study.tell(trial, value)
        else:
            study.tell(trial, state=states.PRUNED if state == "pruned" else states.FAIL)
    except RuntimeError as error:
        # The grid sampler asks the study to stop once its last point ran, which
        # Optuna allows only inside optimize(); the trial's end is stored all the same.
        if "Study.stop" not in str(error):
            raise


def outcome(
    result: dict[str, Any], objective: str
) -> tuple[str, float | None, str | None, dict[str, Any] | None]:
    """A worker's ``result`` as the trial's state, value, reason, and the error that would
    stop the search (None for a failure that is the trial's own)."""
    error = result.get("error")
    if error:
        classes = error.get("class") or []
        classes = [classes] if isinstance(classes, str) else list(classes)
        own = error.get("crashed") or any(name in OWN_FAILURES for name in classes)
        message = str(error.get("message") or "")
        first = (message.splitlines() or [""])[0]
        return "failed", None, first, None if own else {"class": classes, "message": message}
    pruning = result.get("pruning") or {}
    missing = pruning.get("missing")
    if missing is not None:
        missing = [missing] if isinstance(missing, str) else missing
        said = f'the objective "{objective}" is not among the logged values ({", ".join(missing)}).'
        stop = {
            "class": ["gpukeras_error_bad_argument"],
            "message": f"{said} Give `objective` one of them.",
        }
        return "failed", None, said, stop
    if pruning.get("pruned"):
        return "pruned", None, None, None
    if pruning.get("failed"):  # a population's member whose loss turned NaN
        return "failed", None, str(pruning["failed"]), None
    values = _reported(result)
    value = values[-1] if values else None
    if value is None or not math.isfinite(value):
        return "failed", None, f"the objective {objective} was {value}", None
    return "complete", value, None, None


def _reported(result: dict[str, Any]) -> list[float]:
    """The objective's values the trial reported, one per epoch (R gives one as a number)."""
    values = (result.get("pruning") or {}).get("values")
    if values is None:
        return []
    return [float(value) for value in (values if isinstance(values, list) else [values])]


def _trial_id(search: Search, number: int) -> int:
    trial = next(t for t in search.study.get_trials(deepcopy=False) if t.number == number)
    return optuna_trial_id(trial)


def trials(search: Search, models: str | None = None) -> dict[str, Any]:
    """The study's counted trials as columns: ``number``, ``params`` (one list per
    parameter), ``value``, ``state`` (complete, pruned, failed, running, waiting),
    ``reason``, ``seconds``, ``device``, ``seed``, ``epochs`` (epochs reported),
    ``retry_of`` (the interrupted trial it runs again); then the best complete trial
    (``best``: its ``number``, ``params``, ``value`` and ``path``, its saved model in
    ``models``, None where none is kept; or None before a trial completed), the numbers
    of the ``interrupted`` trials this search runs again (not counted; a later search that
    runs none lists none), the direction,
    and the ``storage`` as it may be shown (no password). Where there is a best trial, the
    folder ``models`` keeps only its saved model (``trial-<n>.keras`` and its
    ``.gpukeras.json``): the other trials' go."""
    states = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed"}
    with study_storage.quiet() as optuna:
        rows = _counted_trials(optuna, search.study)
        retry_of = [_retry_of(optuna, t) for t in rows]
    top = _best(search.study, rows)
    best = None
    if top is not None:
        path = os.path.join(models, f"trial-{top.number}.keras") if models is not None else None
        if models is not None:
            _keep_best_model(models, top.number)
        best = {
            "number": top.number,
            "params": {name: top.params.get(name) for name in search.space},
            "value": top.value,
            "path": path if path is not None and os.path.exists(path) else None,
        }
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
        "retry_of": retry_of,
        "best": best,
        "interrupted": sorted(search.resumed),
        "direction": search.study.direction.name.lower(),
        "storage": mask_uri(search.url),
    }


def _keep_best_model(models: str, best: int) -> None:
    """Remove every trial's saved model from the folder ``models`` but trial ``best``'s."""
    kept = {f"trial-{best}.keras", f"trial-{best}.gpukeras.json"}
    if not os.path.isdir(models):
        return
    with os.scandir(models) as entries:
        for entry in entries:
            saved = re.fullmatch(r"trial-[0-9]+\.(keras|gpukeras\.json)", entry.name)
            if saved and entry.name not in kept and not entry.is_dir(follow_symlinks=False):
                os.unlink(entry.path)


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


def progress(storage: str, study: str) -> dict[str, Any]:
    """Where the study ``study`` at ``storage`` is, read without changing it: ``done``
    (counted trials that ended), ``running``, and ``best`` (``number``, ``value``,
    ``params``; None before a trial completed). A study not made yet has done nothing."""
    with study_storage.quiet() as optuna:
        found = _existing(optuna, storage, study)
        if found is None:
            return {"done": 0, "running": 0, "best": None}
        loaded = found[1]
        counted = _counted_trials(optuna, loaded)
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
