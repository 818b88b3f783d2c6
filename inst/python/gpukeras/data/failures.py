"""Data that cannot be read, or that the model refuses, as classed errors that say what to do.

Keras reports data that does not fit the model as a ValueError whose first lines
name the layer; TensorFlow reports a batch it could not make (a corrupt image, a
missing file) as an op error deep in a traceback. These functions pick the
informative line (``core.messages``) and wrap it in a ``BadDataError``; training
(``train.failures``), a fit's rows on the device and a population's members
(``adapters.resident.build``), gpu_batch_size(), gpu_quantize() and the pipeline
benchmark all translate with them, so the same failure reads the same everywhere.
"""

from __future__ import annotations

import re
import sys

from gpukeras.core.errors import BadDataError
from gpukeras.core.messages import cause, error_message

# TensorFlow errors that mean a batch could not be made or read.
DATA_ERRORS = ("InvalidArgumentError", "DataLossError", "NotFoundError")


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
