"""data/bad_rows.py: NA and non-finite values in R data, named as R names them, and the rows
na = "drop" keeps."""

from __future__ import annotations

import numpy as np
import pytest

from gpukeras.core.errors import DataFieldsError
from gpukeras.data import encoding, pipeline
from gpukeras.data.array_source import handover
from gpukeras.data.bad_rows import as_numpy, check_numbers, check_rows

NA = encoding.R_NA_INTEGER
SPEC = {
    "income": {"type": "numeric"},
    "region": {"type": "factor", "levels": ["east", "west"], "encoding": "one_hot"},
}


def frame(income=(1.0, 2.0, 3.0, 4.0), region=(1, 2, 1, 2)):
    """A data.frame as R's frame_handover() gives it."""
    columns = {
        "income": {"values": np.array(income), "levels": None},
        "region": {"values": np.array(region, dtype=np.int32), "levels": ["east", "west"]},
    }
    return {encoding.FRAME: {"name": "x", "spec": SPEC, "unknown": "error", "columns": columns}}


def labels(values):
    """Factor labels as R's labels_handover() gives them."""
    codes = np.array(values, dtype=np.int32)
    return {encoding.LABELS: {"values": codes, "levels": ["a", "b"], "training": ["a", "b"]}}


def raised(*args, **kwargs) -> DataFieldsError:
    with pytest.raises(DataFieldsError) as error:
        check_rows(*args, **kwargs)
    return error.value


def test_na_in_every_kind_of_part_is_named_by_column_once_with_its_rows():
    """A factor's NA code and a number's NaN in a data.frame (the factor named once), an
    integer's NA_integer_, a matrix column by its name or place, factor labels: the message
    R's own check wrote, and the fields."""
    matrix = np.asfortranarray(np.ones((4, 2)))
    matrix[3, 1] = np.nan
    parts = {
        "x": frame(income=(1.0, np.nan, 3.0, 4.0), region=(1, 2, NA, 2)),
        "y": labels([1, 2, 1, NA]),
    }
    error = raised(parts)
    assert (
        str(error) == "The data has NA/NaN in 3 row(s) (first: 2, 3, 4), in x$income, x$region, y."
    )
    assert error.details == ['Impute or remove them, or pass na = "drop" to drop those rows.']
    assert error.r_classes == ["gpukeras_error_missing_values", "gpukeras_error_bad_data"]
    assert error.fields == {"column": ["x$income", "x$region", "y"], "rows": [2, 3, 4], "n_rows": 3}
    named = raised(
        {"a": matrix, "b": np.array([1, NA, 3, 4], dtype=np.int32)}, columns={"a": ["u", "v"]}
    )
    assert named.fields["column"] == ["a$v", "b"] and named.fields["rows"] == [2, 4]
    assert raised({"a": matrix}, fix="Do this.").fields["column"] == ["a$column 2"]
    assert raised({"a": matrix}, fix="Do this.").details == ["Do this."]


def test_drop_keeps_the_rows_without_na_and_refuses_to_drop_all():
    """na = "drop": the rows kept (from 1), None when every row is; no row left is an error."""
    assert check_rows({"x": frame()}, "drop") is None
    assert check_rows(
        {"x": frame(region=(1, NA, 1, 2)), "w": np.array([1.0, 1, np.nan, 1])}, "drop"
    ) == [1, 4]
    empty = raised({"x": np.full((2, 2), np.nan)}, "drop")
    assert (
        str(empty).startswith("Every row has an NA") and empty.r_class == "gpukeras_error_bad_data"
    )
    # rows of NumPy arrays R was given are not R's to drop; nothing to drop, nothing refused
    parts = {"x": np.array([[1.0], [np.nan]]), "y": np.array([1.0, 2.0])}
    numpy = raised(parts, "drop", numpy=["x"])
    assert str(numpy) == 'na = "drop" cannot drop rows of `x`, a NumPy array.'
    assert numpy.details == ["Drop those rows before gpu_as_numpy(), or give R data."]
    assert check_rows({"x": np.ones((2, 1))}, "drop", numpy="x") is None


def test_the_handover_drops_the_rows_with_na_itself():
    """R's checks with na = "drop": every part (a data.frame's columns, factor labels, weights)
    handed over without the rows holding NA, the rows kept said; a dataset counts the rows
    dropped; a NumPy array's rows are refused as check_rows refuses them."""
    drop = {"columns": {}, "fix": None, "na": "drop", "numpy": []}
    held = handover(
        frame(income=(1.0, np.nan, 3.0, 4.0)), labels([1, 2, NA, 2]), "int32", drop,
        np.array([0.5, 1, 2, 3]),
    )  # fmt: skip
    assert held.kept.tolist() == [0, 3] and held.rows == 4
    np.testing.assert_array_equal(held.x, [[1, 1, 0], [4, 0, 1]])
    assert held.y.tolist() == [0, 1] and held.sample_weight.tolist() == [0.5, 3]
    whole = handover(frame(), None, None, drop)
    assert whole.kept is None and whole.rows == 4 and len(whole.x) == 4
    made = pipeline.from_arrays(
        frame(income=(1.0, np.nan, 3.0, 4.0)), np.arange(4.0), check_missing=drop, batch_size=2
    )
    assert made["info"]["dropped_rows"] == 1 and made["info"]["rows"] == 3
    with pytest.raises(DataFieldsError, match="cannot drop rows of `x`"):
        handover(np.array([[1.0], [np.nan]]), np.ones(2), None, {**drop, "numpy": ["x"]})


def test_values_beyond_float32_are_refused_whatever_na_says():
    """Inf, -Inf and doubles beyond float32's range, in any part, even with na = "drop"."""
    for na in ("error", "drop"):
        error = raised(
            {"x": frame(income=(1.0, np.inf, 3.0, -1e39)), "y": np.array([np.nan, 1.0, 2, 3])}, na
        )
        if na == "error":
            assert error.r_class == "gpukeras_error_missing_values"
            continue
        assert error.r_classes[0] == "gpukeras_error_not_finite"
        assert error.fields == {"column": ["x$income"], "rows": [2, 4], "n_rows": 2}
        assert "(about 3.4e+38) in 2 row(s) (first: 2, 4), in x$income." in str(error)


def test_the_handover_and_a_pipeline_raise_the_named_error_from_their_copies():
    """NaN found in a copy, and R's NA_integer_ (which a float32 copy would make a number),
    are named as check_rows names them; unchecked, NA passes and Inf does not."""
    checks = {"columns": {"x": ["a", "b"]}, "fix": "Fix it."}
    x = np.asfortranarray(np.ones((4, 2)))
    x[2, 0] = np.nan
    with pytest.raises(DataFieldsError, match=r"\(first: 3\), in x\$a\.") as error:
        handover(x, np.arange(4.0), "float32", checks)
    assert error.value.details == ["Fix it."]
    with pytest.raises(DataFieldsError, match=r"\(first: 2\), in y\.$"):
        handover(np.ones((4, 2)), labels([1, NA, 2, 1]), "int32", True)
    with pytest.raises(DataFieldsError, match=r"\(first: 4\), in x\$column 1\."):
        pipeline.from_arrays(np.array([[1], [2], [3], [NA]], dtype=np.int32), check_missing=True)
    assert np.isnan(handover(x, None, None, False).x).sum() == 1
    x[1, 1] = np.inf
    with pytest.raises(DataFieldsError, match=r"in 1 row\(s\) \(first: 2\), in x\$column 2\.$"):
        handover(x, None, None, False)


def test_gpu_as_numpy_numbers_are_checked_for_na_counted_as_r_counts():
    check_numbers(np.array([[1.0, 2.0], [3.0, 4.0]]))
    values = np.asfortranarray([[1.0, np.nan], [3.0, np.nan]])
    with pytest.raises(
        DataFieldsError, match=r"`x` has 2 NA/NaN value\(s\), the first at position 3\."
    ):
        check_numbers(values)
    with pytest.raises(DataFieldsError, match="the first at position 2"):
        check_numbers(np.array([1, np.iinfo(np.int32).min], np.int32))


def test_gpu_as_numpy_copies_checked_numbers_to_a_c_order_array_of_its_dtype():
    values = np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3))
    made = as_numpy(values, "float32")
    assert made.dtype == np.float32 and made.flags.c_contiguous
    np.testing.assert_array_equal(made, values)
    assert as_numpy(np.array([1.5]), "float16").dtype == np.float16  # any dtype NumPy knows
    codes = as_numpy(np.array([2, 1, 3], np.int32), "int32", codes=True)
    assert codes.dtype == np.int32 and codes.tolist() == [1, 0, 2]  # a factor's codes from 0
    with pytest.raises(DataFieldsError, match="the first at position 2") as error:
        as_numpy(np.array([1, np.iinfo(np.int32).min], np.int32), "int32", codes=True)
    assert error.value.r_classes == ["gpukeras_error_bad_data"]
    with pytest.raises(DataFieldsError, match="converted to NumPy dtype 'float33'") as error:
        as_numpy(np.array([1.0]), "float33")
    assert error.value.r_classes == ["gpukeras_error_bad_argument"]
    assert error.value.details[0].startswith("Use a NumPy dtype name such as")
