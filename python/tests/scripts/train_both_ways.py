"""After gpu_setup(cpu_devices = 2): train alone and under strategies; ``readback`` says how
(run by test_distribute.py as ``after`` code, see ``scripts/core_child.py``)."""

import keras
import numpy as np

from __main__ import bridge, readback
from gpukeras.data import pipeline
from gpukeras.distribute import strategies
from gpukeras.train import fit

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 4)).astype("float32")
y = (x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32")).astype("float32")


def new_model():
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    return model


def batches():
    return pipeline.from_arrays(x, y, batch_size=32, shuffle=False)["dataset"]


common = dict(epochs=3, seed=4, verbose=0)
single = new_model()
one = fit.fit(single, batches(), **common)
made = strategies.make("mirrored")
replicated = new_model()
before = [w.copy() for w in replicated.get_weights()]
two = fit.fit(replicated, batches(), strategy=made["strategy"], **common)
# R data is shuffled with the seed: repeatable under the strategy.
shuffled = [
    fit.fit(new_model(), (x, y), batch_size=32, strategy=made["strategy"], **common)
    for _ in range(2)
]
readback["shuffled_repeat"] = [run["history"]["loss"] for run in shuffled]
readback["plan"] = bridge.plain(made["plan"])
readback["settings"] = two["settings"]["strategy"]
readback["device"] = two["settings"]["device"]
readback["loss_one"] = one["history"]["loss"]
readback["loss_two"] = two["history"]["loss"]
readback["max_diff"] = max(
    float(np.abs(a - b).max()) for a, b in zip(single.get_weights(), replicated.get_weights())
)
readback["moved"] = max(
    float(np.abs(a - b).max()) for a, b in zip(before, replicated.get_weights())
)
readback["iterations"] = int(keras.ops.convert_to_numpy(replicated.optimizer.iterations))
readback["one_device"] = bridge.plain(strategies.make("one_device")["plan"])
readback["auto"] = bridge.plain(strategies.make()["plan"])
readback["named"] = bridge.plain(strategies.make(devices=["cpu:1", "CPU:0"])["plan"])
readback["unknown"] = bridge.call("strategy", {"devices": ["CPU:7"]})
readback["two_for_one"] = bridge.call(
    "strategy", {"type": "one_device", "devices": ["CPU:0", "CPU:1"]}
)
readback["workers_for_mirrored"] = bridge.call(
    "strategy", {"type": "mirrored", "workers": ["127.0.0.1:1"]}
)
readback["uneven"] = bridge.call(
    "fit",
    {
        "model": new_model(),
        "data": (x[:249], y[:249]),
        "batch_size": 32,
        "strategy": made["strategy"],
        "verbose": 0,
    },
)
# A model built inside the scope trains as it is (no copy).
with strategies.strategy_scope(made["strategy"]):
    inside = new_model()
readback["inside_in_scope"] = strategies.in_scope(inside, made["strategy"])
fit.fit(inside, batches(), strategy=made["strategy"], **common)
readback["inside_diff"] = max(
    float(np.abs(a - b).max()) for a, b in zip(single.get_weights(), inside.get_weights())
)
