"""What git ignores (build outputs: the R bundle, the newer stack, caches) never goes into the
package's tarball: R CMD build would take a folder left in the tree (`.gpu-r`, 46 MiB)
into it, and R CMD check then reports its paths."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
# Ignored by git because R CMD build makes them, and the package carries them: the
# vignettes built into inst/doc.
PACKAGED = {"inst/doc"}


def ignored_examples() -> list[str]:
    """A path each line of .gitignore ignores (a wildcard filled in, the leading / gone)."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return [p.strip("/").replace("*", "x") for p in patterns if p.strip("/") not in PACKAGED]


def test_every_folder_git_ignores_is_left_out_of_the_package() -> None:
    rules = [
        re.compile(line, re.IGNORECASE)  # R matches them so (perl = TRUE, ignore.case = TRUE)
        for line in (ROOT / ".Rbuildignore").read_text().splitlines()
        if line.strip()
    ]
    packaged = [path for path in ignored_examples() if not any(r.search(path) for r in rules)]
    assert not packaged, f"ignored by git but built into the package: {packaged}"
    assert any(r.search(".gpu-r") for r in rules)
