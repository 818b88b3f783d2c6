"""The XLA environment JAX reads when its backends start: the memory variables and XLA_FLAGS,
read as JAX reads them and written keeping the user's own flags (``gpukeras.gpu.setup``
sets them before JAX starts; gpu_check() reports them)."""

from __future__ import annotations

import os

JAX_PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"
JAX_ALLOCATOR = "XLA_PYTHON_CLIENT_ALLOCATOR"
# The name jaxlib 0.7 reads, and the older one it still takes alone (see
# compat.jax_memory_fraction_variable()).
JAX_MEM_FRACTIONS = ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")
XLA_FLAGS = "XLA_FLAGS"
# XLA's run-to-run determinism on GPUs (atomics-free reductions and scatters, no
# autotuning by timing); XLA:CPU is deterministic without it.
DETERMINISTIC_FLAG = "xla_gpu_deterministic_ops"


def variable_in_force(name: str) -> str | None:
    """An XLA variable's value as JAX acts on it.

    Unset or empty, XLA_PYTHON_CLIENT_PREALLOCATE preallocates, as 'true' does;
    the memory fraction is read under either of its names.
    """
    if name in JAX_MEM_FRACTIONS:
        return next((os.environ[n] for n in JAX_MEM_FRACTIONS if os.environ.get(n)), None)
    value = os.environ.get(name)
    if name == JAX_PREALLOCATE:
        return "false" if value in ("false", "False", "0") else "true"
    return value


def allocator_grows() -> bool:
    """Whether JAX's GPU allocator grows as memory is asked of it (memory growth): its own
    (BFC) allocator, the default, without preallocation."""
    return variable_in_force(JAX_PREALLOCATE) == "false" and os.environ.get(
        JAX_ALLOCATOR, "default"
    ) in ("default", "bfc")


def xla_flag(name: str, flags: str | None = None) -> str | None:
    """The value XLA takes for its flag ``name`` from ``flags`` (default: XLA_FLAGS now).

    XLA reads the flags in order, so the last ``--name`` counts; a bare ``--name``
    sets a boolean flag to true. None when the flag is not there.
    """
    flags = os.environ.get(XLA_FLAGS, "") if flags is None else flags
    found = None
    for word in flags.split():
        given, equals, value = word.removeprefix("--").partition("=")
        if word.startswith("--") and given == name:
            found = value if equals else "true"
    return found


def with_xla_flag(flags: str, name: str, value: str) -> str:
    """``flags`` (XLA_FLAGS) with ``--name=value``: the user's other flags kept as they are
    and in their order, an earlier ``--name`` dropped (so the value reads the same to
    anyone who parses only the first)."""
    kept = [
        word
        for word in flags.split()
        if not (word.startswith("--") and word[2:].partition("=")[0] == name)
    ]
    return " ".join([*kept, f"--{name}={value}"])


def flag_true(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")
