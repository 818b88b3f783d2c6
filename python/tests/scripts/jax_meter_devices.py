"""After gpu_setup(cpu_devices = 3) on JAX: the device the peak meter reads for each name
(run by test_batch_size.py as ``after`` code, see ``scripts/core_child.py``)."""

import jax

from __main__ import readback
from gpukeras.gpu import peak_memory

readback["named"] = [str(peak_memory.jax_device(f"CPU:{i}")) for i in range(3)]
readback["listed"] = [str(device) for device in jax.devices("cpu")]
