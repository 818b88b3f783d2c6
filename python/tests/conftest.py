"""Shared helpers: run the core in a fresh process, detect a GPU, reuse one gpu_check().

A Keras backend starts once per process and its settings apply only before it
starts, so every test that needs another environment (KERAS_BACKEND,
CUDA_VISIBLE_DEVICES, a blocked module) runs the core through ``run_core`` in
a fresh Python (``scripts/core_child.py``); its ``after`` code (with the
functions of ``scripts/readback.py``, see ``run_setup``) reads back what the
backend itself reports. Tests in this process use the configured backend
(``KERAS_BACKEND``, TensorFlow by default; JAX on the GPU machines).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import grp
import importlib.util
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpukeras import bridge
from gpukeras.core import backend, runtime
from gpukeras.gpu import devices, nvml
from scripts.core_child import MARKER

CORE = Path(__file__).resolve().parents[2] / "inst" / "python"
CHILD = Path(__file__).with_name("scripts") / "core_child.py"

# Several processes of this suite may hold the same GPU at once (this one and a
# run_core child); without this, the first JAX process takes 75 % of its memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# The same for TensorFlow in this process (its in-process gpu_check() took most of the
# GPU, and later memory tests failed). Children start without it unless the caller set
# it, so what they read back about memory growth is gpu_setup()'s doing alone.
_OWN_TF_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH" not in os.environ
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
# One JAX compilation cache for the whole run, as a user's sessions and workers share
# gpukeras' (core.compile_cache): a program one process compiled, the next loads (the
# suite's processes compile the same small models again and again; measured in
# bench/results/ci-time-cpu-2026-12-01.md). Set here, as the run starts, JAX's own way
# (the core then leaves it as a user's own cache), so that pytest-xdist's workers and
# every child inherit it; the tests of the core's cache run their children without it
# (NO_SUITE_CACHE). Removed as the run ends, by the process that made it.
SUITE_CACHE = "JAX_COMPILATION_CACHE_DIR"
NO_SUITE_CACHE: dict[str, str | None] = {SUITE_CACHE: None}
_OWN_SUITE_CACHE = SUITE_CACHE not in os.environ
if _OWN_SUITE_CACHE:
    os.environ[SUITE_CACHE] = tempfile.mkdtemp(prefix="gpukeras-tests-compiled-")
    # every program, however short its compile (JAX keeps only those over a second)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


@dataclass
class CoreRun:
    """What a fresh Python reported after one ``bridge.call``.

    Attributes:
        result: the bridge's answer, parsed from JSON (so it is plain data).
        stderr: everything the process wrote to standard error.
        loaded: top-level modules imported by the end (the ``after`` code included).
        environ: the variables in ``core_child.WATCHED_ENV`` as the process ended with them.
        readback: what the ``after`` code stored in its ``readback`` dict.
    """

    result: dict
    stderr: str
    loaded: set[str]
    environ: dict[str, str | None]
    readback: dict

    @property
    def value(self) -> object:
        """The call's value; fails the test, showing the error, when the call failed."""
        assert self.result["ok"], self.result
        return self.result["value"]


def child_pythonpath() -> str:
    """PYTHONPATH for a child Python: the core, then what this process was given (on the
    GPU machines Keras itself comes from there)."""
    return os.pathsep.join([str(CORE), *filter(None, [os.environ.get("PYTHONPATH")])])


def run_core(
    target: str,
    kwargs: dict[str, object] | None = None,
    *,
    env: dict[str, str | None] | None = None,
    setup: str = "",
    after: str = "",
    timeout: float = 120,
) -> CoreRun:
    """Run ``target`` with ``kwargs`` through the bridge in a fresh Python
    (``scripts/core_child.py``).

    Args:
        target: a verb (``bridge.VERBS``), or 'module:function' inside gpukeras.
        kwargs: keyword arguments (JSON-serialisable).
        env: variables to set in the child; None removes one.
        setup: Python code run before gpukeras is imported (e.g. blocking a module).
        after: Python code run after the call, with ``result`` (the bridge's
            answer) and ``bridge`` in scope, that stores JSON-serialisable facts
            in the dict ``readback`` (e.g. what TensorFlow reports once set up).
        timeout: seconds before the child is killed and the test fails.
    """
    child_env = dict(os.environ)
    if _OWN_TF_GROWTH:
        child_env.pop("TF_FORCE_GPU_ALLOW_GROWTH", None)
    child_env["PYTHONPATH"] = child_pythonpath()
    # A child that crashes (a rare TensorFlow SIGSEGV under load in test_scaling's setup)
    # prints each thread's Python stack into the failure's stderr.
    child_env.setdefault("PYTHONFAULTHANDLER", "1")
    for name, value in (env or {}).items():
        if value is None:
            child_env.pop(name, None)
        else:
            child_env[name] = value
    done = subprocess.run(
        [sys.executable, str(CHILD), target, json.dumps(kwargs or {}), setup, after],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
    if done.returncode != 0 or not lines:
        pytest.fail(f"core child failed (rc {done.returncode}):\n{done.stderr[-4000:]}")
    report = json.loads(lines[-1][len(MARKER) :])
    return CoreRun(
        report["result"],
        done.stderr,
        set(report["loaded"]),
        report["environ"],
        report["readback"],
    )


# A script run as ``python script '<json spec>'``, TensorFlow blocked first.
_WITHOUT_TENSORFLOW = (
    "import runpy, sys; sys.modules['tensorflow'] = None; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def run_jax_script(script: Path, spec: object, timeout: int = 240) -> Any:
    """Run ``script`` (``python script '<json spec>'``) in a fresh Python on the JAX
    backend, the core on PYTHONPATH, without TensorFlow (blocked), as on the GPU machines:
    else Keras' ``set_random_seed`` (the verb ``workers_seed``) imports it, 2.4 CPU-s a
    child; its last line of output, read as JSON."""
    requires("jax")
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": child_pythonpath()}
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TENSORFLOW, str(script), json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_on_jax(after: str, *, tensorflow: bool = False) -> CoreRun:
    """Run ``after`` in a fresh Python on the JAX backend; without TensorFlow (blocked) by
    default, as on the GPU machines. Skips when JAX is not installed."""
    pytest.importorskip("jax")
    return run_core(
        "core.backend:configured_backend",
        env={"KERAS_BACKEND": "jax"},
        setup="" if tensorflow else "sys.modules['tensorflow'] = None",
        after=after,
    )


def run_setup(
    backend: str,
    kwargs: dict[str, object] | None = None,
    after: str = "",
    *,
    target: str = "setup",
    env: dict[str, str | None] | None = None,
    timeout: float = 120,
) -> CoreRun:
    """gpu_setup()'s core (the verb ``setup``, or ``target``) with ``kwargs`` in a fresh Python
    on ``backend``.

    ``after`` runs next with the functions of ``scripts/readback.py`` defined; skips
    when the backend is not installed. ``timeout`` as ``run_core``'s.
    """
    requires(backend)
    return run_core(
        target,
        kwargs,
        env={"KERAS_BACKEND": backend, **(env or {})},
        after="from readback import *\n" + after,
        timeout=timeout,
    )


def requires(module: str) -> None:
    """Skip unless ``module`` is installed, without importing it into this process."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed in this Python")


def in_process_backend(name: str) -> None:
    """Skip unless this process's Keras backend is ``name`` (it cannot be switched)."""
    if backend.configured_backend() != name:
        pytest.skip(f"this process runs the {backend.configured_backend()} backend, not {name}")


@functools.cache
def gpu_status() -> tuple[bool, str]:
    """Whether the configured backend sees a GPU, and why not when it does not.

    NVML answers "no" cheaply; only when it sees a visible GPU is the backend
    asked, in a fresh process so this one's backend is not started early.
    """
    report = nvml.query()
    if not report.available:
        return False, f"no GPU: {report.reason}"
    if not any(devices.cuda_view(report).devices):
        return False, "no GPU: NVML reads none of the GPUs CUDA lets this process see"
    gpus = run_core("gpu.devices:framework_gpus").value
    name = backend.configured_backend()
    if not gpus:
        return False, f"no GPU: the {name} backend finds none that NVML sees"
    return True, f"{name} sees {len(gpus)} GPU(s)"


def first_gpu() -> nvml.NvmlDevice:
    """CUDA's GPU:0 in this process (the framework's GPU:0) as NVML reads it now.

    Matched by UUID through the CUDA driver once CUDA runs here, else as
    CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER will let CUDA see it (NVML's
    index 0 need not be it); a MIG instance is itself, with its own memory.
    For ``@pytest.mark.gpu`` tests, which run only where such a GPU exists.
    """
    found = devices.cuda_view(nvml.query()).devices
    if not found or found[0] is None:
        pytest.fail("no GPU NVML reads is CUDA's GPU 0")
    return found[0]


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (Keras and TensorFlow, where a test module imports them at
    its top) is frozen out of Python's later collections, as the core freezes what starting
    Keras made (core.runtime): each full collection between the tests walked it again."""
    gc.freeze()


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's compilation cache (``SUITE_CACHE``) goes with the run that made it."""
    if _OWN_SUITE_CACHE:
        shutil.rmtree(os.environ[SUITE_CACHE], ignore_errors=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None:
        visible, why = gpu_status()
        if not visible:
            pytest.skip(why)


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests of the no-GPU verdicts: skip where the backend sees a GPU; no simulated GPU
    either (``GPUKERAS_SIMULATE_GPU``, make test's simulated-GPU run), here or in children."""
    visible, why = gpu_status()
    if visible:
        pytest.skip(f"asserts the no-GPU outcome, but {why}")
    monkeypatch.delenv("GPUKERAS_SIMULATE_GPU", raising=False)


@pytest.fixture
def no_driver() -> nvml.NvmlReport:
    """NVML's report on a machine without an NVIDIA driver; skip where there is one."""
    report = nvml.query()
    if report.available:
        pytest.skip(
            f"asserts the no-driver outcome, but NVML runs (driver {report.driver_version})"
        )
    return report


@pytest.fixture(scope="session")
def check_result() -> dict:
    """One gpu_check() in this process, through the bridge as R calls it."""
    answer = bridge.call("check", {"probe_seconds": 1, "matmul_size": 256})
    assert answer["ok"], answer
    return answer["value"]


@pytest.fixture(scope="session")
def tensorflow_check(request: pytest.FixtureRequest) -> dict:
    """gpu_check() on the TensorFlow backend: this process's, or a fresh one's."""
    if backend.configured_backend() == "tensorflow":
        pytest.importorskip("tensorflow")
        return request.getfixturevalue("check_result")
    requires("tensorflow")
    return run_core(
        "check",
        {"probe_seconds": 1, "matmul_size": 256},
        env={"KERAS_BACKEND": "tensorflow"},
    ).value


@pytest.fixture(scope="session")
def jax_run() -> CoreRun:
    """gpu_check() on the JAX backend, always in a fresh process (to see what it imports)."""
    requires("jax")
    return run_core(
        "check",
        {"probe_seconds": 1, "matmul_size": 256},
        env={"KERAS_BACKEND": "jax"},
    )


class NotingPlan:
    """A strategy's plan (``adapters.StrategyPlan``) that notes what a data adapter asks of it, and
    shards a dataset as ``workers`` workers would, keeping worker ``index``'s batches."""

    def __init__(self, workers: int = 1, index: int = 0) -> None:
        self.workers, self.index = workers, index
        self.checked: list[tuple[int | None, int | None]] = []
        self.sharded: list[object] = []

    def check_batch(self, batch_size: int | None, rows: int | None) -> None:
        self.checked.append((batch_size, rows))

    def shard(self, dataset: Any) -> object:
        self.sharded.append(dataset)
        return dataset.shard(self.workers, self.index) if self.workers > 1 else dataset


# Folders of other users (a backup folder's, a study's rules) -------------------------------
@pytest.fixture
def nobody() -> pwd.struct_passwd:
    """Another user, for folders that are not this one's: needs root (to chown)."""
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    return pwd.getpwnam("nobody")


def other_group() -> grp.struct_group:
    """A group that is not this user's private group."""
    me = pwd.getpwuid(os.geteuid()).pw_name
    for name in ("nogroup", "nobody", "users"):
        with contextlib.suppress(KeyError):
            found = grp.getgrnam(name)
            if found.gr_name != me:
                return found
    pytest.skip("no group other than this user's own to give a folder to")


@pytest.fixture(scope="session", autouse=True)
def simulated_gpu_session() -> Iterator[None]:
    """Under ``GPUKERAS_SIMULATE_GPU`` (make test's simulated-GPU run) the test process starts
    as a GPU user's session does, with gpu_setup() and its "auto" choices (mixed_bfloat16);
    the policy is put back after."""
    from gpukeras.gpu.simulated import simulated_gpu

    if simulated_gpu() is None:
        yield
        return
    answer = bridge.call("setup", {})
    assert answer["ok"], answer
    yield
    keras = runtime.config.keras()
    keras.config.set_dtype_policy("float32")
    runtime.config.setup.precision = None


def keras_outputs(predicted: Any) -> Any:
    """Keras' own predictions as float32 arrays (a list for several outputs), to compare
    gpukeras' with: under mixed precision (the simulated-GPU run's bfloat16) Keras gives
    bfloat16 arrays, which NumPy's comparisons cannot promote."""
    if isinstance(predicted, (list, tuple)):
        return [np.asarray(part, dtype="float32") for part in predicted]
    return np.asarray(predicted, dtype="float32")


def low_precision() -> bool:
    """Whether Keras' global policy computes in float16 or bfloat16 (the simulated-GPU run)."""
    return runtime.config.keras().config.dtype_policy().compute_dtype in ("float16", "bfloat16")


@contextlib.contextmanager
def onnx_under(policy: str) -> Iterator[Any]:
    """For an ONNX export test: skipped without tf2onnx and onnxruntime or off TensorFlow
    (where ONNX export is tested); gives Keras with ``policy`` as its global policy, the one
    before it set again on leaving (a model built inside keeps ``policy``)."""
    requires("tf2onnx")
    requires("onnxruntime")
    if runtime.config.backend != "tensorflow":
        pytest.skip("ONNX export is tested on the TensorFlow engine")
    keras = runtime.config.keras()
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield keras
    finally:
        keras.config.set_dtype_policy(before)
