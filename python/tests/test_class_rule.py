"""The class rule (issue #76): which class a row's prediction is, written once in the core
(``data/class_rule.py``) for predict(type = "class"), predict-to-file, the service and the
exported ``class`` output."""

from __future__ import annotations

import numpy as np
import pytest

from gpukeras.core.errors import BadArgumentError
from gpukeras.data import class_rule


def test_one_column_is_the_second_class_above_the_threshold() -> None:
    values = np.array([[0.2], [0.7], [0.5], [np.nan]])
    assert class_rule.class_codes(values).tolist() == [0, 1, 0, -1]
    assert class_rule.class_count(1) == 2


def test_several_columns_are_the_largest_the_first_of_ties_and_a_row_with_na_none() -> None:
    values = np.array([[0.2, 0.2, 0.1], [0.0, 1.0, np.nan], [0.0, 0.3, 0.7]], dtype="float32")
    assert class_rule.class_codes(values).tolist() == [0, -1, 2]
    assert class_rule.class_count(3) == 3


def test_r_gets_the_codes_as_a_list_with_its_na_for_a_row_with_a_missing_value() -> None:
    values = np.array([[0.2, 0.8], [np.nan, 1.0], [0.9, 0.1]])
    assert class_rule.r_class_codes(values) == [1, int(np.iinfo(np.int32).min), 0]


def test_outputs_not_rows_by_columns_are_refused() -> None:
    with pytest.raises(BadArgumentError, match="one column per class"):
        class_rule.class_codes(np.zeros((2, 2, 2)))


def test_levels_name_the_classes_only_when_there_are_enough_of_them() -> None:
    assert class_rule.class_names(1, ["no", "yes"]) == ["no", "yes"]
    assert class_rule.class_names(3, ["a", "b", "c"]) == ["a", "b", "c"]
    # levels named like the reserved outputs are names like any other
    assert class_rule.class_names(2, ["class", "output"]) == ["class", "output"]
    assert class_rule.class_names(1, ["only"]) is None
    assert class_rule.class_names(3, ["a", "b"]) is None
    assert class_rule.class_names(2, None) is None
    assert class_rule.class_names(None, ["a", "b"]) is None
