"""Imports point downward only (ARCHITECTURE.md): checked by reading every module's imports."""

from __future__ import annotations

import ast
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


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for n in names:
            parts = n.split(".")
            if parts[0] == "vta" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.unit
@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_point_downward(layer: str) -> None:
    bad = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for target in _imports(path) - ALLOWED[layer] - {layer}:
            bad.append(f"{path.relative_to(ROOT)} imports vta.{target}")
    assert not bad, "layering violations:\n" + "\n".join(bad)
