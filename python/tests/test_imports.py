"""The core's layers: each subpackage imports only from those below it, and nothing in a cycle.

The layers, bottom up: ``core`` < ``gpu`` < ``data`` < ``distribute`` < ``train`` <
``serve`` < ``track`` < ``tools`` < ``search``; the ``bridge`` on top is the one door R
comes through. A module may import from its own layer and the ones below. A cycle makes
what a module can use at import time depend on which module was imported first, and keeps
modules from being understood one at a time. Imports inside functions count: they only
postpone the problem. Imports under ``if TYPE_CHECKING:`` do not run, so they are not part
of the graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "inst" / "python" / "gpukeras"
LAYERS = ("core", "gpu", "data", "distribute", "train", "serve", "track", "tools", "search")
TOP_LEVEL_AT_MOST = 8


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


def module_names(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name (without "gpukeras.") -> its file; a package is its __init__."""
    names = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            names[".".join(parts)] = path
    return names


def _resolve(parts: list[str], modules: set[str]) -> str | None:
    """The longest prefix of ``parts`` that is one of ``modules``."""
    for length in range(len(parts), 0, -1):
        name = ".".join(parts[:length])
        if name in modules:
            return name
    return None


def imported_modules(source: str, modules: set[str], here: str = "") -> set[str]:
    """The package's modules that ``source`` (the module ``here``) imports: ``from gpukeras
    import x``, ``from gpukeras.x.y import z``, ``import gpukeras.x``, and relative forms."""
    found: set[str] = set()
    package = here.split(".")[:-1]
    for node in _import_nodes(ast.parse(source)):
        targets: list[list[str]] = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "gpukeras":
                    targets.append(parts[1:])
        else:
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "gpukeras":
                module = node.module.split(".")[1:]
            else:
                continue
            targets += [[*module, alias.name] for alias in node.names]
        for target in targets:
            name = _resolve(target, modules)
            if name is not None:
                found.add(name)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module name -> the package's modules it imports."""
    files = module_names(package)
    return {
        name: imported_modules(path.read_text(encoding="utf-8"), set(files), name) - {name}
        for name, path in files.items()
    }


def layer_of(module: str) -> int:
    """A module's layer: its index in LAYERS; the top-level modules above them all."""
    first = module.split(".")[0]
    return LAYERS.index(first) if first in LAYERS else len(LAYERS)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a module from a layer above its own, as "importer -> imported"."""
    return sorted(
        f"{name} -> {imported}"
        for name, imported_set in graph.items()
        for imported in imported_set
        if layer_of(imported) > layer_of(name)
    )


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
    assert len(graph) > 50  # the package was found
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_layer_imports_from_a_layer_above_it() -> None:
    assert upward_imports(import_graph()) == []


def test_every_module_is_in_a_layer_and_few_stay_on_top() -> None:
    files = module_names()
    top = sorted(name for name in files if "." not in name and name not in LAYERS)
    assert len(top) + 1 <= TOP_LEVEL_AT_MOST, top  # and __init__
    assert set(LAYERS) <= set(files)


def test_the_backend_name_imports_nothing_from_the_package() -> None:
    # Every module may ask which backend runs, so asking must not import back.
    assert import_graph()["core.backend"] == set()


def test_an_upward_import_is_named() -> None:
    graph = {"core.stack": {"gpu.nvml"}, "train.fit": {"data.pipeline", "core.errors"}}
    assert upward_imports(graph) == ["core.stack -> gpu.nvml"]


def test_the_graph_reads_every_form_of_import() -> None:
    source = """
from typing import TYPE_CHECKING
import gpukeras.a
from gpukeras import b, c as d
from gpukeras.e import thing
from gpukeras.p.q import r
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
    names = {*"abcdefghijk", "p", "p.q", "p.f", "p.g"}
    assert imported_modules(source, names, here="p.mine") == {
        *"abceij",
        "p.q",
        "p.f",
        "p.g",
    }


def test_a_cycle_is_named() -> None:
    graph = {"fit": {"pipeline"}, "pipeline": {"sources", "fit"}, "sources": set()}
    assert find_cycle(graph) == ["fit", "pipeline", "fit"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
