"""Failures during training and in reading data, translated into classed errors that say what to do.

TensorFlow reports a batch it could not make (a corrupt image, a missing
file) as an op error deep in a traceback, and Keras reports data that does
not fit the model as a ValueError whose first lines name the layer. Users
see neither: these functions pick the informative line and wrap it in a
``BadDataError`` that says where training stopped and what progress was
kept. gpu_fit(), multi-worker training, gpu_batch_size(), gpu_quantize() and
the pipeline benchmark all translate with them, so the same failure reads
the same everywhere. An error raised in a callback the user gave is the
user's (``callback_error``), not a failure of gpukeras. TensorFlow is never
imported here: its errors can only come from a process that has imported it.
"""

from __future__ import annotations

import contextlib
import re
import sys
import traceback

from gpukeras import backup
from gpukeras.errors import BadDataError, CallbackError, GpukerasError

# TensorFlow errors that mean a batch could not be made or read.
DATA_ERRORS = ("InvalidArgumentError", "DataLossError", "NotFoundError")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Keras makes parts of its messages bold


def cause(error: Exception) -> str:
    """The informative line of a TensorFlow error message (its op and cause)."""
    text = getattr(error, "message", None) or str(error)
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    useful = [
        line
        for line in lines
        if not line.startswith(("Graph execution error", "Detected at node", "File ", "[["))
        and "defined at (most recent call last)" not in line
    ]
    chosen = useful[-1] if useful else (lines[-1] if lines else type(error).__name__)
    chosen = re.sub(r"\{\{function_node[^}]*\}\}\s*", "", chosen)
    chosen = re.sub(r"^.*with iterator: Iterator::\S+\s+", "", chosen)
    return chosen.split("\t")[0].split(" [[")[0].strip()


def last_line(error: Exception) -> str:
    """The last line of an error message: TensorFlow puts the cause there, after its trace."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def error_message(error: BaseException) -> str:
    """The informative line of an error: TensorFlow's op error cause, or the first line
    of a Keras error (without its "Exception encountered" header and argument list)."""
    if type(error).__name__.endswith("Error") and hasattr(error, "op"):  # a TensorFlow OpError
        return cause(error)  # type: ignore[arg-type]
    text = ANSI.sub("", str(error)).split("Arguments received by")[0]
    lines = [line.strip() for line in text.splitlines()]
    useful = [line for line in lines if line and not line.startswith("Exception encountered")]
    return useful[0] if useful else type(error).__name__


def refused_data(error: BaseException, what: str = "train on this data") -> BadDataError | None:
    """The model refusing data as a classed error; None for errors of another kind.

    Keras checks data against the model (input shapes, dtypes, data types it
    can read) when it first meets it, with a ValueError or TypeError;
    TensorFlow may instead fail in the op (InvalidArgumentError).
    """
    refused = isinstance(error, (ValueError, TypeError)) or (
        type(error).__name__ == "InvalidArgumentError"
    )
    if not refused:
        return None
    message = error_message(error).rstrip(".")
    return BadDataError(
        f"The model cannot {what}: {message}. Give x and y that match the model's inputs "
        f"and outputs, as gpu_fit() takes them.{_channels_hint(message)}"
    )


# Keras' words when an image's channels are not the model's (TensorFlow and JAX alike).
CHANNELS_REFUSED = re.compile(
    r"expected axis -1 of input shape to have value (\d+), but received input with "
    r"shape \([^)]*?(\d+)\)"
)
COLOR_MODES = {1: "grayscale", 3: "rgb", 4: "rgba"}


def _channels_hint(message: str) -> str:
    """What reads images with the channels the model wants, when channels are the mismatch."""
    found = CHANNELS_REFUSED.search(message)
    if found is None:
        return ""
    wanted, given = (int(group) for group in found.groups())
    if wanted not in COLOR_MODES or given not in COLOR_MODES:
        return ""
    return (
        f" The model takes images with {wanted} channel(s) and the data has {given}: for an "
        f'image folder, gpu_dataset(color_mode = "{COLOR_MODES[wanted]}") reads '
        f'{wanted} channel(s) (the default, "rgb", reads 3).'
    )


def data_error(
    error: Exception, position: dict[str, int], backup_dir: str | None, given_dataset: bool = True
) -> BadDataError | None:
    """A classed error for TensorFlow failing on the data mid-training; None for other errors.

    The message names the cause, where training stopped, and what progress is
    kept: the last committed backup, if ``backup_dir`` holds one. For a
    dataset given by the user it also says to make the dataset again: measured
    with TF 2.21, after an element fails inside ``dataset.repeat()`` (how Keras
    gets it here), an in-memory ``cache()`` in the dataset may complete without
    that element, so the same dataset object would later train on less data
    without a word.

    Args:
        error: what training raised.
        position: the epoch and batch it stopped at (0-based ``epoch`` and ``batch``).
        backup_dir: the run's backup folder, or None.
        given_dataset: whether the data was a dataset the user made (rather
            than one made here from arrays).
    """
    unreadable = unreadable_batch(error)
    if unreadable is None:
        return None
    where = f"epoch {position['epoch'] + 1}, batch {position['batch'] + 1}"
    kept = progress_kept(backup_dir, "fix the data")
    again = (
        " Make the dataset again (gpu_dataset()) before training again: its in-memory cache "
        "may now hold the data without the bad element."
        if given_dataset
        else ""
    )
    return BadDataError(f"Training stopped at {where}: {unreadable}{kept}{again}")


def progress_kept(backup_dir: str | None, fix: str) -> str:
    """What progress a stopped run kept, in a sentence that starts with a space: the last
    committed backup in ``backup_dir``, if any; ``fix`` says what to do before running again."""
    if backup_dir is None:
        return " Nothing was kept: with backup_dir, the same call continues after such an error."
    saved = None
    with contextlib.suppress(GpukerasError):
        saved = backup.read_state(backup_dir)
    if saved is None:
        return (
            f" No backup had been written to {backup_dir} yet (one is written every "
            "epoch, or every backup_freq batches); training starts over next time."
        )
    return (
        f" Progress is kept in {backup_dir} (epoch {saved.epoch + 1}, "
        f"{saved.batches_done} batches done): {fix} and run the same call "
        "again to continue from there."
    )


def callback_error(
    error: BaseException, callbacks: list[object], epoch: int, backup_dir: str | None
) -> CallbackError | None:
    """A callback the user gave failing, as a classed error; None for an error raised elsewhere.

    Told by where it was raised: a frame of its traceback runs a hook
    (``on_...``) of one of ``callbacks``, a method of its class or the function
    given to a ``LambdaCallback``. The message names the callback, the hook,
    the error and the line it was raised at, and what progress was kept.

    Args:
        error: what training raised.
        callbacks: the callbacks the user gave.
        epoch: the 0-based epoch training stopped in.
        backup_dir: the run's backup folder, or None.
    """
    hooks: dict[object, tuple[object, str]] = {}
    for callback in callbacks:
        for name in dir(callback):
            if name.startswith("on_"):
                hook = getattr(callback, name, None)
                code = getattr(getattr(hook, "__func__", hook), "__code__", None)
                if code is not None:
                    hooks.setdefault(code, (callback, name))
    frame = error.__traceback__
    while frame is not None and frame.tb_frame.f_code not in hooks:
        frame = frame.tb_next
    if frame is None:
        return None
    callback, name = hooks[frame.tb_frame.f_code]
    own = frame.tb_frame.f_locals.get("self")
    if any(own is given for given in callbacks):
        callback = own
    raised = traceback.extract_tb(error.__traceback__)[-1]
    said = f": {error_message(error).rstrip('.')}" if str(error) else ""
    return CallbackError(
        f"Your callback {type(callback).__name__}.{name} raised {type(error).__name__}{said} "
        f"(at {raised.filename}, line {raised.lineno}). "
        f"Training stopped in epoch {epoch + 1}.{progress_kept(backup_dir, 'fix the callback')}"
    )


def unreadable_batch(error: Exception) -> str | None:
    """What to say when TensorFlow could not make a batch from the data; None for other errors."""
    tf = sys.modules.get("tensorflow")
    if tf is None or not isinstance(error, tf.errors.OpError):
        return None
    if type(error).__name__ not in DATA_ERRORS:
        return None
    return (
        f"a batch could not be made from the data ({type(error).__name__}: {cause(error)}). "
        "Check the files or values the dataset reads (a corrupt or truncated image, a wrong label)."
    )
