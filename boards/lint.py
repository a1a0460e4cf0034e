"""Verilator lint of an emitted board project (``verilator --lint-only -Wno-fatal``)."""

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vta.hw.verilator import ToolMissingError, find_verilator

from .tools import ToolError
from .ulx3s import ECP5_SIM_MODELS


@dataclass
class LintResult:
    """Verilator's verdict on a project: its error lines and the number of warnings."""

    top: str
    errors: list[str]
    warnings: int
    output: str


def lint_project(project_dir: str | Path, *, timeout: float = 600.0) -> LintResult:
    """Lint the Verilog of a project written by :func:`vta.boards.project.write_project`.

    Vendor primitives the top instantiates (the ECP5 PLL) are given black-box declarations.
    """
    d = Path(project_dir)
    meta = json.loads((d / "board.json").read_text())
    top = meta["top"]
    sources = [str(d / f) for f in meta["files"] if f.endswith(".v")]
    try:
        exe = find_verilator().path
    except ToolMissingError as e:
        raise ToolError(str(e)) from None
    with tempfile.TemporaryDirectory(prefix="vta-lint-") as tmp:
        if meta["flow"] == "open":
            stub = Path(tmp) / "ecp5_models.v"
            stub.write_text(ECP5_SIM_MODELS)
            sources.append(str(stub))
        try:
            proc = subprocess.run(
                [exe, "--lint-only", "-Wno-fatal", "--top-module", top, *sources],
                capture_output=True, text=True, timeout=timeout, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise ToolError(f"verilator lint of {d} did not finish in {timeout:.0f} s") from None
    out = proc.stdout + proc.stderr
    errors = [ln for ln in out.splitlines() if ln.startswith("%Error")]
    warnings = sum(ln.startswith("%Warning") for ln in out.splitlines())
    if proc.returncode != 0 and not errors:
        errors = [f"verilator exited with status {proc.returncode}"]
    return LintResult(top=top, errors=errors, warnings=warnings, output=out)
