"""runtime: starting the configured backend quietly."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import pytest

from conftest import requires, run_core
from gpukeras.core import runtime


def test_config_reads_the_configured_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert runtime.config.backend == "jax"


def test_keras_agrees_with_configured_backend(tmp_path: Path) -> None:
    requires("jax")
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax"}))
    run = run_core("start", env={"KERAS_HOME": str(tmp_path), "KERAS_BACKEND": None})
    assert run.value["backend"] == "jax"
    assert "jax" in run.loaded


def test_started_and_keras_in_this_process() -> None:
    keras = runtime.config.keras()
    assert runtime.config.keras() is keras
    assert runtime.config.started()
    backend = keras.backend.backend()
    assert runtime.config.backend_module().__name__ == runtime.RUNTIME_MODULES[backend]
    assert runtime.start() == {"keras": keras.__version__, "backend": backend}


def test_started_is_false_for_a_backend_not_running(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERAS_BACKEND", "gpukeras_no_such_backend")
    assert not runtime.config.started()


def test_tensorflow_starts_quietly() -> None:
    requires("tensorflow")
    run = run_core("start", env={"KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": None})
    assert run.value["backend"] == "tensorflow"
    assert "tensorflow" in run.loaded
    assert "oneDNN" not in run.stderr
    assert "cpu_feature_guard" not in run.stderr
    assert run.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"


def test_users_tensorflow_log_level_is_respected() -> None:
    requires("tensorflow")
    run = run_core("start", env={"KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert run.value["backend"] == "tensorflow"
    assert run.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"
    if sys.platform == "linux" and platform.machine() == "x86_64":
        # TensorFlow announces oneDNN or its CPU features on x86 Linux: the quiet
        # tests are not vacuous.
        assert "oneDNN" in run.stderr or "cpu_feature_guard" in run.stderr


def test_tensorflow_starts_quietly_under_keras3s_log_level() -> None:
    """keras3 sets TF_CPP_MIN_LOG_LEVEL=2 when it loads: a level, not a wish for logs."""
    requires("tensorflow")
    run = run_core("start", env={"KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert run.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"
    assert "absl::InitializeLog" not in run.stderr
    assert "cpu_feature_guard" not in run.stderr


@pytest.mark.parametrize(
    ("level", "quiet"), [(None, True), ("2", True), ("1", True), ("3", True), ("0", False)]
)
def test_native_start_up_lines_are_silenced_unless_the_level_is_0(
    monkeypatch: pytest.MonkeyPatch, level: str | None, quiet: bool
) -> None:
    if level is None:
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", level)
    assert runtime._native_log_quiet() is quiet


def test_tensorflow_started_for_a_pipeline_under_jax_is_quiet_too() -> None:
    """Under the JAX backend TensorFlow starts only for tf.data (gpu_dataset()): its native
    start-up lines (absl, oneDNN, CPU features) stay off stderr there as well."""
    requires("jax")
    requires("tensorflow")
    run = run_core(
        "start",
        env={"KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": None},
        after="import numpy, sys\n"
        "answer = bridge.call('dataset_from_arrays', "
        "{'x': numpy.ones((8, 3), 'float32'), 'y': None, 'batch_size': 4})\n"
        "readback['ok'] = answer['ok']\n"
        "readback['tensorflow'] = 'tensorflow' in sys.modules",
    )
    assert run.readback == {"ok": True, "tensorflow": True}
    for line in ("absl::InitializeLog", "oneDNN", "cpu_feature_guard", "E0000", "W0000", "I0000"):
        assert line not in run.stderr


def test_jax_starts_without_tensorflow() -> None:
    requires("jax")
    run = run_core("start", env={"KERAS_BACKEND": "jax"})
    assert run.value["backend"] == "jax"
    assert "jax" in run.loaded
    assert "tensorflow" not in run.loaded


@pytest.mark.parametrize("collector", ["on", "off"])
def test_what_starting_keras_loaded_is_frozen_and_the_collector_left_as_it_was(
    collector: str,
) -> None:
    """Keras and its backend import with the cyclic collector paused, and what they made is
    then out of later collections (frozen); the collector is on or off as it was before."""
    run = run_core(
        "start",
        env={"KERAS_BACKEND": "tensorflow"},
        setup="import gc\nif " + repr(collector == "off") + ": gc.disable()",
        after="import gc\nreadback.update(frozen=gc.get_freeze_count(), enabled=gc.isenabled())",
    )
    assert run.readback["frozen"] > 100_000
    assert run.readback["enabled"] is (collector == "on")
