"""The fresh Python that ``conftest.run_core`` starts: one call through the bridge, as JSON.

Usage: ``core_child.py TARGET KWARGS_JSON SETUP AFTER``, with the core on
PYTHONPATH. TARGET is a verb (``bridge.VERBS``), as R calls it, or any core
function as "module:function" (``bridge.function_at``).
SETUP is Python code run before gpukeras is imported (e.g.
blocking a module); AFTER runs after the call, with ``result`` (the bridge's
answer), ``bridge`` and the dict ``readback`` in scope, and stores
JSON-serialisable facts in ``readback``. Both run in this module's namespace,
so they see ``json``, ``os`` and ``sys`` too. Code kept in a file of this
folder, or in the tests' helpers (``nvml_double``), runs as an import by its
name (``import hide_keras``, ``from readback import *``); a module run as
AFTER reaches the call's names by ``from __main__ import readback, result``.
The last line printed starts with ``MARKER``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

MARKER = "@@gpukeras-result@@"
WATCHED_ENV = ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND", "CUDA_VISIBLE_DEVICES")

if __name__ == "__main__":
    # The tests' own helpers (nvml_double) import by name too, after this folder's modules.
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
    exec(sys.argv[3])
    from gpukeras import bridge

    target, kwargs = sys.argv[1], json.loads(sys.argv[2])
    if ":" in target:
        result = bridge.answer(bridge.function_at(target), kwargs)
    else:
        result = bridge.call(target, kwargs)
    readback: dict[str, object] = {}
    exec(sys.argv[4])
    report = {
        "result": result,
        "readback": readback,
        "loaded": sorted({name.split(".")[0] for name, module in sys.modules.items() if module}),
        "environ": {name: os.environ.get(name) for name in WATCHED_ENV},
    }
    print(MARKER + json.dumps(report))
