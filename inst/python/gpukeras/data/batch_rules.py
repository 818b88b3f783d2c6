"""The batch-size rules gpu_fit(), gpu_dataset(), gpu_batch_size() and gpu_tune() share:
a batch size for arrays alone (gpu_fit(), gpu_profile() and gpu_scaling() check it here),
steps per epoch, the largest batch that still makes enough of them, the largest that
gpu_fit(batch_size = "auto") takes, the batch a size larger than the rows becomes, and what to
say of it."""

from __future__ import annotations

from gpukeras.core.errors import DataFieldsError

# The fewest steps (batches) an epoch has at the batch sizes gpu_batch_size() and gpu_tune()
# recommend: fewer gives few updates per pass over the data, and leaves the monitor (which
# skips the first steps of a run) and the epoch's validation little to measure.
MIN_STEPS_PER_EPOCH = 8
# The largest batch gpu_fit(batch_size = "auto") takes however much memory is free (gpu_tune()'s
# max_batch): beyond it a batch seldom trains faster per row, and trains otherwise at the same
# learning rate.
AUTO_MOST = 1024


def check_batch_size_for(batch_size: object, data: object) -> None:
    """Raises DataFieldsError (gpukeras_error_bad_argument, ``argument`` "batch_size") when
    ``batch_size`` is given for data that makes its own batches: anything but arrays as
    ``(x, y)`` (R data, NumPy arrays), such as a dataset."""
    if batch_size is None or isinstance(data, (tuple, list)):
        return
    raise DataFieldsError(
        "`batch_size` is for R data: a dataset makes its own batches.",
        [
            "Batch it where it is made (gpu_dataset(batch_size = ), or dataset_batch() with "
            "tfdatasets) and leave `batch_size` NULL."
        ],
        ["gpukeras_error_bad_argument"],
        argument="batch_size",
    )


def steps_per_epoch(rows: int, batch_size: int) -> int:
    """Batches in one pass over ``rows`` rows, the last one partial."""
    return -(-int(rows) // int(batch_size))


def largest_batch_for_steps(rows: int) -> int:
    """The largest batch size that still makes ``MIN_STEPS_PER_EPOCH`` steps of ``rows``
    rows: ceil(rows / b) >= 8 exactly when b < rows / 7. With fewer rows than that, 1 (the
    most steps they can make)."""
    return max(1, -(-int(rows) // (MIN_STEPS_PER_EPOCH - 1)) - 1)


def power_of_two_within(rows: int) -> int:
    """The largest power of two at most ``rows`` (1 or more): the batch gpu_tune() and
    gpu_fit(batch_size = "auto") take within what fits, leaving the plan's estimate headroom."""
    return 1 << (int(rows).bit_length() - 1)


def batch_within_rows(batch_size: int, rows: int, every: int = 1) -> int:
    """The batch ``batch_size`` makes of ``rows`` rows: itself within them; above them, one
    batch of all rows (what Keras' fit() makes of it), the smallest multiple of ``every``
    (gpu_fit()'s ``accumulate``) that holds them."""
    if batch_size <= rows:
        return batch_size
    return -(-rows // every) * every


def batch_over_rows(
    batch_size: int, rows: int, validation_rows: int | None, noun: str, every: int = 1
) -> list[str]:
    """What to say when a batch is larger than the training rows (it becomes the rows, a
    multiple of ``every``: ``batch_within_rows``): the finding, then what gives several steps
    per epoch."""
    held_out = (
        f" ({rows + validation_rows:,} less {validation_rows:,} for validation)"
        if validation_rows
        else ""
    )
    batch = batch_within_rows(batch_size, rows, every)
    multiple = f", a multiple of accumulate = {every}" if every > 1 else ""
    return [
        f"`batch_size` ({batch_size:,}) is larger than the {rows:,} training {noun}{held_out}: "
        f"each epoch is one batch of all {rows:,} {noun} (batch_size = {batch:,}{multiple}).",
        f"One step per epoch is one update per pass over the data: batch_size = "
        f"{largest_batch_for_steps(rows):,} or less gives {MIN_STEPS_PER_EPOCH} or more steps "
        "per epoch.",
    ]
