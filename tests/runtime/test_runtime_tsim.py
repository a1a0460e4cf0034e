"""The runtime on the Verilator build of the core (small configuration), against numpy."""

from __future__ import annotations

import numpy as np
import pytest
import vta.runtime as rt
from vta.isa import Config

from ..conftest import require_tool

pytestmark = [pytest.mark.tsim, pytest.mark.slow]


def test_matmul_on_tsim(small_cfg: Config, matmul_case) -> None:
    require_tool("verilator")
    dev = rt.open("tsim", small_cfg, arena_size=1 << 14)
    assert not dev.keeps_sram
    case = matmul_case(small_cfg, 4, 2, 3, shift=4, seed=31)
    A, W, C = case.buffers(dev)
    cq = dev.command_queue()
    case.emit(cq, A, W, C)
    stats = cq.synchronize()
    np.testing.assert_array_equal(case.result(C), case.reference())
    assert stats.insns_per_module["store"] == case.m + 1  # m stores and one drain no-op
