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


def _imported_names(tree: ast.AST, rel: Path) -> list[str]:
    """Every dotted name a module imports, wherever the import stands (module level, inside a
    function, under ``if TYPE_CHECKING``), by string included; ``from m import a`` gives ``m``
    and ``m.a`` (``a`` may be a submodule). The one import walker: the layering check and the
    circle check both read it."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names += _relative(node, rel)
            elif node.module:
                names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return names + _strings(tree)


def imported_layers(source: str, rel: Path) -> set[str]:
    """The ``vta.<layer>`` names a module at ``rel`` (relative to the repository) imports;
    ``".."`` for a relative import that climbs above ``vta``. A name counts only when it names
    a layer (a string such as an entry-point group ``vta.platforms`` is no import)."""
    found = set()
    for n in _imported_names(ast.parse(source, str(rel)), rel):
        parts = n.split(".")
        if n.startswith(".."):
            found.add("..")
        elif parts[0] == "vta" and len(parts) > 1 and parts[1] in ALLOWED:
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


# ------------------------------------------------------------------ no circles between modules
#: Top-level folders that are vta packages (the layers).
LAYERS = tuple(ALLOWED)
_DEFERRED = re.compile(r"#\s*deferred:\s*\S")


def _module_name(rel: Path) -> str:
    parts = ["vta", *rel.with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources(root: Path = ROOT) -> dict[str, Path]:
    """Every vta module's name -> its file (``__init__.py`` under its package's name)."""
    return {_module_name(p.relative_to(root)): p
            for layer in LAYERS for p in sorted((root / layer).rglob("*.py"))}


def _faces(sources: dict[str, Path], root: Path) -> dict[str, dict[str, str]]:
    """Per package: the names its ``__init__`` re-exports -> the submodule they come from (so
    ``from vta.isa import Config`` is an edge to ``vta.isa.config``, not to the face)."""
    faces: dict[str, dict[str, str]] = {}
    for name, path in sources.items():
        if path.name != "__init__.py":
            continue
        rel = path.relative_to(root)
        table: dict[str, str] = {}
        for node in ast.parse(path.read_text(), str(rel)).body:
            if isinstance(node, ast.ImportFrom) and node.module:
                mod = _relative(node, rel)[0] if node.level else node.module
                for a in node.names:
                    if a.name != "*":
                        table[a.asname or a.name] = mod
        faces[name] = table
    return faces


def _resolve(name: str, sources: dict[str, Path], faces: dict[str, dict[str, str]]
             ) -> str | None:
    """The module a dotted import name lands in: itself or its longest module prefix, through
    package faces (a package's own name, a face, is no dependency: its submodules are)."""
    while name and name not in sources:
        head, _, attr = name.rpartition(".")
        if head in faces and attr in faces[head]:
            return _resolve(faces[head][attr], sources, faces)
        name = head
    if not name or sources[name].name == "__init__.py":
        return None
    return name


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules it imports (package faces aside: an ``__init__`` re-exporting its
    submodules is not a module of the graph)."""
    sources = _sources(root)
    faces = _faces(sources, root)
    graph: dict[str, set[str]] = {}
    for name, path in sources.items():
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(root)
        targets = {_resolve(n, sources, faces)
                   for n in _imported_names(ast.parse(path.read_text(), str(rel)), rel)
                   if n.startswith("vta.")}
        graph[name] = targets - {None, name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as a path
    that closes on its first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(_cycle(sorted(comp), graph))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _cycle(comp: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One circle through the component's first module, by breadth-first search back to it."""
    members, start = set(comp), comp[0]
    prev: dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [*reversed(path), start]
            if w not in prev:
                prev[w] = v
                todo.append(w)
    return comp  # pragma: no cover - a component always has a circle


@pytest.mark.unit
def test_no_import_circles() -> None:
    """No two vta modules import each other, directly or around a circle, counting imports
    inside functions (a deferred import is still a dependency, ARCHITECTURE.md)."""
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


@pytest.mark.unit
def test_circle_detection(tmp_path: Path) -> None:
    """The graph sees function-body, relative and TYPE_CHECKING imports and imports through a
    package face; a package's own ``__init__`` importing its submodules is no circle."""
    pkg = tmp_path / "isa"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .a import A\nfrom .b import B\n")
    (pkg / "a.py").write_text("A = 1\ndef f():\n    from .b import B  # deferred: test\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from vta.isa import C\nB = 2\n")
    (pkg / "c.py").write_text("import vta.isa.a\nC = 3\n")
    (pkg / "__init__.py").write_text("from .a import A\nfrom .b import B\nfrom .c import C\n")
    graph = import_graph(tmp_path)
    assert graph == {"vta.isa.a": {"vta.isa.b"}, "vta.isa.b": {"vta.isa.c"},
                     "vta.isa.c": {"vta.isa.a"}}
    assert circles(graph) == [["vta.isa.a", "vta.isa.b", "vta.isa.c", "vta.isa.a"]]
    (pkg / "c.py").write_text("C = 3\n")
    assert circles(import_graph(tmp_path)) == []


# ------------------------------------------------------------------ imports inside functions
def deferred_imports(source: str, rel: Path) -> list[tuple[int, str, bool]]:
    """Each import inside a function: (line, its text, whether it carries a ``# deferred:
    <reason>`` comment)."""
    lines = source.splitlines()
    out: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                text = " ".join(lines[child.lineno - 1:child.end_lineno])
                out.append((child.lineno, text.strip(), bool(_DEFERRED.search(text))))
            visit(child, in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(source, str(rel)), False)
    return out


@pytest.mark.unit
@pytest.mark.parametrize("layer", LAYERS)
def test_function_imports_say_why(layer: str) -> None:
    """An import inside a function body is there only to keep a heavy dependency off start-up,
    and says so: ``# deferred: <reason>`` on its line; every other import stands at the top."""
    bad = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        rel = path.relative_to(ROOT)
        bad += [f"{rel}:{line}: {text}" for line, text, ok in
                deferred_imports(path.read_text(), rel) if not ok]
    assert not bad, ("imports inside functions without a '# deferred: <reason>' comment "
                     "(move them to the top):\n" + "\n".join(bad))


@pytest.mark.unit
def test_deferred_comment_is_required() -> None:
    source = ("import os\ndef f():\n    import json\n    from . import x  # deferred: slow\n"
              "    def g():\n        import numpy  # deferred:\n")
    assert deferred_imports(source, Path("sim/x.py")) == [
        (3, "import json", False), (4, "from . import x  # deferred: slow", True),
        (6, "import numpy  # deferred:", False)]
