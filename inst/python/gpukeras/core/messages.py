"""Error messages made readable: the informative line of a TensorFlow or Keras error.

TensorFlow reports a failed op with its whole graph trace, Keras data checks with
a bold header and the call's arguments; users need the one line that says what
went wrong. Every layer that translates an error into a classed one takes that
line from here, and asks ``is_out_of_memory`` whether an engine's error is an
allocation failure, ``refused_by_model`` whether training failed on data the
model refuses. The wordings ``refused_by_model`` matches are constants here,
checked on errors the installed Keras and TensorFlow make by
``python/tests/test_messages.py``. TensorFlow is never imported: its errors can
only come from a process that has imported it.
"""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Keras makes parts of its messages bold
# An out-of-memory error, by class name (TensorFlow, PyTorch, Python) or message: XLA's
# ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate"), the CUDA driver's
# (CUDA_ERROR_OUT_OF_MEMORY), cuBLAS's and cuDNN's (CUBLAS_STATUS_ALLOC_FAILED,
# CUDNN_STATUS_ALLOC_FAILED), TensorFlow's when cuDNN cannot get workspace memory.
OOM_TYPES = ("ResourceExhaustedError", "OutOfMemoryError", "MemoryError")
OOM_TEXT = re.compile(
    r"RESOURCE_EXHAUSTED|out[ _]of[ _]memory|OOM when allocating|STATUS_ALLOC_FAILED"
    r"|Failed to get convolution algorithm|failed to allocate|cudaErrorMemoryAllocation",
    re.IGNORECASE,
)


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


# Keras' words when data does not fit a layer's input spec, at whichever step it meets the
# model (validation data meets it after training steps); the TensorFlow op that takes the
# next batch from a tf.data iterator, named in the error of a batch that could not be read.
INCOMPATIBLE_INPUT = "incompatible with the layer"
READING_A_BATCH = "IteratorGetNext"


def refused_by_model(error: BaseException, first_step: bool) -> bool:
    """Whether an error raised during training says the model refused its data: Keras' input
    check at any step, or any failure of the first step (Keras' checks when it traces the
    step, or the model's ops) but reading its batch (a batch that cannot be read is the
    data's fault, not the model's)."""
    text = str(error)
    return INCOMPATIBLE_INPUT in text or (first_step and READING_A_BATCH not in text)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether a backend error says the device (or a library on it) could not get memory."""
    names = {kind.__name__ for kind in type(error).__mro__}
    return bool(names.intersection(OOM_TYPES)) or bool(OOM_TEXT.search(str(error)))


# Warnings the frameworks give during a verb that gpukeras can say in R's words: a pattern
# of the message, the R warning class's suffix, and what it means for the user.
KNOWN_WARNINGS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"Your input ran out of data"),
        "input_exhausted",
        "Training ran out of data before the epoch's steps were done: the data gives fewer "
        "batches than steps_per_epoch x epochs, so the fit stopped early. Give a dataset that "
        "knows its length (gpu_dataset() of R data or counted files) and no steps_per_epoch.",
    ),
)


def framework_warning(category: str, message: str, filename: str) -> dict[str, str]:
    """One Python warning as R shows it: ``{"class": ..., "message": ...}``.

    The frameworks' warnings name a file deep in site-packages and print on stderr, beside
    R's own; R raises these instead, as classed R warnings: a known one in gpukeras' words
    (``KNOWN_WARNINGS``), any other as "<category> from <package>: <message>".
    """
    text = ANSI.sub("", message).strip()
    for pattern, suffix, said in KNOWN_WARNINGS:
        if pattern.search(text):
            return {"class": suffix, "message": said}
    package = re.search(r"site-packages[/\\]([A-Za-z_][\w]*)", filename)
    origin = f" from {package.group(1)}" if package else ""
    return {"class": "python", "message": f"{category}{origin}: {text}"}
