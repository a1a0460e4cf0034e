#!/usr/bin/env python3
"""Rewrite the [tool.setuptools] packages list of pyproject.toml from the source folders
(tests/test_packaging.py fails when a subpackage is missing from it)."""

import pathlib
import re

root = pathlib.Path(__file__).resolve().parents[1]
p = root / "pyproject.toml"
s = p.read_text()
m = re.search(r"packages = \[(.*?)\]\n", s, re.S)
dirs = dict(re.findall(r'"(vta\.[a-z_]+)" = "([a-z_]+)"', s))
pk = set(re.findall(r'"([^"]+)"', m.group(1)))
for pkg, folder in dirs.items():
    for init in (root / folder).rglob("__init__.py"):
        rel = init.parent.relative_to(root / folder)
        if not any(x.startswith((".", "__")) for x in rel.parts):
            pk.add(".".join([pkg, *rel.parts]))
lines = "\n".join(f'    "{x}",' for x in sorted(pk))
p.write_text(s[: m.start()] + "packages = [\n" + lines + "\n]\n" + s[m.end():])
print(f"{len(pk)} packages listed")
