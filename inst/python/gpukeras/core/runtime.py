"""The runtime-config object: starting the configured Keras backend quietly.

GPU settings (memory growth, visible devices) only work before TensorFlow or
JAX starts, so nothing in gpukeras imports a backend at module import time.
``config`` is the one piece of process-wide state in the core; everything
that needs Keras goes through ``config.keras()``.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType

from gpukeras.core import compile_cache, stack
from gpukeras.core.backend import RUNTIME_MODULES, configured_backend


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Silence file descriptor 2 while a native library starts.

    TensorFlow prints its oneDNN and CUDA start-up lines from C++ before its
    log level is read, so TF_CPP_MIN_LOG_LEVEL alone does not hide them.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@contextlib.contextmanager
def _loading() -> Iterator[None]:
    """Python's cyclic collector paused while Keras and its backend import, and what the
    process then holds frozen out of later collections (``gc.freeze``).

    The imports make some 300,000 (TensorFlow) or 120,000 (JAX) objects that live as long
    as the process. Left to the collector, each growth of a quarter of them set off a full
    collection that walked them all, several during the import (a seventh of a fresh
    process' CPU to import Keras and fit a small model), and every later full collection,
    in a fit or between a service's answers, walked them again. The collector's state is
    as it was after (paused where it was paused); the few cycles the import left are kept.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@dataclass
class PrecisionChoice:
    """A dtype policy for a device, and why (``gpu.precision.choose_policy`` chooses it)."""

    policy: str
    reason: str
    loss_scaling: bool
    suits_device: bool
    # gpu_setup(mixed_precision = "auto") chose it, for the device
    automatic: bool = False


@dataclass
class SetupState:
    """What gpu_setup() applied in this process, for the settings read back later.

    Attributes:
        precision: the dtype policy gpu_setup() set and why; None when it set none.
        jit_compile: the default XLA choice of later gpukeras training calls.
        devices: the devices gpu_setup() chose; None when it chose none.
        notes: settings that were asked for but do not apply on this backend.
        memory_growth_asked: what the last gpu_setup() asked for memory growth, also
            when it could not be applied (the runtime had started); None before any.
        seed: the seed gpu_setup() last seeded the session with, gpu_fit()'s when it is
            given none; None before any.
    """

    precision: PrecisionChoice | None = None
    jit_compile: bool | str = "auto"
    devices: list[str] | None = None
    notes: list[str] = field(default_factory=list)
    memory_growth_asked: bool | None = None
    seed: int | None = None


def _native_log_quiet() -> bool:
    """Whether TensorFlow's native log lines are unwanted: the level is unset or above 0.

    keras3 sets TF_CPP_MIN_LOG_LEVEL=2 when it loads, and a user who sets it
    above 0 asks for quiet too; only "0" asks for everything.
    """
    return os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2") != "0"


@dataclass
class RuntimeConfig:
    """Process-wide runtime settings, applied before the backend starts.

    Attributes:
        quiet: hide the backend's native start-up log lines, unless
            TF_CPP_MIN_LOG_LEVEL is set to 0.
        setup: what gpu_setup() applied so far.
    """

    quiet: bool = True
    setup: SetupState = field(default_factory=SetupState)

    @property
    def backend(self) -> str:
        """The backend Keras uses or will use (see ``gpukeras.core.backend``)."""
        return configured_backend()

    def started(self) -> bool:
        """Whether the backend's runtime (TensorFlow or JAX) is already imported."""
        module = RUNTIME_MODULES.get(self.backend, self.backend)
        return module in sys.modules

    def keras(self) -> ModuleType:
        """Import Keras (and so start its backend) after checking the stack is supported;
        on JAX, with the compilation cache chosen for the process (``compile_cache``)."""
        if "keras" in sys.modules:
            return self._cached(sys.modules["keras"])
        stack.require_supported(self.backend)
        # Number GPUs as nvidia-smi and NVML do (PCI bus order), not CUDA's
        # default fastest-first order, so an index means the same GPU everywhere.
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        quiet = self.quiet and _native_log_quiet()
        if quiet:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        with _native_stderr_silenced() if quiet else contextlib.nullcontext(), _loading():
            import keras
        return self._cached(keras)

    def _cached(self, keras: ModuleType) -> ModuleType:
        if keras.backend.backend() == "jax":
            compile_cache.apply()
        return keras

    def backend_module(self) -> ModuleType:
        """The backend's own module (``tensorflow`` or ``jax``), started through Keras."""
        self.keras()
        return importlib.import_module(RUNTIME_MODULES[self.backend])


config = RuntimeConfig()


def start() -> dict[str, str]:
    """Start Keras and its backend now (the stack is checked first)."""
    keras = config.keras()
    return {"keras": keras.__version__, "backend": keras.backend.backend()}


def preload_keras() -> list[str]:
    """Import Keras, and what Keras imports at a process's first seed, and start nothing:
    for a worker of gpu_cv()'s or gpu_search()'s pool, ahead of its task.

    Returns the runtime modules imported (``tensorflow``, ``jax``). No device, memory or
    thread is taken: the worker starts its runtime after, with the session's settings.
    ``keras.utils.set_random_seed()`` seeds TensorFlow's generator wherever TensorFlow can
    be imported, whatever the backend: on JAX, with TensorFlow installed, that import took
    2.5 to 4.3 s of every trial's start (bench/search.R with KERAS_BACKEND=jax), so it is
    imported here too. A TensorFlow that
    cannot be imported is left to the seed, as Keras leaves it.
    """
    config.keras()
    with contextlib.suppress(Exception), _loading():
        importlib.import_module("tensorflow")
    return [module for module in ("tensorflow", "jax") if module in sys.modules]


def remove_autograph_files() -> int:
    """Delete the source files TensorFlow's autograph wrote in this process; the count.

    Autograph writes every function it converts to
    ``__autograph_generated_file*.py`` in the temp folder and deletes it in an
    ``atexit`` handler. R ends without finalizing the Python it embeds
    (reticulate 1.28), so those handlers never run: R calls this at exit.
    """
    removed = 0
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name.startswith("__autograph_generated_file") and path and os.path.exists(path):
            os.remove(path)
            removed += 1
    return removed
