"""gpu_cv()'s folds as one population against a separate gpu_fit() of each fold (JAX).

Run by test_population.py as ``python population_cv.py '<json spec>'`` (JAX backend, the
core on PYTHONPATH); prints one JSON line: ``population`` (the verb ``cv_population``'s
answer), ``separate`` (per fold, gpu_fit()'s history and ``score``'s metrics and
predictions, each fit of the fold's rows alone with its seed, its held-out rows as
validation) and ``built`` (the models the population was given: one, made after the first
fold's seed, the others' states drawn from theirs). The spec's keys: ``rows``, ``folds``,
``batch_size``, ``epochs``, ``dropout``, ``learning_rate``, ``sample_weight`` (each row
weighted); ``other_units``: each fold's own model, the last one's of other units (not one
architecture); ``memory_share``:
``cv_population.MEMORY_SHARE`` for the run (a tiny one: the members do not fit). With either,
no separate fits. A list of specs runs each in turn (their answers a list).
"""

import json
import sys

import numpy as np

from gpukeras import bridge
from gpukeras.core.runtime import config
from gpukeras.tools import cv_population

keras = config.keras()


def answer(verb: str, kwargs: dict) -> object:
    done = bridge.call(verb, kwargs)
    assert done["ok"], done
    return done["value"]


def run(spec: dict) -> dict:
    """The spec's fits (see above): ``population``, ``separate`` and ``built``."""
    rng = np.random.default_rng(0)
    rows, folds = spec["rows"], spec["folds"]
    x = rng.standard_normal((rows, 20)).astype("float32")
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32")
    weights = rng.uniform(0.5, 2.0, rows).astype("float32") if spec.get("sample_weight") else None

    def rows_of(rows: np.ndarray) -> tuple:
        """The data's ``rows``: (x, y) or (x, y, sample_weight)."""
        return (x[rows], y[rows]) if weights is None else (x[rows], y[rows], weights[rows])

    fold_of = rng.permutation(np.arange(rows) % folds)
    held = [np.flatnonzero(fold_of == k) for k in range(folds)]
    train = [np.flatnonzero(fold_of != k) for k in range(folds)]
    seeds = [101 + 7 * k for k in range(folds)]

    def model_fn(number: int):
        units = 32 if spec.get("other_units") and number == folds - 1 else 64
        layers = [keras.Input((20,)), keras.layers.Dense(units, activation="relu")]
        if spec.get("dropout"):
            layers.append(keras.layers.Dropout(0.3))
        layers += [keras.layers.Dense(2, activation="softmax")]
        model = keras.Sequential(layers)
        model.compile(
            optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
        )
        return model

    made_folds = []  # each model_fn() call's fold

    def made(number: int):
        """A fold's model as its worker makes it: its seed, then model_fn()."""
        bridge.call("workers_seed", {"seed": seeds[number]})
        made_folds.append(number)
        return model_fn(number)

    fit_args = {"epochs": spec["epochs"], "batch_size": spec["batch_size"]}
    if spec.get("learning_rate") is not None:
        fit_args["learning_rate"] = spec["learning_rate"]
    separate = []
    cv_population.MEMORY_SHARE = spec.get("memory_share", DEFAULT_SHARE)
    if not spec.get("other_units") and "memory_share" not in spec:
        for k in range(folds):
            model = made(k)
            fit = answer(
                "fit",
                {
                    "model": model,
                    "data": rows_of(train[k]),
                    "validation_data": rows_of(held[k]),
                    "seed": seeds[k],
                    "verbose": 0,
                    **fit_args,
                },
            )
            held_x, held_y, *held_w = rows_of(held[k])
            scored = answer(
                "score",
                {
                    "model": model,
                    "x": held_x,
                    "y": held_y,
                    "sample_weight": held_w[0] if held_w else None,
                    "batch_size": spec["batch_size"],
                },
            )
            separate.append({"history": fit["history"], **scored, "data": fit["settings"]["data"]})
    built = len(made_folds)
    population = answer(
        "cv_population",
        {
            # as the worker gives them: one model, made after the first fold's seed (the
            # others' states drawn from their seeds), or, of other architectures, each fold's
            # own
            "models": [made(k) for k in range(folds if spec.get("other_units") else 1)],
            "x": x,
            "y": y,
            "sample_weight": weights,
            "members": [
                {"seed": seeds[k], "rows": train[k].tolist(), "held_out": held[k].tolist()}
                for k in range(folds)
            ],
            **fit_args,
        },
    )
    return {"population": population, "separate": separate, "built": len(made_folds) - built}


DEFAULT_SHARE = cv_population.MEMORY_SHARE
spec = json.loads(sys.argv[1])
print(
    json.dumps(
        [run(one) for one in spec] if isinstance(spec, list) else run(spec),
        default=lambda a: np.asarray(a).tolist(),
    )
)
