"""Errors a user can cause, each mapped to an R condition class.

The R layer turns a raised ``GpukerasError`` into an R condition (an rlang error)
whose class vector is ``c(r_class, "gpukeras_error", "rlang_error", "error",
"condition")``, so every error carries a class R code can catch and a message that
says what to do. ``?gpukeras-conditions`` in R lists them all.
"""

from __future__ import annotations


class GpukerasError(Exception):
    """Base class of errors with an R condition class and an actionable message."""

    r_class = "gpukeras_error"


class KerasMissingError(GpukerasError):
    """Keras is not installed in the Python gpukeras uses."""

    r_class = "gpukeras_error_keras_missing"


class Keras2Error(GpukerasError):
    """Keras 2 is installed where gpukeras needs Keras 3."""

    r_class = "gpukeras_error_keras2"


class KerasTooOldError(GpukerasError):
    """The Keras installed has a published way around ``safe_mode`` (code run by loading a
    model file), which gpu_load() of a file from elsewhere relies on."""

    r_class = "gpukeras_error_keras_too_old"


class TensorflowMissingError(GpukerasError):
    """The backend is TensorFlow but TensorFlow is not installed."""

    r_class = "gpukeras_error_tensorflow_missing"


class TensorflowTooOldError(GpukerasError):
    """TensorFlow is older than Keras 3 supports (2.16)."""

    r_class = "gpukeras_error_tensorflow_too_old"


class BackendMissingError(GpukerasError):
    """KERAS_BACKEND names a backend that is not installed."""

    r_class = "gpukeras_error_backend_missing"


class BackendUnsupportedError(GpukerasError):
    """KERAS_BACKEND names a backend gpukeras does not support."""

    r_class = "gpukeras_error_backend_unsupported"


class BadArgumentError(GpukerasError):
    """An argument has the wrong type or value."""

    r_class = "gpukeras_error_bad_argument"


class RuntimeStartedError(GpukerasError):
    """A setting that only works before the backend starts was asked for after it started."""

    r_class = "gpukeras_error_runtime_started"


class UnknownDeviceError(GpukerasError):
    """A device that does not exist was named."""

    r_class = "gpukeras_error_unknown_device"


class MissingFilesError(GpukerasError):
    """Files or a folder given as a data source do not exist or hold nothing to read."""

    r_class = "gpukeras_error_missing_files"


class BadDataError(GpukerasError):
    """Data files or values cannot be used as they are (mismatched headers, text columns)."""

    r_class = "gpukeras_error_bad_data"


class DataFieldsError(BadDataError):
    """Bad data an error names precisely, for R to raise as its own check would: the
    message's first line, lines of advice after it (``details``), the condition's classes
    (``r_classes``, most specific first) and its fields (``fields``: ``column``,
    ``levels``, ``type``, ...)."""

    def __init__(
        self, message: str, details: list[str], r_classes: list[str], **fields: object
    ) -> None:
        super().__init__(message)
        self.details = details
        self.r_classes = r_classes
        self.r_class = r_classes[0]
        self.fields = fields


class BadImageError(GpukerasError):
    """A file in an image folder is not an image TensorFlow can decode."""

    r_class = "gpukeras_error_bad_image"


class MapFunctionError(GpukerasError):
    """A user's map function failed when tf.data traced it."""

    r_class = "gpukeras_error_bad_map"


class BadModelError(GpukerasError):
    """The model is not a Keras 3 model, or cannot be trained as it is."""

    r_class = "gpukeras_error_bad_model"


class ExportError(GpukerasError):
    """gpu_export() cannot export the model as asked: layers the format has no operation
    for, a package the format needs that is not installed, or an engine it cannot use."""

    r_class = "gpukeras_error_export"


class ModelNotCompiledError(GpukerasError):
    """A model given for training has not been compiled (no optimizer and loss yet)."""

    r_class = "gpukeras_error_model_not_compiled"


class BackupMismatchError(GpukerasError):
    """backup_dir holds a backup this call cannot resume (another run's, or unreadable)."""

    r_class = "gpukeras_error_backup_mismatch"


class BackupInUseError(GpukerasError):
    """Another fit holds backup_dir: two fits would resume from and delete each other's backups."""

    r_class = "gpukeras_error_backup_in_use"


class BackupDirUnsafeError(GpukerasError):
    """backup_dir is another user's folder, or one other users may write to."""

    r_class = "gpukeras_error_backup_dir_unsafe"


class BackupWriteError(GpukerasError):
    """A backup could not be written during training (a full disk, a quota, no permission)."""

    r_class = "gpukeras_error_backup_write"


class CallbackError(GpukerasError):
    """A Keras callback the user gave failed during training."""

    r_class = "gpukeras_error_callback"


class PreemptedError(GpukerasError):
    """Training stopped at a signal gpu_fit() was told to handle (a scheduler's SIGTERM), after
    backing up the exact step where backup_dir is given."""

    r_class = "gpukeras_error_preempted"


class OutOfMemoryError(GpukerasError):
    """The device could not get the memory training needed: an allocation failed while
    training, or even the smallest batch asked for does not fit (or the budget).

    ``model`` and ``batch_size``, where given, are what the memory plan is made for
    when the error goes to R (``gpukeras.bridge``).
    """

    r_class = "gpukeras_error_out_of_memory"

    def __init__(self, message: str, model: object = None, batch_size: int | None = None):
        super().__init__(message)
        self.model = model
        self.batch_size = batch_size


class ProfilerError(GpukerasError):
    """The profiler cannot trace: one is already running, or the backend has none."""

    r_class = "gpukeras_error_profiler"


class StrategyError(GpukerasError):
    """A multi-worker cluster cannot be set up as asked (workers that do not join, a port in
    use, a TF_CONFIG gpukeras cannot train with, or workers called differently)."""

    r_class = "gpukeras_error_strategy"


class WorkerLostError(GpukerasError):
    """Multi-worker training stopped because another worker died, hung up or failed."""

    r_class = "gpukeras_error_worker_lost"


class NetworkExposedError(GpukerasError):
    """Training ports would be open to other hosts where nothing needs them (TensorFlow's
    servers listen on every interface, without authentication)."""

    r_class = "gpukeras_error_network_exposed"
