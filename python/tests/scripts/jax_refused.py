"""On JAX: data of the wrong width to fit() and quantize()
(run by test_bad_input.py as ``after`` code, see ``scripts/core_child.py``)."""

import keras
import numpy as np

from __main__ import bridge, readback

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
narrow = [np.zeros((32, 3), "float32"), np.zeros(32, "float32")]
readback["fit"] = bridge.call("fit", {"model": model, "data": narrow, "verbose": 0})
readback["quantize"] = bridge.call("quantize", {"model": model, "data": narrow})
