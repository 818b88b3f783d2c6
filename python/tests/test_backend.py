"""backend: which backend Keras will use, read without importing anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpukeras.core import backend


@pytest.fixture
def keras_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty KERAS_HOME, with KERAS_BACKEND unset."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    return tmp_path


def test_keras_backend_variable_wins(keras_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (keras_home / "keras.json").write_text(json.dumps({"backend": "tensorflow"}))
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert backend.configured_backend() == "jax"


def test_keras_json_under_keras_home(keras_home: Path) -> None:
    (keras_home / "keras.json").write_text(json.dumps({"backend": "jax", "floatx": "float32"}))
    assert backend.configured_backend() == "jax"


def test_empty_keras_backend_falls_back_to_keras_json(
    keras_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (keras_home / "keras.json").write_text(json.dumps({"backend": "jax"}))
    monkeypatch.setenv("KERAS_BACKEND", "")
    assert backend.configured_backend() == "jax"


def test_keras_json_in_home_when_keras_home_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KERAS_HOME", raising=False)
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".keras").mkdir()
    (tmp_path / ".keras" / "keras.json").write_text(json.dumps({"backend": "jax"}))
    assert backend.configured_backend() == "jax"


@pytest.mark.parametrize(
    "content",
    [None, "{not json", json.dumps({"floatx": "float32"}), json.dumps(["jax"])],
    ids=["missing", "malformed", "no-backend-key", "not-an-object"],
)
def test_default_backend_is_tensorflow(keras_home: Path, content: str | None) -> None:
    if content is not None:
        (keras_home / "keras.json").write_text(content)
    assert backend.configured_backend() == "tensorflow"
