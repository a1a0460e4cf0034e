"""No function in hw/ is longer than 80 lines (#36): a composite block whose ``elaborate``
grows past that wants a sub-component with a name (STYLE.md), not a longer method."""

from __future__ import annotations

import ast
from pathlib import Path

MAX_LINES = 80
HW = Path(__file__).resolve().parents[2] / "hw"


def long_functions(source: str, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function or method in ``source``, nested ones
    included, that spans more than ``limit`` lines (decorators and docstring counted)."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                lines = child.end_lineno - first + 1
                if lines > limit:
                    found.append((f"{prefix}{child.name}", lines))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_the_check_finds_a_long_method_and_a_nested_function() -> None:
    body = "\n".join(f"        x{k} = {k}" for k in range(79))
    source = (f"class A:\n    def long(self):\n{body}\n\n"
              f"def outer():\n    def inner():\n{body}\n    return inner\n")
    assert long_functions(source) == [("outer", 82)]
    assert long_functions(source, limit=79) == [("A.long", 80), ("outer", 82),
                                                ("outer.inner", 80)]


def test_no_function_in_hw_is_longer_than_80_lines() -> None:
    files = sorted(HW.rglob("*.py"))
    assert len(files) > 20  # the package was found
    too_long = [f"{path.relative_to(HW)}: {name} ({lines} lines)"
                for path in files for name, lines in long_functions(path.read_text())]
    assert not too_long, too_long
