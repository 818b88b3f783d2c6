"""After gpu_setup(cpu_devices = 3): the devices each kind of strategy trains on
(run by test_fit.py as ``after`` code, see ``scripts/core_child.py``)."""

import keras

from __main__ import readback
from gpukeras.distribute import strategies
from gpukeras.train import training_run


def built():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    return model


readback["none"] = training_run.devices_in_use(keras, built())
for name, kind, devices in (
    ("one", "one_device", ["CPU:1"]),
    ("two", "mirrored", ["CPU:1", "CPU:2"]),
):
    strategy = strategies.make(kind, devices=devices)["strategy"]
    with strategies.strategy_scope(strategy):
        readback[name] = training_run.devices_in_use(keras, built())
