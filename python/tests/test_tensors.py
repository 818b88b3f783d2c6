"""tensors: where a tensor lives, and waiting for it, on the running backend."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import in_process_backend
from gpukeras.core.runtime import config
from gpukeras.gpu import tensors


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("/job:localhost/replica:0/task:0/device:GPU:0", "GPU:0"),
        ("/job:localhost/replica:0/task:0/device:CPU:0", "CPU:0"),
        ("/job:worker/replica:0/task:1/device:GPU:3", "GPU:3"),
        ("cuda:1", "GPU:1"),
        ("gpu:0", "GPU:0"),
        ("GPU:2", "GPU:2"),
        ("TFRT_CPU_0", "CPU:0"),
        ("cpu(id=0)", "CPU:0"),
        ("TPU:1", "TPU:1"),
        ("unknown", "unknown"),
        ("", ""),
    ],
)
def test_normalize_device(name: str, expected: str) -> None:
    assert tensors.normalize_device(name) == expected


def test_tensor_device_and_synchronize_on_the_cpu() -> None:
    keras = config.keras()
    with keras.device("CPU:0"):
        a = keras.ops.ones((64, 64))
        result = keras.ops.matmul(a, a)
    assert tensors.synchronize(result) is None
    assert tensors.tensor_device(result) == "CPU:0"
    np.testing.assert_allclose(keras.ops.convert_to_numpy(result), np.full((64, 64), 64.0))


def test_tensor_device_of_tensorflow_tensors_and_variables() -> None:
    in_process_backend("tensorflow")
    tf = pytest.importorskip("tensorflow")
    config.keras()
    with tf.device("/CPU:0"):
        constant = tf.constant([1.0, 2.0])
        variable = tf.Variable([3.0])
    assert tensors.tensor_device(constant) == "CPU:0"
    assert tensors.tensor_device(variable) == "CPU:0"
    assert tensors.tensor_device(variable * 2) == "CPU:0"


def test_tensor_device_of_jax_arrays() -> None:
    in_process_backend("jax")
    config.keras()
    import jax

    array = jax.device_put(np.ones(3, dtype=np.float32), jax.devices("cpu")[0])
    tensors.synchronize(array)
    assert tensors.tensor_device(array) == "CPU:0"
