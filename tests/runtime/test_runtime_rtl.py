"""The runtime on the RTL simulation of the core (small configuration), against numpy."""

from __future__ import annotations

import numpy as np
import pytest
import vta.runtime as rt
from vta.isa import Config

pytestmark = [pytest.mark.sim, pytest.mark.slow]


def test_matmul_on_rtl_reloads_kernels_after_each_run(small_cfg: Config, matmul_case) -> None:
    dev = rt.open("rtl", small_cfg, arena_size=1 << 14)
    assert not dev.keeps_sram
    case = matmul_case(small_cfg, 3, 2, 2, shift=3, seed=21)
    A, W, C = case.buffers(dev)
    cq = dev.command_queue()
    case.emit(cq, A, W, C)
    first = cq.synchronize()
    np.testing.assert_array_equal(case.result(C), case.reference())
    assert first.backend == "rtl" and first.cycles > 0
    # the RTL forgets its SRAM: the second program must load its micro-kernels again
    C.copyfrom(np.zeros(C.nbytes, np.uint8))
    misses = cq.stats.uop_misses
    case.emit(cq, A, W, C)
    cq.synchronize()
    np.testing.assert_array_equal(case.result(C), case.reference())
    assert cq.stats.uop_misses == 2 * misses
