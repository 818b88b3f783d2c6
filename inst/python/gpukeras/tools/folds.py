"""The folds of gpu_cv() and the rows gpu_search() holds out: each row's fold, drawn with a
seed (R's own random numbers are left untouched), whole groups together, else stratified by
class, else at random. An rsample resampling's folds are R's (R/cv-folds.R). And the folds'
predictions gathered in the data's row order (gpu_cv()'s out-of-fold predictions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


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
