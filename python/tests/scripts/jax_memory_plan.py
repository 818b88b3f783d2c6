"""On JAX: gpu_memory_plan()'s closed-form cases (run by test_memory_plan.py as ``after``
code, see ``scripts/core_child.py``)."""

from memory_plan_cases import facts

from __main__ import readback

readback["facts"] = facts()
