"""data/encoding.py: a data.frame's columns, as R hands them over, into the model's matrix."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from gpukeras.core.errors import DataFieldsError
from gpukeras.data import encoding, encoding_plain, encoding_words, indicators, recording
from gpukeras.data.array_source import handover

NA = encoding.R_NA_INTEGER
SPEC = {
    "income": {"type": "numeric"},
    "region": {"type": "factor", "levels": ["east", "north", "west"], "encoding": "one_hot"},
    "size": {"type": "factor", "levels": ["S", "L"], "encoding": "codes"},
}


def frame(region=(1, 2, 3, 1), levels=("east", "north", "west"), unknown="error", **more):
    columns = {
        "income": {"values": np.array([1.5, 2.0, np.nan, 4.0]), "levels": None},
        "region": {"values": np.array(region, dtype=np.int32), "levels": list(levels)},
        "size": {"values": np.array([1, 2, 1, NA], dtype=np.int32), "levels": ["S", "L"]},
    }
    columns.update(more)
    return {"name": "x", "spec": SPEC, "unknown": unknown, "columns": columns}


def test_columns_in_the_spec_order_factors_as_indicators_or_codes():
    matrix = encoding.encode_frame(frame())
    assert matrix.dtype == np.float32 and matrix.flags.c_contiguous
    assert matrix.ctypes.data % indicators.ALIGNMENT == 0
    expected = np.array(
        [[1.5, 1, 0, 0, 0], [2, 0, 1, 0, 1], [np.nan, 0, 0, 1, 0], [4, 1, 0, 0, np.nan]],
        dtype=np.float32,
    )
    np.testing.assert_array_equal(matrix, expected)
    assert encoding.frame_width(SPEC) == 5


def test_levels_are_matched_by_name_and_na_is_a_row_of_nan():
    # the new data's own levels in another order, one unused level it lacks in training
    matrix = encoding.encode_frame(frame((2, NA, 1, 3), ("west", "east", "north", "south")))
    np.testing.assert_array_equal(matrix[0, 1:4], [1, 0, 0])
    assert np.isnan(matrix[1, 1:4]).all()
    np.testing.assert_array_equal(matrix[2, 1:4], [0, 0, 1])
    np.testing.assert_array_equal(matrix[3, 1:4], [0, 1, 0])


def test_unseen_levels_are_an_error_with_fields_or_scored_as_unknown_says():
    with pytest.raises(DataFieldsError) as caught:
        encoding.encode_frame(frame((4, 1, 5, 4), ("east", "north", "west", "south", "mauve")))
    error = caught.value
    assert error.r_class == "gpukeras_error_new_levels"
    assert error.fields == {"column": "x$region", "levels": ["south", "mauve"]}
    assert str(error) == '`x$region` has level(s) not seen in training: "south", "mauve".'
    assert error.details[0] == 'The model knows "east", "north", "west".'
    zero = encoding.encode_frame(frame((4, 1, 2, 3), ("east", "north", "west", "south"), "zero"))
    np.testing.assert_array_equal(zero[0, 1:4], [0, 0, 0])
    size = {"values": np.array([1, 2, 3, 1], dtype=np.int32), "levels": ["S", "L", "M"]}
    coded = encoding.encode_frame(
        frame(unknown="code", size=size) | {"spec": {"size": SPEC["size"]}}
    )
    np.testing.assert_array_equal(coded[:, 0], [0, 1, 2, 0])


def test_a_character_column_lists_unseen_values_as_they_come():
    region = {"values": np.array([3, 1, 2], dtype=np.int32), "levels": ["b", "east", "z"]}
    region["appearance"] = True
    with pytest.raises(DataFieldsError) as caught:
        encoding.encode_frame(
            frame(region=(1,)) | {"spec": {"region": SPEC["region"]}, "columns": {"region": region}}
        )
    assert caught.value.fields["levels"] == ["z", "b"]


def test_a_column_of_the_wrong_type_is_an_error_naming_it():
    numbers = {
        "values": np.array([1.0, 2, 3, 4]),
        "levels": None,
        "class": "numeric",
        "typeof": "double",
    }
    with pytest.raises(DataFieldsError) as caught:
        encoding.encode_frame(
            frame(region=(1,)) | {"columns": {**frame()["columns"], "region": numbers}}
        )
    assert caught.value.r_classes == ["gpukeras_error_wrong_type", "gpukeras_error_bad_data"]
    assert str(caught.value) == "`x$region` is numeric (numeric); in training it was a factor."
    assert caught.value.fields == {"column": "x$region", "type": "double"}
    flags = {"values": np.array([1.0, 0, 1, 0]), "class": "logical", "typeof": "logical"}
    with pytest.raises(DataFieldsError, match=r"^`x\$region` is not numeric \(logical\);"):
        encoding.encode_frame(
            frame(region=(1,)) | {"columns": {**frame()["columns"], "region": flags}}
        )
    letters = {**SPEC, "region": {"type": "numeric"}}
    text = {"values": np.array([1, 2, 1, 2], dtype=np.int32), "levels": ["a", "b"]}
    for handed, words in [
        ({"appearance": True, "class": "character"}, "not numeric (character)"),
        ({"class": "factor", "typeof": "integer"}, "a factor"),
    ]:
        with pytest.raises(
            DataFieldsError, match=f"is {re.escape(words)}; in training it was numeric"
        ):
            encoding.encode_frame(
                frame()
                | {"spec": letters, "columns": {**frame()["columns"], "region": text | handed}}
            )


def test_large_frames_are_filled_in_blocks_alike():
    rows = indicators.PARALLEL_ROWS + 7
    rng = np.random.default_rng(1)
    codes = rng.integers(1, 4, rows).astype(np.int32)
    numbers = rng.normal(size=rows)
    columns = {
        "income": {"values": numbers, "levels": None},
        "region": {"values": codes, "levels": ["east", "north", "west"]},
        "size": {"values": codes.copy(), "levels": ["S", "L", "XL"]},
    }
    spec = {**SPEC, "size": {"type": "factor", "levels": ["S", "L", "XL"], "encoding": "codes"}}
    matrix = encoding.encode_frame({"name": "x", "spec": spec, "columns": columns})
    expected = np.column_stack([numbers, np.eye(3)[codes - 1], codes - 1]).astype(np.float32)
    np.testing.assert_array_equal(matrix, expected)


def test_handover_encodes_frames_and_checks_them_as_copies():
    held = handover({"a": {encoding.FRAME: frame()}, "b": np.ones((4, 2))}, check_missing=False)
    assert held.x["a"].shape == (4, 5) and held.x["b"].dtype == np.float32
    with pytest.raises(Exception, match="NA/NaN in 2 row"):
        handover({encoding.FRAME: frame()}, check_missing=True)


def test_handover_puts_r_matrices_in_the_training_order_of_their_columns():
    # R's checks: each matrix's own column names, and each input's training ones (the encoding's)
    checks = {"columns": {"x": ["c", "a", "b"]}, "order": {"x": ["a", "b", "c"]}}
    given = np.array([[3.0, 1.0, 2.0], [6.0, 4.0, 5.0]])
    assert handover(given, check_missing=checks).x.tolist() == [[1, 2, 3], [4, 5, 6]]
    # a data.frame given for that matrix: the training columns (R handed them over) as numbers
    columns = {
        c: {"values": np.array([v, v]), "levels": None} for c, v in zip("bac", (2.0, 1.0, 3.0))
    }
    frame = {encoding.FRAME: {"name": "x", "spec": None, "unknown": "error", "columns": columns}}
    assert handover(frame, check_missing=checks).x.tolist() == [[1, 2, 3]] * 2
    region = {"values": np.array([1, 1], dtype=np.int32), "levels": ["u"], "class": "factor"}
    with pytest.raises(
        DataFieldsError, match=re.escape("`x$a` is a factor; in training it was numeric")
    ):
        handover(
            {encoding.FRAME: {**frame[encoding.FRAME], "columns": {**columns, "a": region}}},
            check_missing=checks,
        )
    # an R vector is one column, as the encoding records it; a NumPy array R holds, as it is
    several = {"v": np.array([1.0, 2.0]), "n": np.array([1.0, 2.0])}
    held = handover(several, check_missing={"numpy": "n"}).x
    assert held["v"].shape == (2, 1) and held["n"].shape == (2,)


def test_r_labels_are_copied_as_int32_where_they_are_codes_else_float32():
    checks = {"numpy": ["n"]}
    levels = ["a", "b"]
    codes = {"values": np.array([1, 2], dtype=np.int32), "levels": levels, "training": levels}
    x = np.ones((2, 1))
    assert handover(x, {encoding.LABELS: codes}, check_missing=checks).y.dtype == np.int32
    integers = np.array([0, 1], dtype=np.int32)
    assert handover(x, integers, check_missing=checks).y.dtype == np.int32
    assert handover(x, np.array([0.5, 1.0]), check_missing=checks).y.dtype == np.float32
    # a NumPy array R holds as it is: float32, whatever its own; without R's checks, its own
    numpy = {"numpy": ["y"]}
    assert handover(x, integers, check_missing=numpy).y.dtype == np.float32
    assert handover(x, np.array([0.5, 1.0])).y.dtype == np.float64


def test_a_one_hot_factor_of_one_level_is_a_column_of_ones():
    spec = {"f": {"type": "factor", "levels": "only", "encoding": "one_hot"}}
    values = {"values": np.array([1, 1, NA], dtype=np.int32), "levels": "only"}
    matrix = encoding.encode_frame({"name": "x", "spec": spec, "columns": {"f": values}})
    np.testing.assert_array_equal(matrix, [[1], [1], [np.nan]])


def test_arrays_the_core_made_are_known_as_its_own():
    from gpukeras.data.adapters import core_made

    held = handover({encoding.FRAME: frame()}, np.ones(4), "float32")
    assert core_made(held.x, held.y, None)
    assert not core_made(held.x, np.ones(4))
    assert not core_made(None)


def test_the_bridge_answers_an_unseen_level_with_r_classes_and_fields():
    from gpukeras import bridge

    bad = frame((4, 1, 2, 3), ("east", "north", "west", "south"))
    answer = bridge.answer(encoding.encode_frame, {"frame": bad})
    assert answer["ok"] is False
    assert answer["r_classes"] == ["gpukeras_error_new_levels"]
    assert answer["fields"] == {"column": "x$region", "levels": ["south"]}
    assert answer["details"][0] == 'The model knows "east", "north", "west".'


def test_the_encoding_is_made_from_r_account_of_the_training_data():
    inputs = {
        "x": {
            "type": "data.frame",
            "columns": {
                "income": {"type": "numeric", "levels": None},
                "region": {"type": "factor", "levels": ["north", "east"]},
                "shop": {
                    "type": "character",
                    "levels": "a",
                },  # one level: a string, as reticulate gives it
                "member": {"type": "logical", "levels": None},
            },
        },
        "pixels": {"type": "array", "shape": 3, "names": None},
    }
    y = {"type": "factor", "levels": ["no", "yes"]}
    made = encoding.data_encoding(inputs, y, True, "drop", {"shop": "codes"})
    assert made["input_order"] == ["x", "pixels"]
    assert made["inputs"]["x"]["columns"] == {
        "income": {"type": "numeric"},
        "region": {"type": "factor", "levels": ["north", "east"], "encoding": "one_hot"},
        "shop": {"type": "factor", "levels": ["a"], "encoding": "codes", "character": True},
        "member": {"type": "logical"},
    }
    assert made["inputs"]["x"]["column_order"] == ["income", "region", "shop", "member"]
    assert made["inputs"]["pixels"] == {"type": "array", "shape": [3], "names": None}
    assert made["y"] == y and made["several"] and made["na"] == "drop"
    assert encoding.data_encoding(inputs, None, True, "error", "codes")["y"] is None
    assert encoding.frame_width(made["inputs"]["x"]["columns"]) == 5
    # what the core makes is what a valid file holds (serve/encoding_file.py's one check)
    assert encoding_plain.plain_problem(json.loads(json.dumps(made))) is None
    assert encoding.part_width(made["inputs"]["pixels"]) == 3


def test_a_frame_handed_over_is_accounted_for_by_its_columns():
    """R hands a data.frame over once, as its columns (frame_handover()): the encoding reads
    each column's type and levels from them as from R's account of them."""

    def column(levels, r_class, typeof, number=True, appearance=False):
        return {
            "values": None,  # R leaves the numbers out of what the encoding is made from
            "levels": levels,
            "class": r_class,
            "typeof": typeof,
            "number": number,
            "appearance": appearance,
        }

    handed = {
        "income": column(None, "numeric", "double"),
        "region": column(["north", "east"], "factor", "integer", False),
        "shop": column(["a"], "character", "character", False, True),
        "member": column(None, "logical", "logical"),
    }
    frame = {encoding.FRAME: {"name": "x", "spec": None, "unknown": "error", "columns": handed}}
    assert recording.frame_account(frame)["columns"] == {
        "income": {"type": "numeric", "levels": None},
        "region": {"type": "factor", "levels": ["north", "east"]},
        "shop": {"type": "character", "levels": ["a"]},
        "member": {"type": "logical", "levels": None},
    }
    account = {"type": "data.frame", "columns": recording.frame_account(frame)["columns"]}
    made = recording.record({"x": frame}, None, False, "error")
    assert made == recording.record({"x": account}, None, False, "error")
    handed["day"] = column(None, "Date", "double", False)  # a type R has no numbers for
    with pytest.raises(DataFieldsError, match=r"unsupported type in `x`: day \(Date\)"):
        recording.record({"x": frame}, None, False, "error")


def test_factors_naming_a_column_that_is_no_factor_is_an_error_naming_them():
    inputs = {"x": {"type": "data.frame", "columns": {"a": {"type": "numeric"}}}}
    with pytest.raises(
        DataFieldsError, match="not factor or character columns of `x`: a, b"
    ) as error:
        encoding.data_encoding(inputs, None, False, "error", {"a": "codes", "b": "codes"})
    assert error.value.r_classes == ["gpukeras_error_bad_argument"]
    assert error.value.details == ["`x` has no factor or character column."]


def test_factor_labels_are_matched_to_the_training_levels_by_name():
    labels = {"values": np.array([2, 1, 2], dtype=np.int32), "levels": ["yes", "no"]}
    codes = encoding.label_codes({**labels, "training": ["no", "yes"]})
    assert codes.dtype == np.int32 and codes.ctypes.data % indicators.ALIGNMENT == 0
    np.testing.assert_array_equal(codes, [0, 1, 0])
    held = handover(np.zeros((3, 1)), {encoding.LABELS: {**labels, "training": ["no", "yes"]}})
    np.testing.assert_array_equal(held.y, [0, 1, 0])
    with pytest.raises(
        DataFieldsError, match='`y` has level\\(s\\) not seen in training: "yes"'
    ) as error:
        encoding.label_codes({**labels, "training": ["no"]})
    assert error.value.fields == {"column": "y", "levels": ["yes"]}
    assert error.value.r_classes == ["gpukeras_error_new_levels"]


def test_two_encodings_are_the_same_where_they_encode_alike():
    frame_part = {
        "type": "data.frame",
        "columns": {
            "a": {"type": "numeric"},
            "s": {"type": "factor", "levels": ["u", "v"], "encoding": "one_hot", "character": True},
        },
        "column_order": ["a", "s"],
    }
    wanted = {
        "inputs": {"x": frame_part, "m": {"type": "array", "shape": [2], "names": ["p", "q"]}},
        "y": {"type": "factor", "levels": ["no", "yes"]},
    }
    as_factor = {**frame_part["columns"]["s"]}
    del as_factor["character"]
    given = {
        "inputs": {
            "x": {**frame_part, "columns": {**frame_part["columns"], "s": as_factor}},
            "m": {"type": "array", "shape": 2, "names": None},
        },
        "y": None,
    }
    assert encoding.same_encoding(given, wanted)
    other_levels = {**as_factor, "levels": ["v", "u"]}
    given["inputs"]["x"] = {**frame_part, "columns": {"a": {"type": "numeric"}, "s": other_levels}}
    assert not encoding.same_encoding(given, wanted)
    given["inputs"]["x"] = frame_part
    assert not encoding.same_encoding({**given, "y": {"type": "factor", "levels": ["no"]}}, wanted)
    assert not encoding.same_encoding({**given, "images": {"image_size": [2, 2]}}, wanted)
    encoding.check_same_encoding(given, wanted, "newdata")
    with pytest.raises(DataFieldsError, match=r"^`validation_data` is a gpu_dataset") as refused:
        encoding.check_same_encoding({**given, "images": {}}, wanted, "validation_data")
    assert refused.value.r_classes == ["gpukeras_error_bad_data"]
    assert "like = <the training dataset or fit>" in refused.value.details[0]


PLAIN = {
    "inputs": {"x": {"type": "data.frame", "columns": SPEC, "column_order": list(SPEC)}},
    "input_order": ["x"],
    "several": False,
    "y": {"type": "factor", "levels": ["no", "yes"]},
    "na": "error",
}


def test_an_encoding_in_words_for_print_the_fit_report_and_the_columns():
    assert encoding_words.encoding_lines(PLAIN) == [
        "<gpukeras_encoding>",
        "  x: data.frame, income <numeric>, region <factor(3), one-hot>, size <factor(2), codes>",
        "  y: factor, levels no, yes",
        "  NA rule in training: error",
    ]
    columns = "5 columns: income, region (3 levels, one-hot), size (2 levels, integer codes)"
    assert encoding_words.encoding_lines(PLAIN, "columns") == [columns]
    assert encoding_words.encoding_lines(PLAIN, "fit") == [
        f"Encoding:       {columns}; classes no, yes; predict(fit, newdata) and gpu_save() "
        "encode new data the same way"
    ]
    images = {
        "inputs": {"x": {"type": "array", "shape": [28, 28, 3]}},
        "y": {"type": "factor", "levels": ["cat", "dog"]},
        "images": {"image_size": [28, 28], "color_mode": "rgb", "rescale": 1 / 255},
        "na": "error",
    }
    assert encoding_words.encoding_lines(images)[1:4] == [
        "  x: array, rows of shape (28, 28, 3)",
        "  y: factor, levels cat, dog",
        "  images: 28 x 28, rgb, pixels in [0, 1]",
    ]


def test_a_model_of_another_width_than_the_encoding_is_told_both():
    from gpukeras.core.runtime import config
    from gpukeras.serve.scoring import check_widths

    keras = config.keras()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    with pytest.raises(DataFieldsError, match=r"takes rows of 4 column\(s\), but `x` gives 5"):
        check_widths(model, PLAIN)
    with pytest.raises(DataFieldsError, match="output has 3 unit") as error:
        check_widths(model, None, ["no", "yes"])
    assert error.value.details[0].endswith('(or one unit, activation = "sigmoid").')
    check_widths(model, None, ["a", "b", "c"])
    wide = keras.Sequential([keras.Input((5,)), keras.layers.Dense(1)])
    check_widths(wide, PLAIN, ["no", "yes"])
    # narrower than the levels: the advice names what makes a level no example has
    levels = ["a", "b", "c", "d"]
    with pytest.raises(DataFieldsError, match="output has 3 unit") as error:
        check_widths(model, None, levels)
    assert error.value.details[1].endswith("y <- droplevels(y).")
    folder = encoding.image_encoding(levels, (4, 4), 3, "rgb", 1 / 255)
    with pytest.raises(DataFieldsError, match="output has 3 unit") as error:
        check_widths(model, folder, levels)
    assert error.value.details[1] == (
        "A class folder without images counts too: remove it from the folder."
    )


def test_a_factors_plan_is_its_table_index_by_level_and_the_model_columns_by_index():
    """One plan per factor column, which NumPy here and TensorFlow in the export apply alike:
    levels by position, an unseen level the index after them (scored only where ``unknown``
    is the rule's), NA the next; the table one-hot's indicators or the code itself."""
    one_hot = encoding.factor_plan(SPEC["region"], "zero")
    assert (one_hot.levels, one_hot.unseen, one_hot.scored, one_hot.unknown) == (
        ["east", "north", "west"], 3, True, "zero"
    )  # fmt: skip
    np.testing.assert_array_equal(one_hot.table(), indicators.indicator_table(3))
    codes = encoding.factor_plan(SPEC["size"], "zero")
    assert (codes.scored, codes.advice, codes.unknown) == (False, "code", "error")
    np.testing.assert_array_equal(codes.table()[:, 0], [0, 1, 2, np.nan])
    old = encoding.factor_plan({"type": "factor", "levels": "a"}, "code")
    assert (old.levels, old.rule, old.scored) == (["a"], "codes", True)


def test_a_file_of_any_version_is_read_in_full_factors_without_a_rule_as_codes():
    old = {
        "inputs": {
            "x": {
                "type": "data.frame",
                "columns": {"b": {"type": "factor", "levels": ["p"]}, "a": {"type": "numeric"}},
                "column_order": ["a", "b"],
            }
        },
        "y": None,
    }
    full = encoding.normalized(old)
    assert list(full["inputs"]["x"]["columns"]) == ["a", "b"] == full["inputs"]["x"]["column_order"]
    assert full["inputs"]["x"]["columns"]["b"]["encoding"] == "codes"
    assert (full["input_order"], full["several"], full["na"]) == (["x"], False, "error")
    assert encoding.normalized(full) == full


def test_an_encoding_as_r_sends_it_is_made_json_ready_one_level_or_dimension_a_list():
    # reticulate gives R's vector of one value as that value: one level, one dimension, one name
    sent = {
        "inputs": {
            "x": {
                "type": "data.frame",
                "columns": {
                    "shop": {
                        "type": "factor",
                        "levels": "a",
                        "encoding": "codes",
                        "character": True,
                    },
                    "levels": {"type": "numeric"},  # a column named like a field stays a column
                },
            },
            "m": {"type": "array", "shape": 3, "names": "p"},
        },
        "y": {"type": "factor", "levels": ("no", "yes")},
        "images": {"image_size": (28, 28), "color_mode": "rgb", "rescale": 1},
    }
    plain = encoding.plain_encoding(sent)
    assert plain["inputs"]["x"]["columns"] == {
        "shop": {"type": "factor", "levels": ["a"], "encoding": "codes", "character": True},
        "levels": {"type": "numeric"},
    }
    assert plain["inputs"]["x"]["column_order"] == ["shop", "levels"]
    assert plain["inputs"]["m"] == {"type": "array", "shape": [3], "names": ["p"]}
    assert plain["input_order"] == ["x", "m"] and plain["y"]["levels"] == ["no", "yes"]
    assert plain["images"]["image_size"] == [28, 28]
    assert encoding.plain_encoding(plain) == plain == json.loads(json.dumps(plain))
    # what R prints of it is what it printed before it was saved (a character column as such)
    assert encoding_words.encoding_lines(sent) == encoding_words.encoding_lines(plain)
    assert "shop <character, 1 values, codes>" in encoding_words.encoding_lines(plain)[1]


def test_an_image_folder_encoding_holds_its_images_classes_and_pixel_rule():
    made = encoding.image_encoding(["cat", "dog"], (28, 32), 3, "rgb", 1 / 255)
    assert made == {
        "inputs": {"x": {"type": "array", "shape": [28, 32, 3], "names": None}},
        "input_order": ["x"],
        "several": False,
        "y": {"type": "factor", "levels": ["cat", "dog"]},
        "na": "error",
        "x_dtype": "float32",
        "images": {"image_size": [28, 32], "color_mode": "rgb", "rescale": 1 / 255},
    }
    assert encoding.plain_encoding(made) == made and encoding_plain.plain_problem(made) is None
    assert encoding_words.encoding_lines(made)[3] == "  images: 28 x 32, rgb, pixels in [0, 1]"
    assert encoding.part_width(made["inputs"]["x"]) == 28 * 32 * 3
    assert (
        encoding_plain.plain_problem({**made, "na": "keep"})
        == "its NA rule is neither error nor drop"
    )


def test_the_vocabulary_is_each_factor_columns_levels_and_the_labels():
    plain = encoding.data_encoding(
        {
            "a": {"type": "array", "shape": [2], "names": None},
            "b": {
                "type": "data.frame",
                "columns": {
                    "kind": {"type": "character", "levels": ["x", "y"]},
                    "n": {"type": "numeric"},
                    "grade": {"type": "factor", "levels": "low"},
                },
            },
        },
        {"type": "factor", "levels": ["p", "q"]},
        True,
        "error",
        {"grade": "codes"},
    )
    assert encoding.vocabulary(plain) == {"kind": ["x", "y"], "grade": ["low"], "y": ["p", "q"]}
    assert encoding.vocabulary({**plain, "y": {"type": "numeric"}}) == {
        "kind": ["x", "y"],
        "grade": ["low"],
    }


def test_columns_of_other_types_are_refused_in_training_and_in_new_data():
    """A column R has no numbers for (a Date, a list): refused by name and R class, when the
    encoding is made and when new data hands such a column over without values."""
    account = {"a": {"type": "numeric"}, "when": {"type": "Date"}, "l": {"type": "list"}}
    with pytest.raises(DataFieldsError, match=r"type in `x`: when \(Date\), l \(list\)\.") as error:
        encoding.data_encoding({"x": {"type": "data.frame", "columns": account}}, None, False, "")
    assert error.value.r_classes == ["gpukeras_error_bad_data"]
    assert "as.numeric()" in error.value.details[0]
    dated = {"values": None, "levels": None, "class": "Date", "typeof": "double"}
    with pytest.raises(DataFieldsError, match=r"type in `x`: income \(Date\)\."):
        encoding.encode_frame({**frame(), "columns": {**frame()["columns"], "income": dated}})


def test_new_data_is_checked_against_the_training_encoding_by_the_core():
    inputs = {
        "x": {
            "type": "data.frame",
            "columns": {"a": {"type": "numeric"}, "b": {"type": "factor", "levels": ["u"]}},
        }
    }
    trained = encoding.data_encoding(inputs, {"type": "factor", "levels": ["n", "y"]}, False, "")
    assert trained is not None
    frame = {"type": "data.frame", "columns": {"b": {"type": "factor"}, "a": {}, "c": {}}}
    assert encoding.data_encoding({"x": frame}, None, False, "", encoding=trained) is None

    def refused(inputs, y=None, several=False, plain=trained):
        with pytest.raises(DataFieldsError) as caught:
            encoding.data_encoding(inputs, y, several, "", encoding=plain)
        assert caught.value.r_classes == ["gpukeras_error_bad_data"]
        return str(caught.value)

    lacking = {"type": "data.frame", "columns": {"a": {}}}
    assert refused({"x": lacking}).startswith("`x` lacks column(s) the model was trained on: b.")
    matrix = {"type": "array", "shape": [2], "names": None, "describe": "a matrix of length 4"}
    assert "`x` must be a data.frame, as in training, not a matrix of length 4." in refused(
        {"x": matrix}
    )
    assert "The new data has the inputs `x`; the model was trained on one input." in refused(
        {"x": frame}, several=True
    )
    numbers = {"type": "numeric", "describe": "a numeric of length 3"}
    assert "`y` must be a factor or character vector, as in training" in refused(
        {"x": frame}, numbers
    )
    arrays = encoding.data_encoding(
        {"x": {"type": "array", "shape": [3], "names": ["p", "q", "r"]}}, None, False, ""
    )
    shuffled = {"type": "array", "shape": [3], "names": ["r", "q", "p"]}
    assert encoding.data_encoding({"x": shuffled}, None, False, "", encoding=arrays) is None
    assert "lacks column(s) the model was trained on: r" in refused(
        {"x": {**shuffled, "names": ["p", "q", "s"]}}, plain=arrays
    )
    assert "Each row of `x` has shape (2); the model was trained on rows of shape (3)." in refused(
        {"x": np.zeros((4, 2), np.float32)}, plain=arrays
    )
    # a data.frame for a matrix: matched by the training column names; without any, refused
    named = {"type": "data.frame", "columns": {"r": {}, "q": {}, "p": {}, "s": {}}}
    assert encoding.data_encoding({"x": named}, None, False, "", encoding=arrays) is None
    unnamed = encoding.data_encoding({"x": {"type": "array", "shape": [3]}}, None, False, "")
    assert "`x` must be a matrix or array, as in training, not a data.frame." in refused(
        {"x": frame}, plain=unnamed
    )


def test_training_labels_levels_no_row_has_are_kept_and_warned_of_when_recorded():
    inputs = {"x": {"type": "array", "shape": 2, "names": None}}
    # R's codes: "maybe" (1) and "never" (4) have no row; NA is R's NA_integer_
    y = {
        "type": "factor",
        "levels": ["maybe", "no", "yes", "never"],
        "values": np.array([2, 3, 2, encoding.R_NA_INTEGER], np.int32),
    }
    made = recording.record(inputs, y, False, "error")
    assert made["encoding"]["y"] == {"type": "factor", "levels": ["maybe", "no", "yes", "never"]}
    (warning,) = made["warnings"]
    assert warning["class"] == "empty_levels"
    assert warning["message"][0] == 'The labels `y` have 2 level(s) no row has: "maybe", "never".'
    assert "an output of 4 units, one per level" in warning["message"][1]
    # every level used, numbers, new data checked against training, or scored with no
    # encoding: nothing said
    assert recording.record(inputs, {**y, "values": [1, 2, 3, 4]}, False, "error")["warnings"] == []
    assert recording.record(inputs, {"type": "numeric"}, False, "error")["warnings"] == []
    trained = made["encoding"]
    assert recording.record(inputs, y, False, "error", encoding=trained) == {
        "encoding": trained,
        "warnings": [],
    }
    assert recording.record(inputs, y, False, "error", None)["warnings"] == []


def test_new_data_is_encoded_by_the_training_encoding_with_its_labels_spec():
    inputs = {"x": {"type": "array", "shape": 2, "names": None}}
    factor = {"type": "factor", "levels": ["no", "yes"], "values": [1, 2]}
    trained = recording.record(inputs, factor, False, "error")["encoding"]
    unlabelled = recording.record(inputs, None, False, "error")["encoding"]
    # new labels: the training labels' spec, or the new labels' own for a model trained
    # without labels; none without new labels
    assert recording.record(inputs, factor, False, "error", encoding=trained)["encoding"]["y"] == {
        "type": "factor",
        "levels": ["no", "yes"],
    }
    assert recording.record(inputs, None, False, "error", encoding=trained)["encoding"]["y"] is None
    numbers = {"type": "numeric", "describe": "a numeric vector"}
    own = recording.record(inputs, numbers, False, "error", encoding=unlabelled)["encoding"]
    assert own["y"] == {"type": "numeric"} and own["inputs"] == trained["inputs"]


def test_new_images_whose_pixels_are_out_of_the_training_range_are_warned_of():
    from gpukeras.data.encoding import image_encoding

    trained = image_encoding(["a", "b"], [4, 4], 1, "grayscale", 1 / 255)
    inputs = {"x": {"type": "array", "shape": [4, 4, 1], "names": None}}
    (said,) = recording.record(inputs, None, False, "error", encoding=trained, highest=255.0)[
        "warnings"
    ]
    assert said["class"] == "pixel_range" and "newdata * 0.003922" in said["message"][1]
    # in range, or nothing to check: nothing said
    for highest in (1.0, None):
        made = recording.record(inputs, None, False, "error", encoding=trained, highest=highest)
        assert made["warnings"] == []


def test_new_data_for_a_model_without_an_encoding_may_not_have_factor_columns():
    frame = {
        "type": "data.frame",
        "columns": {"a": {"type": "numeric"}, "b": {"type": "character", "levels": ["x"]}},
    }
    with pytest.raises(DataFieldsError, match=r"columns \(b\), but the model's training encoding"):
        encoding.data_encoding({"x": frame}, None, False, "error", None)
    numbers = {"x": {"type": "data.frame", "columns": {"a": {"type": "numeric"}}}}
    assert encoding.data_encoding(numbers, None, False, "error", None)["inputs"]["x"]["columns"]
