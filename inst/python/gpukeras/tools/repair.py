"""The repairs gpu_check(fix = TRUE) can make: what the evidence says to change, as data.

A pure function of the check's evidence, like ``diagnose``: each repair says
in one sentence what it changes and how (a pip command in the Python
environment in use, or a variable to set before Python starts), and whether
R must restart for it to take effect. R asks the user and acts
(``R/check-fix.R``); nothing here changes anything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpukeras.gpu.xla_env import JAX_PREALLOCATE
from gpukeras.tools.diagnose import Evidence

RENVIRON = "before Python starts: in ~/.Renviron"


@dataclass
class Repair:
    """One change gpu_check(fix = TRUE) can make.

    Attributes:
        id: a stable name ("gpu_build", "jax_memory_growth", "nvidia_ml_py").
        what: what it changes, in one sentence.
        action: ``{"pip_uninstall": [...], "pip_install": [...], "pip_restore": [...]}``
            (run with the Python in use: uninstall, install, and when the install
            fails, the restore puts back what was uninstalled) or
            ``{"set_env": {name: value}}``.
        when: when a ``set_env`` must happen to act; None for pip.
        needs_restart: R must restart before the change takes effect.
    """

    id: str
    what: str
    action: dict[str, object] = field(default_factory=dict)
    when: str | None = None
    needs_restart: bool = True


def how(repair: Repair, renviron: str) -> str:
    """What ``repair`` runs or writes, in words: its pip commands as a shell shows them (a
    word quoted only where the shell would read it otherwise: 'tensorflow[and-cuda]==2.21.0'),
    or its lines and ``renviron``, the .Renviron R reads."""
    action: dict[str, Any] = repair.action
    if "set_env" in action:
        lines = ", ".join(f"{name}={value}" for name, value in action["set_env"].items())
        return f"{lines} in {renviron}"
    said = []
    if action.get("pip_uninstall"):
        said.append(f"pip uninstall -y {' '.join(action['pip_uninstall'])}")
    if action.get("pip_install"):
        words = (
            w if re.fullmatch(r"[A-Za-z0-9_./=:+-]+", w) else f"'{w}'"
            for w in action["pip_install"]
        )
        said.append(f"pip install {' '.join(words)}")
    return "; ".join(said)


def _project(requirement: str) -> str:
    """A requirement's project name, extras and version left out: 'tensorflow[and-cuda]==2.21'
    is 'tensorflow'."""
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


def _pinned(requirements: Sequence[str], project: str) -> str | None:
    """The requirement for ``project`` among ``requirements`` (install_gpukeras()'s pins)."""
    return next((r for r in requirements if _project(r) == project), None)


def _gpu_build(ev: Evidence, requirements: Sequence[str]) -> Repair | None:
    """A CPU-only TensorFlow beside a driver that shows GPUs: the CUDA build of the same version."""
    driver_shows_gpus = ev.nvml_available and ev.nvml_visible_gpus > 0
    if not (
        ev.os == "Linux"
        and ev.keras_backend == "tensorflow"
        and ev.is_cuda_build is False
        and ev.tensorflow
        and driver_shows_gpus
    ):
        return None
    # The distribution install_gpukeras() names for a GPU ('tensorflow[and-cuda]'),
    # at the version installed, so Keras and the rest of the environment still fit.
    pinned = _pinned(requirements, "tensorflow") or "tensorflow[and-cuda]"
    wanted = f"{re.split(r'[<>=!~; ]', pinned, maxsplit=1)[0]}=={ev.tensorflow}"
    action: dict[str, object] = {"pip_install": [wanted]}
    # tensorflow-cpu installs the same module: remove it first, as install_gpukeras() does.
    cpu_build = ev.tensorflow_distribution
    if cpu_build and _project(cpu_build) != "tensorflow":
        action = {
            "pip_uninstall": [cpu_build],
            **action,
            "pip_restore": [f"{cpu_build}=={ev.tensorflow}"],
        }
    return Repair(
        id="gpu_build",
        what=(
            f"Replace the CPU-only {ev.tensorflow_distribution or 'tensorflow'} {ev.tensorflow} "
            f"with TensorFlow's GPU build ({wanted}) in the Python environment in use"
        ),
        action=action,
    )


def _jax_memory_growth(ev: Evidence) -> Repair | None:
    """gpu_setup(memory_growth = TRUE) asked on JAX, but JAX preallocates: the variable,
    which JAX reads only when it starts."""
    preallocates = (ev.jax_preallocate or "").strip() not in ("false", "False", "0")
    if not (
        ev.keras_backend == "jax"
        and ev.framework_gpus > 0
        and ev.memory_growth_asked
        and preallocates
    ):
        return None
    return Repair(
        id="jax_memory_growth",
        what=(
            f"Set {JAX_PREALLOCATE}=false in the .Renviron R reads at start-up, so that JAX "
            "grows GPU memory on demand from the next R session on (gpu_setup(memory_growth = "
            "TRUE) came after JAX had started and preallocated)"
        ),
        action={"set_env": {JAX_PREALLOCATE: "false"}},
        when=RENVIRON,
    )


def _nvidia_ml_py(ev: Evidence, requirements: Sequence[str]) -> Repair | None:
    """nvidia-ml-py missing where there is a GPU to watch: install it."""
    if ev.pynvml_installed or not (ev.driver_gpus > 0 or ev.framework_gpus > 0):
        return None
    wanted = _pinned(requirements, "nvidia-ml-py") or "nvidia-ml-py"
    return Repair(
        id="nvidia_ml_py",
        what=(
            f"Install {wanted} (NVIDIA's NVML binding) in the Python environment in use, "
            "so gpu_check() can measure the GPU's utilization and memory"
        ),
        action={"pip_install": [wanted]},
        # A failed import leaves nothing behind: the next `import pynvml` finds it.
        needs_restart=False,
    )


def plan(ev: Evidence, requirements: Sequence[str] = ()) -> list[Repair]:
    """The repairs the evidence calls for, in the order to make them (none when all is well).

    Args:
        ev: what the check observed.
        requirements: install_gpukeras()'s pinned requirements for a GPU machine
            (R's ``gpukeras_requirements(gpu = TRUE)``); a repair installs the pin of
            the package it needs, or the bare name when none is given.
    """
    found = [
        _gpu_build(ev, requirements),
        _nvidia_ml_py(ev, requirements),
        _jax_memory_growth(ev),
    ]
    return [repair for repair in found if repair is not None]
