"""Failures during training as classed errors that say where training stopped and what
progress was kept: the device running out of memory (``out_of_memory``), TensorFlow
failing on the data mid-training (``data_error``), and an error raised in a callback the
user gave, which is the user's (``callback_error``), not a failure of gpukeras.
"""

from __future__ import annotations

import contextlib
import traceback

from gpukeras.core.errors import BadDataError, CallbackError, GpukerasError, OutOfMemoryError
from gpukeras.core.messages import error_message, is_out_of_memory
from gpukeras.data.failures import unreadable_batch
from gpukeras.train import backup


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


def out_of_memory(
    error: BaseException,
    model: object,
    batch_size: int | None,
    position: dict[str, int],
    backup_dir: str | None,
) -> OutOfMemoryError | None:
    """The engine failing to allocate memory during training (TensorFlow's
    ResourceExhaustedError, XLA's RESOURCE_EXHAUSTED, ``messages.is_out_of_memory``) as a
    classed error naming its line, where training stopped and what progress was kept; it
    carries ``model`` and ``batch_size`` (rows per step) for the memory plan R is given.
    None for other errors.
    """
    if not is_out_of_memory(error):
        return None
    where = f"epoch {position['epoch'] + 1}, batch {position['batch'] + 1}"
    rows = f" (batches of {batch_size} rows)" if batch_size else ""
    kept = progress_kept(backup_dir, "make the step smaller (below)")
    return OutOfMemoryError(
        f"The device ran out of memory at {where}{rows}: {error_message(error).rstrip('.')}.{kept}",
        model=model,
        batch_size=batch_size,
    )


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
