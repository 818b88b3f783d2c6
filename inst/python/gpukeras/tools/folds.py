"""The folds of gpu_cv() and the rows gpu_search() holds out: each row's fold, drawn with a
seed (R's own random numbers are left untouched), whole groups together, else stratified by
class, else at random. An rsample resampling's folds are R's (R/cv-folds.R). And gpu_cv()'s
result from its folds' outcomes: the held-out metrics and their summary, the folds'
predictions gathered in the data's row order (the out-of-fold predictions), its print."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gpukeras.tools.result_lines import cv_lines


def folds(
    rows: int,
    k: int,
    seed: int,
    classes: Sequence[str] | str | None = None,
    groups: Sequence[str] | str | None = None,
) -> list[int]:
    """Each of ``rows`` rows' fold, 1 to ``k``, drawn with ``seed``.

    With ``groups`` (one per row): the groups in a random order, then by size, largest
    first, each whole to the fold with the fewest rows so far, so the folds' sizes stay
    close. Else with ``classes`` (one per row): each class's rows shuffled and dealt to the
    folds in turn, the deal going on from class to class, so every fold gets each class's
    share within one row. Else at random, the folds' sizes within one row of each other."""
    rng = np.random.default_rng(int(seed) % 2**32)
    if groups is not None:
        names, of_row = np.unique(np.atleast_1d(np.asarray(groups, dtype=str)), return_inverse=True)
        sizes = np.bincount(of_row, minlength=len(names))
        ranked = sorted(rng.permutation(len(names)).tolist(), key=lambda g: -sizes[g])
        load = np.zeros(k, dtype=np.int64)
        fold_of = np.zeros(len(names), dtype=np.int64)
        for group in ranked:
            fold_of[group] = int(np.argmin(load)) + 1
            load[fold_of[group] - 1] += sizes[group]
        return [int(f) for f in fold_of[of_row]]
    if classes is not None:
        labels = np.atleast_1d(np.asarray(classes, dtype=str))
        fold = np.zeros(len(labels), dtype=np.int64)
        dealt = 0
        for label in dict.fromkeys(labels.tolist()):  # in the order the classes first occur
            members = rng.permutation(np.flatnonzero(labels == label))
            fold[members] = (dealt + np.arange(len(members))) % k + 1
            dealt += len(members)
        return [int(f) for f in fold]
    return [int(f) for f in rng.permutation(np.arange(int(rows)) % k + 1)]


def class_labels(labels: object) -> list[str] | None:
    """The classes ``folds`` stratifies by, one per row, of the training labels as R hands
    them over (an array of one column or none: a factor's or character vector's values as
    text, logicals, R's integers): the labels that are classes; None for other labels
    (doubles, several columns) and for none."""
    if labels is None:
        return None
    values = np.asarray(labels)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1 or values.dtype.kind not in "UObi":
        return None
    return [str(value) for value in values.tolist()]


def split(
    rows: int,
    k: int,
    seed: int,
    labels: object = None,
    groups: Sequence[str] | str | None = None,
) -> dict[str, Any]:
    """The ``k`` folds of ``rows`` rows as ``folds`` draws them, stratified by the training
    ``labels`` where they are classes (``class_labels``): ``held_out`` and ``train``, each
    fold's rows (1-based, as R numbers them, in order), and ``kind``, how they were made
    ("grouped", "stratified by the labels" or "random"). ``groups`` has at least ``k``
    distinct values: gpu_cv() refuses fewer in R, before Python starts (R/cv-folds.R)."""
    k = int(k)
    classes = class_labels(labels)
    fold = np.asarray(folds(rows, k, seed, classes, groups))
    number = np.arange(1, int(rows) + 1)
    return {
        "held_out": [number[fold == f].tolist() for f in range(1, k + 1)],
        "train": [number[fold != f].tolist() for f in range(1, k + 1)],
        "kind": "grouped"
        if groups is not None
        else "stratified by the labels"
        if classes is not None
        else "random",
    }


def result(
    metrics: Sequence[Mapping[str, float]],
    trained: Sequence[str],
    devices: Sequence[str],
    predictions: Sequence[Any],
    held_out: Sequence[Any],
    rows: int,
    split: str,
    seed: int,
    why: str | None = None,
) -> dict[str, Any]:
    """gpu_cv()'s result from each fold's outcome: its held-out ``metrics``, how it
    ``trained`` ("population" or "processes"), its device and its ``predictions`` (an array,
    or a list or dict of them, one per output). Returns ``metrics`` (the columns of a row per
    fold, ``fold`` first), ``trained`` (one way, or "population and processes"),
    ``predictions`` and ``several`` (out_of_fold's, one array per output, and whether the
    model has several), ``summary`` (each metric's mean, then each one's sd, over the folds,
    as the parent run's ``held_out_<metric>_mean`` and ``_sd``) and print()'s ``lines``."""
    ways = set(trained)
    way = ways.pop() if len(ways) == 1 else "population and processes"
    columns = {name: [float(fold[name]) for fold in metrics] for name in metrics[0]}
    summary = {f"held_out_{name}_mean": statistics.mean(v) for name, v in columns.items()}
    for name, values in columns.items():
        summary[f"held_out_{name}_sd"] = statistics.stdev(values) if len(values) > 1 else math.nan
    several = isinstance(predictions[0], (list, tuple, dict))
    outputs = [
        list(p.values()) if isinstance(p, dict) else list(p) if several else [p]
        for p in predictions
    ]
    return {
        "metrics": {"fold": list(range(1, len(metrics) + 1)), **columns},
        "trained": way,
        "predictions": out_of_fold(outputs, held_out, rows),
        "several": several,
        "summary": summary,
        "lines": cv_lines(len(held_out), split, seed, way, why, list(devices), columns),
    }


def out_of_fold(
    predictions: Sequence[Sequence[Any]], held_out: Sequence[Any], rows: int
) -> list[np.ndarray]:
    """The folds' predictions in the data's row order, an array per output: ``predictions``
    per fold, its outputs' arrays (a vector as one column) for its ``held_out`` rows (1-based,
    as R numbers them). A row held out more than once gets the mean, one never held out NaN.
    """
    gathered = []
    for output in range(len(predictions[0])):
        total: np.ndarray | None = None
        count = np.zeros(int(rows))
        for fold, index in zip(predictions, held_out):
            part = np.asarray(fold[output], dtype=np.float64)
            part = part.reshape(len(part), -1) if part.ndim < 2 else part
            if total is None:
                total = np.zeros((int(rows), *part.shape[1:]))
            at = np.atleast_1d(np.asarray(index, dtype=np.int64)) - 1
            total[at] += part
            count[at] += 1
        assert total is not None
        with np.errstate(invalid="ignore"):
            gathered.append(total / count.reshape(-1, *[1] * (total.ndim - 1)))
    return gathered
