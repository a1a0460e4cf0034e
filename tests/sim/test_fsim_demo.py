"""examples/demo.py (what ``make demo`` runs) and the example program it assembles."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_demo():
    spec = importlib.util.spec_from_file_location("vta_demo", ROOT / "examples" / "demo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.sim
def test_fsim_demo_runs_and_passes() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "matches numpy" in proc.stdout and "demo OK" in proc.stdout
    assert '"insn_count": 13' in proc.stdout


@pytest.mark.sim
def test_fsim_demo_fails_when_the_result_is_wrong(monkeypatch, capsys) -> None:
    demo = _load_demo()
    real = demo.reference
    monkeypatch.setattr(demo, "reference", lambda *a: real(*a) ^ np.int8(1))
    assert demo.main() == 1
    assert "DIFFERS FROM NUMPY" in capsys.readouterr().out
