"""LAYOUT.md, where a newcomer looks first, names every module of the core (by its path in
the package, as `train/fit.py`) and every R file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
LAYOUT = (ROOT / "LAYOUT.md").read_text()
# Core modules by their path in the package; R files by name; paths of the repository
# (R/fit.R, python/tests/...) are mentioned in passing, not listed.
NAMED = {
    name
    for name in re.findall(r"`([A-Za-z_][\w/-]*\.(?:py|R))`", LAYOUT)
    if not name.startswith(("R/", "python/", "tests/", "bench/"))
}
CORE = ROOT / "inst/python/gpukeras"


def core_modules() -> set[str]:
    """Every module of the core, by its path in the package; packages by their __init__."""
    return {str(path.relative_to(CORE)) for path in CORE.rglob("*.py")}


def test_every_core_module_is_in_layout() -> None:
    missing = sorted(core_modules() - NAMED - {"__init__.py"})
    assert not missing, f"LAYOUT.md does not say what these modules are for: {missing}"


def test_every_r_file_is_in_layout() -> None:
    files = {path.name for path in (ROOT / "R").glob("*.R")}
    missing = sorted(files - NAMED)
    assert not missing, f"LAYOUT.md does not say what these R files are for: {missing}"


def test_layout_names_no_file_that_is_gone() -> None:
    present = core_modules() | {path.name for path in (ROOT / "R").glob("*.R")}
    gone = sorted(NAMED - present)
    assert not gone, f"LAYOUT.md names files that no longer exist: {gone}"
