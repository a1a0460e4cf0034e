"""`pip install .` installs every part of the kit: pyproject.toml lists every directory of Python
files as a package (a missing one, like vta.compiler.graph once, is silently dropped from a
regular install while an editable install hides it), ships the data files the code reads, and
a wheel installed into a fresh environment runs `vta zoo`, `vta compile` and `vta run`."""

from __future__ import annotations

import fnmatch
import os
import shutil
import site
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Top-level folders with Python files that are not part of the distribution.
NOT_PACKAGED = {"tests", "bench", "examples", "scripts", "build"}


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _python_dirs(folder: Path) -> set[Path]:
    """Every directory under ``folder`` (itself included) that holds a .py file."""
    return {p.parent for p in folder.rglob("*.py")
            if not any(part.startswith((".", "__")) for part in p.relative_to(folder).parts[:-1])}


def _package_of(folder: str, pkg: str, d: Path) -> str:
    return ".".join([pkg, *d.relative_to(ROOT / folder).parts])


@pytest.mark.unit
def test_every_python_directory_is_a_listed_package() -> None:
    meta = _setuptools()
    listed = set(meta["packages"])
    mapped = {v: k for k, v in meta["package-dir"].items()}
    tops = {d.name for d in ROOT.iterdir() if d.is_dir() and not d.name.startswith(".")
            and next(d.rglob("*.py"), None) is not None}
    assert tops - NOT_PACKAGED == set(mapped), "map each folder in [tool.setuptools.package-dir]"
    found = {_package_of(folder, pkg, d)
             for folder, pkg in mapped.items() for d in _python_dirs(ROOT / folder)}
    assert not found - listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert not listed - found, f"listed but no such folder of .py files: {sorted(listed - found)}"


@pytest.mark.unit
def test_package_data_ships_every_data_file() -> None:
    """Non-Python files inside a package (except documentation) match a package-data glob."""
    meta = _setuptools()
    data = meta.get("package-data", {})
    missing = []
    for folder, pkg in ((v, k) for k, v in meta["package-dir"].items()):
        for f in (ROOT / folder).rglob("*"):
            rel = f.relative_to(ROOT / folder)
            if (not f.is_file() or f.suffix in (".py", ".pyc", ".md")
                    or any(part.startswith((".", "__")) for part in rel.parts)):
                continue
            owner = _package_of(folder, pkg, f.parent)
            if not any(fnmatch.fnmatch(f.name, g) for g in data.get(owner, [])):
                missing.append(f"{owner}: {f.name}")
    assert not missing, f"add to [tool.setuptools.package-data]: {missing}"


@pytest.mark.unit
def test_console_script_entry_point() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    module, func = meta["project"]["scripts"]["vta"].split(":")
    import importlib

    assert callable(getattr(importlib.import_module(module), func))


def _copy_source(dst: Path) -> None:
    """pyproject.toml, README.md and the package folders (a clean tree to build from)."""
    dst.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dst / name)
    for folder in _setuptools()["package-dir"].values():
        shutil.copytree(ROOT / folder, dst / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_runs_a_model(tmp_path) -> None:
    """Build the wheel offline (no build isolation), install it without dependencies into a new
    venv that sees this environment's already-installed dependencies through a .pth file (its
    .pth files, such as the editable install's hook, are not run), then zoo, compile, run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    env |= {"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "VTA_CACHE_DIR": str(tmp_path / "cache")}
    _copy_source(tmp_path / "src")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "-w", str(tmp_path / "dist"), str(tmp_path / "src")], tmp_path, env)
    (wheel,) = (tmp_path / "dist").glob("vta_kit-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    py = venv / "bin" / "python"
    purelib = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                        tmp_path, env).strip())
    (purelib / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    _run([str(py), "-m", "pip", "install", "--no-deps", "-q", "--prefix", str(venv),
          str(wheel)], tmp_path, env)
    where = _run([str(py), "-c", "import vta.compiler.graph.module as m, vta.hw.tsim as t; "
                  "print(m.__file__); print(t._harness_source()[:2])"], tmp_path, env)
    assert where.splitlines()[0].startswith(str(venv)), where  # the wheel's copy, not the tree
    vta = str(venv / "bin" / "vta")
    work = tmp_path / "work"
    work.mkdir()
    _run([vta, "zoo", "resnet18", "--image-size", "32", "--num-classes", "10", "-o", "r.onnx"],
         work, env)
    np.save(work / "x.npy", np.random.default_rng(0).standard_normal((1, 3, 32, 32))
            .astype(np.float32))
    _run([vta, "compile", "r.onnx", "-o", "mod"], work, env)
    _run([vta, "run", "mod", "--input", "x.npy", "--target", "fsim", "-o", "y.npy"], work, env)
    _run([vta, "run", "mod", "--input", "x.npy", "--target", "cpu", "-o", "y_cpu.npy"],
         work, env)
    y, y_cpu = np.load(work / "y.npy"), np.load(work / "y_cpu.npy")
    assert y.shape == (1, 10) and np.abs(y).max() > 0
    np.testing.assert_array_equal(y, y_cpu)  # VTA on fsim == the int8 CPU reference
    # and the installed kit computes what the source tree does
    from vta.cli.main import main

    assert main(["run", str(work / "mod"), "--input", str(work / "x.npy"), "--target", "fsim",
                 "-o", str(tmp_path / "y_tree.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y_tree.npy"), y)
