"""predict_file: predictions written to CSV batch by batch, in order, all or nothing."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from conftest import keras_outputs, requires
from gpukeras import bridge
from gpukeras.core.runtime import config
from gpukeras.data.csv_source import csv_source


@pytest.fixture(scope="module")
def model() -> object:
    """A small classifier of 4 features into 3 classes (softmax), trained a little."""
    keras = config.keras()
    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(120, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 1).astype("int32")
    built = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    built.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    built.fit(x, y, epochs=1, batch_size=32, verbose=0)
    return built


def features(rows: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(rows, 4)).astype("float32")


def answer(**kwargs: object) -> dict:
    return bridge.call("predict_file", kwargs)


def written(**kwargs: object) -> dict:
    result = answer(**kwargs)
    assert result["ok"], result
    return result["value"]


def read(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def numbers(rows: list[list[str]], columns: slice) -> np.ndarray:
    return np.array([[float(cell) for cell in row[columns]] for row in rows])


def leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if ".tmp-" in path.name)


def test_arrays_give_keras_outputs_in_order_in_any_batch_size(model, tmp_path: Path) -> None:
    x = features(203)
    expected = keras_outputs(model.predict(x, verbose=0))
    # R hands over column-major float64 views: the core copies them to C order itself.
    fortran = np.asfortranarray(x.astype("float64"))
    for batch_size in (7, 64, 1000):
        path = tmp_path / f"p{batch_size}.csv"
        value = written(
            model=model, x=fortran, batch_size=batch_size, file=str(path), levels=["a", "b", "c"]
        )
        assert value["rows"] == 203 and value["columns"] == 3
        assert value["path"] == str(path.resolve())
        header, rows = read(path)
        assert header == ["a", "b", "c"]
        np.testing.assert_allclose(numbers(rows, slice(None)), expected, rtol=0, atol=1e-6)
    assert leftovers(tmp_path) == []


def test_a_dataset_streams_its_batches_labels_ignored(model, tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    x = features(150, seed=2)
    labels = np.zeros(150, dtype="int32")
    dataset = tf.data.Dataset.from_tensor_slices((x, labels)).batch(32)
    path = tmp_path / "ds.csv"
    value = written(model=model, x=dataset, file=str(path))
    assert value["rows"] == 150
    header, rows = read(path)
    assert header == ["prediction_1", "prediction_2", "prediction_3"]
    np.testing.assert_allclose(
        numbers(rows, slice(None)), keras_outputs(model.predict(x, verbose=0)), atol=1e-6
    )


def test_a_csv_source_is_scored_row_by_row_in_file_order(model, tmp_path: Path) -> None:
    requires("tensorflow")  # a CSV source is read by tf.data
    x = features(70, seed=4)
    source = tmp_path / "in.csv"
    np.savetxt(source, x, fmt="%.9g", delimiter=",", header="a,b,c,d", comments="")
    dataset = csv_source(str(source)).dataset.batch(16)
    out = tmp_path / "out.csv"
    written(model=model, x=dataset, file=str(out))
    _, rows = read(out)
    np.testing.assert_allclose(
        numbers(rows, slice(None)), keras_outputs(model.predict(x, verbose=0)), atol=1e-6
    )


def test_classes_row_names_and_rows_left_out(model, tmp_path: Path) -> None:
    x = features(7, seed=5)
    x[1, 0] = x[3, 2] = np.nan
    predicted = keras_outputs(model.predict(x[[0, 2, 4, 5, 6]], verbose=0))
    path = tmp_path / "classes.csv"
    # rows 2 and 4 of 7 hold NA: left out with R's na = "drop", as the core drops them
    value = written(
        model=model, x=x, batch_size=2, file=str(path), levels=["low", "mid, high", "top"],
        classes=True, check_missing={"columns": {}, "fix": None, "na": "drop"},
        row_names=["r1", "r2", "r3", "r4", "r5", "r6", "r7"],
    )  # fmt: skip
    assert value["rows"] == 7 and value["columns"] == 5
    header, rows = read(path)
    assert header == ["row", "low", "mid, high", "top", "class"]
    assert [row[0] for row in rows] == [f"r{i}" for i in range(1, 8)]
    assert rows[1][1:] == ["NA"] * 4 and rows[3][1:] == ["NA"] * 4
    scored = [rows[i] for i in (0, 2, 4, 5, 6)]
    np.testing.assert_allclose(numbers(scored, slice(1, 4)), predicted, atol=1e-6)
    levels = np.array(["low", "mid, high", "top"])
    assert [row[4] for row in scored] == levels[predicted.argmax(axis=1)].tolist()


def test_several_outputs_are_prefixed_by_their_names(tmp_path: Path) -> None:
    keras = config.keras()
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(4)(inputs)
    two = keras.Model(
        inputs,
        [keras.layers.Dense(2, name="kind")(hidden), keras.layers.Dense(1, name="size")(hidden)],
    )
    x = features(9)
    path = tmp_path / "two.csv"
    written(model=two, x=x, file=str(path), levels=["p", "q"])
    header, rows = read(path)
    assert header == ["kind_p", "kind_q", "size"]
    kind, size = keras_outputs(two.predict(x, verbose=0))
    np.testing.assert_allclose(numbers(rows, slice(None)), np.hstack([kind, size]), atol=1e-6)
    refused = answer(model=two, x=x, file=str(tmp_path / "c.csv"), classes=True)
    assert refused["r_class"] == "gpukeras_error_bad_argument"
    assert "one output" in refused["message"]


def test_a_failure_part_way_leaves_no_file_and_an_existing_one_as_it_was(
    model, tmp_path: Path
) -> None:
    tf = pytest.importorskip("tensorflow")
    good = features(64)
    # a later batch the model refuses: 3 features instead of 4
    refused = (
        tf.data.Dataset.from_tensor_slices(good)
        .batch(16)
        .concatenate(tf.data.Dataset.from_tensor_slices(good[:, :3]).batch(16))
    )
    # a CSV file whose row 300 holds text: only reading it finds out
    source = tmp_path / "bad.csv"
    lines = [",".join(f"{v:.4f}" for v in row) for row in features(400)]
    lines[299] = "1,2,oops,4"
    source.write_text("a,b,c,d\n" + "\n".join(lines) + "\n")
    unreadable = csv_source(str(source)).dataset.batch(32)
    target = tmp_path / "out.csv"
    for data, words in ((refused, "cannot predict"), (unreadable, "could not be made")):
        result = answer(model=model, x=data, file=str(target))
        assert not result["ok"]
        assert result["r_class"] == "gpukeras_error_bad_data"
        assert "Nothing was written" in result["message"]
        assert words in result["message"]
        assert not target.exists()
        assert leftovers(tmp_path) == []
    # overwrite = TRUE: the old file stays until every row is written
    target.write_text("old\n")
    result = answer(model=model, x=refused, file=str(target), overwrite=True)
    assert not result["ok"] and target.read_text() == "old\n"
    written(model=model, x=good, file=str(target), overwrite=True)
    assert read(target)[0] == ["prediction_1", "prediction_2", "prediction_3"]
    assert leftovers(tmp_path) == []


def test_bad_targets_are_refused_before_any_batch(model, tmp_path: Path) -> None:
    (tmp_path / "exists.csv").write_text("keep\n")
    cases = {
        str(tmp_path): "is a folder",
        str(tmp_path / "no" / "p.csv"): "does not exist",
        str(tmp_path / "exists.csv"): "already exists",
        "": "one file path",
    }
    for file, words in cases.items():
        result = answer(model=model, x=features(3), file=file)
        assert result["r_class"] == "gpukeras_error_bad_argument", file
        assert words in result["message"]
    assert (tmp_path / "exists.csv").read_text() == "keep\n"
    assert leftovers(tmp_path) == []


def test_a_link_at_the_file_is_replaced_never_followed(model, tmp_path: Path) -> None:
    """A link planted at ``file`` (to a victim's file or folder, or dangling) counts as an
    existing file, and with overwrite the predictions replace the link itself."""
    victims = tmp_path / "victim"
    victims.mkdir()
    (victims / "own.csv").write_text("the victim's\n")
    for target in (victims / "own.csv", victims, tmp_path / "nowhere"):
        link = tmp_path / "predictions.csv"
        link.symlink_to(target)
        result = answer(model=model, x=features(3), file=str(link))
        assert "already exists" in result["message"]
        value = written(model=model, x=features(3), file=str(link), overwrite=True)
        assert not link.is_symlink() and value["rows"] == 3
        link.unlink()
    assert (victims / "own.csv").read_text() == "the victim's\n"
    assert sorted(path.name for path in victims.iterdir()) == ["own.csv"]
