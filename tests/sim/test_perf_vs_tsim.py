"""The calibrated performance model against tsim on the small config (held out of the fit,
which used the default config): every program within 10% of tsim's cycles."""

from __future__ import annotations

import numpy as np
import pytest
from vta.isa import Config
from vta.sim.perf import estimate
from vta.sim.progen import random_program
from vta.sim.programs import matmul_program

from ..conftest import require_tool


def _programs(cfg: Config):
    for m, n, k, db in ((16, 16, 16, False), (64, 64, 64, False), (64, 64, 64, True)):
        prog, dram, _ = matmul_program(cfg, m, n, k, double_buffer=db)
        yield f"matmul {m}x{n}x{k}{' db' if db else ''}", prog, dram
    rng = np.random.default_rng(7)
    for i in range(4):
        prog, dram = random_program(cfg, rng)
        yield f"random {i}", prog, dram


@pytest.mark.tsim
@pytest.mark.parametrize("options", [{}, {"dsp_registers": True}], ids=["plain", "dsp"])
def test_perf_model_within_10_percent_of_tsim(small_cfg: Config, options: dict) -> None:
    """Also for the ULX3S's core (the DSP registers: one more GEMM stage), with the model's
    parameters for that core (PerfParams.for_core)."""
    require_tool("verilator")
    from vta.hw import tsim
    from vta.hw.options import CoreOptions
    from vta.sim.perf import DEFAULT_PARAMS

    core = CoreOptions.from_dict(options)
    params = DEFAULT_PARAMS.for_core(core.extra_gemm_latency)
    rows = []
    for name, prog, dram in _programs(small_cfg):
        cycles = tsim.run_program(prog, dram, small_cfg, options=core).stats.cycles
        est = estimate(prog, small_cfg, params=params).cycles
        rows.append((name, cycles, est, abs(est - cycles) / cycles))
    bad = [r for r in rows if r[3] > 0.10]
    assert not bad, "perf model off by more than 10%: " + ", ".join(
        f"{n}: tsim {c} perf {e}" for n, c, e, _ in bad)
