"""LAYOUT.md, where a newcomer looks first, names every module of the core and every R file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
LAYOUT = (ROOT / "LAYOUT.md").read_text()
NAMED = set(re.findall(r"`([A-Za-z_][\w-]*\.(?:py|R))`", LAYOUT))


def test_every_core_module_is_in_layout() -> None:
    modules = {path.name for path in (ROOT / "inst/python/gpukeras").glob("*.py")}
    missing = sorted(modules - NAMED - {"__init__.py"})
    assert not missing, f"LAYOUT.md does not say what these modules are for: {missing}"


def test_every_r_file_is_in_layout() -> None:
    files = {path.name for path in (ROOT / "R").glob("*.R")}
    missing = sorted(files - NAMED)
    assert not missing, f"LAYOUT.md does not say what these R files are for: {missing}"


def test_layout_names_no_file_that_is_gone() -> None:
    present = {path.name for path in (ROOT / "inst/python/gpukeras").glob("*.py")}
    present |= {path.name for path in (ROOT / "R").glob("*.R")}
    gone = sorted(NAMED - present)
    assert not gone, f"LAYOUT.md names files that no longer exist: {gone}"
