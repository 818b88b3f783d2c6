"""Tracked runs read back with MLflow's client: gpu_runs()' rows, gpu_compare_runs()' two runs
with their learning curves, and a run's model for gpu_load("runs:/<id>").

Rows are plain data, one per run: its id, name, kind (``tracked_runs.KIND_TAG``: fit,
fold, trial, cv, search), status, parent, times, and its params and final metrics as
``params.<name>`` and ``metrics.<name>`` (MLflow's own names for them, as its
``search_runs`` data frame has them). A store that cannot be read is TrackingError, its
URI masked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from gpukeras.core.errors import BadArgumentError
from gpukeras.track import reach, tracking
from gpukeras.track.tracked_runs import KIND_TAG
from gpukeras.track.tracking import Target, TrackingError

MODEL_FOLDER = "model"
MODEL_FILE = "model.keras"


def _read(target: Target, what: str, read: Any) -> Any:
    """``read()`` against the store, once a server answers (asked now, in a second or two:
    ``reach``); its failure as TrackingError saying ``what`` failed."""
    why = reach.reach(target, again=True)
    if why is not None:
        raise TrackingError(f"Cannot read {what} from {target.safe}: {why}.")
    try:
        with tracking.quiet_mlflow():
            return read()
    except BadArgumentError:
        raise
    except Exception as error:
        why = reach.unavailable(error, target) or tracking.masked(str(error), target)
        raise TrackingError(f"Cannot read {what} from {target.safe}: {why}.") from error


def _experiment_ids(target: Target, experiments: object) -> list[str]:
    if experiments is None:
        return [tracking.experiment_id(target)]
    names = [experiments] if isinstance(experiments, str) else list(experiments)  # type: ignore[call-overload]
    mlflow = tracking.client(target)
    ids = []
    for name in names:
        found = mlflow.get_experiment_by_name(str(name))
        if found is None:
            raise BadArgumentError(f"{target.safe} has no experiment {str(name)!r}.")
        ids.append(found.experiment_id)
    return ids


# A row's first columns, in every table of runs (an empty one too).
COLUMNS = (
    "run_id", "name", "kind", "status", "parent_run_id", "experiment", "start_time", "end_time",
    "seconds",
)  # fmt: skip


def row(run: Any, experiment: str | None = None) -> dict[str, object]:
    """One run as a flat row (see the module), in the experiment named ``experiment``."""
    info, data = run.info, run.data
    tags = data.tags
    ended = info.end_time
    out: dict[str, object] = {
        "run_id": info.run_id,
        "name": info.run_name or tags.get("mlflow.runName"),
        "kind": tags.get(KIND_TAG),
        "status": info.status,
        "parent_run_id": tags.get("mlflow.parentRunId"),
        "experiment": experiment,
        "start_time": info.start_time / 1000 if info.start_time else None,
        "end_time": ended / 1000 if ended else None,
        "seconds": (ended - info.start_time) / 1000 if ended and info.start_time else None,
    }
    for name in ("gpukeras.input_verdict", "gpukeras.gpu_verdict", "gpukeras.trial_state"):
        if name in tags:
            out[name.removeprefix("gpukeras.")] = tags[name]
    for name, value in sorted(data.params.items()):
        out[f"params.{name}"] = value
    for name, value in sorted(data.metrics.items()):
        out[f"metrics.{name}"] = value
    return out


def columns(rows: list[dict[str, object]]) -> list[str]:
    """The columns of a table of ``rows``: ``COLUMNS``, then the others in order met."""
    return list(dict.fromkeys([*COLUMNS, *(name for r in rows for name in r)]))


def runs(
    track: Mapping[str, object],
    experiment: object = None,
    filter: str | None = None,
    max_results: int = 1000,
) -> dict[str, object]:
    """gpu_runs(): the runs of the experiment(s) (the track's by default) that match
    MLflow's ``filter`` (``"metrics.val_loss < 0.5 and params.units = '64'"``), newest
    first. Returns ``rows`` and their ``columns``."""
    target = tracking.target_of(track)

    def read() -> dict[str, object]:
        ids = _experiment_ids(target, experiment)
        found = tracking.client(target).search_runs(
            ids,
            filter_string=filter or "",
            max_results=int(max_results),
            order_by=["attributes.start_time DESC"],
        )
        names = {i: tracking.client(target).get_experiment(i).name for i in ids}
        rows = [row(run, names.get(run.info.experiment_id)) for run in found]
        return {"rows": rows, "columns": columns(rows)}

    return _read(target, "the runs", read)


def compare(track: Mapping[str, object], run_ids: list[str]) -> dict[str, object]:
    """gpu_compare_runs() of two runs, a and b, as rows for R's tables: ``runs`` (each
    run's ``row``) and their ``columns``, ``params`` (``param``, ``a``, ``b``: those that
    differ, as logged), ``metrics`` (``metric``, ``a``, ``b``, ``change``: b less a; the
    final values, None where a run has none) and ``history`` (``run``, ``metric``,
    ``epoch``, ``value``: the metrics a run logged at more than one step, by step)."""
    target = tracking.target_of(track)

    def read() -> dict[str, object]:
        mlflow = tracking.client(target)
        found = [mlflow.get_run(str(run_id)) for run_id in run_ids]
        history = []
        for label, run in zip("ab", found):
            for name in run.data.metrics:
                points = sorted(
                    mlflow.get_metric_history(run.info.run_id, name), key=lambda m: m.step
                )
                if len({m.step for m in points}) > 1:
                    history += [
                        {"run": label, "metric": name, "epoch": float(m.step), "value": m.value}
                        for m in points
                    ]
        a, b = (run.data.params for run in found)
        params = [
            {"param": name, "a": a.get(name), "b": b.get(name)}
            for name in sorted(set(a) | set(b))
            if a.get(name) != b.get(name)
        ]
        ma, mb = (run.data.metrics for run in found)
        metrics = [
            {
                "metric": name,
                "a": ma.get(name),
                "b": mb.get(name),
                "change": mb[name] - ma[name] if name in ma and name in mb else None,
            }
            for name in sorted(set(ma) | set(mb))
        ]
        rows = [row(run, mlflow.get_experiment(run.info.experiment_id).name) for run in found]
        return {
            "runs": rows,
            "columns": columns(rows),
            "params": params,
            "metrics": metrics,
            "history": history,
        }

    return _read(target, "the runs to compare", read)


def download_model(track: Mapping[str, object], run_id: str, folder: str) -> dict[str, str]:
    """The run's model (``model/`` as gpu_save() wrote it) downloaded into ``folder``; the
    path of its ``.keras`` file."""
    target = tracking.target_of(track)

    def read() -> dict[str, str]:
        mlflow = tracking.client(target)
        names = [os.path.basename(f.path) for f in mlflow.list_artifacts(run_id, MODEL_FOLDER)]
        if MODEL_FILE not in names:
            raise BadArgumentError(
                f"The run {run_id} has no model (no {MODEL_FOLDER}/{MODEL_FILE} among its "
                "artifacts): only a gpu_fit() run that completed keeps one."
            )
        os.makedirs(folder, exist_ok=True)
        local = mlflow.download_artifacts(run_id, MODEL_FOLDER, folder)
        return {"path": os.path.join(local, MODEL_FILE)}

    return _read(target, f"the model of run {run_id}", read)
