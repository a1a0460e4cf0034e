"""The ECP5 multiplier with its own registers (vta.hw.ecp5_mult.Mult18x18D).

Reference: a Python model of the registers (operand registers load when ``ce_in``, the product
register the product of the operand registers' old values when ``ce_out``), replayed on random
operands and clock enables against the behavioural model in the Amaranth simulator, and
against both elaborations (the MULT18X18D instance with a test-only Verilog model of the
primitive, vta.boards.ulx3s.ECP5_SIM_MODELS, which Verilator and the virtual ULX3S simulate,
and the behavioural model) under Icarus.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from amaranth.sim import Simulator
from vta.hw.ecp5_mult import Mult18x18D, PrimitiveTarget

from ..conftest import require_tool


def _stimulus(a_width: int, b_width: int, cycles: int, seed: int) -> list[tuple[int, ...]]:
    """Random (a, b, ce_in, ce_out) per cycle, corner operands included."""
    rng = np.random.default_rng(seed)
    lo_a, lo_b = -(1 << (a_width - 1)), -(1 << (b_width - 1))
    a = rng.integers(lo_a, -lo_a, cycles)
    b = rng.integers(lo_b, -lo_b, cycles)
    a[:4], b[:4] = [lo_a, lo_a, -lo_a - 1, -1], [lo_b, -lo_b - 1, lo_b, -1]
    ce = rng.random((cycles, 2)) < 0.7
    return [(int(a[t]), int(b[t]), int(ce[t, 0]), int(ce[t, 1])) for t in range(cycles)]


def _expected(stimulus: list[tuple[int, ...]]) -> list[int]:
    """The product register's value during each cycle of ``stimulus`` (zero at first)."""
    a_q = b_q = p_q = 0
    out = []
    for a, b, ce_in, ce_out in stimulus:
        out.append(p_q)
        p_q = a_q * b_q if ce_out else p_q
        a_q, b_q = (a, b) if ce_in else (a_q, b_q)
    return out


@pytest.mark.unit
@pytest.mark.parametrize("widths", [(8, 8), (18, 18), (5, 11)])
def test_behavioural_model_matches_register_semantics(widths) -> None:
    stim = _stimulus(*widths, 400, seed=sum(widths))
    dut = Mult18x18D(*widths)
    got = []

    async def bench(ctx):
        for a, b, ce_in, ce_out in stim:
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            ctx.set(dut.ce_in, ce_in)
            ctx.set(dut.ce_out, ce_out)
            got.append(ctx.get(dut.p))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == _expected(stim)


@pytest.mark.unit
@pytest.mark.parametrize("widths", [(0, 8), (8, 19), (8.0, 8)])
def test_bad_widths_are_type_errors(widths) -> None:
    with pytest.raises(TypeError, match="Mult18x18D"):
        Mult18x18D(*widths)


_TB = """
module tb;
  reg clk = 0, rst = 0;
  reg signed [{aw}-1:0] a = 0; reg signed [{bw}-1:0] b = 0; reg ce_in = 0, ce_out = 0;
  wire signed [{pw}-1:0] p;
  dut dut(.clk(clk), .rst(rst), .a(a), .b(b), .ce_in(ce_in), .ce_out(ce_out), .p(p));
  integer fd, n, t;
  initial begin
    fd = $fopen("stim.txt", "r");
    for (t = 0; t < {cycles}; t = t + 1) begin
      n = $fscanf(fd, "%d %d %d %d\\n", a, b, ce_in, ce_out);
      #1 $display("%0d", p);
      #4 clk = 1; #5 clk = 0;
    end
    $finish;
  end
endmodule
"""


@pytest.mark.sim
@pytest.mark.parametrize("family", ["ecp5", None], ids=["primitive", "behavioural"])
def test_both_elaborations_match_under_icarus(tmp_path, family) -> None:
    """The instance (primitive ports, parameters and bit order) and the behavioural model give
    the Python model's products, cycle by cycle."""
    iverilog, vvp = require_tool("iverilog", "vvp"), require_tool("vvp")
    from amaranth.back import verilog

    aw, bw, cycles = 8, 8, 300
    stim = _stimulus(aw, bw, cycles, seed=7)
    platform = PrimitiveTarget(family) if family else None
    text = verilog.convert(Mult18x18D(aw, bw), name="dut", platform=platform, emit_src=False)
    assert ("MULT18X18D" in text) is (family == "ecp5")
    (tmp_path / "dut.v").write_text(text)
    (tmp_path / "tb.v").write_text(_TB.format(aw=aw, bw=bw, pw=aw + bw, cycles=cycles))
    (tmp_path / "stim.txt").write_text("".join(f"{a} {b} {ci} {co}\n" for a, b, ci, co in stim))
    if family:
        from vta.boards.ulx3s import ECP5_SIM_MODELS

        (tmp_path / "ecp5_models.v").write_text(ECP5_SIM_MODELS)
    sources = ["tb.v", "dut.v"] + (["ecp5_models.v"] if family else [])
    subprocess.run([iverilog, "-g2012", "-o", "sim", *sources], cwd=tmp_path, check=True,
                   capture_output=True, timeout=120)
    res = subprocess.run([vvp, "-n", "sim"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, check=True)
    got = [int(line) for line in res.stdout.split() if line.lstrip("-").isdigit()]
    assert got == _expected(stim)
