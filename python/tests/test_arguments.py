"""arguments: the checks the training functions share, for the core's Python callers."""

from __future__ import annotations

import pytest

from gpukeras.core import arguments
from gpukeras.core.errors import BadArgumentError


@pytest.mark.parametrize("value", [1, 3.0, 1_000_000, 1e6])
def test_a_count_is_a_whole_number_from_1_to_a_million(value: object) -> None:
    assert arguments.count("epochs", value) == int(value)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "`epochs` must be one whole number >= 1, not 0."),
        (2.5, "`epochs` must be one whole number >= 1, not 2.5."),
        (True, "`epochs` must be one whole number >= 1, not True."),
        (float("nan"), "`epochs` must be one whole number >= 1, not nan."),
        ("3", "`epochs` must be one whole number >= 1, not '3'."),
        (1_000_001, "`epochs` must be one whole number >= 1, not 1000001 (at most 1000000)."),
        (1e12, "`epochs` must be one whole number >= 1, not 1000000000000.0 (at most 1000000)."),
    ],
)
def test_a_count_outside_the_rules_is_refused_saying_why(value: object, message: str) -> None:
    with pytest.raises(BadArgumentError) as refused:
        arguments.count("epochs", value)
    assert str(refused.value) == message
