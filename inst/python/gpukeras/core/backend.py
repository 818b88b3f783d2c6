"""Which Keras backend this process uses, read without importing anything.

Keras reads its backend once, when it is imported: from ``KERAS_BACKEND``,
else from ``keras.json`` in ``KERAS_HOME``. Reading it the same way here lets
every module ask before a backend starts, and this module imports nothing
from gpukeras, so anything may import it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SUPPORTED_BACKENDS = ("tensorflow", "jax")
RUNTIME_MODULES = {"tensorflow": "tensorflow", "jax": "jax"}


def configured_backend() -> str:
    """The backend Keras will use, read the way Keras reads it, without importing Keras."""
    from_env = os.environ.get("KERAS_BACKEND")
    if from_env:
        return from_env
    keras_home = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras"))
    try:
        return json.loads((keras_home / "keras.json").read_text())["backend"]
    except (OSError, ValueError, KeyError, TypeError):
        return "tensorflow"
