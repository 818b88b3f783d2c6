"""Numbers and strings in the words R would have written: lines the core writes for R
to print (print(fit), print() of a gpu_dataset()) read as R's own ``format()`` wrote
them before, and values R sent as one string or several are taken alike."""

from __future__ import annotations

from typing import Any


def r_number(value: Any, digits: int = 7) -> str:
    """``value`` as R's ``format(value, digits = digits)`` writes one number: the fewest
    significant digits (up to ``digits``) that keep it, fixed or scientific, whichever
    is shorter (fixed on a tie)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    x = float(value)
    if x == 0:
        return "0"
    if x != x:
        return "NA"
    full = float(f"{x:.{digits - 1}e}")
    shown = next(d for d in range(1, digits + 1) if float(f"{x:.{d - 1}e}") == full)
    mantissa, exponent = f"{x:.{shown - 1}e}".split("e")
    sci = f"{mantissa}e{exponent[0]}{abs(int(exponent)):02d}"
    fixed = f"{x:.{max(0, shown - 1 - int(exponent))}f}"
    return fixed if len(fixed) <= len(sci) else sci


def strings(value: Any) -> list[str]:
    """A value R sent as one string or several (a length-1 vector arrives bare)."""
    if value is None:
        return []
    return [str(value)] if isinstance(value, str) else [str(v) for v in value]


def whole(value: float) -> str:
    """A number rounded to a whole one, with commas: ``1,234,567``."""
    return f"{round(value):,}"


def big(value: Any) -> str:
    """A count with thousands separated by commas, as R's ``format(big.mark = ",")``."""
    return f"{round(float(value)):,}" if float(value) == round(float(value)) else r_number(value)


def seconds(seconds: float) -> str:
    """A duration in seconds, minutes or hours, one decimal."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"
