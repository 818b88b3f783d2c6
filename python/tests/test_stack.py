"""stack: version parsing, the supported-stack check and its classed errors."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys

import pytest

from conftest import in_process_backend, requires, run_core
from gpukeras.core import backend, errors, runtime, stack


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3.15.1", (3, 15, 1)),
        ("2.16.0rc1", (2, 16, 0)),
        ("2.15.0.post1", (2, 15, 0)),
        ("0.7.1", (0, 7, 1)),
        ("1.2.dev0", (1, 2)),
        ("12", (12,)),
        ("", ()),
        (None, ()),
        ("nightly", ()),
    ],
)
def test_parse_version(text: str | None, expected: tuple[int, ...]) -> None:
    assert stack.parse_version(text) == expected


KERAS3 = {"keras": "3.15.1", "tensorflow": "2.21.0", "jax": "0.7.1"}


@pytest.mark.parametrize(
    ("backend", "found", "error", "r_class", "says"),
    [
        (
            "tensorflow",
            {**KERAS3, "keras": None},
            errors.KerasMissingError,
            "gpukeras_error_keras_missing",
            [
                "Keras is not installed",
                "install_gpukeras()",
                "pip install 'keras>=3.12.1,!=3.13.0,",
            ],
        ),
        (
            "tensorflow",
            {**KERAS3, "keras": "2.15.0"},
            errors.Keras2Error,
            "gpukeras_error_keras2",
            [
                "Keras 2.15.0",
                "needs Keras 3",
                "install_gpukeras()",
                "pip install -U 'keras>=3.12.1",
            ],
        ),
        (
            "tensorflow",
            {**KERAS3, "keras": "3.8.0"},
            errors.KerasTooOldError,
            "gpukeras_error_keras_too_old",
            [
                "Keras 3.8.0",
                "CVE-2025-1550, CVE-2025-9906, CVE-2025-9905, CVE-2026-1462",
                "gpu_load()",
                "3.12.1 or later, but not 3.13.0 or 3.13.1",
                "gpu_check(fix = TRUE)",
            ],
        ),
        (
            "jax",
            {**KERAS3, "keras": "3.13.1"},
            errors.KerasTooOldError,
            "gpukeras_error_keras_too_old",
            ["Keras 3.13.1", "(CVE-2026-1462)", "pip install -U 'keras>=3.12.1,!=3.13.0,!=3.13.1'"],
        ),
        (
            "torch",
            KERAS3,
            errors.BackendUnsupportedError,
            "gpukeras_error_backend_unsupported",
            ["'torch'", "tensorflow and jax", "Sys.setenv(KERAS_BACKEND = 'tensorflow')"],
        ),
        (
            "numpy",
            KERAS3,
            errors.BackendUnsupportedError,
            "gpukeras_error_backend_unsupported",
            ["'numpy'", "Sys.setenv(KERAS_BACKEND = 'tensorflow')"],
        ),
        (
            "tensorflow",
            {**KERAS3, "tensorflow": None},
            errors.TensorflowMissingError,
            "gpukeras_error_tensorflow_missing",
            ["TensorFlow is not installed", "install_gpukeras()"],
        ),
        (
            "tensorflow",
            {**KERAS3, "tensorflow": "2.15.1"},
            errors.TensorflowTooOldError,
            "gpukeras_error_tensorflow_too_old",
            ["TensorFlow 2.15.1 is too old", ">= 2.16", "install_gpukeras()"],
        ),
        (
            "jax",
            {**KERAS3, "jax": None},
            errors.BackendMissingError,
            "gpukeras_error_backend_missing",
            ["'jax'", "pip install jax", "unset KERAS_BACKEND"],
        ),
    ],
)
def test_check_versions_raises_classed_error_saying_what_to_do(
    backend: str,
    found: dict[str, str | None],
    error: type[errors.GpukerasError],
    r_class: str,
    says: list[str],
) -> None:
    with pytest.raises(error) as raised:
        stack.check_versions(backend, found)
    assert raised.value.r_class == r_class
    assert isinstance(raised.value, errors.GpukerasError)
    for words in says:
        assert words in str(raised.value)


def test_missing_packages_name_the_python_to_fix() -> None:
    with pytest.raises(errors.KerasMissingError, match=sys.executable):
        stack.check_versions("tensorflow", {"keras": None})


@pytest.mark.parametrize(
    ("backend", "found"),
    [
        ("tensorflow", {"keras": "3.12.1", "tensorflow": "2.16.0rc0", "jax": None}),
        ("tensorflow", {"keras": "3.13.2", "tensorflow": "2.21.0", "jax": None}),
        ("tensorflow", {"keras": "3.15.1", "tensorflow": "2.21.0", "jax": None}),
        ("jax", {"keras": "3.15.1", "tensorflow": None, "jax": "0.4.30"}),
    ],
)
def test_check_versions_accepts_supported_stacks(
    backend: str, found: dict[str, str | None]
) -> None:
    stack.check_versions(backend, found)


@pytest.mark.parametrize(
    ("version", "bypasses"),
    [
        ("3.0.0", ["CVE-2025-1550", "CVE-2025-9906", "CVE-2025-9905", "CVE-2026-1462"]),
        ("3.8.0", ["CVE-2025-1550", "CVE-2025-9906", "CVE-2025-9905", "CVE-2026-1462"]),
        ("3.9.0", ["CVE-2025-9906", "CVE-2025-9905", "CVE-2026-1462"]),
        ("3.11.2", ["CVE-2025-9905", "CVE-2026-1462"]),
        ("3.12.0", ["CVE-2026-1462"]),
        ("3.12.1", []),
        ("3.13.0", ["CVE-2026-1462"]),
        ("3.13.1", ["CVE-2026-1462"]),
        ("3.13.2", []),
        ("3.15.1", []),
    ],
)
def test_keras_releases_with_a_published_safe_mode_bypass(
    version: str, bypasses: list[str]
) -> None:
    """CVE-2025-1550 (< 3.9), CVE-2025-9906 (< 3.11), CVE-2025-9905 (< 3.11.3) and
    CVE-2026-1462 (< 3.12.1, and 3.13.0-3.13.1): the requirement excludes each."""
    assert stack.keras_bypasses(version) == bypasses


def test_require_supported_passes_on_this_environment() -> None:
    stack.require_supported(backend.configured_backend())


def test_require_supported_rejects_torch_even_when_installed() -> None:
    with pytest.raises(errors.BackendUnsupportedError):
        stack.require_supported("torch")


def test_module_distributions() -> None:
    import numpy

    assert stack.module_distributions("numpy", "gpukeras_no_such_module") == {
        "numpy": ("numpy", numpy.__version__),
        "gpukeras_no_such_module": (None, None),
    }
    missing = stack.module_distributions("gpukeras_no_such_module")
    assert missing == {"gpukeras_no_such_module": (None, None)}


def test_found_versions_match_the_installed_modules() -> None:
    found = stack.found_versions()
    assert set(found) == {"keras", "tensorflow", "jax"}
    assert found["keras"] == runtime.config.keras().__version__


def test_collect_stack_on_this_environment() -> None:
    keras = runtime.config.keras()
    software = stack.collect_stack()
    assert software["keras"] == keras.__version__
    assert software["keras_backend"] == keras.backend.backend()
    assert software["python_executable"] == sys.executable
    assert software["python"] == ".".join(map(str, sys.version_info[:3]))
    assert software["numpy"] is not None


def test_collect_stack_reads_tensorflow_build() -> None:
    in_process_backend("tensorflow")
    tf = pytest.importorskip("tensorflow")
    runtime.config.keras()
    software = stack.collect_stack()
    assert software["tensorflow"] == tf.__version__
    assert isinstance(software["is_cuda_build"], bool)
    if software["tensorflow_distribution"].replace("_", "-").lower() == "tensorflow-cpu":
        assert software["is_cuda_build"] is False
        assert software["cuda_version"] is None


def test_collect_stack_reports_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert stack.collect_stack()["cuda_visible_devices"] == "1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert stack.collect_stack()["cuda_visible_devices"] is None


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_unsupported_backend_is_a_classed_error_before_keras_starts(backend: str) -> None:
    run = run_core("start", env={"KERAS_BACKEND": backend})
    assert run.result["ok"] is False
    assert run.result["r_class"] == "gpukeras_error_backend_unsupported"
    assert f"KERAS_BACKEND is '{backend}'" in run.result["message"]
    assert run.result["traceback"] is None
    assert "Traceback" not in run.stderr
    assert not {"keras", "tensorflow", "jax", "torch"} & run.loaded


@pytest.mark.parametrize(
    ("backend", "setup", "r_class"),
    [
        ("tensorflow", "import hide_keras", "gpukeras_error_keras_missing"),
        ("tensorflow", "sys.modules['tensorflow'] = None", "gpukeras_error_tensorflow_missing"),
        ("jax", "sys.modules['jax'] = None", "gpukeras_error_backend_missing"),
    ],
    ids=["keras", "tensorflow", "jax"],
)
def test_missing_module_is_a_classed_error(backend: str, setup: str, r_class: str) -> None:
    requires("keras")
    run = run_core("start", env={"KERAS_BACKEND": backend}, setup=setup)
    assert run.result["ok"] is False
    assert run.result["r_class"] == r_class
    assert "install" in run.result["message"].lower()
    assert run.result["traceback"] is None


def test_collect_stack_reads_kerashub_from_its_metadata_without_importing_it() -> None:
    run = run_core("core.stack:collect_stack")
    software = run.result["value"]
    expected = {
        module: importlib.metadata.version(module.replace("_", "-"))
        if importlib.util.find_spec(module)
        else None
        for module in ("keras_hub", "tensorflow_text")
    }
    assert {module: software[module] for module in expected} == expected
    assert not {"keras_hub", "tensorflow_text", "tensorflow"} & run.loaded
