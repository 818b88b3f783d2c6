"""A simulated GPU: the GPU's own "auto" choices, taken on a CPU (``GPUKERAS_SIMULATE_GPU``).

On a GPU gpukeras' "auto" rules choose differently from a CPU: mixed_bfloat16 on compute
capability >= 8.0, worker slots on the GPU with more than one per GPU by the memory plan,
the precisions gpu_tune() tries. With ``GPUKERAS_SIMULATE_GPU`` set (to anything but "", "0",
"false" or "no") in a process that sees no GPU, those rules decide as on an NVIDIA GPU of
compute capability 9.0 with 80 GB of memory (``SIMULATED``) while the work runs on the CPU,
so that the path a GPU user takes by default is tested where no GPU is.
``GPUKERAS_SIMULATE_GPU_MIB`` sets the simulated GPU's memory in MiB (a small one makes a small
model "not fit", so that the memory plan's choices can be tested). What is measured
stays what it is: gpu_check()'s verdict, the devices, NVML and the report's figures are the
CPU's; where a choice followed the simulated GPU, its reason and the report say so. Child
processes (workers, background jobs) inherit the variable, and so the simulation. A real GPU
always wins: the variable changes nothing where one is visible.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

VARIABLE = "GPUKERAS_SIMULATE_GPU"
MEMORY_VARIABLE = "GPUKERAS_SIMULATE_GPU_MIB"


@dataclass(frozen=True)
class SimulatedGpu:
    """The GPU the "auto" rules decide for while the variable is set."""

    name: str = "NVIDIA H100 80GB HBM3"
    compute_capability: str = "9.0"
    memory_total_mib: float = 81559.0

    @property
    def label(self) -> str:
        """How a choice made for it is labelled: what was simulated, and where it ran."""
        return (
            f"simulated {self.name} (compute capability {self.compute_capability}, "
            f"{self.memory_total_mib / 1024:.0f} GiB; {VARIABLE} is set): the work runs on the CPU"
        )


SIMULATED = SimulatedGpu()


def simulated_gpu() -> SimulatedGpu | None:
    """The simulated GPU when ``GPUKERAS_SIMULATE_GPU`` asks for one, else None. Callers use it
    only where they found no real GPU."""
    value = os.environ.get(VARIABLE, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return None
    memory = os.environ.get(MEMORY_VARIABLE, "").strip()
    return SimulatedGpu(memory_total_mib=float(memory)) if memory else SIMULATED
