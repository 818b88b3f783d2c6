"""A population's members with their own learning rates, one stopped midway, and each
epoch's order drawn on the device (JAX), against separate fits.

Run by test_population.py as ``python population_members.py '<json spec>'`` (JAX backend,
the core on PYTHONPATH); prints one JSON line with weights as lists:

- ``separate``: per member, the weights of gpu_fit() of its rows with its seed and learning
  rate for ``epochs`` epochs;
- ``whole``: per member, the weights after a population trained ``epochs`` epochs at once;
- ``stopped``: the same population trained one epoch (``after_first``, its weights), member
  1 stopped, then the remaining epochs (``weights``, ``epochs``: each member's history's);
- ``device_rows``: whether a population whose orders are drawn on the device gives each
  member its rows in ``EpochOrder``'s device order (epoch 0 and 1).

The spec's keys: ``rows``, ``batch_size``, ``epochs``.
"""

import json
import sys

import numpy as np

from gpukeras import bridge
from gpukeras.core import compat
from gpukeras.core.runtime import config
from gpukeras.data.adapters.resident import EpochOrder
from gpukeras.train.population import Member, Population

spec = json.loads(sys.argv[1])
keras = config.keras()
rng = np.random.default_rng(1)
rows, size, epochs = spec["rows"], spec["batch_size"], spec["epochs"]
x = rng.standard_normal((rows, 8)).astype("float32")
y = (x[:, 0] - x[:, 2] > 0).astype("int32")
rates = [0.001, 0.01, 0.05]
seeds = [3, 4, 5]
# members of unequal row counts, overlapping rows
member_rows = [np.arange(0, rows - 40), np.arange(20, rows), np.arange(5, rows - 3)]


def made(i: int):
    keras.utils.set_random_seed(seeds[i])
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(rates[i]),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    compat.symbolic_build(model, (x[:size], y[:size]))  # as fit() builds it
    return model


def weights(model) -> list:
    return [w.tolist() for w in model.get_weights()]


def population(on_host=None) -> Population:
    models = [made(i) for i in range(3)]
    members = [Member(seeds[i], member_rows[i]) for i in range(3)]
    return Population(models, members, (x, y), size, on_host=on_host)


separate = []
for i in range(3):
    model = made(i)
    done = bridge.call(
        "fit",
        {"model": model, "data": (x[member_rows[i]], y[member_rows[i]]), "epochs": epochs,
         "batch_size": size, "seed": seeds[i], "verbose": 0},
    )  # fmt: skip
    assert done["ok"], done
    separate.append(weights(model))

whole = population()
whole.train(epochs)
whole.write_back()

stopped = population()
stopped.train(1)
stopped.write_back()
after_first = [weights(m) for m in stopped.models]
stopped.stop(1)
histories = stopped.train(epochs - 1)
stopped.write_back()

on_device = population(on_host=False)
device_rows = all(
    np.array_equal(
        np.asarray(on_device.epoch_rows(epoch))[i, : len(member_rows[i])],
        member_rows[i][
            np.asarray(EpochOrder(on_device.jax, len(member_rows[i]), seeds[i], False).draw(epoch))
        ],
    )
    for epoch in (0, 1)
    for i in range(3)
)
print(
    json.dumps(
        {
            "separate": separate,
            "whole": [weights(m) for m in whole.models],
            "stopped": {
                "after_first": after_first,
                "weights": [weights(m) for m in stopped.models],
                "epochs": [h["epoch"] for h in histories],
            },
            "device_rows": device_rows,
        }
    )
)
