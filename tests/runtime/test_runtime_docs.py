"""The walk-through in runtime/API.md runs as written (it asserts its own result vs numpy)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.sim

API_MD = Path(__file__).resolve().parents[2] / "runtime" / "API.md"


def test_api_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", API_MD.read_text(), re.S)
    example = blocks[0]
    assert "cq.synchronize()" in example and "assert (out ==" in example
    namespace: dict[str, object] = {}
    exec(compile(example, str(API_MD), "exec"), namespace)  # noqa: S102
    assert namespace["stats"].insns_per_opcode["GEMM"] == 2
