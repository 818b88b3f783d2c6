"""On a GPU: its memory before and after a small model runs, and what the backend reports
(run by test_setup.py as ``after`` code through ``run_setup``, see ``scripts/core_child.py``)."""

import keras
from readback import backend_report

from __main__ import readback
from gpukeras.gpu import devices, nvml


def first_gpu():  # CUDA's GPU:0: by the driver's UUID once JAX has started CUDA
    return devices.cuda_view(nvml.query()).devices[0]


readback["total"] = first_gpu().memory_total_mib
readback["before"] = first_gpu().memory_used_mib
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256), keras.layers.Dense(10)])
keras.ops.convert_to_numpy(model(keras.ops.ones((128, 64))))
readback["after"] = first_gpu().memory_used_mib
readback["backend"] = backend_report()
