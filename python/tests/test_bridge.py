"""bridge: plain data out, classed errors as data, nothing raised into R."""

from __future__ import annotations

import numpy as np

from gpukeras import bridge, errors, runtime
from gpukeras.nvml import NvmlDevice, NvmlReport


def test_plain_turns_dataclasses_into_nested_dicts() -> None:
    device = NvmlDevice(0, "H100", "GPU-1", "9.0", 81559.0, 1.0, 81558.0, None)
    value = bridge.plain(NvmlReport(available=True, driver_version="580", devices=[device]))
    assert value == {
        "available": True,
        "reason": None,
        "driver_version": "580",
        "cuda_driver_version": None,
        "devices": [
            {
                "index": 0,
                "name": "H100",
                "uuid": "GPU-1",
                "compute_capability": "9.0",
                "memory_total_mib": 81559.0,
                "memory_used_mib": 1.0,
                "memory_free_mib": 81558.0,
                "utilization_gpu": None,
                "error": None,
                "pci_bus_id": None,
                "mig_parent": None,
                "mig_index": None,
                "mig_devices": [],
            }
        ],
    }


def test_plain_turns_tuples_and_numpy_scalars_into_python() -> None:
    value = bridge.plain(
        {
            "shape": (2, (3, 4)),
            "f32": np.float32(1.5),
            "i64": np.int64(7),
            "flag": np.bool_(True),
            "zero_d": np.array(2.5),
            1: "int key",
        }
    )
    assert value == {
        "shape": [2, [3, 4]],
        "f32": 1.5,
        "i64": 7,
        "flag": True,
        "zero_d": 2.5,
        "1": "int key",
    }
    assert type(value["f32"]) is float
    assert type(value["i64"]) is int
    assert type(value["flag"]) is bool
    assert type(value["zero_d"]) is float


def test_plain_leaves_dataclass_types_and_plain_values_alone() -> None:
    assert bridge.plain(NvmlReport) is NvmlReport
    assert bridge.plain("text") == "text"
    assert bridge.plain(None) is None


def test_call_returns_plain_value() -> None:
    assert bridge.call("stack.parse_version", {"text": "2.16.0rc1"}) == {
        "ok": True,
        "value": [2, 16, 0],
    }


def test_empty_r_list_as_kwargs() -> None:
    # reticulate sends an empty unnamed R list() as an empty Python list.
    expected = {"ok": True, "value": runtime.configured_backend()}
    assert bridge.call("runtime.configured_backend", []) == expected
    assert bridge.call("runtime.configured_backend", None) == expected
    assert bridge.call("runtime.configured_backend") == expected


def test_gpukeras_error_keeps_its_class_and_no_traceback() -> None:
    answer = bridge.call("stack.check_versions", {"backend": "torch", "found": {"keras": "3.15.1"}})
    assert answer == {
        "ok": False,
        "r_class": errors.BackendUnsupportedError.r_class,
        "message": answer["message"],
        "traceback": None,
    }
    assert "KERAS_BACKEND is 'torch'" in answer["message"]


def test_unexpected_exception_is_reported_with_its_traceback() -> None:
    answer = bridge.call("stack.parse_version", {"text": 5})
    assert answer["ok"] is False
    assert answer["r_class"] == "gpukeras_error_python"
    assert answer["message"].startswith("AttributeError: ")
    assert answer["traceback"].startswith("Traceback")
    assert "parse_version" in answer["traceback"]


def test_wrong_arguments_are_reported_not_raised() -> None:
    answer = bridge.call("stack.parse_version", {"txt": "1.0"})
    assert answer["r_class"] == "gpukeras_error_python"
    assert answer["message"].startswith("TypeError: ")


def test_unknown_target_is_reported_not_raised() -> None:
    for target in ("no_such_module.run", "stack.no_such_function", "nodot"):
        answer = bridge.call(target)
        assert answer["ok"] is False, target
        assert answer["r_class"] == "gpukeras_error_python"
        assert answer["traceback"]
