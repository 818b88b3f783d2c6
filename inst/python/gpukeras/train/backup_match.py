"""Whether a backup belongs to the run that would resume it: what the two must share (the
model's layers and inputs, its loss and optimizer, the arguments that change the updates),
and the refusal of a backup written by another run.
"""

from __future__ import annotations

import json

from gpukeras.core import compat
from gpukeras.core.errors import BackupMismatchError
from gpukeras.core.handles import Model
from gpukeras.train import backup


def training_fingerprint(model: Model, request: object) -> dict[str, object]:
    """What else a backup must share with the run that resumes it: the model's layers (by
    type, in order) and input shapes, its loss and optimizer, and the arguments that change
    the updates (see ``MUST_MATCH``). Plain JSON values, none of them a name Keras numbers
    per session (``dense_3``), so the same call in a fresh process gives the same ones."""
    optimizer = getattr(model, "optimizer", None)
    inputs = getattr(model, "inputs", None) if model.built else None
    loss = getattr(model, "loss", None)
    return {
        "layers": [type(layer).__name__ for layer in compat.flatten_layers(model)],
        "inputs": [list(getattr(t, "shape", ()))[1:] for t in inputs] if inputs else None,
        "loss": loss if isinstance(loss, str) else type(loss).__name__,
        "optimizer": type(optimizer).__name__ if optimizer is not None else None,
        **{
            name: json.loads(json.dumps(getattr(request, name), default=str))
            for name in backup.REQUEST_KEYS
        },
    }


def check_matches(state: backup.BackupState, run: dict[str, object], backup_dir: str) -> None:
    """Refuse a backup written by a different run (other batches, seed, or model)."""
    differ = [
        f"{key}: backup {state.run.get(key)!r}, now {run.get(key)!r}"
        for key in backup.MUST_MATCH
        if key in state.run and key in run and state.run[key] != run[key]
    ]
    if differ:
        raise BackupMismatchError(
            f"backup_dir {backup_dir} holds the backup of a different training run "
            f"({'; '.join(differ)}). Resuming needs the same call; use another backup_dir, "
            "or delete this one to start over."
        )
