"""After gpu_setup(cpu_devices = 2): gpu_scaling()'s core on a small MLP (run by
test_scaling.py as ``after`` code, see ``scripts/core_child.py``)."""

import keras
import numpy as np

from __main__ import bridge, readback

rng = np.random.default_rng(0)
x = rng.standard_normal((2048, 16)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
keras.utils.set_random_seed(1)
model = keras.Sequential(
    [keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(2)]
)
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
before = [w.copy() for w in model.get_weights()]
answer = bridge.call("scaling", {"model": model, "data": (x, y), "batch_size": 64, "epochs": 3})
readback["answer"] = bridge.plain(answer)
readback["unchanged"] = all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
one = bridge.call("scaling", {"model": model, "data": (x, y), "devices": ["CPU:0"]})
readback["one_device"] = bridge.plain(one)
