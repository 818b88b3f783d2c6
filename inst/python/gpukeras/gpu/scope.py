"""Device scopes: build models and run ops on a named device, checked to exist.

``keras.device()`` alone accepts a name that matches no device and fails
later, deep inside TensorFlow or JAX; here an unknown name is a classed error
that lists the devices there are.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from gpukeras.core.errors import UnknownDeviceError
from gpukeras.core.runtime import config
from gpukeras.gpu import devices, tensors


def logical_devices() -> list[str]:
    """Devices ops can be placed on now, as 'CPU:0', 'GPU:0', ... (starts the runtime)."""
    if config.backend == "jax":
        found = [*config.backend_module().devices("cpu"), *devices.jax_gpus()]
        names = [tensors.jax_device_name(device) for device in found]
    else:
        tf = config.backend_module()
        names = [
            tensors.normalize_device(device.name) for device in tf.config.list_logical_devices()
        ]
    return sorted(set(names), key=lambda name: (name.split(":")[0], int(name.split(":")[1])))


def check_device(device: str) -> str:
    """``device`` ('GPU:0', 'cpu:1', ...) as 'GPU:0', ...; UnknownDeviceError when there is none
    such, listing the devices there are."""
    name = tensors.normalize_device(str(device))
    available = logical_devices()
    if name not in available:
        raise UnknownDeviceError(
            f"No such device: '{device}'. Devices here: {', '.join(available)}. "
            "gpu_devices() lists them with names and memory."
        )
    return name


def device_scope(device: str) -> AbstractContextManager:
    """A ``keras.device`` scope for ``device`` ('GPU:0', 'cpu:1', ...), checked to exist."""
    return config.keras().device(check_device(device))
