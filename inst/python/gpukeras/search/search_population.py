"""gpu_search()'s trials as populations (JAX): asked a batch at a time, trained by shape,
each told as a trial of its own process is told.

``ask`` asks the study (in the R session) for up to ``n`` trials at once (``search.ask``
each: the budget, the owner, the seed as for any trial; a study opened with ``batch``
makes TPE lie constantly about the running ones, so a batch's trials differ; random and
grid draw as they do). ``next_task`` splits a batch by the values that set its trials'
shapes (model_fn's parameters, a searched batch size: ``Groups``), a task for a worker
each, so that other architectures train at once in other workers (a group of one, or where
processes measured faster, trains as trials of their own processes). ``train`` runs in one
worker, which made one model there (``model_fn(params)`` is R code, called after the first
trial's seed; a task's trials have the same params): each trial's starting state is drawn
from it as gpu_fit(seed = ) would start a fit of its own model (``population.starts``: the
seed, the build, the trial's learning rate; where it cannot, nothing trains and the worker
makes each trial's model after its seed), the trials grouped by
architecture and batch size (``population.mismatch``: a task's trials are one architecture
where model_fn builds one for equal values), a group that does not fit the memory split in
halves (``cv_population.fits_memory``), and each group trained as one ``Population``,
padded to the search's batch width where it holds half of it (``padded_width``: a batch's
programs are then those an earlier batch compiled). After each epoch each member reports
its objective to its trial (``search_trial.Reporter``, as a trial's own process reports
it, its heartbeat recorded while the group trains); the pruner's verdict stops that member
alone (``Population.stop``) and tells its trial pruned at once, and a loss that is not
finite stops the member too (it fails, saying why). ``tell`` tells each member's end to
the study with ``search.tell``, so a member's state and value are decided as a process's
are: the objective at its last epoch. The models that may be the study's best are saved by
``train``, each member's state put into the model in turn.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gpukeras.core.handles import Model, Record
from gpukeras.data.adapters.base import DEFAULT_BATCH_SIZE
from gpukeras.search import search as searching
from gpukeras.search import search_trial
from gpukeras.serve import scoring
from gpukeras.tools.cv_population import first_batch, fits_memory
from gpukeras.train.population import Member, Population, assign, mismatch, prepare, starts

# The trials asked at once where the sampler or the pruner learns from completed trials: a
# batch large enough that a population pays, small enough that TPE and the pruners judge by
# the batches before (a trial of a batch completes when its batch ends).
TRIALS_PER_BATCH = 8


def batch_size(search: searching.Search) -> int:
    """How many trials ``ask`` asks at once: ``TRIALS_PER_BATCH``, or, where nothing learns
    from completed trials (the random or grid sampler and no pruner), every trial the budget
    holds (a batch too large for the memory is split when it trains)."""
    if search.sampler in ("random", "grid") and search.pruner == "none":
        return max(1, search.budget)
    return TRIALS_PER_BATCH


def ask(search: searching.Search, n: int | None = None) -> Record:
    """A batch: ``trials``, up to ``n`` trials to train together (None: ``batch_size``'s),
    each as ``search.ask`` gives it (``number``, ``trial_id``, ``params``, ``seed``,
    ``left``), fewer, or none, when the budget ends; and ``width``, the ``n`` asked (which
    ``train`` pads a group to, see ``padded_width``)."""
    width = batch_size(search) if n is None else int(n)
    asked = []
    for _ in range(width):
        trial = searching.ask(search)
        if trial is None:
            break
        asked.append(trial)
    return {"width": width, "trials": asked}


class Groups:
    """The session's populations: each batch ``ask`` gives split by ``shapes`` (the names of
    the values that set a trial's shapes: model_fn's parameters and a searched batch size;
    equal values build one architecture, whose trials can train as one population), a task
    for a worker each, so that groups of other shapes train at once in other workers. What
    R holds and passes back to ``next_task``, ``ended`` and ``state`` (an object, not a
    dataclass, so the bridge hands it over as it is).

    ``queue``: the tasks asked and not yet given to a worker; ``seconds``, ``trials`` and
    ``tasks``: of the tasks that ended, as populations and as processes; ``as_trials`` and
    ``as_groups``: how many trials and groups trained each way; ``why``: why groups of
    several trained as processes, if any did; ``reason``: the plan's."""

    def __init__(self, shapes: Sequence[str], reason: str) -> None:
        self.shapes = list(shapes)
        self.reason = reason
        self.queue: list[Record] = []
        ways = ("population", "process")
        self.seconds = dict.fromkeys(ways, 0.0)
        self.trials, self.tasks = dict.fromkeys(ways, 0), dict.fromkeys(ways, 0)
        self.as_trials, self.as_groups = dict.fromkeys(ways, 0), dict.fromkeys(ways, 0)
        self.why: str | None = None

    def way(self, n: int) -> str:
        """How a group of ``n`` trials trains: "process" (each trial a fit in a worker
        process, as with population = FALSE) or "population". A group of one is a process:
        a population of one would compile the population's programs for one fit's work. A
        group of several is a population, unless the tasks that ended say processes are
        cheaper: ``n`` fits at the seconds a trial took in a process, fewer than the seconds
        a population's task took."""
        if n == 1:
            return "process"
        if not all(self.tasks.values()):
            return "population"
        return "process" if n * self.per_trial() < self.per_population() else "population"

    def per_trial(self) -> float:
        return self.seconds["process"] / self.trials["process"]

    def per_population(self) -> float:
        return self.seconds["population"] / self.tasks["population"]


def open_groups(shapes: Sequence[str], reason: str) -> Groups:
    """A search's ``Groups``, ``reason`` the population plan's."""
    return Groups(shapes, reason)


def shape_groups(trials: Sequence[Record], shapes: Sequence[str]) -> list[list[Record]]:
    """The trials of a batch (each as ``ask`` gives it) in groups of equal ``shapes``
    values, in the order they were asked."""
    groups: dict[str, list[Record]] = {}
    for trial in trials:
        key = repr([trial["params"].get(name) for name in shapes])
        groups.setdefault(key, []).append(trial)
    return list(groups.values())


def next_task(groups: Groups | None, search: searching.Search) -> Record | None:
    """The next task (None when the budget is spent): without ``groups`` (no populations)
    the next trial, as ``searching.ask`` gives it; else the queue's first, asking the study
    for a batch (``ask``) when the queue is empty: a trial as ``searching.ask`` gives it, to
    train in a process of its own, or a population's ``trials`` (``number``, ``trial_id``,
    ``params``, ``seed`` each) and ``width`` (the trials asked, which a short group pads
    to, ``padded_width``)."""
    if groups is None:
        return searching.ask(search)
    if not groups.queue:
        batch = ask(search)
        for group in shape_groups(batch["trials"], groups.shapes):
            way = groups.way(len(group))
            if way == "process" and len(group) > 1:
                groups.why = (
                    f"a group of {len(group)} trained as processes, which measured faster: "
                    f"{groups.per_trial():.1f} s a trial in a process, "
                    f"{groups.per_population():.1f} s a population"
                )
            groups.as_trials[way] += len(group)
            groups.as_groups[way] += 1
            if way == "process":
                groups.queue.extend(group)
            else:
                keys = ("number", "trial_id", "params", "seed")
                members = [{key: trial[key] for key in keys} for trial in group]
                groups.queue.append({"trials": members, "width": batch["width"]})
    return groups.queue.pop(0) if groups.queue else None


def ended(groups: Groups, population: bool, seconds: float, trials: int) -> None:
    """Count an ended task's ``seconds`` (its worker's time on it) and ``trials`` as a
    population's or a process's."""
    kind = "population" if population else "process"
    groups.seconds[kind] += seconds
    groups.trials[kind] += int(trials)
    groups.tasks[kind] += 1


def state(groups: Groups) -> Record:
    """``why``: the search's ``trained_why``, the plan's reason, then how many trials trained
    each way; ``trained``: how they trained ("populations", "processes" where every group
    was of one, or "populations and processes")."""
    done = []
    if groups.as_trials["population"] > 0:
        done.append(
            f"{groups.as_trials['population']} trials in "
            f"{groups.as_groups['population']} populations"
        )
    if groups.as_trials["process"] > 0:
        done.append(
            f"{groups.as_trials['process']} in processes of their own "
            "(a group of one trains as a process)"
        )
    if groups.why:
        done.append(groups.why)
    why = groups.reason
    if done:
        why = f"{why}, split by architecture into tasks for the workers: {'; '.join(done)}"
    ways = [w for w in ("population", "process") if groups.as_trials[w] > 0]
    trained = " and ".join(f"{way}es" if way == "process" else f"{way}s" for way in ways)
    return {"why": why, "trained": trained or "populations"}


def padded_width(count: int, width: int) -> int:
    """How many members a group of ``count`` trains as, in a search that asks ``width`` trials
    a batch: ``width`` where the group holds at least half of it, else ``count``.

    The members' count is a shape of the population's programs, so a group of another count
    compiles them again, even where an earlier batch compiled its architecture (each batch's
    worker is a fresh process, which finds the earlier ones' programs in the session's
    compilation cache only for the same shapes). A search's last batch is often short (20
    trials: 8, 8, 4); padded, it compiles nothing. The padding members' steps cost compute
    (at most as much again: never for a group of under half), where compiling costs seconds
    (a 20-64-64-2 MLP's programs: 5-6 s on 2 CPU cores, against 1.6 s loaded from the cache).
    """
    return width if 2 * count >= width > count else count


def _joined(data: tuple, validation: tuple | None) -> tuple[tuple, np.ndarray | None]:
    """The training data with the validation data after it (one set of arrays the members'
    rows index), and the validation's rows in it (None without validation data). Where one
    of them has sample weights, the other's rows weigh 1 (as they do unweighted)."""
    if validation is None:
        return data, None
    rows = len(np.asarray(data[1]))
    weighted = len(data) > 2 or len(validation) > 2

    def parts(given: tuple) -> list:
        count = len(np.asarray(given[1]))
        weights = given[2] if len(given) > 2 else np.ones(count, np.float32)
        return [given[0], given[1], *([weights] if weighted else [])]

    def join(a: Any, b: Any) -> Any:
        if isinstance(a, dict):
            return {name: np.concatenate([np.asarray(a[name]), np.asarray(b[name])]) for name in a}
        return np.concatenate([np.asarray(a), np.asarray(b)])

    joined = tuple(join(a, b) for a, b in zip(parts(data), parts(validation)))
    return joined, np.arange(rows, rows + len(np.asarray(validation[1])), dtype=np.int64)


def _groups(models: Sequence[Model], sizes: Sequence[int], data: tuple) -> list[list[int]]:
    """The members (indices) that train together: one architecture and batch size each
    (the first member of a group decides), a group that does not fit the memory split in
    halves until it does (one member alone trains as a process of its own would)."""
    groups: list[list[int]] = []
    for i, model in enumerate(models):
        for group in groups:
            first = group[0]
            if sizes[first] == sizes[i] and mismatch([models[first], model]) is None:
                group.append(i)
                break
        else:
            groups.append([i])
    fitting, pending = [], groups
    while pending:
        group = pending.pop(0)
        if len(group) > 1 and fits_memory([models[i] for i in group], data, sizes[group[0]]):
            half = len(group) // 2
            pending[:0] = [group[:half], group[half:]]
        else:
            fitting.append(group)
    return fitting


def _appended(history: dict[str, list], more: dict[str, list]) -> dict[str, list]:
    return {name: [*history.get(name, []), *values] for name, values in more.items()}


def _train_group(
    population: Population,
    reporters: Sequence[search_trial.Reporter],
    epochs: Sequence[int],
    device: str | None = None,
) -> list[dict[str, list]]:
    """Train ``population`` epoch by epoch, each member reporting to its trial, for its own
    ``epochs`` (a member past them stops, as its fit would end); a member the
    pruner stops, or whose loss is not finite, stops alone. A pruned member's trial is told
    pruned at once (``search.store_end``, its seconds so far and ``device`` with it): another
    process sharing the study sees it end, not running on until its batch ends. Its slot is
    not given to a new trial: the member's steps still run, masked, until the group ends.
    Each member's history."""
    started = time.perf_counter()
    histories: list[dict[str, list]] = [{} for _ in reporters]
    for reporter in reporters:
        reporter.heartbeat.start()
    try:
        for epoch in range(max(epochs)):
            for i, own in enumerate(epochs):
                if own == epoch:  # its fit would end here
                    population.stop(i)
            if not population.active.any():
                break
            for i, history in enumerate(population.train(1)):
                if not history.get("epoch"):
                    continue  # stopped before this epoch
                histories[i] = _appended(histories[i], history)
                logs = {name: values[-1] for name, values in history.items() if name != "epoch"}
                stop = reporters[i].epoch_end(epoch, logs)
                loss = logs.get("loss")
                if loss is not None and not math.isfinite(loss):
                    reporters[i].failed = f"its loss was {loss} at epoch {epoch + 1}"
                    stop = True
                if stop:
                    population.stop(i)
                if reporters[i].pruned:
                    reporters[i].heartbeat.stop()
                    seconds = time.perf_counter() - started
                    trial = reporters[i].trial
                    searching.store_end(trial.study, trial, "pruned", None, None, seconds, device)
    finally:
        for reporter in reporters:
            reporter.heartbeat.stop()
    return histories


def train(
    models: Sequence[Model],
    x: object,
    y: object,
    members: Sequence[Mapping[str, Any]],
    rows: Sequence[int],
    storage: str,
    study: str,
    objective: str,
    pruner: str = "median",
    sample_weight: object = None,
    validation_rows: Sequence[int] | None = None,
    validation: Sequence[object] | None = None,
    epochs: int = 1,
    batch_size: int | None = None,
    learning_rate: float | None = None,
    monitor: object = None,
    width: int | None = None,
    device: str | None = None,
    saved_to: str | None = None,
    encoding: object = None,
) -> Record:
    """Train a batch of trials (``ask``'s) as populations, each member reporting to its trial.

    Args:
        models: one model, compiled, made by model_fn(params) after the first trial's seed,
            the trials' params setting no shape apart (a task's group): the others'
            starting states are drawn from their seeds (``population.starts``); or each
            trial's model, made by model_fn(params) after its seed.
        x, y, sample_weight: the search's data (arrays, ``x`` a dict of them too).
        members: per trial, in the order of ``models``: ``number``, ``trial_id``, ``seed``,
            and ``fit``, its drawn values of gpu_fit()'s arguments (``learning_rate``,
            ``batch_size``, ``epochs``) over the search's.
        rows: the rows every trial trains on (0-based); ``validation_rows`` the rows it
            validates on after each epoch, or ``validation`` (``(x, y)`` or ``(x, y,
            sample_weight)``) the validation data given; neither: no validation.
        storage, study, objective, pruner: the study's (as ``search_trial.reporters``).
        epochs, batch_size, learning_rate: gpu_fit()'s, for every trial that did not draw
            its own (``monitor``, which changes no update, is taken and ignored).
        width: the trials the search asks a batch (``ask``'s ``width``): a group trains as
            ``padded_width`` members where they fit the memory (None: as many as it has).
        device: the worker's device as the session names it ("GPU 0"), recorded with a
            pruned member's trial, which the worker tells at once.
        saved_to, encoding: the folder where the models worth saving (``_worth_saving``)
            are saved, as ``trial-<number>.keras``, with ``encoding`` beside each
            (``scoring.save_model``); None: none is saved.

    Returns:
        ``groups`` (the members' indices, 0-based, that trained together), ``widths`` (the
        members each group's programs were compiled for, ``padded_width``) and ``trials``:
        per member ``number``, ``pruning`` (``Reporter.outcome``: what ``tell`` reads),
        ``history`` (as gpu_fit()'s), ``seconds`` (its group's training time) and
        ``save``, whether its model is worth saving (and was saved). Where one model was
        given and the trials' states cannot be drawn from it, nothing trains: ``trained``
        "models" and ``reason`` say so (each trial then needs its own model).
    """
    given = tuple(part for part in (x, y, sample_weight) if part is not None)
    held = tuple(part for part in validation if part is not None) if validation else None
    data, appended = _joined(given, held)
    validated = appended if appended is not None else validation_rows
    train_rows = np.asarray(rows, np.int64)
    held_rows = None if validated is None else np.asarray(validated, np.int64)
    sizes: list[int] = []
    seeds: list[int] = []
    own_epochs: list[int] = []
    rates: list[float | None] = []
    for member in members:
        drawn = member.get("fit") or {}
        own_epochs.append(int(drawn.get("epochs") or epochs))
        sizes.append(int(drawn.get("batch_size") or batch_size or DEFAULT_BATCH_SIZE))
        rate = drawn.get("learning_rate")
        rates.append(rate if rate is not None else learning_rate)
        seeds.append(int(member["seed"]))
    batches = [first_batch(data, train_rows[:size]) for size in sizes]
    starting: list[tuple] | None = None
    if len(models) == 1 < len(members):
        drawn_starts = starts(models[0], seeds, batches[0], rates)
        if isinstance(drawn_starts, str):
            why = f"each trial needs its own model: {drawn_starts}"
            return {"trained": "models", "reason": why}
        starting, models = drawn_starts, [models[0]] * len(members)
    else:
        for model, seed, batch, rate in zip(models, seeds, batches, rates):
            prepare(model, seed, batch, rate)
    reporters = search_trial.reporters(
        storage, study, [int(m["trial_id"]) for m in members], objective, pruner
    )
    groups = _groups(models, sizes, data)
    histories: list[dict[str, list]] = [{} for _ in models]
    seconds = [0.0 for _ in models]
    ended: list[tuple[Any, int]] = [(None, 0) for _ in models]  # each member's group's state
    widths = []
    for group in groups:
        started = time.perf_counter()
        size = sizes[group[0]]
        members_width = padded_width(len(group), int(width or len(models)))
        if fits_memory([models[group[0]]] * members_width, data, size) is not None:
            members_width = len(group)
        population = Population(
            [models[i] for i in group],
            [Member(seeds[i], train_rows, held_rows) for i in group],
            data,
            size,
            width=members_width,
            starts=None if starting is None else [starting[i] for i in group],
        )
        widths.append(members_width)
        group_epochs = [own_epochs[i] for i in group]
        trained = _train_group(population, [reporters[i] for i in group], group_epochs, device)
        values = population.jax.device_get(population.state)
        spent = time.perf_counter() - started  # the group's, the same for each member
        for at, (i, history) in enumerate(zip(group, trained)):
            histories[i], seconds[i], ended[i] = history, spent, (values, at)
    keep = _worth_saving(reporters, objective)
    if saved_to is not None:
        for model, member, (values, at), saved in zip(models, members, ended, keep):
            if saved:
                assign(model, values, at)
                path = os.path.join(saved_to, f"trial-{int(member['number'])}.keras")
                scoring.save_model(model, path, encoding, overwrite=True)
    return {
        "groups": groups,
        "widths": widths,
        "trials": [
            {
                "number": int(member["number"]),
                "pruning": reporter.outcome(),
                "history": history,
                "seconds": spent,
                "save": saved,
            }
            for member, reporter, history, spent, saved in zip(
                members, reporters, histories, seconds, keep
            )
        ],
    }


def _worth_saving(reporters: Sequence[search_trial.Reporter], objective: str) -> list[bool]:
    """Which members' models the worker saves: those that may be the study's best, the
    members that completed (as ``search.outcome`` decides) with the batch's best value, all
    of them where several tie. The study's best is one of them or an earlier batch's, saved
    then; only the best's model stays in the study's folder (R's keep_best_model), so a
    batch of 64 trials writes one model, not 64 (a ``.keras`` file each)."""
    values = [searching.outcome({"pruning": r.outcome()}, objective)[1] for r in reporters]
    done = [v for v in values if v is not None]
    if not done:
        return [False] * len(values)
    maximize = reporters[0].trial.study.direction.name == "MAXIMIZE"
    best = max(done) if maximize else min(done)
    return [v is not None and v == best for v in values]


def tell(
    search: searching.Search, trials: Sequence[Mapping[str, Any]], device: str | None = None
) -> list[Record]:
    """Tell the study how each of ``train``'s ``trials`` ended, as ``search.tell`` tells a
    trial of its own process (its state, value and reason decided alike)."""
    return [
        searching.tell(
            search,
            int(trial["number"]),
            {"pruning": trial["pruning"]},
            seconds=trial.get("seconds"),
            device=device,
        )
        for trial in trials
    ]


def tell_task(
    search: searching.Search,
    numbers: Sequence[int],
    result: Mapping[str, Any] | None,
    population: bool = False,
    seconds: float | None = None,
    device: str | None = None,
    groups: Groups | None = None,
    track: Mapping[str, object] | None = None,
    context: Mapping[str, Any] | None = None,
) -> Record:
    """Tell the study how a worker's task ended, from its raw ``result`` (and ``groups``,
    with populations, its ``seconds`` as ``ended`` counts them): a population's
    ``trials`` each as ``tell`` tells them, else (a trial of its own process, or a population
    task that failed: each of its trials fails with its ``error``) each of ``numbers`` as
    ``search.tell`` tells it. Returns the first answer whose ``stop`` is set (else the
    first), with ``number``, its trial's, and ``status``, its tracked run's ("FINISHED",
    "KILLED" when pruned, else "FAILED"); a pruned trial's ``reason`` says after which epoch.
    With ``track`` and a tracked trial's ``context`` (its run's key, name and params), the
    trial's run records its objective (when complete), state and reason and ends with that
    status (a trial whose worker died before its fit began gets its run here), the
    tracking's ``warnings`` returned for R."""
    result = result or {}  # R's empty list arrives as one
    if groups is not None:
        ended(groups, population, seconds or 0.0, len(numbers))
    trials = result.get("trials")
    if population and result.get("error") is None and trials is not None:
        told = tell(search, trials, device)
    else:
        raw = {key: result[key] for key in ("error", "pruning") if key in result}
        told = [
            searching.tell(search, int(number), raw, seconds=seconds, device=device)
            for number in numbers
        ]
    at = next((i for i, answer in enumerate(told) if answer["stop"] is not None), 0)
    answer = told[at]
    status = {"complete": "FINISHED", "pruned": "KILLED"}.get(answer["state"], "FAILED")
    if answer["state"] == "pruned" and answer["reason"] is None:
        answer = {**answer, "reason": f"pruned after epoch {answer['epochs']}"}
    said: list[object] = []
    if track is not None and context:
        from gpukeras.track import tracked_runs  # only where a search is tracked

        tags = {"gpukeras.trial_state": answer["state"], "gpukeras.trial_reason": answer["reason"]}
        said = tracked_runs.record(
            track,
            str(context["key"]),
            metrics={"objective": answer["value"]} if answer["state"] == "complete" else None,
            params=context.get("params"),
            tags={name: value for name, value in tags.items() if value is not None},
            status=status,
            name=context.get("name"),
            kind="trial",
        )["warnings"]  # type: ignore[assignment]
    return {**answer, "number": int(numbers[at]), "status": status, "warnings": said}
