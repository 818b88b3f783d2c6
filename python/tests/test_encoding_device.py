"""A data.frame's one-hot factors kept as their codes until their indicator columns are needed
(data/indicators.py's ``FrameCodes``): on the device for rows trained there (JAX), on the host
for rows that stream; the model sees the same columns and values either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import child_pythonpath, keras_outputs, requires
from gpukeras.data import encoding, indicators
from gpukeras.data.adapters import Rows, as_arrays, resident
from gpukeras.data.array_source import handover

NA = encoding.R_NA_INTEGER
LEVELS = ["east", "north", "west"]
SPEC = {
    "income": {"type": "numeric"},
    "region": {"type": "factor", "levels": LEVELS, "encoding": "one_hot"},
    "size": {"type": "factor", "levels": ["S", "L"], "encoding": "codes"},
    "age": {"type": "numeric"},
}
SCRIPT = Path(__file__).with_name("scripts") / "coded_fit.py"


def frame(region=(1, 2, 3, 1), levels=LEVELS, unknown="error", income=(1.5, 2.0, np.nan, 4.0)):
    columns = {
        "income": {"values": np.array(income), "levels": None},
        "region": {"values": np.array(region, dtype=np.int32), "levels": list(levels)},
        "size": {"values": np.array([1, 2, 1, NA], dtype=np.int32), "levels": ["S", "L"]},
        "age": {"values": np.array([30.0, 40, 50, 60]), "levels": None},
    }
    return {"name": "x", "spec": SPEC, "unknown": unknown, "columns": columns}


def coded(given: dict) -> indicators.FrameCodes:
    made = encoding.frame_codes(given)
    assert isinstance(made, indicators.FrameCodes)
    return made


def test_a_frame_with_one_hot_factors_keeps_int32_codes_and_expands_to_the_same_matrix() -> None:
    made = coded(frame())
    assert made.codes.dtype == np.int32 and made.codes.shape == (4, 1)
    assert made.dense.dtype == np.float32 and made.dense.shape == (4, 3)  # income, size, age
    assert made.shape == (4, 6) and made.nbytes == 4 * (4 * 3) + 4 * 4
    np.testing.assert_array_equal(np.asarray(made), encoding.encode_frame(frame()))
    # a frame without one-hot factors is its matrix itself
    plain = {**frame(), "spec": {k: v for k, v in SPEC.items() if k != "region"}}
    plain["columns"] = {k: v for k, v in plain["columns"].items() if k != "region"}
    assert isinstance(encoding.frame_codes(plain), np.ndarray)


@pytest.mark.parametrize(
    ("region", "levels", "unknown"),
    [
        ((2, NA, 1, 3), ["west", "east", "north", "south"], "error"),  # by name, NA
        ((4, 1, NA, 4), ["east", "north", "west", "south"], "zero"),  # unseen scored 0
    ],
    ids=["na", "unseen"],
)
def test_na_and_unseen_levels_expand_as_the_host_matrix_has_them_on_each_array_module(
    region, levels, unknown
) -> None:
    given = frame(region, levels, unknown)
    made, host = coded(given), encoding.encode_frame(given)
    np.testing.assert_array_equal(made.rows(slice(0, 4)), host)
    jnp = pytest.importorskip("jax.numpy")
    on_jax = indicators.expand_inputs(*indicators.split_codes(made), jnp)
    np.testing.assert_array_equal(np.asarray(on_jax), host)
    if unknown == "error":
        assert np.isnan(host[1, 1:4]).all()  # NA: NaN across the factor's indicators
    else:
        np.testing.assert_array_equal(host[[0, 3], 1:4], 0)  # unseen: zeros


def test_unseen_levels_are_the_same_error_and_na_the_same_rows() -> None:
    with pytest.raises(encoding.DataFieldsError) as caught:
        encoding.frame_codes(frame((4, 1, 1, 1), ["east", "north", "west", "south"]))
    assert caught.value.fields == {"column": "x$region", "levels": ["south"]}
    # NA in the factor alone (row 2) and in a number (row 3): the rows the host matrix names
    given = {"gpukeras_frame": frame((1, NA, 1, 1))}
    messages = []
    for codes in (False, True):
        with pytest.raises(encoding.DataFieldsError) as missing:
            handover(given, check_missing=True, codes=codes)
        messages.append(str(missing.value))
    assert messages[0] == messages[1] and "3 row(s) (first: 2, 3, 4)" in messages[0]


def test_rows_on_the_device_hold_the_codes_and_expand_each_batch_inside_the_step() -> None:
    jax = pytest.importorskip("jax")
    big = 1000
    rng = np.random.default_rng(1)
    given = {
        "name": "x",
        "unknown": "error",
        "spec": {k: SPEC[k] for k in ("income", "region")},
        "columns": {
            "income": {"values": rng.standard_normal(big), "levels": None},
            "region": {"values": rng.integers(1, 4, big).astype(np.int32), "levels": LEVELS},
        },
    }
    x = handover({"gpukeras_frame": given}, codes=True).x
    assert isinstance(as_arrays(x), indicators.FrameCodes)  # the data as given keeps it
    y = np.zeros(big, np.int32)
    rows = resident.DeviceRows(Rows(x, y, big, 100, 3))
    dense, codes = rows.data[0]
    assert codes.dtype == np.int32 and codes.shape == (big, 1) and codes.nbytes == 4 * big
    assert dense.shape == (big, 1)  # the number alone: no indicator column on the device
    assert resident.data_bytes(x) == 4 * big + 4 * big
    picked = np.array([5, 0, 999])
    gathered = jax.tree.map(lambda a: a[picked], rows.data)
    batch = rows.batch(gathered)
    np.testing.assert_array_equal(np.asarray(batch[0]), indicators.host_form(x)[picked])


def run(backend: str, spec: dict) -> dict:
    requires("jax" if backend == "jax" else "tensorflow")
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": child_pythonpath()}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), json.dumps(spec)],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_a_fit_of_the_codes_equals_the_fit_of_the_host_encoded_matrix(backend: str) -> None:
    report = run(backend, {"validation": True, "epochs": 2})
    coded_fit, matrix_fit = report["coded"], report["matrix"]
    assert coded_fit["data_path"]["resident"] == (backend == "jax")
    assert coded_fit["data_path"]["resident"] == matrix_fit["data_path"]["resident"]
    np.testing.assert_allclose(coded_fit["predictions"], matrix_fit["predictions"], atol=1e-6)
    assert coded_fit["history"].keys() == matrix_fit["history"].keys()
    for name, values in coded_fit["history"].items():
        np.testing.assert_allclose(values, matrix_fit["history"][name], atol=1e-6)


@pytest.mark.parametrize("split", [0.0, 0.2], ids=["whole", "split"])
@pytest.mark.parametrize("given_as", ["codes", "frame"])
def test_a_pipeline_gathers_the_codes_and_makes_the_host_matrixs_batches(
    split: float, given_as: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpu_fit()'s codes, and a data.frame R hands gpu_dataset() (made codes there): the
    pipeline keeps the codes and gathers batches equal to the host matrix's."""
    pytest.importorskip("tensorflow")
    from gpukeras.data import pipeline

    count = 103
    rng = np.random.default_rng(2)
    given = {
        "name": "x",
        "unknown": "error",
        "spec": SPEC,
        "columns": {
            "income": {"values": rng.standard_normal(count), "levels": None},
            "region": {"values": rng.integers(1, 4, count).astype(np.int32), "levels": LEVELS},
            "size": {"values": rng.integers(1, 3, count).astype(np.int32), "levels": ["S", "L"]},
            "age": {"values": rng.standard_normal(count), "levels": None},
        },
    }
    x = (
        handover({encoding.FRAME: given}, codes=True).x
        if given_as == "codes"
        else {encoding.FRAME: given}
    )
    host, y = encoding.encode_frame(given), np.arange(count, dtype=np.int32)
    # as gpu_fit()'s data reaches it (checked in the hand-over): nothing makes every row's matrix
    monkeypatch.setattr(indicators.FrameCodes, "host", lambda self: pytest.fail("every row"))
    made = pipeline.from_arrays(x, y, batch_size=10, seed=3, validation_split=split)
    monkeypatch.undo()
    assert isinstance(made["arrays"].x, indicators.FrameCodes)
    assert made["dataset"].element_spec[0].shape.as_list() == [None, 6]
    seen = []
    for dataset in (made["dataset"], made["validation"]):
        for features, rows in dataset or []:
            np.testing.assert_array_equal(features.numpy(), host[rows.numpy()])
            seen.extend(rows.numpy().tolist())
    assert sorted(seen) == list(range(count))


def test_predict_expands_a_block_of_rows_at_a_time_and_scores_as_the_host_matrix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """predict() of a data.frame with one-hot factors makes its indicator columns a block of
    whole batches at a time (three blocks here): the same outputs as the host matrix, whose
    every row is never made; evaluate() scores as the host matrix does."""
    from gpukeras.core.runtime import config
    from gpukeras.serve import scoring

    keras = config.keras()
    rows = 37
    rng = np.random.default_rng(1)
    big = frame(
        region=tuple(rng.integers(1, 4, rows)),
        income=tuple(rng.normal(size=rows)),
    )
    big["columns"]["size"]["values"] = rng.integers(1, 3, rows).astype(np.int32)
    big["columns"]["age"]["values"] = rng.normal(size=rows)
    matrix = encoding.encode_frame(big)
    labels = (matrix[:, 0] > 0).astype("int32")
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(2, activation="softmax")])
    model.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    made: list[int] = []
    rows_of = indicators.rows_of

    def watched(part: object, picked: slice) -> object:
        block = rows_of(part, picked)
        made.append(len(block))  # type: ignore[arg-type]
        return block

    monkeypatch.setattr(indicators, "BLOCK_ROWS", 16)
    monkeypatch.setattr(indicators, "rows_of", watched)
    monkeypatch.setattr(indicators.FrameCodes, "host", lambda self: pytest.fail("every row"))
    predicted = scoring.predict(model, {encoding.FRAME: big}, batch_size=8)
    monkeypatch.undo()
    assert made[1:] == [16, 16, 5]  # (the first: the model's check of one row)
    expected_outputs = keras_outputs(model.predict(matrix, batch_size=8, verbose=0))
    np.testing.assert_allclose(keras_outputs(predicted), expected_outputs, rtol=1e-6)
    scores = scoring.evaluate(model, {encoding.FRAME: big}, labels, "int32", batch_size=8)
    expected = model.evaluate(matrix, labels, batch_size=8, verbose=0, return_dict=True)
    assert scores.keys() == expected.keys()
    for name, value in expected.items():
        assert scores[name] == pytest.approx(value, rel=1e-6)
