"""Back up training and resume it exactly: Keras' BackupAndRestore, made exact mid-epoch.

Keras 3.15's ``BackupAndRestore`` writes the weights (with the optimizer's
state) every epoch or every ``save_freq`` batches, but on restart it only
sets the epoch: a run killed in the middle of epoch e trains all of epoch e
again, so it ends with other weights than an uninterrupted run. Read from
keras/src/callbacks/backup_and_restore.py, it also (a) keeps counting the
epoch from 0 after a restart until the first epoch ends, so a mid-epoch
backup taken then names epoch 0; (b) writes the weights and the metadata as
two files, so a kill between the two pairs new weights with old metadata;
(c) leaves Dropout's random state out (``save_weights`` skips seed
generators); (d) deletes the whole backup folder, whatever else is in it.

``backup_callback`` subclasses it (keeping its save-frequency logic) and:

- writes each backup as a new ``weights-<n>.weights.h5`` and then commits it
  by atomically replacing ``gpukeras-backup.json`` (epoch, batches done in
  it, seed-generator states, the history so far, and the run's fingerprint),
  so a kill at any moment leaves the last committed backup intact;
- syncs JAX's training state into the model before saving (on JAX it lives
  outside the model during an epoch; ``jax_state_sync`` is Keras' own way);
- on restart, loads the committed backup, and then, in the interrupted
  epoch, lets the first ``batches_done`` batches go by without training
  (they are drawn from the data, so the rest of the epoch sees the same
  batches in the same order as an uninterrupted run), with the running loss
  and metrics of those batches restored, so the epoch's logged loss is the
  mean over all its batches, as in an uninterrupted run;
- backs up at the end of every epoch as well, and removes only its own files
  when training completes;
- on JAX with several processes (``gpukeras.jax_cluster``), writes them into
  the shared folder on the chief alone; the other workers make the same
  backups (reading the state takes every worker) into a private temporary
  folder, and every worker restores from the shared one.

Exact resumption also needs the data order to depend only on the seed and
the epoch; ``gpukeras.data_adapters`` arranges that (see its notes).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpukeras import compat
from gpukeras.errors import BackupMismatchError, BadArgumentError
from gpukeras.runtime import config

STATE_FILE = "gpukeras-backup.json"
WEIGHTS_PATTERN = "weights-{:06d}.weights.h5"
FORMAT = 1
# The fingerprint keys a resumed run must share with the run that wrote the backup.
MUST_MATCH = ("steps_per_epoch", "steps_per_execution", "seed", "batch_size", "weights")


@dataclass
class BackupState:
    """A committed backup, as plain data.

    Attributes:
        epoch: the epoch (0-based) to continue in.
        batches_done: batches of that epoch already trained (0 at an epoch's start).
        weights: file name of the weights (in the backup folder).
        generation: counts backups; names the weights file.
        run: the fingerprint of the run that wrote it (``MUST_MATCH`` keys).
        seed_generators: states of the model's random seed generators, in order.
        history: epoch logs of the epochs finished so far.
        metrics: values of the model's metric variables (the running loss
            and metrics of the interrupted epoch), for a mid-epoch backup.
    """

    epoch: int
    batches_done: int
    weights: str
    generation: int
    run: dict[str, object] = field(default_factory=dict)
    seed_generators: list[list[int]] = field(default_factory=list)
    history: list[dict[str, float]] = field(default_factory=list)
    metrics: list[object] = field(default_factory=list)


def read_state(backup_dir: str) -> BackupState | None:
    """The committed backup in ``backup_dir``; None when there is none (a fresh start).

    Read while a run still trains (as its tests watch it), a backup may be
    replaced by a newer one between reading its state and finding its weights,
    which the run then deletes: the state is read again, a few times at most.
    """
    path = Path(backup_dir) / STATE_FILE
    for _ in range(3):
        state = _parse_state(path, backup_dir)
        if state is None or (Path(backup_dir) / state.weights).exists():
            return state
    raise BackupMismatchError(
        f"The backup in {backup_dir} names {state.weights}, which is missing. Delete "
        f"{path} (or the folder) to start training from the beginning."
    )


def _parse_state(path: Path, backup_dir: str) -> BackupState | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        return BackupState(
            epoch=int(data["epoch"]),
            batches_done=int(data["batches_done"]),
            weights=str(data["weights"]),
            generation=int(data["generation"]),
            run=dict(data.get("run", {})),
            seed_generators=[list(s) for s in data.get("seed_generators", [])],
            history=list(data.get("history", [])),
            metrics=list(data.get("metrics", [])),
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise BackupMismatchError(
            f"The backup in {backup_dir} cannot be read ({error}). Delete {path} (or the "
            "folder) to start training from the beginning."
        ) from error


def check_matches(state: BackupState, run: dict[str, object], backup_dir: str) -> None:
    """Refuse a backup written by a different run (other batches, seed, or model)."""
    differ = [
        f"{key}: backup {state.run.get(key)!r}, now {run.get(key)!r}"
        for key in MUST_MATCH
        if key in state.run and key in run and state.run[key] != run[key]
    ]
    if differ:
        raise BackupMismatchError(
            f"backup_dir {backup_dir} holds the backup of a different training run "
            f"({'; '.join(differ)}). Resuming needs the same call; use another backup_dir, "
            "or delete this one to start over."
        )


def check_dir(backup_dir: object) -> str:
    """``backup_dir`` as an absolute path, created; a BadArgumentError if it cannot be."""
    if not isinstance(backup_dir, (str, os.PathLike)) or not str(backup_dir):
        raise BadArgumentError(f"backup_dir must be a folder path, not {backup_dir!r}.")
    path = Path(backup_dir).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise BadArgumentError(f"backup_dir {path} is a file; give a folder.")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadArgumentError(f"backup_dir {path} cannot be created: {error}") from error
    return str(path)


def _plain_logs(logs: dict | None) -> dict[str, float]:
    out = {}
    for name, value in (logs or {}).items():
        with contextlib.suppress(TypeError, ValueError):
            out[str(name)] = float(value)
    return out


def _save_dir(backup_dir: str) -> str:
    """Where this process writes backups: ``backup_dir``, or on a JAX worker other than the
    chief a temporary folder of its own (see the module's notes)."""
    jax = sys.modules.get("jax")
    if jax is None or not jax.distributed.is_initialized() or jax.process_index() == 0:
        return backup_dir
    return tempfile.mkdtemp(prefix="gpukeras-worker-backup-")


def backup_callback(
    backup_dir: str,
    save_freq: str | int,
    run: dict[str, object],
    state: BackupState | None,
) -> object:
    """The backup callback for one gpu_fit() (see the module's notes).

    Args:
        backup_dir: the folder (see ``check_dir``).
        save_freq: "epoch", or a number of batches between backups (and one at
            every epoch's end too).
        run: this run's fingerprint, stored with each backup.
        state: the committed backup to resume from (``read_state``), or None.

    Returns:
        A ``keras.callbacks.BackupAndRestore`` subclass instance. Its wrapper
        of ``train_function`` takes its place among others by
        ``compat.TRAIN_FUNCTION_LAYERS``, wherever the callback is in ``fit()``'s list.
    """
    keras = config.keras()
    spe = int(run.get("steps_per_execution") or 1)  # type: ignore[call-overload]

    class ExactBackupAndRestore(keras.callbacks.BackupAndRestore):
        """BackupAndRestore with atomic backups and an exact mid-epoch resume."""

        def __init__(self) -> None:
            super().__init__(backup_dir, save_freq=save_freq, delete_checkpoint=True)
            self.run = run
            self.resumed = state
            self.generation = state.generation if state else 0
            self.history: list[dict[str, float]] = list(state.history) if state else []
            self.epoch = 0
            self.batches_done = 0
            self.skip_batches = 0
            self.restored = False
            self.save_dir = _save_dir(backup_dir)

        # Loading -----------------------------------------------------------
        def on_train_begin(self, logs: dict | None = None) -> None:
            model = self.model
            if self.resumed is None:
                return
            if model.optimizer is not None and not model.optimizer.built:
                model.optimizer.build(model.trainable_variables)
            weights = os.path.join(backup_dir, self.resumed.weights)
            try:
                model.load_weights(weights)
            except (ValueError, KeyError) as error:
                raise BackupMismatchError(
                    f"The backup in {backup_dir} does not fit this model ({error}). Resuming "
                    "needs the same model; use another backup_dir, or delete this one to "
                    "start over."
                ) from error
            generators = compat.seed_generators(model)
            if len(generators) == len(self.resumed.seed_generators):
                for generator, saved in zip(generators, self.resumed.seed_generators):
                    generator.state.assign(
                        keras.ops.convert_to_tensor(saved, dtype=generator.state.dtype)
                    )
            compat.set_initial_epoch(model, self.resumed.epoch)
            self.epoch = self.resumed.epoch
            self.skip_batches = self.resumed.batches_done
            self.restored = True
            if self.skip_batches:
                self._wrap_train_function()

        def _wrap_train_function(self) -> None:
            """Let the first ``skip_batches`` batches of the resumed epoch go by untrained."""
            jax = keras.backend.backend() == "jax"
            left = [self.skip_batches // spe]

            def resuming_over(original: Callable) -> Callable:
                def resuming(*args: object) -> object:
                    if left[0] > 0:
                        *leading, iterator = args
                        for _ in range(spe):
                            next(iterator)  # type: ignore[call-overload]
                        left[0] -= 1
                        return ({}, leading[0]) if jax else {}
                    return original(*args)

                return resuming

            compat.wrap_train_function(self.model, "resume", resuming_over)

        # Saving ------------------------------------------------------------
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.epoch = epoch
            self._current_epoch = epoch
            if epoch != getattr(self.resumed, "epoch", None):
                self.skip_batches = 0
            elif self.skip_batches and self.resumed.metrics:  # type: ignore[union-attr]
                # Keras has just reset the metrics; the skipped batches' share comes back.
                for variable, value in zip(self.model.metrics_variables, self.resumed.metrics):  # type: ignore[union-attr]
                    variable.assign(keras.ops.convert_to_tensor(value, dtype=variable.dtype))

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if batch < self.skip_batches:  # a batch the resumed epoch let go by
                self._last_batch_seen = batch
                return
            self.batches_done = batch + 1
            if self._should_save_on_batch(batch):
                self._save_model()

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self.skip_batches = 0
            self.history.append({"epoch": epoch + 1, **_plain_logs(logs)})
            self.epoch, self.batches_done = epoch + 1, 0
            self._last_batch_seen = -1
            self._batches_seen_since_last_saving = 0
            self._save_model()

        def _save_model(self) -> None:
            model = self.model
            if hasattr(model, "jax_state_sync"):
                model.jax_state_sync()  # JAX keeps the trained state outside the model
            self.generation += 1
            name = WEIGHTS_PATTERN.format(self.generation)
            model.save_weights(os.path.join(self.save_dir, name), overwrite=True)
            committed = {
                "format": FORMAT,
                "epoch": self.epoch,
                "batches_done": self.batches_done,
                "weights": name,
                "generation": self.generation,
                "run": self.run,
                "seed_generators": [
                    [int(v) for v in keras.ops.convert_to_numpy(g.state.value).tolist()]
                    for g in compat.seed_generators(model)
                ],
                "history": self.history,
                "metrics": [
                    keras.ops.convert_to_numpy(v.value).tolist() for v in model.metrics_variables
                ]
                if self.batches_done
                else [],
            }
            temporary = os.path.join(self.save_dir, STATE_FILE + ".tmp")
            with open(temporary, "w") as out:
                json.dump(committed, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, os.path.join(self.save_dir, STATE_FILE))
            self._remove_weights(keep=name)

        def _remove_weights(self, keep: str | None) -> None:
            for path in Path(self.save_dir).glob("weights-*.weights.h5"):
                if path.name != keep:
                    path.unlink(missing_ok=True)

        def on_train_end(self, logs: dict | None = None) -> None:
            # Training completed (on an error Keras never gets here, and the
            # backup stays): remove this callback's files, and the folder if
            # nothing else is in it.
            compat.unwrap_train_function(self.model, "resume")
            self._remove_weights(keep=None)
            Path(self.save_dir, STATE_FILE).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                Path(self.save_dir).rmdir()

    return ExactBackupAndRestore()
