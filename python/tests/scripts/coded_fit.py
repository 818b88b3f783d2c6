"""gpu_fit() of a data.frame with a one-hot factor, handed over as R hands it, against the same
fit of its float32 matrix encoded on the host beforehand, in one process of the backend the
environment names.

Run by test_encoding_device.py as ``python coded_fit.py '<json spec>'`` (the core on
PYTHONPATH); prints one JSON line: each fit's ``history``, ``predictions`` (of the encoded
matrix, after training) and ``data_path`` (where its rows trained). The spec's keys: ``rows``,
``batch_size``, ``epochs``, ``validation`` (the last 50 rows, handed over the same way).
"""

import json
import sys

import numpy as np

from gpukeras import bridge
from gpukeras.core import compat
from gpukeras.core.handles import HANDOVER
from gpukeras.core.runtime import config
from gpukeras.data.encoding import encode_frame

spec = json.loads(sys.argv[1])
keras = config.keras()
rows = spec.get("rows", 400)
rng = np.random.default_rng(0)
levels = [f"l{i}" for i in range(7)]
codes = rng.integers(1, len(levels) + 1, rows).astype(np.int32)
a, b = rng.standard_normal(rows), rng.standard_normal(rows)
y = ((codes % 2 == 0) ^ (a > 0)).astype("int32")
SPEC = {
    "a": {"type": "numeric"},
    "region": {"type": "factor", "levels": levels, "encoding": "one_hot"},
    "b": {"type": "numeric"},
}


def frame(part: slice) -> dict:
    """The rows ``part`` as R's frame_handover() gives them."""
    number = {"class": "numeric", "typeof": "double", "levels": None}
    return {
        "gpukeras_frame": {
            "name": "x",
            "spec": SPEC,
            "unknown": "error",
            "columns": {
                "a": {"values": a[part], **number},
                "region": {
                    "values": codes[part],
                    "levels": levels,
                    "class": "factor",
                    "typeof": "integer",
                },
                "b": {"values": b[part], **number},
            },
        }
    }


def handed(part: slice) -> dict:
    return {HANDOVER: {"x": frame(part), "y": y[part], "y_dtype": "int32", "check_missing": True}}


def model() -> object:
    compat.set_random_seed(keras, 7)  # as gpu_fit() seeds: TensorFlow not imported for it
    made = keras.Sequential(
        [keras.Input((len(levels) + 2,)), keras.layers.Dense(16, activation="relu"),
         keras.layers.Dense(2)]
    )  # fmt: skip
    made.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return made


train = slice(0, rows - 50) if spec.get("validation") else slice(0, rows)
held = slice(rows - 50, rows)
matrix = encode_frame(frame(slice(0, rows))["gpukeras_frame"])
report = {}
for name, data, validation in (
    ("coded", handed(train), handed(held) if spec.get("validation") else None),
    (
        "matrix",
        (matrix[train], y[train]),
        (matrix[held], y[held]) if spec.get("validation") else None,
    ),
):
    fitted = model()
    answer = bridge.call(
        "fit",
        {
            "model": fitted, "data": data, "validation_data": validation,
            "epochs": spec.get("epochs", 2), "batch_size": spec.get("batch_size", 32),
            "seed": 11, "verbose": 0,
        },
    )  # fmt: skip
    assert answer["ok"], answer
    report[name] = {
        "history": answer["value"]["history"],
        "data_path": answer["value"]["settings"]["data_path"],
        "predictions": np.asarray(fitted.predict(matrix, verbose=0)).tolist(),
    }
print(json.dumps(report, default=str))
