"""What every file source of gpu_dataset() shares: the Source it makes, TensorFlow, its files.

A source (``csv_source``, ``image_source``, ``tfrecord_source``; see
``gpukeras.data.sources``) finds its files with ``match_files`` (a glob, one
file, or a folder), gets TensorFlow from ``tensorflow()`` (on any Keras
backend, without letting it take the GPUs a JAX backend trains on), and
returns a ``Source``: an unbatched tf.data dataset and plain facts about it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys
from dataclasses import dataclass
from types import ModuleType

from gpukeras.core import compat
from gpukeras.core.errors import MissingFilesError, TensorflowMissingError
from gpukeras.core.handles import Dataset, Record
from gpukeras.core.runtime import _native_stderr_silenced, config
from gpukeras.core.stack import INSTALL_HINT


@dataclass
class Source:
    """A streamed file source, before batching.

    Attributes:
        dataset: an unbatched ``tf.data.Dataset``; each element is
            ``(features, label)``, or the features alone when there is no label.
        kind: "csv", "image_folder" or "tfrecord".
        info: plain data for printing: ``files`` (count), ``rows`` (None when
            unknown without reading every file), ``label``, and per kind the
            columns, class names or features.
    """

    dataset: Dataset
    kind: str
    info: Record


def tensorflow() -> ModuleType:
    """TensorFlow for tf.data, which needs it whatever the Keras backend.

    On the TensorFlow backend it is started through ``config`` (stack checked,
    start-up log hidden). On another backend TensorFlow only reads files, so
    its GPUs are hidden from it before it starts: otherwise its first op would
    reserve most of the GPU memory the backend that trains needs. Hiding them
    lists them, which starts CUDA in this process, and CUDA reads
    CUDA_VISIBLE_DEVICES only then: a later gpu_setup(devices = ) on JAX is
    refused (``setup._refuse_devices_cuda_fixed``), not silently ignored.
    """
    if config.backend == "tensorflow":
        return config.backend_module()
    # As config.keras() does; its own start may have set the level already, and
    # only a user who asked for TensorFlow's info lines (level 0) sees them.
    if config.quiet:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    quiet = config.quiet and os.environ["TF_CPP_MIN_LOG_LEVEL"] != "0"
    loaded = "tensorflow" in sys.modules
    try:
        with _native_stderr_silenced() if quiet else contextlib.nullcontext():
            import tensorflow as tf

            if not loaded:  # seeding left it out (compat.set_random_seed)
                compat.seed_loaded_tensorflow(tf)

            # Hiding the GPUs starts CUDA in TensorFlow, whose absl lines go to stderr too;
            # once TensorFlow has started, its devices can no longer change (RuntimeError).
            with contextlib.suppress(RuntimeError):
                tf.config.set_visible_devices([], "GPU")
    except ImportError as error:
        raise TensorflowMissingError(
            "gpu_dataset() builds tf.data pipelines, which need TensorFlow (also when "
            f"the Keras backend is {config.backend}), and TensorFlow is not installed in the "
            f"Python at {sys.executable}. {INSTALL_HINT}, or `pip install tensorflow-cpu` "
            "in that environment."
        ) from error
    return tf


def expand(path: str) -> str:
    """``~`` expanded, as R users write paths."""
    return os.path.expanduser(str(path))


def match_files(pattern: str, directory_patterns: tuple[str, ...], what: str) -> list[str]:
    """Files matching a glob, a single file, or a directory's files matching ``directory_patterns``.

    Raises:
        MissingFilesError: when nothing matches.
    """
    expanded = expand(pattern)
    if os.path.isdir(expanded):
        found = {
            path
            for name in directory_patterns
            for path in glob.glob(os.path.join(glob.escape(expanded), name))
        }
        where = f"in the folder '{pattern}' (looked for {', '.join(directory_patterns)})"
    elif os.path.isfile(expanded):
        found = {expanded}
        where = ""
    else:
        found = set(glob.glob(expanded, recursive=True))
        where = f"match '{pattern}'"
    files = sorted(path for path in found if os.path.isfile(path))
    if not files:
        raise MissingFilesError(
            f"No {what} files {where}. Check the path or glob pattern (a relative path "
            f'starts at the working directory, {os.getcwd()}), e.g. "data/*.csv".'
        )
    return files


def quoted(names: list[str]) -> str:
    """Names in double quotes, comma-separated, as a message lists them."""
    return ", ".join(f'"{name}"' for name in names)
