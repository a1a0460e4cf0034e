"""Imports point downward only (ARCHITECTURE.md): checked by reading every module's imports.

Absolute imports (``import vta.sim``, ``from vta.sim import fsim``), relative imports resolved
against the module's package (``from ...sim import fsim`` in ``compiler/graph/x.py``), and the
module names a file imports by string: arguments of ``importlib.import_module``,
``__import__`` and ``find_spec``, and, in a file that calls one of them, every string constant
that names a ``vta.*`` module (tables such as ``{"fsim": ("vta.sim.fsim", "run")}``) or an
f-string that starts with one (``f"vta.cli.cmd_{name}"``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "isa": set(),
    "sim": {"isa"},
    "hw": {"isa"},
    "runtime": {"isa", "sim", "hw"},
    "boards": {"isa", "sim", "hw"},
    "compiler": {"isa", "sim", "hw", "runtime"},
    "tune": {"isa", "sim", "hw", "runtime", "boards", "compiler"},
    "cli": {"isa", "sim", "hw", "runtime", "boards", "compiler", "tune"},
}
_DYNAMIC = {"import_module", "__import__", "find_spec"}
_MODULE_NAME = re.compile(r"vta(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _package(rel: Path) -> list[str]:
    """The package of a module file (``compiler/graph/x.py`` and ``compiler/graph/__init__.py``
    -> vta.compiler.graph)."""
    return ["vta", *rel.parts[:-1]]


def _relative(node: ast.ImportFrom, rel: Path) -> list[str]:
    """Absolute names of a ``from .x import y`` (the module, and ``module.y`` for each name,
    since ``from .. import sim`` imports a module)."""
    pkg = _package(rel)
    if node.level > len(pkg):
        return [".." * node.level]  # above vta: reported as a violation by the caller
    base = pkg[:len(pkg) - node.level + 1]
    mod = base + (node.module.split(".") if node.module else [])
    return [".".join(mod)] + [".".join([*mod, a.name]) for a in node.names]


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _strings(tree: ast.AST) -> list[str]:
    """Module names written as strings, in a file that imports by name."""
    if not any(isinstance(n, ast.Call) and _call_name(n) in _DYNAMIC for n in ast.walk(tree)):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and _MODULE_NAME.fullmatch(node.value):
            found.append(node.value)
        elif isinstance(node, ast.JoinedStr) and node.values \
                and isinstance(node.values[0], ast.Constant):
            head = str(node.values[0].value)
            m = _MODULE_NAME.match(head)
            if m:
                found.append(m.group(0))
    return found


def imported_layers(source: str, rel: Path) -> set[str]:
    """The ``vta.<layer>`` names a module at ``rel`` (relative to the repository) imports;
    ``".."`` for a relative import that climbs above ``vta``."""
    tree = ast.parse(source, str(rel))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names += _relative(node, rel)
            elif node.module:
                names.append(node.module)
    # a string is a module name only when it names a layer (not e.g. an entry-point group)
    names += [n for n in _strings(tree) if n.split(".")[1] in ALLOWED]
    found = set()
    for n in names:
        parts = n.split(".")
        if n.startswith(".."):
            found.add("..")
        elif parts[0] == "vta" and len(parts) > 1:
            found.add(parts[1])
    return found


@pytest.mark.unit
@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_point_downward(layer: str) -> None:
    bad = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        rel = path.relative_to(ROOT)
        for target in imported_layers(path.read_text(), rel) - ALLOWED[layer] - {layer}:
            bad.append(f"{rel} imports vta.{target}" if target != ".." else
                       f"{rel} has a relative import above the vta package")
    assert not bad, "layering violations:\n" + "\n".join(bad)


@pytest.mark.unit
@pytest.mark.parametrize(("source", "where", "expected"), [
    ("from vta.cli import main", "sim/x.py", {"cli"}),
    ("import vta.tune.task as t", "sim/x.py", {"tune"}),
    ("from ..cli import main", "sim/x.py", {"cli"}),
    ("from .. import cli", "sim/x.py", {"cli"}),
    ("from ...tune import task", "compiler/graph/x.py", {"tune"}),
    ("from .fsim import run", "sim/x.py", {"sim"}),
    ("from ..errors import E", "compiler/tir/x.py", {"compiler"}),
    ("from . import fsim", "sim/__init__.py", {"sim"}),
    ("from ... import x", "sim/x.py", {".."}),
    ("import importlib\nimportlib.import_module('vta.cli.main')", "hw/x.py", {"cli"}),
    ("import importlib\nimportlib.import_module(f'vta.tune.{n}')", "hw/x.py", {"tune"}),
    ("import importlib\nT = {'a': ('vta.boards.x', 'f')}\nimportlib.import_module(T['a'][0])",
     "runtime/x.py", {"boards"}),
    ("__import__('vta.compiler')", "runtime/x.py", {"compiler"}),
    ("import importlib\nGROUP = 'vta.platforms'\nimportlib.import_module(m)", "runtime/x.py",
     set()),
    ("X = 'vta.cli.main'  # a string, no import by name in this file", "sim/x.py", set()),
    ('"""see vta.cli for the command line"""', "sim/x.py", set()),
])
def test_import_resolution(source: str, where: str, expected: set[str]) -> None:
    """The checker sees relative and by-name imports (and only those)."""
    assert imported_layers(source, Path(where)) == expected
