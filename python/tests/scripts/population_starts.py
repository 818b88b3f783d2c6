"""Members' starting states drawn from one model (``population.starts``) against each
member's own model, made after its seed and prepared as a fit of it starts (JAX).

Run by test_population.py as ``python population_starts.py '{}'`` (JAX backend, the core
on PYTHONPATH); prints one JSON line: per kind of model, ``equal`` (per member, whether
every part of its drawn state is its own model's, values and types) and ``differ`` (per
trainable weight, whether the first two members' differ), or ``reason`` (why
``starts`` would not draw them). Kinds: ``mlp`` (built by its Input: Dense layers of two
initializers, Dropout's seed generator, BatchNormalization), ``built_later`` (no Input: its
weights made as a fit builds it), ``seeded`` (an initializer and a Dropout given seeds),
``lstm`` (the LSTM's bias is no initializer's of its layer: not drawn).
"""

import json

import numpy as np

from gpukeras.core.runtime import config
from gpukeras.train.population import prepare, starts
from gpukeras.train.resident import training_state

keras = config.keras()
rng = np.random.default_rng(2)
x = rng.standard_normal((64, 20)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
batch = (x[:32], y[:32])
seeds, rates = [11, 12, 30], [0.01, 0.02, 0.05]


def model_fn(kind: str):
    layers = {
        "mlp": [
            keras.Input((20,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.3),
            keras.layers.BatchNormalization(),
            keras.layers.Dense(2, activation="softmax", kernel_initializer="he_normal"),
        ],
        "built_later": [keras.layers.Dense(16), keras.layers.Dense(2, activation="softmax")],
        "seeded": [
            keras.Input((20,)),
            keras.layers.Dense(16, kernel_initializer=keras.initializers.GlorotUniform(7)),
            keras.layers.Dropout(0.3, seed=3),
            keras.layers.Dense(2, activation="softmax"),
        ],
        "lstm": [
            keras.Input((20,)),
            keras.layers.Reshape((4, 5)),
            keras.layers.LSTM(3),
            keras.layers.Dense(2, activation="softmax"),
        ],
    }[kind]
    model = keras.Sequential(layers)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def same(a: object, b: object) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and np.array_equal(a, b)


found = {}
for kind in ("mlp", "built_later", "seeded", "lstm"):
    keras.utils.set_random_seed(seeds[0])
    drawn = starts(model_fn(kind), seeds, batch, rates)
    if isinstance(drawn, str):
        found[kind] = {"reason": drawn}
        continue
    equal = []
    for seed, rate, state in zip(seeds, rates, drawn):
        keras.utils.set_random_seed(seed)
        own = model_fn(kind)
        prepare(own, seed, batch, rate)
        alone = training_state(own)
        equal.append(
            all(
                len(mine) == len(theirs) and all(same(a, b) for a, b in zip(mine, theirs))
                for mine, theirs in zip(state, alone)
            )
        )
    differ = [not same(a, b) for a, b in zip(drawn[0][0], drawn[1][0])]
    found[kind] = {"equal": equal, "differ": differ}
print(json.dumps(found))
