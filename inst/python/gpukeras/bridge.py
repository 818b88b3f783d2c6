"""The one door R comes through: call a core function, get plain data or a classed error.

Returning errors as data (rather than raising through reticulate) keeps the R
side independent of how each reticulate version wraps Python exceptions, and
lets R raise a condition with the right class and no Python traceback.
"""

from __future__ import annotations

import dataclasses
import importlib
import traceback

from gpukeras.errors import GpukerasError


def plain(value: object) -> object:
    """Dataclasses to dicts, tuples to lists, NumPy scalars to Python numbers."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    return value


def call(target: str, kwargs: dict[str, object] | None = None) -> dict[str, object]:
    """Call ``gpukeras.<module>.<function>`` with ``kwargs``.

    Returns:
        ``{"ok": True, "value": ...}`` on success; otherwise ``{"ok": False,
        "r_class", "message", "traceback"}``, the traceback only for errors that
        are not the user's (a bug, or a failure inside the stack).
    """
    try:
        module_name, function_name = target.rsplit(".", 1)
        function = getattr(importlib.import_module(f"gpukeras.{module_name}"), function_name)
        return {"ok": True, "value": plain(function(**(kwargs or {})))}
    except GpukerasError as error:
        return {"ok": False, "r_class": error.r_class, "message": str(error), "traceback": None}
    except Exception as error:  # anything else is reported, never allowed to crash R
        return {
            "ok": False,
            "r_class": "gpukeras_error_python",
            "message": f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc(),
        }
