"""Back up training and resume it exactly: Keras' BackupAndRestore, made exact mid-epoch and safe.

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

``backup_callback`` subclasses it (keeping its save-frequency logic, through
``compat``; it replaces every hook that saves, so Keras' own saving never runs) and:

- writes each backup's weights into a new file of a name no other file has
  (``gpukeras-weights-<generation>-<random>.weights.h5``, created
  exclusively) and, for a KerasHub model with LoRA, its adapters into another
  beside it (``<the same>.lora.h5``, created exclusively too), by
  ``pretrained.save_weights``: Keras alone would save each kernel with its
  adapters added, and resume with that sum and zero adapters, which train no
  more. It syncs them to disk, and then commits them by atomically
  replacing ``gpukeras-backup.json`` (epoch, batches done in it,
  seed-generator states, the history so far, the run's fingerprint, and each
  file's size and SHA-256), written to a temporary file of its own
  and synced, the folder synced before and after the rename. So a kill or a
  power cut at any moment leaves the last committed backup intact;
- keeps the generation before the last one (the JSON names it, in full, as
  ``previous``) until the next is committed; on resume, a newest backup
  whose weights are missing, of the wrong size or checksum (a file emptied
  or cut short by a crash, or by a disk that lost it) is passed over for
  the previous one (an adapters file alike); when neither can be used,
  BackupMismatchError names the files to remove;
- removes exactly the files it wrote (a generation's adapters with its
  weights), and those named by the backup it resumed from (which the resumed
  run now owns), never any other file in the folder: when training
  completes, and each generation older than the kept one as soon as a newer
  one is committed;
- syncs JAX's training state into the model before saving (on JAX it lives
  outside the model during an epoch; ``jax_state_sync`` is Keras' own way);
- on restart, loads the committed backup, and then, in the interrupted
  epoch, lets the first ``batches_done`` batches go by without training
  (they are drawn from the data, so the rest of the epoch sees the same
  batches in the same order as an uninterrupted run), with the running loss
  and metrics of those batches restored, so the epoch's logged loss is the
  mean over all its batches, as in an uninterrupted run;
- backs up at the end of every epoch as well;
- on JAX with several processes (``gpukeras.distribute.jax_cluster``), writes them into
  the shared folder on the chief alone; the other workers make the same
  backups (reading the state takes every worker) into a private temporary
  folder, and every worker restores from the shared one.

The folder. ``backup_files.check_dir`` refuses (BackupDirUnsafeError) a folder that is not
this user's, or that other users may write to (a group other than the
user's own private one, or everyone, as /tmp): there, another user could
plant a link where a backup is written, or a backup of their own that the
next run would load. Files are created exclusively, and the JSON and weights
are never opened through a link. It also checks that the folder can be
written to before training starts; a write that fails later (a full disk, a
quota, a file-size limit) is BackupWriteError, which says what to free and
where the last good backup is. Before Keras writes a weights file, the space
for it is reserved (``reserve``): HDF5 can crash the process when a write
fails in the middle of a file.

Not protected: a crash while a backup is being written can leave that
backup's uncommitted weights and adapters files in the folder (no committed
backup names them; a fit that resumes and completes removes them); a disk
that acknowledges a sync it did not make (some network file systems, disks
with volatile caches) can still lose both generations; another process
filling the disk between the reservation and Keras' write can still meet
HDF5's crash.

Exact resumption also needs the data order to depend only on the seed and
the epoch; ``gpukeras.data.adapters`` arranges that (see its notes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpukeras.core import compat
from gpukeras.core.errors import BackupMismatchError, BackupWriteError
from gpukeras.core.handles import Model
from gpukeras.core.runtime import config
from gpukeras.train import backup_files as files
from gpukeras.train import best_models, pretrained

STATE_FILE = "gpukeras-backup.json"
WEIGHTS_PREFIX = "gpukeras-weights-"
WEIGHTS_SUFFIX = ".weights.h5"
# The weights' names in format 1 (read still; multi-worker tests write such a backup).
WEIGHTS_PATTERN = "weights-{:06d}.weights.h5"
FORMAT = 2
# The fingerprint keys a resumed run must share with the run that wrote the backup (a key
# an older backup lacks is not compared).
# The request's fields a backup holds in its fingerprint (``training_fingerprint``).
REQUEST_KEYS = (
    "learning_rate",
    "accumulate",
    "clipnorm",
    "clipvalue",
    "class_weight",
    "ema",
    "keep_best",
    "keep_best_monitor",
)
MUST_MATCH = (
    "steps_per_epoch",
    "steps_per_execution",
    "seed",
    "batch_size",
    "weights",
    "layers",
    "inputs",
    "loss",
    "optimizer",
    *REQUEST_KEYS,
)


@dataclass
class BackupState:
    """A committed backup, as plain data.

    Attributes:
        epoch: the epoch (0-based) to continue in.
        batches_done: batches of that epoch already trained (0 at an epoch's start).
        weights: file name of the weights (in the backup folder).
        generation: counts backups.
        run: the fingerprint of the run that wrote it (``MUST_MATCH`` keys).
        seed_generators: states of the model's random seed generators, in order.
        history: epoch logs of the epochs finished so far.
        metrics: values of the model's metric variables (the running loss
            and metrics of the interrupted epoch), for a mid-epoch backup.
        size: the weights file's size in bytes (None in format 1).
        sha256: the weights file's SHA-256, hex (None in format 1).
        adapters: file name of the LoRA adapters, beside the weights (``pretrained``'s
            ``save_weights``); None for a model without them, and in a backup written
            before they were kept (it resumes as it did: each kernel with its adapters
            added, zero adapters).
        adapters_size: the adapters file's size in bytes (None without it).
        adapters_sha256: the adapters file's SHA-256, hex (None without it).
        previous: the generation committed before this one, kept as a fallback.
        owned: (set by ``resume_state``) every file the committed backup names
            (``files()``), which the run resuming from it removes in time.
        fallback: (set by ``resume_state``) why the newest backup was passed
            over for this one; None when this is the newest.
    """

    epoch: int
    batches_done: int
    weights: str
    generation: int
    run: dict[str, object] = field(default_factory=dict)
    seed_generators: list[list[int]] = field(default_factory=list)
    history: list[dict[str, float]] = field(default_factory=list)
    metrics: list[object] = field(default_factory=list)
    size: int | None = None
    sha256: str | None = None
    adapters: str | None = None
    adapters_size: int | None = None
    adapters_sha256: str | None = None
    previous: BackupState | None = None
    owned: list[str] = field(default_factory=list)
    fallback: str | None = None
    # the k best models so far, best first: epoch (from 1), value, file
    best: list[dict[str, object]] = field(default_factory=list)

    def files(self) -> list[str]:
        """The names of this generation's files: its weights, and its adapters where it has them."""
        return [self.weights, *([self.adapters] if self.adapters else [])]

    def record(self) -> dict[str, object]:
        """The generation as the JSON holds it (without ``previous`` and what resuming sets)."""
        return {
            "format": FORMAT,
            **{
                f.name: getattr(self, f.name)
                for f in dataclasses.fields(self)
                if f.name not in ("previous", "owned", "fallback")
            },
        }


def _state_of(data: dict) -> BackupState:
    previous = data.get("previous")
    return BackupState(
        epoch=int(data["epoch"]),
        batches_done=int(data["batches_done"]),
        weights=str(data["weights"]),
        generation=int(data["generation"]),
        run=dict(data.get("run", {})),
        seed_generators=[list(s) for s in data.get("seed_generators", [])],
        history=list(data.get("history", [])),
        metrics=list(data.get("metrics", [])),
        size=None if data.get("size") is None else int(data["size"]),
        sha256=None if data.get("sha256") is None else str(data["sha256"]),
        adapters=None if data.get("adapters") is None else str(data["adapters"]),
        adapters_size=None if data.get("adapters_size") is None else int(data["adapters_size"]),
        adapters_sha256=(
            None if data.get("adapters_sha256") is None else str(data["adapters_sha256"])
        ),
        previous=None if previous is None else _state_of(previous),
        best=[dict(entry) for entry in data.get("best", [])],
    )


def read_state(backup_dir: str) -> BackupState | None:
    """The committed backup in ``backup_dir`` (with its ``previous``); None when there is none.

    The JSON is opened without following a link. Its weights files are not
    checked here (``resume_state`` does).
    """
    path = Path(backup_dir) / STATE_FILE
    try:
        descriptor = os.open(path, os.O_RDONLY | files.NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise BackupMismatchError(
            f"The backup in {backup_dir} cannot be read ({files.why(error)}). Delete {path} (or "
            "the folder) to start training from the beginning."
        ) from error
    try:
        with os.fdopen(descriptor) as file:
            return _state_of(json.load(file))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise BackupMismatchError(
            f"The backup in {backup_dir} cannot be read ({error}). Delete {path} (or the "
            "folder) to start training from the beginning."
        ) from error


def resume_state(backup_dir: str) -> BackupState | None:
    """The backup to resume from: the newest committed one whose weights file (and adapters
    file, where it has one) is whole, else the one before it; None when there is none (a
    fresh start).

    Raises:
        BackupMismatchError: a backup is committed but neither generation can be
            used; it names the files to remove.
    """
    committed = read_state(backup_dir)
    if committed is None:
        return None
    owned = [name for s in (committed, committed.previous) if s is not None for name in s.files()]
    problems: list[str] = []
    for candidate in (committed, committed.previous):
        if candidate is None:
            continue
        problem = weights_problem(backup_dir, candidate)
        if problem is None:
            return dataclasses.replace(
                candidate,
                # numbering goes on after the newest, usable or not
                generation=committed.generation,
                previous=None,
                owned=owned,
                fallback=None
                if candidate is committed
                else f"the newest backup's {problems[0]}; resumed from the one before it",
            )
        problems.append(problem)
    names = ", ".join(owned)
    raise BackupMismatchError(
        f"The backup in {backup_dir} cannot be resumed: its {' and '.join(problems)} "
        "(a crash or a full disk while it was written?). Delete "
        f"{Path(backup_dir) / STATE_FILE} and {names} in that folder (or the folder, if it "
        "holds nothing else) to start training from the beginning."
    )


def weights_problem(backup_dir: str, state: BackupState) -> str | None:
    """What makes a generation's weights file, or its adapters file, unusable, in words (the
    file first: "weights (...) are missing"); None when they are whole."""
    problem = _file_problem(backup_dir, state.weights, state.size, state.sha256)
    if problem is not None:
        return f"weights {problem}"
    if state.adapters is None:
        return None
    adapters = _file_problem(backup_dir, state.adapters, state.adapters_size, state.adapters_sha256)
    return None if adapters is None else f"LoRA adapters {adapters}"


def _file_problem(backup_dir: str, name: str, size: int | None, sha256: str | None) -> str | None:
    """What makes the file ``name`` of a generation unusable, in words; None when it is whole
    (of ``size`` bytes and SHA-256 ``sha256``, where they are known)."""
    if not name or os.path.basename(name) != name or name in (".", ".."):
        return f"name {name!r}, which is not a file in the folder"
    path = os.path.join(backup_dir, name)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return f"({name}) are missing"
    except OSError as error:
        return f"({name}) cannot be read ({files.why(error)})"
    if not stat.S_ISREG(status.st_mode):
        return f"({name}) are not a plain file (a link?)"
    if status.st_size == 0:
        return f"({name}) are empty"
    if size is not None and status.st_size != size:
        return f"({name}) are {status.st_size} bytes, not the {size} written"
    if sha256 is not None:
        try:
            digest = files.sync_and_hash(path, sync=False)[1]
        except OSError as error:
            return f"({name}) cannot be read ({files.why(error)})"
        if digest != sha256:
            return f"({name}) are not what was written (their SHA-256 differs)"
    return None


def _write_failure(code: int, folder: str, kept: BackupState | None) -> BackupWriteError:
    """BackupWriteError: what failed, what to free or change, and where the last good backup is."""
    what = f"{os.strerror(code)}, {errno.errorcode.get(code, code)}"
    fixes = {
        errno.ENOSPC: "Free space on that disk, or give a backup_dir on another one",
        errno.EDQUOT: "Free space within your disk quota there, or give a backup_dir elsewhere",
        errno.EFBIG: "A limit on file sizes (ulimit -f) stops the write: raise it, or give a "
        "backup_dir on a file system that takes larger files",
        errno.EROFS: "That file system is read-only: give a backup_dir on a writable disk",
        errno.EACCES: f"Make {folder} writable for you (chmod u+w), or give another backup_dir",
        errno.EPERM: f"Make {folder} writable for you (chmod u+w), or give another backup_dir",
    }
    fix = fixes.get(code, "Check that disk, or give a backup_dir on another one")
    if kept is not None and not os.path.exists(os.path.join(folder, STATE_FILE)):
        last = (
            f"No backup is left in {folder} (removed during training): training starts over "
            "next time."
        )
    elif kept is None:
        last = "No backup had been committed yet: training starts over next time."
    else:
        last = (
            f"The last good backup is in {folder} (epoch {kept.epoch + 1}, {kept.batches_done} "
            "batches done): run the same call again to continue from it."
        )
    return BackupWriteError(
        f"Training stopped: a backup could not be written to {folder} ({what}). {fix} "
        f"(a backup takes about twice the size of the weights and optimizer state). {last}"
    )


def writes_here() -> bool:
    """Whether this process writes into ``backup_dir``: not a JAX worker other than the chief
    (see the module's notes)."""
    jax = sys.modules.get("jax")
    return jax is None or not jax.distributed.is_initialized() or jax.process_index() == 0


def _save_dir(backup_dir: str) -> str:
    """Where this process writes backups: ``backup_dir``, or on a JAX worker other than the
    chief a temporary folder of its own (see the module's notes)."""
    if writes_here():
        return backup_dir
    return tempfile.mkdtemp(prefix="gpukeras-worker-backup-")


def _plain_logs(logs: dict | None) -> dict[str, float]:
    out = {}
    for name, value in (logs or {}).items():
        with contextlib.suppress(TypeError, ValueError):
            out[str(name)] = float(value)
    return out


def backup_callback(
    backup_dir: str,
    save_freq: str | int,
    run: dict[str, object],
    state: BackupState | None,
    keras_fit: bool = True,
) -> object:
    """The backup callback for one gpu_fit() (see the module's notes).

    Args:
        backup_dir: the folder (see ``backup_files.check_dir``).
        save_freq: "epoch", or a number of batches between backups (and one at
            every epoch's end too).
        run: this run's fingerprint, stored with each backup.
        state: the backup to resume from (``resume_state``), or None.
        keras_fit: whether Keras' ``fit()`` trains. Otherwise (the multi-worker
            loop) the loop lets a resumed epoch's first batches go by itself,
            and the metrics' running values are neither kept nor restored
            (reading them there is an exchange every worker must make).

    Returns:
        A ``keras.callbacks.BackupAndRestore`` subclass instance, with
        ``save_now()`` (see ``gpukeras.train.preempt``). Its wrapper of
        ``train_function`` takes its place among others by
        ``compat.TRAIN_FUNCTION_LAYERS``, wherever the callback is in ``fit()``'s list.
    """
    keras = config.keras()
    spe = int(run.get("steps_per_execution") or 1)  # type: ignore[call-overload]

    callback_base: Any = keras.callbacks.BackupAndRestore  # Keras has no types

    class ExactBackupAndRestore(callback_base):
        """BackupAndRestore with durable, atomic backups and an exact mid-epoch resume."""

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
            # The last committed generation (kept until the next is), and every file (weights,
            # adapters) this run is to remove in time: those it wrote, and those the backup it
            # resumed from names (in the shared folder the chief alone owns them).
            self.kept = state
            self.owned: list[str] = (
                list(state.owned) if state and self.save_dir == backup_dir else []
            )
            # Where the last committed backup is (epoch, batches done): nothing to save there.
            self.committed_at = (state.epoch, state.batches_done) if state else None
            # The k best models, as the resumed backup had them (gpu_backup(keep_best = )).
            self.best = (
                best_models.BestModels(
                    self.save_dir,
                    int(run["keep_best"]),  # type: ignore[call-overload]
                    str(run.get("keep_best_monitor") or "val_loss"),
                    list(state.best) if state else [],
                )
                if run.get("keep_best")
                else None
            )

        # Loading -----------------------------------------------------------
        def on_train_begin(self, logs: dict | None = None) -> None:
            model = self.model
            if self.resumed is None:
                return
            if self.best is not None:
                self.best.clean()
            if model.optimizer is not None and not model.optimizer.built:
                model.optimizer.build(model.trainable_variables)
            weights = os.path.join(backup_dir, self.resumed.weights)
            try:
                pretrained.load_weights(model, weights)  # the adapters beside, where kept
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
            # The model holds that many batches of the epoch while they go by again.
            self.batches_done = self.skip_batches = self.resumed.batches_done
            self.restored = True
            if self.skip_batches and keras_fit:
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
            if epoch != getattr(self.resumed, "epoch", None):
                self.skip_batches = 0
            elif self.skip_batches and keras_fit and self.resumed.metrics:  # type: ignore[union-attr]
                # Keras has just reset the metrics; the skipped batches' share comes back.
                for variable, value in zip(self.model.metrics_variables, self.resumed.metrics):  # type: ignore[union-attr]
                    variable.assign(keras.ops.convert_to_tensor(value, dtype=variable.dtype))

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if batch < self.skip_batches:  # a batch the resumed epoch let go by
                compat.backup_batch_passed(self, batch)
                self.batches_done = self.skip_batches
                return
            self.batches_done = batch + 1
            if compat.backup_due(self, batch):
                self._commit_backup()

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self.skip_batches = 0
            self.history.append({"epoch": epoch + 1, **_plain_logs(logs)})
            self.epoch, self.batches_done = epoch + 1, 0
            compat.backup_count_restart(self)
            if self.best is not None:
                self.best.consider(self.model, epoch + 1, logs)
            self._commit_backup()
            if self.best is not None:
                self.best.committed()

        def save_now(self) -> None:
            """Back up where training is now, unless the last committed backup holds it."""
            if self.committed_at != (self.epoch, self.batches_done):
                self._commit_backup()

        def _commit_backup(self) -> None:
            """Write, sync and commit one backup; then remove what the kept one replaces."""
            model = self.model
            if hasattr(model, "jax_state_sync"):
                model.jax_state_sync()  # JAX keeps the trained state outside the model
            try:
                committed = self._write(model)
            except Exception as error:
                code = files.write_errno(error)
                if code is None:
                    raise
                raise _write_failure(code, self.save_dir, self.kept) from error
            keep = {*committed.files(), *(self.kept.files() if self.kept else [])}
            self.kept = committed
            self.committed_at = (committed.epoch, committed.batches_done)
            for name in [n for n in self.owned if n not in keep]:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.save_dir, name))
                self.owned.remove(name)

        def _new_files(self, model: Model) -> list[str]:
            """This generation's new files, created exclusively, of names no other file has:
            its weights file and, for a model whose adapters are kept apart
            (``pretrained.saves_adapters``), its adapters file beside it."""
            while True:
                descriptor, path = tempfile.mkstemp(
                    dir=self.save_dir,
                    prefix=f"{WEIGHTS_PREFIX}{self.generation:06d}-",
                    suffix=WEIGHTS_SUFFIX,
                )
                os.close(descriptor)
                if not pretrained.saves_adapters(model):
                    return [path]
                adapters = pretrained.adapters_file(path)
                try:
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | files.NOFOLLOW
                    os.close(os.open(adapters, flags, 0o600))
                except FileExistsError:  # a file of that name is there: other names
                    os.unlink(path)
                    continue
                return [path, adapters]

        def _write(self, model: Model) -> BackupState:
            self.generation += 1
            paths = self._new_files(model)
            names = [os.path.basename(path) for path in paths]
            self.owned.extend(names)
            written = None if self.kept is None else self.kept.size
            if self.kept is not None and self.kept.adapters_size is not None:
                written = (written or 0) + self.kept.adapters_size
            try:
                files.reserve(self.save_dir, files.weights_estimate(model, written))
                # Keras (and KerasHub) write by path: the files made just now, in a folder only
                # this user writes; the adapters (if any) into the second.
                pretrained.save_weights(model, paths[0])
                size, digest = files.sync_and_hash(paths[0])
                adapters = files.sync_and_hash(paths[1]) if len(paths) > 1 else None
                committed = BackupState(
                    epoch=self.epoch,
                    batches_done=self.batches_done,
                    weights=names[0],
                    generation=self.generation,
                    run=self.run,
                    seed_generators=[
                        [int(v) for v in keras.ops.convert_to_numpy(g.state.value).tolist()]
                        for g in compat.seed_generators(model)
                    ],
                    history=list(self.history),
                    metrics=[
                        keras.ops.convert_to_numpy(v.value).tolist()
                        for v in model.metrics_variables
                    ]
                    if self.batches_done and keras_fit
                    else [],
                    size=size,
                    sha256=digest,
                    adapters=names[1] if adapters else None,
                    adapters_size=adapters[0] if adapters else None,
                    adapters_sha256=adapters[1] if adapters else None,
                    best=list(self.best.entries) if self.best is not None else [],
                )
                record = committed.record()
                record["previous"] = None if self.kept is None else self.kept.record()
                files.commit_json(self.save_dir, STATE_FILE, record)
            except BaseException:
                for path, name in zip(paths, names):
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                    self.owned.remove(name)
                raise
            return committed

        def on_train_end(self, logs: dict | None = None) -> None:
            # Training completed (on an error Keras never gets here, and the backup stays):
            # remove the commit first (so no backup names a removed file), then the weights
            # files this run owns, what a killed run's write left, and the folder if empty.
            compat.unwrap_train_function(self.model, "resume")
            Path(self.save_dir, STATE_FILE).unlink(missing_ok=True)
            for name in self.owned:
                Path(self.save_dir, name).unlink(missing_ok=True)
            self.owned = []
            files.remove_leftovers(
                self.save_dir, WEIGHTS_PREFIX, (WEIGHTS_SUFFIX, pretrained.ADAPTERS_SUFFIX)
            )
            with contextlib.suppress(OSError):
                Path(self.save_dir).rmdir()

    return ExactBackupAndRestore()
