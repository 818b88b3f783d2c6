"""TensorFlow started, then gpu_setup(memory_growth = FALSE)
(run by test_setup.py as ``after`` code through ``run_setup``, see ``scripts/core_child.py``)."""

import keras

from __main__ import bridge, readback

keras.ops.convert_to_numpy(keras.ops.ones(2))
readback["no_growth"] = bridge.call("setup", {"memory_growth": False})
