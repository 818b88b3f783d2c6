"""scoring: predict and evaluate in batches, and a model saved with its encoding beside it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import numpy as np
import pytest

from conftest import keras_outputs
from gpukeras import bridge
from gpukeras.core.runtime import config
from gpukeras.data.encoding import normalized


@pytest.fixture(scope="module")
def trained() -> tuple[object, np.ndarray, np.ndarray]:
    """A small compiled classifier trained a little, and its data."""
    keras = config.keras()
    keras.utils.set_random_seed(5)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(200, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(x, y, epochs=2, batch_size=32, verbose=0)
    return model, x, y


def call(verb: str, **kwargs: object) -> dict:
    return bridge.call(verb, kwargs)


def value(verb: str, **kwargs: object) -> object:
    answer = call(verb, **kwargs)
    assert answer["ok"], answer
    return answer["value"]


def test_predict_gives_keras_outputs_in_any_batch_size(trained: tuple) -> None:
    model, x, _ = trained
    expected = keras_outputs(model.predict(x, verbose=0))
    # R hands over column-major views: the core copies them to C order itself.
    fortran = np.asfortranarray(x.astype("float64"))
    for batch_size in (7, 200, 1000):
        got = value("predict", model=model, x=fortran, batch_size=batch_size)
        assert isinstance(got, np.ndarray) and got.shape == (200, 2)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_na_drop_leaves_rows_out_as_r_na_rows(trained: tuple) -> None:
    """R's na = "drop": the rows holding NA are not scored, and come back as R's NA (its
    NaN payload, which R reads as NA, not NaN); the others as Keras scores them."""
    model, x, _ = trained
    holed = x[:6].astype("float64")
    holed[[1, 4], 2] = np.nan
    drop = {"columns": {}, "fix": None, "na": "drop", "numpy": []}
    got = value("predict", model=model, x=holed, batch_size=4, check_missing=drop)
    assert got.shape == (6, 2) and got.dtype == np.float64
    assert (got[[1, 4]].view(np.uint64) == 0x7FF00000000007A2).all()
    expected = keras_outputs(model.predict(x[[0, 2, 3, 5]], verbose=0))
    np.testing.assert_allclose(got[[0, 2, 3, 5]], expected, rtol=1e-5, atol=1e-6)


def test_evaluate_matches_keras_and_needs_labels(trained: tuple) -> None:
    model, x, y = trained
    expected = model.evaluate(x, y, verbose=0, return_dict=True)
    got = value("evaluate", model=model, x=x, y=y, y_dtype="int32", batch_size=50)
    assert set(got) == set(expected)
    for name in expected:
        assert got[name] == pytest.approx(float(expected[name]), rel=1e-5)
    missing = call("evaluate", model=model, x=x)
    assert missing["r_class"] == "gpukeras_error_bad_data"
    assert "needs labels" in missing["message"]


def test_data_the_model_refuses_and_na_are_classed_errors(trained: tuple) -> None:
    model, x, _ = trained
    refused = call("predict", model=model, x=x[:, :3])
    assert refused["r_class"] == "gpukeras_error_bad_data"
    assert "cannot predict from this data" in refused["message"]
    assert call("evaluate", model=model, x=x[:, :3], y=np.zeros(200))["r_class"] == (
        "gpukeras_error_bad_data"
    )
    tf = pytest.importorskip("tensorflow")
    batches = tf.data.Dataset.from_tensor_slices(x[:, :3]).batch(16)
    assert call("predict", model=model, x=batches)["r_class"] == "gpukeras_error_bad_data"
    # Refused before Keras' loop: on JAX a loop failing in its first step loses the weights.
    np.testing.assert_allclose(
        value("predict", model=model, x=x), keras_outputs(model.predict(x, verbose=0)), rtol=1e-5
    )
    holed = x.astype("float64")
    holed[3, 1] = np.nan
    missing = call("predict", model=model, x=holed, check_missing=True)
    assert missing["r_classes"] == ["gpukeras_error_missing_values", "gpukeras_error_bad_data"]
    assert "NA/NaN in 1 row(s) (first: 4), in x$column 2." in missing["message"]


def test_save_writes_two_files_refuses_to_overwrite_and_loads_the_same_model(
    trained: tuple, tmp_path: Path
) -> None:
    model, x, _ = trained
    path = tmp_path / "model.keras"
    encoding = {"inputs": {"x": {"type": "array", "shape": [4]}}, "na": "error"}
    written = value("save_model", model=model, path=str(path), encoding=encoding)
    beside = tmp_path / "model.gpukeras.json"
    assert written == {"model": str(path), "encoding": str(beside)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gpukeras.json", "model.keras"]
    assert json.loads(beside.read_text())["encoding"] == normalized(encoding)

    again = call("save_model", model=model, path=str(path), encoding=encoding)
    assert again["r_class"] == "gpukeras_error_bad_argument"
    assert "overwrite = TRUE" in again["message"]
    value("save_model", model=model, path=str(path), encoding=None, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gpukeras.json", "model.keras"]

    loaded = value("load_model", path=str(path))
    assert loaded["encoding"] is None and loaded["encoding_file"] == str(beside)
    np.testing.assert_allclose(
        keras_outputs(loaded["model"].predict(x, verbose=0)),
        keras_outputs(model.predict(x, verbose=0)),
        rtol=1e-6,
    )


def test_paths_that_are_not_keras_files_are_refused(trained: tuple, tmp_path: Path) -> None:
    model, _, _ = trained
    wrong = call("save_model", model=model, path=str(tmp_path / "model.h5"), encoding=None)
    assert wrong["r_class"] == "gpukeras_error_bad_argument"
    absent = call("load_model", path=str(tmp_path / "none.keras"))
    assert absent["r_class"] == "gpukeras_error_bad_argument"
    stray = tmp_path / "stray.keras"
    value("save_model", model=model, path=str(stray), encoding=None)
    (tmp_path / "stray.gpukeras.json").write_text('{"something": "else"}')
    foreign = call("load_model", path=str(stray))
    assert foreign["r_class"] == "gpukeras_error_bad_model"
    assert list(tmp_path.glob(".saving-*")) == []


def test_saved_files_get_the_permissions_keras_own_save_gives(
    trained: tuple, tmp_path: Path
) -> None:
    model, _, _ = trained
    (tmp_path / "keras").mkdir()
    (tmp_path / "ours").mkdir()
    model.save(tmp_path / "keras" / "model.keras")
    value("save_model", model=model, path=str(tmp_path / "ours" / "model.keras"), encoding=None)
    wanted = stat.S_IMODE((tmp_path / "keras" / "model.keras").stat().st_mode)
    for name in ("model.keras", "model.gpukeras.json"):
        assert stat.S_IMODE((tmp_path / "ours" / name).stat().st_mode) == wanted, name


GOOD = {
    "inputs": {
        "x": {
            "type": "data.frame",
            "columns": {
                "size": {"type": "numeric"},
                "colour": {"type": "factor", "levels": ["a", "b", "c"], "encoding": "one_hot"},
            },
            "column_order": ["size", "colour"],
        }
    },
    "input_order": ["x"],
    "y": {"type": "factor", "levels": ["no", "yes"]},
    "na": "error",
}


COLOUR = ["inputs", "x", "columns", "colour"]


def spoiled(path: list, value: object) -> dict:
    """GOOD with the entry at ``path`` replaced by ``value`` (removed when it is ...)."""
    document = json.loads(json.dumps(GOOD))
    *parents, last = path
    target = document
    for key in parents:
        target = target[key]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return document


@pytest.mark.parametrize(
    ("document", "version", "words"),
    [
        (GOOD, 99, "written by a newer gpukeras"),
        (GOOD, "1", "no valid version"),
        (spoiled([*COLOUR, "levels"], ["a", "a", "c"]), 2, "levels that are not distinct"),
        (spoiled([*COLOUR, "levels"], "a"), 2, "levels that are not distinct"),
        (spoiled([*COLOUR, "encoding"], "dummy"), 2, "one_hot or codes"),
        (spoiled(["inputs", "x", "column_order"], ["size"]), 2, "does not name its columns"),
        (spoiled(["inputs", "x", "type"], "table"), 2, "neither data.frame, array nor text"),
        (spoiled(["input_order"], "x"), 2, "inputs or their order are missing"),
        (spoiled(["y", "levels"], None), 2, "label levels"),
        (spoiled(["na"], "keep"), 2, "NA rule"),
        (spoiled(["inputs", "x", "columns", "size"], ...), 2, "does not name its columns"),
        (spoiled([*COLOUR, "levels"], ["a", "b"]), 2, "gives 3 columns, the model takes 4"),
        ("not a record", 2, "encoding is not a record"),
    ],
    ids=["newer version", "version a string", "levels repeated", "levels a string",
         "unknown factor rule", "order without a column", "unknown input type",
         "order a string", "label levels missing", "unknown NA rule", "a column missing",
         "another width than the model's", "not a record"],
)  # fmt: skip
def test_a_malformed_encoding_file_is_a_bad_model_that_says_what_is_wrong(
    tmp_path: Path, document: object, version: object, words: str
) -> None:
    keras = config.keras()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    path = tmp_path / "model.keras"
    value("save_model", model=model, path=str(path), encoding=GOOD)
    assert value("load_model", path=str(path))["encoding"] == normalized(GOOD)
    sidecar = tmp_path / "model.gpukeras.json"
    saved = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**saved, "version": version, "encoding": document}))
    answer = call("load_model", path=str(path))
    assert answer["r_class"] == "gpukeras_error_bad_model", answer
    assert words in answer["message"]
    sidecar.write_text("{not json")
    assert call("load_model", path=str(path))["r_class"] == "gpukeras_error_bad_model"


def test_one_batch_or_several_gives_keras_predictions() -> None:
    """Rows that fit one batch go through one step (predict_on_batch), more through
    Keras' predict(): the same numbers either way, for one input or several."""
    keras = config.keras()
    from gpukeras.serve import scoring

    one = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])
    a, b = keras.Input((3,), name="a"), keras.Input((2,), name="b")
    two = keras.Model([a, b], keras.layers.Dense(1)(keras.layers.Concatenate()([a, b])))
    rng = np.random.default_rng(1)
    for rows in (1, 8, 9, 20):
        x = rng.random((rows, 3), dtype=np.float32)
        expected = keras_outputs(one.predict(x, batch_size=8, verbose=0))
        np.testing.assert_allclose(scoring.predict(one, x, batch_size=8), expected, atol=1e-6)
        inputs = {"a": x, "b": rng.random((rows, 2), dtype=np.float32)}
        expected = keras_outputs(two.predict(inputs, batch_size=8, verbose=0))
        np.testing.assert_allclose(scoring.predict(two, inputs, batch_size=8), expected, atol=1e-6)
