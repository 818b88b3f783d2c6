"""Carry a training run to a child process and back: gpu_fit(background = TRUE).

The R side runs training in a child R process (a callr session), so a crash there (a
signal, an abort, an out-of-memory kill) cannot take the user's session down,
and all memory the run held goes back when the child ends. This module does
the Python part of the carrying:

- the model goes as a ``.keras`` file. A model that would not load in a fresh
  process is refused before any child starts: one that cannot be saved (a
  custom layer without ``get_config``), or one naming a class that a fresh
  Python cannot import (defined in ``__main__``, e.g. by
  ``reticulate::py_run_string()``);
- callbacks go pickled (a lambda, or a callback holding something that
  cannot be pickled, is refused, named);
- a learning-rate schedule made in Python goes as its Keras config;
- R data goes as ``.npy`` files (``save_array``), which the child, or a worker of
  gpu_cv() and gpu_search(), memory-maps (``load_array``);
- the trained weights come back with the optimizer's state, as one
  ``.weights.h5`` file loaded into the user's model object (a KerasHub preset's LoRA
  adapters in a file beside it: ``pretrained.save_weights``);
- a progress callback in the child writes where training is, a few times a
  second at most, to a small file the parent reads.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from gpukeras.core.errors import GpukerasError
from gpukeras.core.files import write_atomic
from gpukeras.core.handles import Model
from gpukeras.core.runtime import config
from gpukeras.train import pretrained
from gpukeras.train.backup_files import full, why

MODEL_FILE = "model.keras"
CALLBACKS_FILE = "callbacks.pkl"
PROGRESS_FILE = "progress.dcf"
EPOCHS_FILE = "epochs.tsv"
# Progress is written at most this often (and at every epoch's end).
PROGRESS_SECONDS = 0.5


class NotCarriableError(GpukerasError):
    """Something given to gpu_fit(background = TRUE) cannot reach the child process."""

    r_class = "gpukeras_error_not_carriable"


class JobWriteError(GpukerasError):
    """A file of a background job could not be written to its folder (a full disk, a quota)."""

    r_class = "gpukeras_error_job_write"


def _write_failed(what: str, folder: str, error: OSError) -> JobWriteError:
    """JobWriteError: what, where, why, and what to free (the R side's job_write_failed())."""
    return JobWriteError(
        f"{what} could not be written to the job's folder {folder} ({why(error)}). Background "
        "jobs write in R's temporary folder (tempdir()): free space on its disk, or start R "
        "with TMPDIR set to a folder on a disk with room."
    )


def _classes(config_tree: object) -> list[tuple[str | None, str]]:
    """(module, class name) of every object a saved Keras config names.

    The module is None for a custom class that was never registered: Keras
    then finds it by name only, in a registry a fresh process does not have.
    """
    found = []
    if isinstance(config_tree, dict):
        if "class_name" in config_tree and "config" in config_tree:
            module = config_tree.get("module")
            found.append(
                (module if isinstance(module, str) else None, str(config_tree["class_name"]))
            )
        for value in config_tree.values():
            found.extend(_classes(value))
    elif isinstance(config_tree, list):
        for value in config_tree:
            found.extend(_classes(value))
    return found


def _loadable(module: str | None, name: str) -> bool:
    """Would a fresh Python (with the same sys.path) find class ``name`` in ``module``?"""
    if module is None or module == "__main__":
        return False
    if module == "keras" or module.startswith("keras."):
        return True
    loaded = sys.modules.get(module)
    if loaded is not None:
        return getattr(loaded, "__file__", None) is not None and hasattr(loaded, name)
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None


def _first_paragraph(error: Exception) -> str:
    return str(error).strip().split("\n\n")[0].replace("\n", " ")


def carry_model(model: object, job_dir: str) -> dict[str, object]:
    """Save ``model`` to ``job_dir`` as a ``.keras`` file the child can load.

    Raises:
        NotCarriableError: the model is not compiled, cannot be saved, or names
            a class a fresh Python cannot import; the message names it.
    """
    keras = config.keras()
    if not isinstance(model, keras.Model):
        raise NotCarriableError(
            "`model` must be a Keras 3 model to train in the background, not "
            f"{type(model).__name__}."
        )
    if not getattr(model, "compiled", False):
        raise NotCarriableError(
            "The model is not compiled: call model$compile(optimizer = , loss = ) before gpu_fit()."
        )
    path = os.path.join(job_dir, MODEL_FILE)
    try:
        pretrained.save_model(model, path)  # a KerasHub preset's with its preset and LoRA
    except OSError as error:
        if not full(error):
            raise
        raise _write_failed("The model (model.keras)", job_dir, error) from error
    except Exception as error:  # Keras says which layer lacks get_config()
        raise NotCarriableError(
            f"The model cannot be saved, so it cannot be carried to a background process "
            f"({type(error).__name__}: {_first_paragraph(error)}). Give each custom layer a "
            "get_config() (and register it with keras.saving.register_keras_serializable()), "
            "or train with background = FALSE."
        ) from error
    with zipfile.ZipFile(path) as saved:
        names = _classes(json.loads(saved.read("config.json")))
    missing = sorted(
        {
            f"{name} ({module or 'not registered'})"
            for module, name in names
            if not _loadable(module, name)
        }
    )
    if missing:
        Path(path).unlink(missing_ok=True)
        raise NotCarriableError(
            f"The model uses {', '.join(missing)}, which a fresh Python process cannot import, "
            "so it cannot be carried to a background process. Define custom classes in a Python "
            "module (a .py file on sys.path) and register them with "
            "keras.saving.register_keras_serializable(), or train with background = FALSE."
        )
    return {"model": path, "sys_path": [entry for entry in sys.path if entry]}


def carry_callbacks(callbacks: list[object], job_dir: str) -> str:
    """Pickle ``callbacks`` into ``job_dir``; a NotCarriableError names one that cannot be."""
    for callback in callbacks:
        try:
            pickle.dumps(callback)
        except Exception as error:
            raise NotCarriableError(
                f"The callback {type(callback).__name__} cannot be carried to a background "
                f"process: it cannot be pickled ({type(error).__name__}: "
                f"{_first_paragraph(error)}). Use a callback class defined in a Python module "
                "(not a lambda or a LambdaCallback), or train with background = FALSE."
            ) from error
    path = os.path.join(job_dir, CALLBACKS_FILE)
    try:
        with open(path, "wb") as out:
            pickle.dump(list(callbacks), out)
    except OSError as error:
        if not full(error):
            raise
        raise _write_failed("The callbacks (callbacks.pkl)", job_dir, error) from error
    return path


def carry_schedule(schedule: object) -> dict[str, object]:
    """A Keras learning-rate schedule as its serialized config (plain data)."""
    keras = config.keras()
    try:
        return dict(keras.saving.serialize_keras_object(schedule))
    except Exception as error:
        raise NotCarriableError(
            f"The learning-rate schedule {type(schedule).__name__} cannot be carried to a "
            f"background process ({type(error).__name__}: {error}). Use lr_warmup_cosine(), "
            "lr_exponential() or lr_cyclical(), or train with background = FALSE."
        ) from error


def carry(
    model: object, job_dir: str, callbacks: list[object] | None = None, schedule: object = None
) -> dict[str, object]:
    """What gpu_fit(background = TRUE) carries to its child, before the child starts: the
    model (``carry_model``), the callbacks where there are any (``carry_callbacks``) and a
    Keras learning-rate schedule (``carry_schedule``). Returns what ``load_carried`` needs
    besides the folder: ``sys_path`` and ``schedule`` (its config; None without one).

    Raises:
        NotCarriableError: one of them cannot be carried (the message names it).
        JobWriteError: the folder's disk is full (the message names the file).
    """
    carried = carry_model(model, job_dir)
    if callbacks:
        carry_callbacks(list(callbacks), job_dir)
    return {
        "sys_path": carried["sys_path"],
        "schedule": carry_schedule(schedule) if schedule is not None else None,
    }


def load_carried(
    job_dir: str, sys_path: list[str], schedule: dict | None = None
) -> dict[str, object]:
    """In the child: the model, callbacks and schedule the parent carried."""
    for entry in sys_path:
        if entry not in sys.path:
            sys.path.append(entry)
    keras = config.keras()
    path = os.path.join(job_dir, MODEL_FILE)
    model = pretrained.load_model(path) or keras.saving.load_model(path)
    callbacks = []
    pickled = Path(job_dir, CALLBACKS_FILE)
    if pickled.exists():
        with open(pickled, "rb") as source:
            callbacks = pickle.load(source)
    return {
        "model": model,
        "callbacks": callbacks,
        "schedule": keras.saving.deserialize_keras_object(schedule) if schedule else None,
    }


def save_array(array: np.ndarray, path: str) -> str:
    """An array R sent, as the ``.npy`` file ``path`` (NumPy's own error on a full disk:
    R tells that case apart by the disk's free space)."""
    np.save(path, array)
    return path


def disk_full(folder: str) -> bool | None:
    """Whether the disk holding ``folder`` (or its nearest existing parent) has less than
    1 MiB left for a normal user; None where that cannot be told."""
    path = Path(folder)
    while not path.exists() and path.parent != path:
        path = path.parent
    try:
        return shutil.disk_usage(path).free < 1024 * 1024
    except OSError:
        return None


def save_arrays(arrays: dict[str, Any], job_dir: str, name: str) -> dict[str, Any]:
    """The arrays R sent (``x``, an array or a dict of them, ``y``, ``sample_weight``) as
    ``.npy`` files ``<name>-<part>.npy`` in ``job_dir``: ``files``, their paths by part
    (None for a part not given); or, where the disk holding ``job_dir`` filled up
    (NumPy's own error is a bare OSError), ``failed``, the file that could not be written,
    which R names in its error."""

    def save(array: Any, part: str) -> str:
        file = f"{name}-{part}.npy"
        try:
            return save_array(array, str(Path(job_dir, file)))
        except OSError as error:
            if full(error) or disk_full(job_dir):
                raise _Unwritten(file) from error
            raise

    x = arrays["x"]
    try:
        files = {
            "x": {key: save(value, f"x-{key}") for key, value in x.items()}
            if isinstance(x, dict)
            else save(x, "x"),
            **{
                part: save(arrays[part], part) if arrays.get(part) is not None else None
                for part in ("y", "sample_weight")
            },
        }
    except _Unwritten as unwritten:
        return {"failed": str(unwritten)}
    return {"files": files}


class _Unwritten(Exception):
    """A job file a full disk kept from being written (save_arrays)."""


def load_array(path: str, rows: list[int] | None = None) -> np.ndarray:
    """The array ``save_array`` wrote, memory-mapped copy-on-write: pages are read as
    training needs them, and nothing written to the array reaches the file. With ``rows``
    (0-based), those rows alone, as one C-order copy."""
    if rows is None:
        return np.load(path, mmap_mode="c")
    index = np.asarray(rows, dtype="int64")
    return np.ascontiguousarray(np.take(np.load(path, mmap_mode="r"), index, axis=0))


def save_trained(model: Model, path: str) -> str:
    """In the child: the trained weights with the optimizer's state."""
    if hasattr(model, "jax_state_sync"):
        model.jax_state_sync()
    pretrained.save_weights(model, path)  # a KerasHub preset's LoRA adapters beside them
    return path


def load_trained(model: Model, path: str) -> bool:
    """In the parent: load the child's trained weights and optimizer state into ``model``."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)
    pretrained.load_weights(model, path)
    return True


def _dcf(fields: dict[str, object]) -> str:
    return "".join(f"{key}: {value}\n" for key, value in fields.items() if value is not None)


def _gpu_fields(sampler: object) -> dict[str, object]:
    """The latest NVML reading of each watched GPU: mean utilization, memory used in all."""
    latest = {sample.gpu: sample for sample in getattr(sampler, "samples", [])[-16:]}
    if not latest:
        return {}
    readings = [s.utilization_gpu for s in latest.values() if s.utilization_gpu is not None]
    return {
        "gpu_utilization": sum(readings) / len(readings) if readings else None,
        "gpu_memory_used_mib": sum(s.memory_used_mib for s in latest.values()),
    }


def progress_callback(
    job_dir: str,
    attempt: int,
    batch_size: int | None = None,
    nvml_indices: list[int] | None = None,
    arrays: bool = False,
) -> object:
    """A Keras callback writing where training is to ``progress.dcf`` in ``job_dir``.

    Fields: ``attempt``, ``epoch`` (1-based), ``epochs``, ``batch`` (batches
    done in the epoch), ``steps``, ``batches_per_second`` and
    ``samples_per_second`` (since the last write), ``time``, the latest
    ``log_<metric>`` and, on a GPU, ``gpu_utilization`` (%) and
    ``gpu_memory_used_mib`` from the monitor's NVML sampler (at 2 Hz, on the
    GPUs the model trains on, or ``nvml_indices``). Each finished epoch also
    adds a line to ``epochs.tsv``. ``batch_size`` None with ``arrays``: the
    batches the arrays adapter makes by default.
    """
    from gpukeras.data.adapters import DEFAULT_BATCH_SIZE
    from gpukeras.gpu.samplers import UtilizationSampler
    from gpukeras.train.live import as_keras_shows
    from gpukeras.train.training_run import gpus_in_use

    keras = config.keras()
    if batch_size is None and arrays:
        batch_size = DEFAULT_BATCH_SIZE
    progress = Path(job_dir, PROGRESS_FILE)
    epochs_file = Path(job_dir, EPOCHS_FILE)

    callback_base: Any = keras.callbacks.Callback

    class Progress(callback_base):
        gpukeras_per_dispatch = True  # counts batches at dispatch ends (fit's _every_batch)

        def __init__(self) -> None:
            super().__init__()
            self.epoch = 0
            self.last = (time.monotonic(), 0)
            self.rate: float | None = None
            self.sampler: UtilizationSampler | None = None

        def on_train_begin(self, logs: dict | None = None) -> None:
            indices = nvml_indices
            if indices is None:
                rows = gpus_in_use(keras, self.model)
                indices = [row["nvml_index"] for row in rows if row.get("nvml_index") is not None]
            self.sampler = UtilizationSampler(list(indices), hz=2.0).__enter__()

        def on_train_end(self, logs: dict | None = None) -> None:
            if self.sampler is not None:
                self.sampler.__exit__(None, None, None)

        def _write(self, batch: int, logs: dict | None) -> None:
            now = time.monotonic()
            then, batches = self.last
            if batch > batches and now > then:
                self.rate = (batch - batches) / (now - then)
            self.last = (now, batch)
            fields = {
                "attempt": attempt,
                "epoch": self.epoch + 1,
                "epochs": self.params.get("epochs"),
                "batch": batch,
                "steps": self.params.get("steps"),
                "batches_per_second": self.rate,
                "samples_per_second": self.rate * batch_size if self.rate and batch_size else None,
                "time": time.time(),
                **_gpu_fields(self.sampler),
            }
            for name, value in (logs or {}).items():
                try:
                    fields[f"log_{name}"] = float(value)
                except (TypeError, ValueError):
                    continue
            try:
                write_atomic(progress, _dcf(fields), mode=None)
            except OSError as error:  # not the user's callback failing: the job's disk
                if not full(error):
                    raise
                raise _write_failed("Progress (progress.dcf)", job_dir, error) from error

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.epoch = epoch
            self.last = (time.monotonic(), 0)
            self._write(0, None)

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if time.monotonic() - self.last[0] >= PROGRESS_SECONDS:
                self._write(batch + 1, logs)

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self._write(int(self.params.get("steps") or 0), logs)
            values = "\t".join(
                f"{name}={as_keras_shows(value)}" for name, value in (logs or {}).items()
            )
            try:
                with open(epochs_file, "a") as out:
                    out.write(f"{epoch + 1}\t{values}\n")
            except OSError as error:
                if not full(error):
                    raise
                raise _write_failed("Progress (epochs.tsv)", job_dir, error) from error

    return Progress()
