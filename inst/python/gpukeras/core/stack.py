"""The software stack: versions found, and whether gpukeras can run on them.

Version checks read package metadata only, so an unsupported stack is reported
with a clear error before anything heavy is imported.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
import sys

from gpukeras.core import errors
from gpukeras.core.backend import SUPPORTED_BACKENDS, configured_backend
from gpukeras.core.handles import Record

MIN_TENSORFLOW = (2, 16)
INSTALL_HINT = "Run install_gpukeras() in R, then restart R"

# Keras releases with a published way around ``safe_mode``, the guard that keeps loading a
# model file (gpu_load()) from running code in it: each advisory, the first release it
# affects and the first that fixed it (GitHub's advisory database, checked 2026-11).
# CVE-2025-8747 (GHSA-c9rc-mg46-23w3) is fixed with CVE-2025-9906, in 3.11.0.
KERAS_SAFE_MODE_BYPASSES: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...] = (
    ("CVE-2025-1550", (3, 0, 0), (3, 9, 0)),  # GHSA-48g7-3x6r-xfhp: config.json names any function
    (
        "CVE-2025-9906",
        (3, 0, 0),
        (3, 11, 0),
    ),  # GHSA-36fq-jgmw-4r9c: safe_mode turned off from the file
    ("CVE-2025-9905", (3, 0, 0), (3, 11, 3)),  # a legacy .h5 file: safe_mode ignored
    ("CVE-2026-1462", (3, 0, 0), (3, 12, 1)),  # GHSA-4f3f-g24h-fr8m: TFSMLayer loads a SavedModel
    ("CVE-2026-1462", (3, 13, 0), (3, 13, 2)),  # the same, in the 3.13 series
)
# The Keras gpukeras needs: none of the releases above (pip's requirement, and in words).
KERAS_REQUIREMENT = "keras>=3.12.1,!=3.13.0,!=3.13.1"
KERAS_NEEDED = "Keras 3.12.1 or later, but not 3.13.0 or 3.13.1"


def parse_version(text: str | None) -> tuple[int, ...]:
    """Leading numeric parts of a version string: '2.16.0rc1' -> (2, 16, 0)."""
    if not text:
        return ()
    parts = []
    for piece in text.split("."):
        match = re.match(r"\d+", piece)
        if match is None:
            break
        parts.append(int(match.group()))
    return tuple(parts)


def module_distributions(*modules: str) -> dict[str, tuple[str | None, str | None]]:
    """The installed distribution providing each importable module, and its version, by
    module: ``(None, None)`` for a module that is not installed.

    TensorFlow's module comes from several distributions (tensorflow,
    tensorflow-cpu, tensorflow-macos, tf-nightly), so look it up by module: in one
    pass over the installed distributions' files for all the modules (each pass reads
    every distribution's file list, a tenth of a second or more).
    """
    found = [module for module in modules if importlib.util.find_spec(module) is not None]
    owners = importlib.metadata.packages_distributions() if found else {}
    result: dict[str, tuple[str | None, str | None]] = {module: (None, None) for module in modules}
    for module in found:
        result[module] = (module, None)
        for dist in owners.get(module, []):
            try:
                meta = importlib.metadata.metadata(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
            result[module] = (re.sub(r"[-_.]+", "-", meta["Name"]).lower(), meta["Version"])
            break
    return result


def keras_bypasses(version: str | None) -> list[str]:
    """The published safe_mode bypasses (advisories) that Keras ``version`` has."""
    release = (*parse_version(version), 0, 0, 0)[:3]
    return list(
        dict.fromkeys(
            advisory
            for advisory, first, fixed in KERAS_SAFE_MODE_BYPASSES
            if first <= release < fixed
        )
    )


def check_versions(backend: str, found: dict[str, str | None]) -> None:
    """Raise the matching classed error when the stack cannot run gpukeras.

    Args:
        backend: the Keras backend that would be used.
        found: version by module name ("keras", "tensorflow", "jax"); None when
            the module is not importable.
    """
    python = sys.executable
    keras_version = found.get("keras")
    if keras_version is None:
        raise errors.KerasMissingError(
            f"Keras is not installed in the Python at {python}. {INSTALL_HINT}, "
            f"or `pip install '{KERAS_REQUIREMENT}'` in that environment."
        )
    if parse_version(keras_version)[:1] < (3,):
        raise errors.Keras2Error(
            f"Keras {keras_version} (Keras 2) found in the Python at {python}; gpukeras "
            f"needs Keras 3. {INSTALL_HINT}, or `pip install -U '{KERAS_REQUIREMENT}'` there."
        )
    bypasses = keras_bypasses(keras_version)
    if bypasses:
        raise errors.KerasTooOldError(
            f"Keras {keras_version} in the Python at {python} has published ways to run code "
            f"from a model file even with safe_mode ({', '.join(bypasses)}), which gpu_load() "
            f"relies on; gpukeras needs {KERAS_NEEDED}. gpu_check(fix = TRUE) installs "
            f"install_gpukeras()'s Keras there, or run `pip install -U '{KERAS_REQUIREMENT}'` "
            "with that Python; then restart R."
        )
    if backend not in SUPPORTED_BACKENDS:
        raise errors.BackendUnsupportedError(
            f"KERAS_BACKEND is '{backend}'; gpukeras supports "
            f"{' and '.join(SUPPORTED_BACKENDS)}. Set Sys.setenv(KERAS_BACKEND = "
            "'tensorflow') before gpukeras starts Python."
        )
    if backend == "tensorflow":
        tf_version = found.get("tensorflow")
        if tf_version is None:
            raise errors.TensorflowMissingError(
                f"TensorFlow is not installed in the Python at {python}, and the Keras "
                f"backend is tensorflow. {INSTALL_HINT}."
            )
        if parse_version(tf_version)[:2] < MIN_TENSORFLOW:
            raise errors.TensorflowTooOldError(
                f"TensorFlow {tf_version} is too old: Keras 3 needs TensorFlow >= "
                f"{'.'.join(map(str, MIN_TENSORFLOW))}. {INSTALL_HINT} to get a supported one."
            )
    elif found.get(backend) is None:
        raise errors.BackendMissingError(
            f"KERAS_BACKEND is '{backend}' but {backend} is not installed in the Python "
            f"at {python}. Install it there (`pip install {backend}`), or unset KERAS_BACKEND."
        )


def found_versions() -> dict[str, str | None]:
    """Versions of the modules gpukeras depends on, from installed metadata."""
    found = module_distributions("keras", "tensorflow", "jax")
    return {module: version for module, (_, version) in found.items()}


def require_supported(backend: str) -> None:
    """Check the installed stack for ``backend`` without importing it."""
    check_versions(backend, found_versions())


def _tensorflow_build() -> Record:
    """TensorFlow's build info; empty unless TensorFlow is already running."""
    if "tensorflow" not in sys.modules:
        return {}
    import tensorflow as tf

    info = tf.sysconfig.get_build_info()
    return {
        "is_cuda_build": bool(info.get("is_cuda_build", False)),
        "cuda_version": info.get("cuda_version"),
        "cudnn_version": info.get("cudnn_version"),
    }


def _jax_cuda_plugin() -> str | None:
    """The installed jax CUDA plugin distribution and version, e.g. 'jax-cuda12-plugin 0.7.1'."""
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if re.fullmatch(r"jax[-_]cuda\d+[-_]plugin", name, flags=re.IGNORECASE):
            return f"{name} {dist.version}"
    return None


def collect_stack() -> Record:
    """Versions and build facts of the running stack, as plain data."""
    # KerasHub from its metadata: importing it imports TensorFlow (through tensorflow-text), 15 s.
    found = module_distributions(
        "tensorflow", "keras", "jax", "numpy", "keras_hub", "tensorflow_text"
    )
    tf_dist, tf_version = found["tensorflow"]
    build = _tensorflow_build()
    return {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "os": platform.system(),
        "os_release": platform.release(),
        "machine": platform.machine(),
        "keras": found["keras"][1],
        "keras_backend": configured_backend(),
        "tensorflow": tf_version,
        "tensorflow_distribution": tf_dist,
        "is_cuda_build": build.get("is_cuda_build"),
        "cuda_version": build.get("cuda_version"),
        "cudnn_version": build.get("cudnn_version"),
        "jax": found["jax"][1],
        "jax_cuda_plugin": _jax_cuda_plugin(),
        "numpy": found["numpy"][1],
        "keras_hub": found["keras_hub"][1],
        "tensorflow_text": found["tensorflow_text"][1],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "jax_platforms": os.environ.get("JAX_PLATFORMS"),
    }
