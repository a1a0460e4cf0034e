"""Every import package of the source tree is listed in pyproject.toml (else `pip install .`
drops it)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.unit
def test_every_subpackage_is_listed() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(meta["packages"])
    dirs = {v: k for k, v in meta["package-dir"].items()}
    missing = []
    for folder, pkg in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if any(part.startswith((".", "__")) for part in rel.parts):
                continue
            name = ".".join([pkg, *rel.parts])
            if name not in listed:
                missing.append(name)
    assert not missing, f"add to [tool.setuptools] packages: {sorted(missing)}"


@pytest.mark.unit
def test_console_script_entry_point() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    module, func = meta["project"]["scripts"]["vta"].split(":")
    import importlib

    assert callable(getattr(importlib.import_module(module), func))
