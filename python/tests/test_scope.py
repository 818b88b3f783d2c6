"""scope: device scopes that check the device exists, here and in fresh processes."""

from __future__ import annotations

import re

import pytest

from conftest import CoreRun, run_setup
from gpukeras import bridge
from gpukeras.core.errors import UnknownDeviceError
from gpukeras.core.runtime import config
from gpukeras.gpu import devices, scope, tensors


def _weights_device(device: str) -> str:
    keras = config.keras()
    with scope.device_scope(device):
        layer = keras.layers.Dense(3)
        layer.build((None, 4))
    return tensors.tensor_device(layer.kernel.value)


def test_logical_devices_in_this_process() -> None:
    names = scope.logical_devices()
    assert names[0] == "CPU:0"
    assert all(re.fullmatch(r"(CPU|GPU):\d+", name) for name in names)
    assert len(set(names)) == len(names)
    assert [name for name in names if name.startswith("GPU")] == [
        f"GPU:{i}" for i in range(len(devices.framework_gpus()))
    ]


@pytest.mark.parametrize("name", ["CPU:0", "cpu:0", "/device:CPU:0"])
def test_scope_places_weights_on_the_cpu(name: str) -> None:
    assert _weights_device(name) == "CPU:0"


@pytest.mark.parametrize("name", ["CPU:9", "GPU:9", "TPU:0", "nonsense"])
def test_unknown_device_is_a_classed_error_listing_devices(name: str) -> None:
    with pytest.raises(UnknownDeviceError) as raised:
        scope.device_scope(name)
    assert raised.value.r_class == "gpukeras_error_unknown_device"
    assert str(raised.value) == (
        f"No such device: '{name}'. Devices here: {', '.join(scope.logical_devices())}. "
        "gpu_devices() lists them with names and memory."
    )


def test_unknown_device_through_the_bridge() -> None:
    answer = bridge.call("device_scope", {"device": "GPU:9"})
    assert answer["ok"] is False
    assert answer["r_class"] == "gpukeras_error_unknown_device"
    assert answer["traceback"] is None


@pytest.mark.gpu
def test_scope_places_weights_on_the_gpu() -> None:
    assert _weights_device("GPU:0") == "GPU:0"
    assert _weights_device("gpu:0") == "GPU:0"


@pytest.fixture(scope="module", params=["tensorflow", "jax"])
def three_cpus(request: pytest.FixtureRequest) -> CoreRun:
    """A fresh process whose CPU is split into 3 logical devices."""
    return run_setup(
        request.param,
        {"cpu_devices": 3},
        """
readback["devices"] = bridge.answer(bridge.function_at("gpu.scope:logical_devices"))["value"]
readback["weights"] = [weights_device(f"CPU:{i}") for i in range(3)]
readback["cpu3"] = bridge.call("device_scope", {"device": "CPU:3"})
""",
    )


def test_logical_devices_list_the_logical_cpus(three_cpus: CoreRun) -> None:
    found = three_cpus.readback["devices"]
    assert [name for name in found if name.startswith("CPU")] == ["CPU:0", "CPU:1", "CPU:2"]
    assert three_cpus.value["cpu_devices"] == 3


def test_scope_places_weights_on_each_logical_cpu(three_cpus: CoreRun) -> None:
    assert three_cpus.readback["weights"] == ["CPU:0", "CPU:1", "CPU:2"]


def test_device_past_the_logical_cpus_is_unknown(three_cpus: CoreRun) -> None:
    answer = three_cpus.readback["cpu3"]
    assert answer["r_class"] == "gpukeras_error_unknown_device"
    assert answer["message"].startswith(
        f"No such device: 'CPU:3'. Devices here: {', '.join(three_cpus.readback['devices'])}."
    )
