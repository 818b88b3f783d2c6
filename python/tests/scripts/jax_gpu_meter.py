"""On a GPU with JAX: 1 GiB made on the device the model trains on, and the peak meter
(run by test_batch_size.py as ``after`` code, see ``scripts/core_child.py``)."""

import jax
import jax.numpy as jnp
import keras

from __main__ import readback
from gpukeras.gpu import peak_memory
from gpukeras.train import training_run

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
(row,) = training_run.gpus_in_use(keras, model)
read = peak_memory.meter("jax", row["device"])()
with jax.default_device(peak_memory.jax_device(row["device"])):
    x = jnp.ones((256, 1024, 1024), jnp.float32)  # 1 GiB
    x.block_until_ready()
readback["device"] = row["device"]
readback["on"] = str(next(iter(x.devices())))
readback["expected"] = str(jax.devices("gpu")[0])
readback["peak_mib"] = read()
