"""The core's modules import each other without a cycle.

A cycle makes what a module can use at import time depend on which module
was imported first, and keeps modules from being understood one at a time.
Imports inside functions count: they only postpone the cycle. Imports under
``if TYPE_CHECKING:`` do not run, so they are not part of the graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "inst" / "python" / "gpukeras"


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement below ``node``, at any depth, but none under TYPE_CHECKING."""
    found: list[ast.Import | ast.ImportFrom] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            found.append(child)
        elif isinstance(child, ast.If) and _type_checking(child.test):
            for branch in child.orelse:  # only the else branch runs
                found.extend(_import_nodes(ast.Module(body=[branch], type_ignores=[])))
        else:
            found.extend(_import_nodes(child))
    return found


def imported_modules(source: str, modules: set[str]) -> set[str]:
    """The package's modules that ``source`` imports (``from gpukeras import x``,
    ``from gpukeras.x import y``, ``import gpukeras.x``, and their relative forms)."""
    found: set[str] = set()
    for node in _import_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "gpukeras" and len(parts) > 1:
                    found.add(parts[1])
            continue
        parts = (node.module or "").split(".") if node.module else []
        if node.level == 0 and (not parts or parts[0] != "gpukeras"):
            continue
        inner = parts[1:] if node.level == 0 else parts
        if inner:
            found.add(inner[0])
        else:  # from gpukeras import x, y: the names that are modules
            found.update(alias.name for alias in node.names)
    return found & modules


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module name -> the package's modules it imports."""
    files = {path.stem: path for path in package.glob("*.py") if path.stem != "__init__"}
    return {
        name: imported_modules(path.read_text(encoding="utf-8"), set(files)) - {name}
        for name, path in files.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path that ends where it starts, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        path.append(name)
        for imported in sorted(graph.get(name, ())):
            cycle = visit(imported)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(name)
        return None

    for name in sorted(graph):
        cycle = visit(name)
        if cycle is not None:
            return cycle
    return None


def test_the_core_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 20  # the package was found
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_backend_name_imports_nothing_from_the_package() -> None:
    # Every module may ask which backend runs, so asking must not import back.
    assert import_graph()["backend"] == set()


def test_the_graph_reads_every_form_of_import() -> None:
    source = """
from typing import TYPE_CHECKING
import gpukeras.a
from gpukeras import b, c as d
from gpukeras.e import thing
from . import f
from .g import other
import numpy
if TYPE_CHECKING:
    from gpukeras import h
else:
    from gpukeras import i

def later():
    from gpukeras import j
"""
    names = set("abcdefghijk")
    assert imported_modules(source, names) == set("abcefgij")


def test_a_cycle_is_named() -> None:
    graph = {"fit": {"pipeline"}, "pipeline": {"sources", "fit"}, "sources": set()}
    assert find_cycle(graph) == ["fit", "pipeline", "fit"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
