"""The TVM-slides example (examples/matmul_tensorize.py) runs and checks itself."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.sim

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "matmul_tensorize.py"


def test_matmul_tensorize_example(capsys):
    spec = importlib.util.spec_from_file_location("matmul_tensorize", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--preset", "small", "--size", "16"]) == 0
    out = capsys.readouterr().out
    assert "1 virtual thread(s): OK" in out and "2 virtual thread(s): OK" in out
    assert "vta.gemm" in out and "thread=(1,)" in out


def test_conv2d_vta_example(capsys):
    path = EXAMPLE.parent / "conv2d_vta.py"
    spec = importlib.util.spec_from_file_location("conv2d_vta", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # 6 channels with BLOCK=4: the packers zero-pad to 8 and the result is cut back
    assert mod.main(["--preset", "small", "--channels", "6", "--size", "6"]) == 0
    out = capsys.readouterr().out
    assert out.count(": OK") == 2
