"""What print(gpu_search()) says: how many trials ended each way, the best trial with its
parameters (numbers as R's ``format(digits = 4)`` writes them) and its saved model, how the
trials validated, where the study is kept, how the trials trained (on every engine) and
whether interrupted trials ran again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpukeras.core.r_words import r_number, strings

# The trial states in the order the first line counts them.
STATES = ("complete", "pruned", "failed", "running", "waiting")
# How the trials trained, by the result's ``trained``.
TRAINED = {
    "populations": "in batches, as populations",
    "processes": "a fit per trial, in worker processes",
    "populations and processes": "as populations, and a fit per trial where a group was of one",
}
# Where a line's value starts, under its label.
INDENT = " " * 12


def search_lines(
    states: Sequence[str] | str,
    objective: str,
    direction: str,
    validation: str,
    study: str,
    storage: str,
    seed: int,
    trained: str,
    trained_why: str | None = None,
    best: Mapping[str, Any] | None = None,
    interrupted: int = 0,
) -> list[str]:
    """print(gpu_search())'s lines.

    Args:
        states: each trial's state ("complete", "pruned", "failed", "running", "waiting").
        objective, direction, validation, study, storage, seed: the search's.
        trained: "populations", "processes" or "populations and processes";
            ``trained_why``: why (None: not said).
        best: the best trial's ``number``, ``value``, ``params`` (a name to a value each)
            and ``path`` (its saved model; None or R's NA where none was kept); None
            before any trial completed.
        interrupted: how many interrupted trials this call ran again.
    """
    states = strings(states)
    counts = ", ".join(f"{states.count(s)} {s}" for s in STATES if s in states)
    lines = [f"<gpukeras_search> {len(states)} trials ({counts}), {direction} {objective}"]
    if best is None:
        lines.append("Best:       none yet (no trial completed)")
    else:
        params = ", ".join(f"{name} = {r_number(v, 4)}" for name, v in best["params"].items())
        lines += [
            f"Best:       trial {best['number']}, {objective} = {best['value']:.5g}",
            f"{INDENT}{params}",
        ]
        if best.get("path") not in (None, "NA"):  # R's NA_character_ arrives as "NA"
            lines.append(f"{INDENT}model: {best['path']} (gpu_load() it)")
    why = "" if trained_why is None else f" ({trained_why})"
    lines += [
        f"Validation: {validation}",
        f"Study:      '{study}' in {storage}, seed {int(seed)}",
        f"Trained:    {TRAINED.get(trained, TRAINED['processes'])}{why}",
    ]
    if interrupted:
        lines.append(f"Resumed:    {interrupted} interrupted trial(s) run again")
    return lines
