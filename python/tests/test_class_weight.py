"""data/weights.py class_weight_codes: gpu_fit(class_weight = )'s named weights, their form
checked by R, matched to the labels' levels or class numbers as Keras takes them."""

from __future__ import annotations

import pytest

from gpukeras.core.errors import DataFieldsError
from gpukeras.data.weights import class_weight_codes


def raised(*args: object) -> DataFieldsError:
    with pytest.raises(DataFieldsError) as error:
        class_weight_codes(*args)  # type: ignore[arg-type]
    assert error.value.r_classes == ["gpukeras_error_bad_argument"]
    return error.value


def test_names_are_levels_or_class_numbers_in_the_order_given() -> None:
    assert class_weight_codes({"yes": 5.0, "no": 1.0}, ["no", "yes"]) == {"1": 5.0, "0": 1.0}
    assert class_weight_codes({"0": 1, "yes": 2.5}, ["no", "yes"]) == {"0": 1.0, "1": 2.5}
    assert class_weight_codes({"2": 3.0}, None) == {"2": 3.0}
    assert class_weight_codes({"7": 1.0}, []) == {"7": 1.0}  # numbers, not classes by name
    assert class_weight_codes({"yes": 2.0}, "yes") == {"0": 2.0}  # R's length-1 levels, bare


def test_a_name_that_is_no_class_says_which_classes_there_are() -> None:
    error = raised({"no": 1.0, "maybe": 5.0}, ["no", "yes"])
    assert str(error) == '`class_weight` names "maybe", which is no class of the labels.'
    assert error.details == ['The classes are "no", "yes" (or their numbers 0 to 1).']
    error = raised({"cat": 1.0, "dog": 1.0}, None)
    assert str(error) == '`class_weight` names "cat", "dog", which are no class of the labels.'
    assert error.details == [
        "The labels are not a factor: name the classes by their numbers, 0, 1, ..."
    ]
    error = raised({"2": 1.0}, ["no", "yes"])
    assert str(error) == "`class_weight` names class 2, but the labels have 2 classes (0 to 1)."
