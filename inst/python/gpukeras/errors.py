"""Errors a user can cause, each mapped to an R condition class.

The R layer turns a raised ``GpukerasError`` into an R condition whose class
vector is ``c(r_class, "gpukeras_error", "error", "condition")``, so every
error carries a class R code can catch and a message that says what to do.
"""

from __future__ import annotations


class GpukerasError(Exception):
    """Base class of errors with an R condition class and an actionable message."""

    r_class = "gpukeras_error"


class KerasMissingError(GpukerasError):
    r_class = "gpukeras_error_keras_missing"


class Keras2Error(GpukerasError):
    r_class = "gpukeras_error_keras2"


class TensorflowMissingError(GpukerasError):
    r_class = "gpukeras_error_tensorflow_missing"


class TensorflowTooOldError(GpukerasError):
    r_class = "gpukeras_error_tensorflow_too_old"


class BackendMissingError(GpukerasError):
    r_class = "gpukeras_error_backend_missing"


class BackendUnsupportedError(GpukerasError):
    r_class = "gpukeras_error_backend_unsupported"


class BadArgumentError(GpukerasError):
    r_class = "gpukeras_error_bad_argument"
