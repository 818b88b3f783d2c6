"""bridge: plain data out, classed errors as data, nothing raised into R."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from conftest import requires, run_core
from gpukeras import bridge
from gpukeras.core import errors, runtime, stack
from gpukeras.gpu.nvml import NvmlDevice, NvmlReport


def test_plain_sends_integers_beyond_r_s_as_doubles() -> None:
    """reticulate wraps a Python int beyond R's integers around 2^32 in R: such ints cross
    as floats, exact; R's own integers stay ints, -2^31 (R's NA_integer_) among them."""
    big = 12_968_068_352
    value = bridge.plain({"peak": big, "low": -big, "numpy": np.int64(big), "small": 7})
    assert value == {"peak": float(big), "low": -float(big), "numpy": float(big), "small": 7}
    assert [type(v) for v in value.values()] == [float, float, float, int]
    edge = bridge.plain([2**31 - 1, 2**31, -(2**31), -(2**31) - 1, True, np.int32(5)])
    assert edge == [2**31 - 1, 2.0**31, -(2**31), -(2.0**31) - 1, True, 5]
    assert [type(v) for v in edge] == [int, float, int, float, bool, int]


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


def test_plain_gives_r_low_precision_arrays_as_float32_and_leaves_the_others() -> None:
    """reticulate converts no float16, bfloat16 or other ml_dtypes array: what a model in
    mixed precision outputs crosses as float32, at any depth of the value."""
    import ml_dtypes

    bf16 = np.array([[0.5, 1.25]], dtype=ml_dtypes.bfloat16)
    value = bridge.plain(
        {
            "predictions": [bf16, np.array([1.5], np.float16)],
            "nested": {"fp8": np.array([2.0], ml_dtypes.float8_e4m3fn)},
            "int4": np.array([3, -2], ml_dtypes.int4),
        }
    )
    first, second = value["predictions"]
    assert first.dtype == np.float32 and second.dtype == np.float32
    np.testing.assert_array_equal(first, [[0.5, 1.25]])
    assert value["nested"]["fp8"].dtype == np.float32
    assert value["int4"].dtype == np.int32 and value["int4"].tolist() == [3, -2]
    kept = [np.zeros(2, np.float32), np.zeros(2, np.float64), np.zeros(2, np.int8), np.array(["a"])]
    for array in kept:
        assert bridge.plain(array) is array


def test_plain_leaves_dataclass_types_and_plain_values_alone() -> None:
    assert bridge.plain(NvmlReport) is NvmlReport
    assert bridge.plain("text") == "text"
    assert bridge.plain(None) is None


def test_answer_returns_plain_value() -> None:
    assert bridge.answer(stack.parse_version, {"text": "2.16.0rc1"}) == {
        "ok": True,
        "value": [2, 16, 0],
    }


def test_empty_r_list_as_kwargs() -> None:
    # reticulate sends an empty unnamed R list() as an empty Python list.
    expected = {"ok": True, "value": runtime.configured_backend()}
    assert bridge.answer(runtime.configured_backend, []) == expected
    assert bridge.answer(runtime.configured_backend, None) == expected
    assert bridge.answer(runtime.configured_backend) == expected


def test_gpukeras_error_keeps_its_class_and_no_traceback() -> None:
    given = {"backend": "torch", "found": {"keras": "3.15.1"}}
    answer = bridge.answer(stack.check_versions, given)
    assert answer == {
        "ok": False,
        "r_class": errors.BackendUnsupportedError.r_class,
        "message": answer["message"],
        "traceback": None,
    }
    assert "KERAS_BACKEND is 'torch'" in answer["message"]


def test_unexpected_exception_is_reported_with_its_traceback() -> None:
    answer = bridge.answer(stack.parse_version, {"text": 5})
    assert answer["ok"] is False
    assert answer["r_class"] == "gpukeras_error_python"
    assert answer["message"].startswith("AttributeError: ")
    assert answer["traceback"].startswith("Traceback")
    assert "parse_version" in answer["traceback"]


def test_wrong_arguments_are_reported_not_raised() -> None:
    answer = bridge.answer(stack.parse_version, {"txt": "1.0"})
    assert answer["r_class"] == "gpukeras_error_python"
    assert answer["message"].startswith("TypeError: ")


def test_a_verb_calls_its_function_by_name() -> None:
    uri = "https://user:secret@host/x"
    assert bridge.call("mask_uri", {"uri": uri}) == {"ok": True, "value": "https://***@host/x"}
    refused = bridge.call("check", {"matmul_size": 0})
    assert refused["r_class"] == "gpukeras_error_bad_argument"
    assert refused["traceback"] is None


def test_an_unknown_verb_is_reported_not_raised() -> None:
    for verb in ("no_such_verb", "fit.fit", "core.stack:parse_version"):
        answer = bridge.call(verb)
        assert answer["ok"] is False, verb
        assert answer["r_class"] == "gpukeras_error_python"
        assert f"no verb {verb!r}" in answer["message"]


def test_every_verb_names_a_function_that_exists() -> None:
    """A verb whose module moved would fail only when R first calls it: caught here."""
    for verb, path in bridge.VERBS.items():
        assert callable(bridge.function_at(path)), verb


def test_r_names_verbs_alone() -> None:
    """R calls the core by verb (moving a module changes no R code), and never imports it."""
    root = Path(__file__).resolve().parents[2]
    called, modules = set(), []
    for path in [*root.glob("R/*.R"), *root.glob("tests/testthat/*.R")]:
        text = path.read_text()
        called |= set(re.findall(r'core_call\(\s*"([^"]+)"', text))
        called |= set(re.findall(r'handover_call\(\s*"([^"]+)"', text))
        called |= set(re.findall(r'list\("([a-z_]+)", kind =', text))
        modules += re.findall(r'import\("(gpukeras\.[a-z_.]+)"\)', text)
    assert called and called <= set(bridge.VERBS), called - set(bridge.VERBS)
    assert set(modules) <= {"gpukeras.bridge"}, modules


def test_r_reaches_python_through_python_r_alone() -> None:
    """R imports no module and touches no model's Python attribute outside R/python.R:
    the rest goes through the core's verbs (``core_call``), so a module that moves or a
    Keras that renames changes R/python.R and the core alone."""
    root = Path(__file__).resolve().parents[2]
    reaching = re.compile(
        r"(?:reticulate::)?\bimport(?:_from_path|_builtins|_main)?\("
        r"|\bmodel\$(?:evaluate|predict\w*|outputs?|inputs?|output_names|layers|fit|compile"
        r"|save\w*|load_weights|get_weights|set_weights|summary|optimizer)\b"
        r"|\bpy_(?:has|get)_attr\(\s*model\b"
    )
    found = set()
    for path in sorted(root.glob("R/*.R")):
        name = f"R/{path.name}"
        if name == "R/python.R":
            continue
        for line in path.read_text().splitlines():
            code = line.split("#", 1)[0]
            for match in reaching.finditer(code):
                if not code[: match.start()].count('"') % 2:  # not inside a string
                    found.add((name, match.group(0)))
    assert not found, sorted(found)


def test_python_warnings_during_a_verb_come_back_as_data_for_r() -> None:
    """Keras' warnings print on stderr with a path into site-packages; the bridge returns
    them for R to raise as classed warnings, a known one in gpukeras' words."""
    import warnings

    def warns() -> int:
        warnings.warn(
            "Your input ran out of data; interrupting training.", UserWarning, stacklevel=1
        )
        warnings.warn("\x1b[1msomething\x1b[0m else", DeprecationWarning, stacklevel=1)
        return 1

    answer = bridge.answer(warns)
    assert answer["ok"] and answer["value"] == 1
    known, other = answer["warnings"]
    assert known["class"] == "input_exhausted" and "stopped early" in known["message"]
    assert other == {"class": "python", "message": "DeprecationWarning: something else"}
    assert "warnings" not in bridge.answer(lambda: 2)

    def warns_then_fails() -> None:
        warnings.warn("about to fail", RuntimeWarning, stacklevel=1)
        raise ValueError("failed")

    failed = bridge.answer(warns_then_fails)
    assert not failed["ok"] and failed["warnings"][0]["message"] == "RuntimeWarning: about to fail"
    with warnings.catch_warnings():  # the user's filters decide what is recorded
        warnings.simplefilter("ignore")
        assert "warnings" not in bridge.answer(warns)


def test_a_framework_warning_names_its_package_not_its_file() -> None:
    from gpukeras.core.messages import framework_warning

    said = framework_warning(
        "UserWarning", "`shuffle=True` was passed", "/x/lib/site-packages/keras/src/e.py"
    )
    assert said == {
        "class": "python",
        "message": "UserWarning from keras: `shuffle=True` was passed",
    }


def test_preload_imports_the_verbs_modules_and_starts_no_framework() -> None:
    """A worker preloads what its task calls in its first call: imports alone, no Keras,
    no TensorFlow or JAX (the runtime starts after, with the session's settings)."""
    run = run_core(
        "preload",
        {"verbs": ["fit", "search_pruning_callback", "save_model", "no_such_verb"]},
        after="readback['modules'] = [m for m in sys.modules if m.startswith('gpukeras.')]",
    )
    assert run.value is None
    wanted = {"gpukeras.tools.training", "gpukeras.search.search_trial", "gpukeras.serve.scoring"}
    assert wanted <= set(run.readback["modules"])
    assert not {"keras", "tensorflow", "jax"} & run.loaded


def test_preload_keras_imports_what_the_first_seed_imports_and_the_process_then_trains() -> None:
    """A worker calls it ahead of its task: on JAX, Keras and TensorFlow (which Keras' seed
    imports wherever it is installed) are imported, and the task then seeds, builds and
    trains a model with nothing left to import for the seed."""
    requires("jax")
    requires("tensorflow")
    run = run_core(
        "preload_keras",
        env={"KERAS_BACKEND": "jax"},
        after="""
import keras
import numpy as np

modules = set(sys.modules)
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
x = np.ones((8, 2), "float32")
model.fit(x, x[:, :1], epochs=1, verbose=0)
readback["imported"] = sorted(
    {m.split(".")[0] for m in set(sys.modules) - modules} & {"tensorflow", "jax"}
)
""",
    )
    assert run.value == ["tensorflow", "jax"]
    assert run.readback["imported"] == []


def test_preload_by_default_imports_what_a_worker_calls() -> None:
    """Every verb a worker's task calls is one of the bridge's (R's pool names none: it
    calls preload() with no verbs)."""
    from gpukeras.bridge import VERBS, WORKER_VERBS

    assert set(WORKER_VERBS) <= set(VERBS)


def test_a_value_r_keeps_in_python_is_left_as_the_core_made_it() -> None:
    half = np.array([1.5], np.float16)
    assert bridge.answer(lambda: half, python=True)["value"] is half
    assert bridge.answer(lambda: half)["value"].dtype == np.float32
    assert (
        bridge.call("as_numpy", {"values": [1.5], "dtype": "float16"}, python=True)["value"].dtype
        == np.float16
    )
