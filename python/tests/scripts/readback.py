"""For ``after`` code (see ``conftest.run_setup``): read back what the backend reports.

Importing this module imports Keras, and so starts the backend: ``after``
code runs after the call it reads back. ``run_setup`` gives ``after`` code
every name defined here (``from readback import *``).
"""

from __future__ import annotations

import os

import keras

from gpukeras.core.runtime import config
from gpukeras.gpu import scope, tensors


def model_facts():
    # Build and compile a small model under the global dtype policy.
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)]
    )
    model.compile(optimizer="adam", loss="mse")
    return {
        "policy": keras.config.dtype_policy().name,
        "compute_dtypes": [layer.compute_dtype for layer in model.layers],
        "kernel_dtypes": [str(layer.kernel.dtype) for layer in model.layers],
        "optimizer": type(model.optimizer).__name__,
    }


def weights_device(device):
    # Where a layer built inside scope.device_scope(device) keeps its weights.
    with scope.device_scope(device):
        layer = keras.layers.Dense(3)
        layer.build((None, 4))
    return tensors.tensor_device(layer.kernel.value)


def backend_report():
    # The devices, threads and variables the backend itself reports (starts it).
    if config.backend == "jax":
        import jax

        return {
            "cpus": [tensors.jax_device_name(device) for device in jax.devices("cpu")],
            "environ": {
                name: os.environ.get(name)
                for name in (
                    "XLA_PYTHON_CLIENT_PREALLOCATE",
                    "XLA_CLIENT_MEM_FRACTION",
                    "XLA_PYTHON_CLIENT_MEM_FRACTION",
                    "CUDA_VISIBLE_DEVICES",
                )
            },
        }
    import tensorflow as tf

    gpus = tf.config.get_visible_devices("GPU")
    return {
        "cpus": [tensors.normalize_device(d.name) for d in tf.config.list_logical_devices("CPU")],
        "gpus": len(gpus),
        "memory_growth": [tf.config.experimental.get_memory_growth(gpu) for gpu in gpus],
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
    }
