"""gpu_backup(keep_best = , monitor = ): the k best models by a monitored value, the same after a
resume as in an unbroken run.

Keras' ``ModelCheckpoint(save_best_only = TRUE)`` forgets its best value when training
is resumed, and then overwrites the best model with a worse one (keras-team/keras#17012).
Here the list of the k best (epoch from 1, value, file; best first) is part of each
committed backup (``gpukeras.train.backup``): at an epoch's end the backup callback asks
``consider`` (which writes a new best model's file, under a temporary name, synced, then
renamed), commits the backup that names the new list, and only then (``committed``)
removes the files the list no longer names and rewrites ``BEST_INDEX``. A run killed at
any moment resumes from a commit whose list is whole; its files are all there, and a file
no commit names (written, or left to go, just before the kill) is removed when it
resumes (``clean``): it comes back, the same, if the resumed run keeps it again.

Better is as Keras' callbacks infer ``mode = "auto"`` (``compat.monitor_mode``); a tie
keeps the earlier epoch; NaN is never kept. A model is saved with the averaged weights
under gpu_step(ema = ) (``gpukeras.train.ema``), and as gpu_save() saves it
(``pretrained.save_model``): a KerasHub preset's model with its preset, and its LoRA
adapters kept apart, so that gpu_load() gives it back with LoRA at the same rank (Keras'
own save would add the adapters into each kernel). The files and the index stay when
training completes: they are what the user asked for.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from gpukeras.core import compat
from gpukeras.core.errors import BadArgumentError
from gpukeras.core.files import write_atomic
from gpukeras.core.handles import Model
from gpukeras.core.runtime import config
from gpukeras.train import backup_files as files
from gpukeras.train import ema, pretrained

BEST_PREFIX = "gpukeras-best-"
BEST_SUFFIX = ".keras"
BEST_INDEX = "gpukeras-best.json"


class BestModels:
    """The k best models of one fit, in its backup folder (see the module)."""

    def __init__(self, folder: str, keep: int, monitor: str, entries: list[dict[str, Any]]):
        self.folder = folder
        self.keep = keep
        self.monitor = monitor
        self.entries = entries
        self.mode: str | None = None
        self.dropped: list[str] = []

    def consider(self, model: Model, epoch: int, logs: dict | None) -> None:
        """Keep this epoch's model among the k best (its file written now; the list the
        next commit holds updated)."""
        value = (logs or {}).get(self.monitor)
        if value is None:
            raise BadArgumentError(
                f"gpu_backup(keep_best = ) monitors {self.monitor!r}, which training does not "
                f"log (it logs {', '.join(sorted(logs or {})) or 'nothing'}): give monitor = "
                "one of those."
            )
        value = float(value)
        if value != value:  # NaN is never among the best
            return
        sign = -1.0 if self._mode(model) == "max" else 1.0
        ranked = sorted(
            [*self.entries, {"epoch": epoch, "value": value}],
            key=lambda e: (sign * float(e["value"]), int(e["epoch"])),
        )
        if all(entry["epoch"] != epoch for entry in ranked[: self.keep]):
            return
        monitor = re.sub(r"[^A-Za-z0-9_.-]", "_", self.monitor)
        name = f"{BEST_PREFIX}epoch-{epoch:04d}-{monitor}-{value:.6g}{BEST_SUFFIX}"
        self._save(model, name)
        ranked = [{**e, "file": name} if e["epoch"] == epoch else e for e in ranked]
        self.entries = ranked[: self.keep]
        self.dropped += [str(e["file"]) for e in ranked[self.keep :]]

    def committed(self) -> None:
        """The backup naming the current list is committed: the files it left out go, and
        the index says what is kept."""
        for name in self.dropped:
            Path(self.folder, name).unlink(missing_ok=True)
        self.dropped = []
        files.commit_json(
            self.folder,
            BEST_INDEX,
            {"monitor": self.monitor, "mode": self.mode, "best": self.entries},
        )

    def clean(self) -> None:
        """On resuming: best-model files the committed list does not name, and half-written
        ones, removed (see the module)."""
        named = {str(entry.get("file")) for entry in self.entries}
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.folder):
                mine = entry.name.startswith((BEST_PREFIX, f".{BEST_PREFIX}"))
                if mine and entry.name.endswith(BEST_SUFFIX) and entry.name not in named:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)

    def _mode(self, model: Model) -> str:
        if self.mode is None:
            try:
                self.mode = compat.monitor_mode(config.keras(), model, self.monitor)
            except ValueError as error:
                raise BadArgumentError(
                    f"Keras cannot tell whether {self.monitor!r} is better high or low; "
                    "gpu_backup(keep_best = ) needs a loss or a compiled metric."
                ) from error
        return self.mode

    def _save(self, model: Model, name: str) -> None:
        """The model (its averaged weights under gpu_step(ema = )) as ``name``, as gpu_save()
        saves it (``pretrained.save_model``, LoRA adapters kept apart): written under a
        temporary name, synced, then renamed."""
        if hasattr(model, "jax_state_sync"):
            model.jax_state_sync()

        def save(path: str) -> None:
            with ema.averaged(model), compat.tensorflow_left_unloaded():
                pretrained.save_model(model, path, lora="keep")

        # the temporary name's prefix is one the cleanup of a killed run's files looks for
        write_atomic(
            os.path.join(self.folder, name),
            save,
            sync=True,
            prefix=f".{BEST_PREFIX}",
            suffix=BEST_SUFFIX,
        )


def best_models(backup_dir: str | None) -> dict[str, object] | None:
    """The k best models a fit kept in ``backup_dir`` (``BEST_INDEX``): monitor, mode and
    ``best`` (epoch, value, file, path), best first; None where it kept none."""
    if not backup_dir:
        return None
    try:
        descriptor = os.open(Path(backup_dir) / BEST_INDEX, os.O_RDONLY | files.NOFOLLOW)
        with os.fdopen(descriptor) as file:
            index = json.load(file)
    except (OSError, ValueError):
        return None
    index["best"] = [
        {**entry, "path": os.path.join(backup_dir, str(entry["file"]))} for entry in index["best"]
    ]
    return dict(index)
