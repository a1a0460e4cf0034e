"""Two int8 products per multiplier (vta.hw.packed, vta.hw.gemm.GemmPair).

References: plain integer products ``w0 * x`` and ``w1 * x`` for the numpy model of the packed
arithmetic (every one of the 2^24 signed int8 triples), that model for the Amaranth form of
the operand and the split (corner values and a random sample, Amaranth simulator), and numpy
dot products for a pipelined GemmPair.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator
from vta.hw.gemm import GemmPair
from vta.hw.packed import (
    packed_operand,
    packed_operand_np,
    packed_width,
    split_np,
    split_product,
)

INT8 = np.arange(-128, 128, dtype=np.int64)
#: Operand values where sign, carry and overflow corner cases live.
CORNERS = (-128, -127, -65, -64, -2, -1, 0, 1, 2, 63, 64, 127)


@pytest.mark.unit
def test_numpy_model_is_exact_for_every_int8_triple() -> None:
    """All 2^24 (w0, w1, x): the packed operand fits 25 signed bits (DSP48E1's A port), its
    product fits 33, and the split gives both products exactly."""
    assert packed_width(8, 8) == 25
    w0, w1 = (a.ravel() for a in np.meshgrid(INT8, INT8, indexing="ij"))
    a = packed_operand_np(w0, w1)
    assert a.min() >= -2**24 and a.max() < 2**24
    np.testing.assert_array_equal(a, w1 * 2**16 + w0)  # the operand is A = (w1 << 16) + w0
    wrong = 0
    for x in INT8:  # 256 slices of 65536 pairs: a second or two
        p = a * x
        assert p.min() >= -2**32 and p.max() < 2**32
        lo, hi = split_np(p)
        wrong += int(np.count_nonzero(lo != w0 * x) + np.count_nonzero(hi != w1 * x))
    assert wrong == 0


@pytest.mark.unit
@pytest.mark.parametrize("inp_width,wgt_width", [(4, 4), (8, 4), (4, 8), (16, 16)])
def test_numpy_model_other_widths(inp_width: int, wgt_width: int) -> None:
    """The same slices for other operand widths: exhaustive where small, extremes and a random
    sample for 16-bit operands."""
    def values(bits: int) -> np.ndarray:
        lo, hi = -2**(bits - 1), 2**(bits - 1)
        if bits <= 8:
            return np.arange(lo, hi, dtype=np.int64)
        rng = np.random.default_rng(bits)
        return np.concatenate([[lo, lo + 1, -1, 0, 1, hi - 1],
                               rng.integers(lo, hi, 58)]).astype(np.int64)

    w0, w1, x = np.meshgrid(values(wgt_width), values(wgt_width), values(inp_width),
                            indexing="ij")
    a = packed_operand_np(w0, w1, inp_width, wgt_width)
    assert np.abs(a).max() <= 2**(packed_width(inp_width, wgt_width) - 1)
    lo, hi = split_np(a * x, inp_width, wgt_width)
    np.testing.assert_array_equal(lo, w0 * x)
    np.testing.assert_array_equal(hi, w1 * x)


def _simulate_split(triples: list[tuple[int, int, int]]) -> list[tuple[int, int, int, int]]:
    """(A, low product, high half, sign bit) of the Amaranth form for each (w0, w1, x)."""
    w0, w1, x = Signal(signed(8)), Signal(signed(8)), Signal(signed(8))
    a = Signal(signed(packed_width(8, 8)))
    lo, hi, sign = Signal(signed(16)), Signal(signed(16)), Signal()
    m = Module()
    m.d.comb += a.eq(packed_operand(w0, w1, 8))
    parts = split_product(a * x, 8, 8)
    m.d.comb += [lo.eq(parts[0]), hi.eq(parts[1]), sign.eq(parts[2])]
    out = []

    async def bench(ctx) -> None:
        for t in triples:
            for s, v in zip((w0, w1, x), t):
                ctx.set(s, v)
            out.append(tuple(ctx.get(s) for s in (a, lo, hi, sign)))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return out


@pytest.mark.sim
def test_amaranth_form_matches_the_model() -> None:
    """The Amaranth operand and split against the numpy model: every combination of corner
    values and 3000 random triples."""
    rng = np.random.default_rng(39)
    triples = list(itertools.product(CORNERS, repeat=3))
    triples += [tuple(int(v) for v in t) for t in rng.integers(-128, 128, (3000, 3))]
    got = np.array(_simulate_split(triples), dtype=np.int64)
    w0, w1, x = np.array(triples, dtype=np.int64).T
    a = packed_operand_np(w0, w1)
    np.testing.assert_array_equal(got[:, 0], a)
    p = a * x
    lo, hi = split_np(p)
    np.testing.assert_array_equal(got[:, 1], lo)
    np.testing.assert_array_equal(got[:, 2] + got[:, 3], hi)
    np.testing.assert_array_equal(got[:, 1], w0 * x)  # and so the products themselves
    np.testing.assert_array_equal(got[:, 2] + got[:, 3], w1 * x)


@pytest.mark.sim
@pytest.mark.parametrize("operand_stage", [False, True], ids=["plain", "operand-stage"])
def test_gemm_pair_dot_products(operand_stage: bool) -> None:
    """A pipelined GemmPair over block_in = 8: both lanes' sums equal numpy's dot products for
    random and extreme vectors (all -128: the largest sums), and a reset loads zero."""
    bi = 8
    dut = GemmPair(block_in=bi, inp_width=8, wgt_width=8, operand_stage=operand_stage,
                   name=(0, 0))
    rng = np.random.default_rng(7)
    vecs = [rng.integers(-128, 128, (3, bi)) for _ in range(40)]
    vecs += [np.full((3, bi), v) for v in (-128, 127)]
    vecs += [np.array([[-128] * bi, [127] * bi, [-128] * bi])]
    stages = 4 + operand_stage  # (C), M, T1, T2, then the output
    got = []

    async def bench(ctx) -> None:
        for en in (dut.en_c, dut.en_m, *dut.en_t1, *dut.en_t2):
            ctx.set(en, 1)
        for x, w0, w1 in vecs:
            for k in range(bi):
                ctx.set(dut.x[k], int(x[k]))
                ctx.set(dut.w0[k], int(w0[k]))
                ctx.set(dut.w1[k], int(w1[k]))
            for _ in range(stages - 1):
                await ctx.tick()
            got.append((ctx.get(dut.sum[0]), ctx.get(dut.sum[1])))
        for z in dut.zero:
            ctx.set(z, 1)
        await ctx.tick()
        got.append((ctx.get(dut.sum[0]), ctx.get(dut.sum[1])))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    want = [(int(w0 @ x), int(w1 @ x)) for x, w0, w1 in vecs] + [(0, 0)]
    assert got == want
