"""After gpu_setup(cpu_devices = 2): gpu_fit() with class and sample weights on each path this
backend trains by, against Keras' own fit() with the same weights (run by test_weights.py as
``after`` code, see ``scripts/core_child.py``).

One batch of every row per step, so the order of the rows changes nothing but the order of
a sum. ``readback[path][weighting]`` holds the largest difference from Keras' weights
(relative to the largest weight) and the data path gpu_fit() reports; ``readback["keras"]``
how far Keras' own weighted and unweighted runs end apart.
"""

import keras
import numpy as np

from __main__ import readback
from gpukeras.core.backend import configured_backend
from gpukeras.data import pipeline
from gpukeras.distribute import strategies
from gpukeras.train import fit

ROWS, EPOCHS = 200, 3
CLASS_WEIGHT = {0: 1.0, 1: 5.0}
rng = np.random.default_rng(0)
x = rng.standard_normal((ROWS, 4)).astype("float32")
y = (x[:, 0] > 0.8).astype("int32")  # about a fifth of the rows are class 1
sample_weight = rng.uniform(0.1, 3.0, ROWS).astype("float32")


def new_model() -> keras.Model:
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def keras_fit(**weighting: object) -> list[np.ndarray]:
    model = new_model()
    model.fit(x, y, batch_size=ROWS, epochs=EPOCHS, shuffle=False, verbose=0, **weighting)
    return model.get_weights()


def apart(ours: list[np.ndarray], theirs: list[np.ndarray]) -> float:
    scale = max(float(np.abs(w).max()) for w in theirs)
    return max(float(np.abs(a - b).max()) for a, b in zip(ours, theirs)) / scale


def dataset(weights: object = None, **options: object) -> object:
    made = pipeline.from_arrays(
        x, y, sample_weight=weights, batch_size=ROWS, shuffle=False, **options
    )
    return made["dataset"]


reference = {
    "class": keras_fit(class_weight=CLASS_WEIGHT),
    "sample": keras_fit(sample_weight=sample_weight),
    "equal": keras_fit(),
}
readback["keras"] = apart(reference["class"], reference["equal"])
mirrored = strategies.make("mirrored")["strategy"]
paths = {
    # name: (data without weights, the same with sample weights, gpu_fit()'s other arguments)
    "arrays": ((x, y), (x, y, sample_weight), {"batch_size": ROWS}),
    "gpu_dataset": (dataset(), dataset(sample_weight), {}),
    "gpu_dataset_map": (
        dataset(map=lambda *element: element),
        dataset(sample_weight, map=lambda *element: element),
        {},
    ),
    "mirrored": ((x, y), (x, y, sample_weight), {"batch_size": ROWS, "strategy": mirrored}),
}
if configured_backend() == "jax":  # without XLA, Keras' own loop takes the arrays
    paths["keras_arrays"] = (*paths["arrays"][:2], {"batch_size": ROWS, "jit_compile": False})
for path, (plain, weighted, arguments) in paths.items():
    runs = {
        "class": (plain, {"class_weight": CLASS_WEIGHT}),
        "sample": (weighted, {}),
        "equal": (plain, {"class_weight": {0: 1.0, 1: 1.0}}),
    }
    readback[path] = {}
    for weighting, (data, request) in runs.items():
        model = new_model()
        result = fit.fit(
            model, data, epochs=EPOCHS, seed=3, verbose=0, monitor=False, **arguments, **request
        )
        readback[path][weighting] = {
            "apart": apart(model.get_weights(), reference[weighting]),
            "data": result["settings"]["data"],
        }
