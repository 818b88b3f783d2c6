"""gpu_fit()'s request, declared once (``train.fit_request.FitRequest``): R's formals are the
same fields with the same defaults, each rule is checked on one side, and it crosses the
bridge as one object."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from gpukeras import bridge
from gpukeras.core.runtime import config
from gpukeras.train import fit_request

FIT_R = Path(__file__).resolve().parents[2] / "R" / "fit.R"
OPTIONS_R = FIT_R.with_name("fit-options.R")


def r_formals(function: str = "gpu_fit", path: Path = FIT_R) -> dict[str, str]:
    """An R function's formals (gpu_fit()'s in R/fit.R), with their default's R text ("" for
    none)."""
    text = path.read_text()
    start = text.index(f"{function} <- function(") + len(f"{function} <- function(")
    depth, end = 1, start
    while depth:
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    formals: dict[str, str] = {}
    for part in re.split(r",\s*(?![^()]*\))", text[start : end - 1]):
        name, _, default = part.strip().partition("=")
        formals[name.strip()] = default.strip()
    return formals


def option_fields() -> dict[str, dict[str, str]]:
    """R/fit.R's option_fields: for each option-object formal, its constructor's arguments
    and the request field each one fills."""
    found = re.search(r"option_fields <- list\((.*?)\n\)", FIT_R.read_text(), re.S)
    assert found is not None
    return {
        formal: dict(re.findall(r'(\w+) = "(\w+)"', pairs))
        for formal, pairs in re.findall(r"(\w+) = c\(([^)]*)\)", found.group(1))
    }


def requested_defaults() -> dict[str, str]:
    """The request's fields as R fills them, in order, with their default's R text: a formal
    as it is, an option object's fields from its constructor's defaults (gpu_step() for
    step = gpu_step(), gpu_backup(NULL) for backup = NULL)."""
    options = option_fields()
    requested: dict[str, str] = {}
    for name, default in r_formals().items():
        if name in not_requested():
            continue
        if name not in options:
            requested[name] = default
            continue
        constructor = r_formals(f"gpu_{name}", OPTIONS_R)
        for argument, field in options[name].items():
            requested[field] = constructor[argument] or "NULL"
    return requested


def not_requested() -> list[str]:
    found = re.search(r"not_requested <- c\((.*?)\)", FIT_R.read_text())
    assert found is not None
    return [ast.literal_eval(name.strip()) for name in found.group(1).split(",")]


R_CONSTANTS = {"NULL": None, "TRUE": True, "FALSE": False}


def r_value(text: str) -> object:
    """An R default's text as a Python value."""
    return R_CONSTANTS[text] if text in R_CONSTANTS else ast.literal_eval(text)


def test_the_request_fields_are_gpu_fits_formals_with_the_same_defaults() -> None:
    requested = requested_defaults()
    declared = {field.name: field for field in dataclasses.fields(fit_request.FitRequest)}
    assert list(requested) == list(declared)
    for name, default in requested.items():
        field = declared[name]
        value = field.default_factory() if field.default is dataclasses.MISSING else field.default  # type: ignore[misc]
        if isinstance(value, list):  # R's NULL stands for none, one name for a list of one
            value = value[0] if value else None
        assert r_value(default) == value, name


def test_every_field_says_which_side_checks_it() -> None:
    assert set(fit_request.CHECKED_BY.values()) <= {"R", "core"}
    assert fit_request.CHECKED_BY["backup_dir"] == "core"  # it needs the file system
    assert fit_request.CHECKED_BY["epochs"] == "R"


def compiled() -> object:
    keras = config.keras()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_fits_notes_say_what_becomes_of_every_field() -> None:
    """train/fit.py's module notes list every field as ``name``: a field added to the request
    and not to them fails here."""
    from gpukeras.train import fit

    notes = fit.__doc__ or ""
    missing = [f.name for f in dataclasses.fields(fit_request.FitRequest)
               if f"``{f.name}``" not in notes]  # fmt: skip
    assert missing == []


def test_fields_r_checked_are_taken_as_they_are() -> None:
    """R's checks return each value in its field's type (a list, and whole-number keys, by
    R/python.R's as_python()), so the core converts nothing (tests/testthat/test-fit-options.R
    checks the R side)."""
    keras = config.keras()
    signals, class_weight = ["SIGUSR1"], {0: 2.0, 1: 1.0}
    given = {"epochs": 3, "batch_size": 8, "clipnorm": 1.0, "verbose": 0}
    request = fit_request.check_request(
        keras, compiled(), {**given, "signals": signals, "class_weight": class_weight}
    )
    assert request.signals is signals and request.class_weight is class_weight
    assert (request.epochs, request.batch_size, request.clipnorm, request.verbose) == (3, 8, 1.0, 0)
    assert request.steps_per_execution == "auto" and request.callbacks == []


def test_a_model_of_another_policy_than_the_tuned_one_is_refused() -> None:
    """gpu_fit(tuned = ) cannot change a built model's dtype policy: the core compares it with
    the precision gpu_tune() recommended, R reads no model attribute."""
    keras = config.keras()
    with pytest.raises(Exception, match=r"built under the float32 dtype policy.*mixed_precision"):
        fit_request.check_request(keras, compiled(), {"tuned": {"precision": "mixed_bfloat16"}})
    same = fit_request.check_request(keras, compiled(), {"tuned": {"precision": "float32"}})
    assert same.tuned == {"precision": "float32"}


def test_the_core_checks_its_own_fields_and_refuses_unknown_ones(tmp_path: Path) -> None:
    keras = config.keras()
    with pytest.raises(Exception, match="`callbacks` must be a Keras callback"):
        fit_request.check_request(keras, compiled(), {"callbacks": ["print"]})
    with pytest.raises(Exception, match="gpu_fit\\(\\) has no argument speed"):
        fit_request.check_request(keras, compiled(), {"speed": 2})
    made = fit_request.check_request(keras, compiled(), {"backup_dir": str(tmp_path / "b")})
    assert made.backup_dir == str(tmp_path / "b")


def test_the_request_crosses_the_bridge_as_one_object() -> None:
    x = np.linspace(0, 1, 64, dtype="float32").reshape(16, 4)
    answer = bridge.call(
        "fit",
        {
            "model": compiled(),
            "data": (x, x[:, :1]),
            "request": {"epochs": 2, "batch_size": 8, "verbose": 0, "monitor": False},
        },
    )
    assert answer["ok"], answer
    result = answer["value"]
    assert result["settings"]["epochs"] == 2 and result["settings"]["batch_size"] == 8
    assert result["settings"]["steps_per_epoch"] == 2
    assert result["settings"]["data_info"] is None  # arrays, not a dataset
    assert result["warnings"] == []


def test_every_field_says_whether_it_changes_the_step_and_which_loops_honour_it() -> None:
    """A field declared without ``changes_step`` fails at import (``_by`` takes it by keyword
    alone); these are the ones traced into the step, and the multi-worker loop refuses the
    ones its own step cannot honour."""
    for field in dataclasses.fields(fit_request.FitRequest):
        assert isinstance(field.metadata["changes_step"], bool), field.name
        assert set(field.metadata["loops"]) <= set(fit_request.LOOPS), field.name
    assert set(fit_request.CHANGES_STEP) == {
        "accumulate", "steps_per_execution", "jit_compile", "remat", "learning_rate", "clipnorm",
        "clipvalue", "ema",
    }  # fmt: skip
    request = fit_request.FitRequest(steps_per_execution=4, backup_freq=10, remat=True)
    assert fit_request.refused_by("multi_worker", request) == [
        "steps_per_execution = 4",
        "backup_freq = 10",
    ]
    assert fit_request.refused_by("keras", request) == []
    assert fit_request.refused_by("multi_worker", fit_request.FitRequest()) == []
    # the compiled-step cache key follows those fields, and only those
    key = fit_request.step_key(request)
    assert fit_request.step_key(dataclasses.replace(request, remat=False)) != key
    assert fit_request.step_key(dataclasses.replace(request, epochs=9, seed=3)) == key
