"""export: a SavedModel whose served function encodes raw columns, ONNX with its encoding
beside it, read back by fresh processes that never import gpukeras."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import keras_outputs, low_precision, onnx_under, requires, run_on_jax
from gpukeras import bridge
from gpukeras.core.runtime import config

# Two inputs, as a named list in R: `a` a data.frame (a number, a flag, a one-hot factor),
# `b` a data.frame (a factor of codes, and a column named as one of a's).
ENCODING = {
    "inputs": {
        "a": {
            "type": "data.frame",
            "columns": {
                "Sepal.Length": {"type": "numeric"},
                "flag": {"type": "logical"},
                "colour": {"type": "factor", "levels": ["red", "green"], "encoding": "one_hot"},
            },
            "column_order": ["Sepal.Length", "flag", "colour"],
        },
        "b": {
            "type": "data.frame",
            "columns": {
                "size": {"type": "factor", "levels": ["S", "M", "L"], "encoding": "codes"},
                "flag": {"type": "numeric"},
            },
            "column_order": ["size", "flag"],
        },
    },
    "input_order": ["a", "b"],
    "several": True,
    "y": {"type": "factor", "levels": ["output", "yes", "no way"]},
    "na": "error",
    "x_dtype": "float32",
}

# Loads the SavedModel with TensorFlow alone and calls serving_default on the columns.
LOAD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    served = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
    specs = served.structured_input_signature[1]
    columns = json.loads(sys.argv[2])
    tensors = {k: tf.constant(np.asarray(v, dtype=specs[k].dtype.as_numpy_dtype))
               if specs[k].dtype != tf.string else tf.constant(v) for k, v in columns.items()}
    try:
        out = {k: v.numpy().tolist() for k, v in served(**tensors).items()}
        out = {k: [x.decode() if isinstance(x, bytes) else x for x in v] for k, v in out.items()}
    except Exception as error:
        out = {"error": str(error)}
    out["signature"] = {k: specs[k].dtype.name for k in specs}
    out["gpukeras"] = any(m.startswith("gpukeras") for m in sys.modules)
    print(json.dumps(out))
    """
)


def serve(path: str, columns: dict) -> dict:
    """serving_default's answer to ``columns``, from a fresh Python."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD, path, json.dumps(columns)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def two_input_model() -> object:
    keras = config.keras()
    keras.utils.set_random_seed(3)
    a = keras.Input((4,), name="a")
    b = keras.Input((2,), name="b")
    joined = keras.layers.Concatenate()([a, b])
    out = keras.layers.Dense(3, activation="softmax")(keras.layers.Dense(5, "relu")(joined))
    return keras.Model({"a": a, "b": b}, out)


def export(**kwargs: object) -> dict:
    return bridge.call("export", kwargs)


def test_two_inputs_served_by_column_with_named_outputs(tmp_path: Path) -> None:
    requires("tensorflow")  # a SavedModel is written by TensorFlow
    model = two_input_model()
    path = str(tmp_path / "served")
    answer = export(model=model, path=path, format="savedmodel", encoding=ENCODING)
    assert answer["ok"], answer
    names = [(i["name"], i["input"], i["column"]) for i in answer["value"]["inputs"]]
    assert names == [
        ("Sepal_Length", "a", "Sepal.Length"),
        ("a_flag", "a", "flag"),
        ("colour", "a", "colour"),
        ("size", "b", "size"),
        ("b_flag", "b", "flag"),
    ]
    outputs = [o["name"] for o in answer["value"]["outputs"]]
    assert outputs == ["output", "output_2", "yes", "no way", "class"]
    about = json.loads((tmp_path / "served" / "assets.extra" / "gpukeras.json").read_text())
    assert about["format"] == "gpukeras-encoding" and about["encoding"] == ENCODING
    assert about["serving"]["inputs"][0]["column"] == "Sepal.Length"

    columns = {
        "Sepal_Length": [5.1, -0.5],
        "a_flag": [True, False],
        "colour": ["green", "red"],
        "size": ["L", "S"],
        "b_flag": [0.25, 3.0],
    }
    got = serve(path, columns)
    encoded = {
        "a": np.array([[5.1, 1, 0, 1], [-0.5, 0, 1, 0]], "float32"),
        "b": np.array([[2, 0.25], [0, 3.0]], "float32"),
    }
    expected = keras_outputs(model.predict(encoded, verbose=0))
    assert not got["gpukeras"]
    assert got["signature"]["colour"] == "string" and got["signature"]["a_flag"] == "bool"
    np.testing.assert_allclose(got["output"], expected, atol=1e-5)
    np.testing.assert_allclose(got["no way"], expected[:, 2], atol=1e-5)
    levels = np.array(["output", "yes", "no way"])
    assert got["class"] == levels[expected.argmax(axis=1)].tolist()
    unseen = serve(path, {**columns, "size": ["XL", "S"]})
    assert "Column `size` has level(s) not seen in training" in unseen["error"]
    assert "[XL]" in unseen["error"]


def test_without_an_encoding_the_inputs_are_the_models(tmp_path: Path) -> None:
    """A model trained on NumPy arrays (no encoding recorded): each input a float32 tensor."""
    requires("tensorflow")  # a SavedModel is written by TensorFlow
    answer = export(model=two_input_model(), path=str(tmp_path / "plain"), encoding=None)
    assert answer["ok"], answer
    inputs = [(i["name"], i["type"], i["dtype"], i["shape"]) for i in answer["value"]["inputs"]]
    assert inputs == [("a", "array", "float32", [4]), ("b", "array", "float32", [2])]
    assert [o["name"] for o in answer["value"]["outputs"]] == ["output"]


def test_arguments_and_paths_are_checked(tmp_path: Path) -> None:
    model = two_input_model()
    existing = tmp_path / "taken"
    existing.mkdir()
    cases = [
        ({"format": "pmml"}, '`format` must be "savedmodel" or "onnx"'),
        ({"unknown": "skip"}, '`unknown` must be "error", "zero" or "code"'),
        ({"path": str(existing)}, "already exists: give overwrite = TRUE"),
        ({"path": str(tmp_path / "m.keras"), "format": "onnx"}, "must end in .onnx"),
        ({"path": str(tmp_path / "no" / "m")}, "does not exist"),
    ]
    for change, message in cases:
        kwargs = {"model": model, "path": str(tmp_path / "m"), "encoding": ENCODING, **change}
        answer = export(**kwargs)
        assert not answer["ok"] and answer["r_class"] == "gpukeras_error_bad_argument"
        assert message in answer["message"], answer["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_onnx_with_the_encoding_beside_it(tmp_path: Path) -> None:
    requires("tf2onnx")
    requires("onnxruntime")
    if config.backend != "tensorflow":
        pytest.skip("ONNX export is tested on the TensorFlow engine")
    model = two_input_model()
    path = tmp_path / "model.onnx"
    answer = export(model=model, path=str(path), format="onnx", encoding=ENCODING)
    assert answer["ok"], answer
    beside = json.loads((tmp_path / "model.gpukeras.json").read_text())
    assert beside["encoding"] == ENCODING and beside["model"] == "model.onnx"
    assert beside["onnx"]["model_inputs"] == ["a", "b"]
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    feeds = {"a": rng.normal(size=(3, 4)).astype("float32"), "b": rng.normal(size=(3, 2))}
    feeds["b"] = feeds["b"].astype("float32")
    expected = keras_outputs(model.predict(feeds, verbose=0))
    got = session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})[0]
    # in mixed precision (a GPU's default) the file is a float32 copy's: bfloat16's rounding
    np.testing.assert_allclose(got, expected, atol=2e-2 if low_precision() else 1e-5)
    again = export(model=model, path=str(path), format="onnx", encoding=ENCODING)
    assert not again["ok"] and "already exist" in again["message"]


def test_onnx_of_a_mixed_bfloat16_model_computes_in_float32(tmp_path: Path) -> None:
    """gpu_setup()'s choice on a recent GPU: tf2onnx made of such a model a graph
    onnxruntime refused (MatMul bound to float16 and bfloat16); the file is a float32 copy's,
    its outputs float32 and the model's up to bfloat16's rounding."""
    with onnx_under("mixed_bfloat16"):
        model = two_input_model()
    assert model.layers[-1].compute_dtype == "bfloat16"
    path = tmp_path / "model.onnx"
    answer = export(model=model, path=str(path), format="onnx", encoding=ENCODING)
    assert answer["ok"], answer
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {"a": np.ones((2, 4), "float32"), "b": np.full((2, 2), 0.5, "float32")}
    got = session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})[0]
    assert got.dtype == np.float32
    expected = keras_outputs(model.predict(feeds, verbose=0))
    np.testing.assert_allclose(got, expected, atol=2e-2)
    assert model.layers[-1].compute_dtype == "bfloat16"  # the user's model is as it was


def test_jax_savedmodel_and_what_it_needs(tmp_path: Path) -> None:
    requires("jax")
    requires("tensorflow")  # a SavedModel is written by TensorFlow
    after = textwrap.dedent(
        """
        import keras, numpy as np
        keras.utils.set_random_seed(4)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])
        x = np.array([[0.5, 1.0, -2.0]], "float32")
        readback["expected"] = model.predict(x, verbose=0).tolist()
        enc = {"inputs": {"x": {"type": "array", "shape": [3], "names": None}},
               "input_order": ["x"], "several": False, "y": {"type": "factor",
               "levels": ["no", "yes"]}, "na": "error"}
        done = bridge.call("export", dict(model=model, path=PATH, encoding=enc))
        readback["saved"] = done
        readback["onnx"] = bridge.call("export", dict(model=model, format="onnx",
                                       path=PATH + ".onnx"))
        """
    )
    run = run_on_jax(f"PATH = {str(tmp_path / 'jax')!r}\n" + after, tensorflow=True)
    assert run.readback["saved"]["ok"], run.readback["saved"]
    assert run.readback["saved"]["value"]["backend"] == "jax"
    onnx = run.readback["onnx"]
    assert onnx["r_class"] == "gpukeras_error_export"
    assert "Export from the TensorFlow engine instead" in onnx["message"]
    got = serve(str(tmp_path / "jax"), {"x": [[0.5, 1.0, -2.0]]})
    np.testing.assert_allclose(got["output"], run.readback["expected"], atol=1e-5)
    assert got["class"] == [["no", "yes"][int(np.argmax(run.readback["expected"][0]))]]
    # without TensorFlow (as on the GPU machines) a SavedModel cannot be written: said so
    blocked = run_on_jax(f"PATH = {str(tmp_path / 'jax2')!r}\n" + after).readback["saved"]
    assert blocked["r_class"] == "gpukeras_error_export"
    assert "written by TensorFlow, which is not installed" in blocked["message"]


@pytest.mark.parametrize("unknown", ["error", "zero", "code"])
def test_the_signature_applies_the_cores_plan_as_encode_frame_does(unknown: str) -> None:
    """The served function's encoding ops (run eagerly) give the matrix the core's encoder
    gives for the same raw columns: the columns in order, levels matched by name, a
    number's and a flag's value, an unseen level as ``unknown`` scores it (one-hot all 0,
    codes the reserved code), or the error where it does not."""
    requires("tensorflow")
    import tensorflow as tf

    from gpukeras.data import encoding
    from gpukeras.serve import export_signature

    served = export_signature.served_inputs(ENCODING, unknown)
    colour = ["green", "blue" if unknown == "zero" else "red", "red"]
    size = ["L", "XL" if unknown == "code" else "S", "M"]
    raw = {"Sepal_Length": [5.1, -0.5, 2.0], "a_flag": [True, False, True], "colour": colour}
    raw |= {"size": size, "b_flag": [0.25, 3.0, 1.0]}
    got = export_signature.encode(tf, {k: tf.constant(v) for k, v in raw.items()}, served)

    def factor(values: list[str]) -> dict:
        levels = list(dict.fromkeys(values))
        codes = np.array([levels.index(v) + 1 for v in values], "int32")
        return {"values": codes, "levels": levels}

    def number(values: list) -> dict:
        return {"values": np.array(values, "float64"), "levels": None}

    handed = {
        "a": {"Sepal.Length": number(raw["Sepal_Length"]), "flag": number(raw["a_flag"])}
        | {"colour": factor(colour)},
        "b": {"size": factor(size), "flag": number(raw["b_flag"])},
    }
    for name, columns in handed.items():
        spec = ENCODING["inputs"][name]["columns"]
        frame = {"name": name, "spec": spec, "unknown": unknown, "columns": columns}
        np.testing.assert_array_equal(got[name].numpy(), encoding.encode_frame(frame))
    if unknown == "error":
        unseen = {k: tf.constant(v) for k, v in (raw | {"size": ["XL", "S", "M"]}).items()}
        with pytest.raises(tf.errors.InvalidArgumentError, match="not seen in training"):
            export_signature.encode(tf, unseen, served)
