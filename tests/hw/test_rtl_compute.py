"""The compute module (vta.hw.compute.Compute): GEMM, ALU, LOAD UOP/ACC and the hazards.

The reference is a per-micro-op numpy/Python interpreter of ARCHITECTURE.md's GEMM/ALU
semantics written here, executed strictly in program order, so any pipeline hazard in the RTL
(back-to-back micro-ops on the same accumulator entry, as dst or as ALU src) shows up as a
mismatch.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator
from vta.hw.compute import Compute, out_granularity
from vta.hw.decode import insn_layouts
from vta.hw.options import CoreOptions
from vta.hw.testbench import ReadResponder, stream_put
from vta.isa import Config
from vta.isa.fusion import MAX_STAGE_SHIFT, alu_chains
from vta.isa.insn import (
    AluInsn,
    FinishInsn,
    GemmInsn,
    Insn,
    MemInsn,
    Uop,
    encode_uops,
    encode_word,
)
from vta.isa.layout import AluOp, MemType, Opcode

pytestmark = pytest.mark.sim

UOP_DRAM = 0x400  # byte address of the micro-ops in the test DRAM


def wrap32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def alu_ref(op: int, a: int, b: int) -> int:
    """One ALU lane on Python integers (mathematical result wrapped to int32)."""
    if op == AluOp.MIN:
        return min(a, b)
    if op == AluOp.MAX:
        return max(a, b)
    if op == AluOp.ADD:
        return wrap32(a + b)
    if op == AluOp.SHR:
        return wrap32(a >> b) if b >= 0 else wrap32(a << -b)
    if op == AluOp.MUL:
        return wrap32(a * b)
    raise ValueError(op)


def reference(cfg: Config, insns: list[Insn], uops: list[Uop], acc: np.ndarray,
              inp: np.ndarray, wgt: np.ndarray) -> np.ndarray:
    """Execute GEMM/ALU instructions micro-op by micro-op; returns the new accumulators."""
    acc = acc.astype(np.int64).copy()
    for insn in insns:
        if isinstance(insn, MemInsn):
            continue  # LOAD UOP: the uops are given
        for o in range(insn.iter_out):
            for i in range(insn.iter_in):
                for u in range(insn.uop_bgn, insn.uop_end):
                    uop = uops[u]
                    d = uop.dst_idx + o * insn.dst_factor_out + i * insn.dst_factor_in
                    s = uop.src_idx + o * insn.src_factor_out + i * insn.src_factor_in
                    if isinstance(insn, GemmInsn) and insn.reset_reg:  # ALU ignores it (TVM)
                        acc[d] = 0
                        continue
                    if isinstance(insn, GemmInsn):
                        w = uop.wgt_idx + o * insn.wgt_factor_out + i * insn.wgt_factor_in
                        x = inp[s].reshape(cfg.batch, cfg.block_in).astype(np.int64)
                        wt = wgt[w].reshape(cfg.block_out, cfg.block_in).astype(np.int64)
                        res = acc[d] + (x @ wt.T).reshape(-1)
                        acc[d] = [wrap32(int(v)) for v in res]
                    else:
                        src = [insn.imm] * acc.shape[1] if insn.use_imm else list(acc[s])
                        acc[d] = [alu_ref(insn.alu_opcode, int(a), int(b))
                                  for a, b in zip(acc[d], src)]
    return acc.astype(np.int32)


def run_compute(cfg: Config, insns: list[Insn], uops: list[Uop], *, seed: int = 0,
                acc_range: tuple[int, int] = (-2**31, 2**31), streamed: bool = False,
                options: CoreOptions | None = None):
    """Run ``insns`` (after a LOAD UOP of ``uops``) on Compute; return (rtl acc, reference,
    cycles). One instruction at a time (``cycles``: per instruction index, busy cycles), or
    ``streamed`` back to back as the fetch module queues them (``cycles``: ``total`` to
    FINISH, ``done`` instructions counted, ``alu_uops`` ALU micro-op iterations counted).
    ``options``: the core variant (:class:`~vta.hw.options.CoreOptions`)."""
    rng = np.random.default_rng(seed)
    lanes = cfg.batch * cfg.block_out
    acc0 = rng.integers(*acc_range, (cfg.acc_depth, lanes), dtype=np.int64).astype(np.int32)
    inp = rng.integers(-128, 128, (cfg.inp_depth, cfg.batch * cfg.block_in), dtype=np.int8)
    wgt = rng.integers(-128, 128, (cfg.wgt_depth, cfg.block_out * cfg.block_in), dtype=np.int8)
    dram = np.zeros(0x2000, np.uint8)
    ub = np.frombuffer(encode_uops(uops, cfg), np.uint8)
    dram[UOP_DRAM:UOP_DRAM + len(ub)] = ub
    load_uops = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, sram_base=0,
                        dram_base=UOP_DRAM // 4, y_size=1, x_size=len(uops), x_stride=len(uops))
    # FINISH drains the pipeline (GEMM/ALU instructions that push no token do not wait for it)
    program = [load_uops, *insns, FinishInsn()]

    lays = insn_layouts(cfg)
    bus = 8
    dut = Compute(cfg, insn_layout=lays.insn, bus_bytes=bus, options=options)
    m = Module()
    m.submodules.dut = dut

    def rows(a: np.ndarray) -> list[int]:
        return [int.from_bytes(r.tobytes(), "little") for r in a]

    m.submodules.inp = inp_mem = Memory(shape=inp.shape[1] * 8, depth=cfg.inp_depth,
                                        init=rows(inp))
    m.submodules.wgt = wgt_mem = Memory(shape=wgt.shape[1] * 8, depth=cfg.wgt_depth,
                                        init=rows(wgt))
    m.submodules.acc = acc_mem = Memory(shape=lanes * 32, depth=cfg.acc_depth, init=rows(acc0))
    gran = bus * 8 if cfg.acc_elem_bytes > bus else None
    acc_wr = acc_mem.write_port(granularity=gran)
    wiring.connect(m, dut.acc_wr, acc_wr)
    wiring.connect(m, dut.acc_rd, acc_mem.read_port())
    out_bits = lanes * cfg.out_width
    m.submodules.out = out_mem = Memory(shape=out_bits, depth=cfg.acc_depth, init=[])
    wiring.connect(m, dut.out_wr, out_mem.write_port(granularity=out_granularity(cfg, bus)))
    wiring.connect(m, dut.inp_rd, inp_mem.read_port())
    wiring.connect(m, dut.wgt_rd, wgt_mem.read_port())
    responder = ReadResponder(dram, dut.req, dut.rdata, bus_bytes=bus, latency=2)
    got = np.zeros_like(acc0)
    cycles = {}

    async def feed(ctx) -> None:
        for insn in program:
            await stream_put(ctx, dut.insn, encode_word(insn, cfg))

    async def bench(ctx) -> None:
        for q in (dut.pop_prev, dut.pop_next):
            ctx.set(q.avail, 1)
        for q in (dut.push_prev, dut.push_next):
            ctx.set(q.ready, 1)
        if streamed:
            alu_uops = 0
            total = None
            for n in range(1, 200000):
                _clk, _rst, fin, uop, busy = await ctx.tick().sample(
                    dut.finish, dut.alu_uop, dut.status.busy)
                alu_uops += uop
                total = total or (n if fin else None)
                if fin and not busy:  # (FINISH is counted once it completes)
                    break
            cycles.update(total=total, done=ctx.get(dut.status.done), alu_uops=alu_uops)
        for k, insn in enumerate([] if streamed else program):
            start = None
            await stream_put(ctx, dut.insn, encode_word(insn, cfg))
            for n in range(100000):
                _clk, _rst, busy = await ctx.tick().sample(dut.status.busy)
                if busy and start is None:
                    start = n
                if not busy and start is not None:
                    break
            cycles[k] = n
        for i in range(cfg.acc_depth):
            got[i] = np.frombuffer(ctx.get(acc_mem.data[i]).to_bytes(lanes * 4, "little"),
                                   np.int32)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(responder.run, background=True)
    if streamed:
        sim.add_testbench(feed, background=True)
    sim.add_testbench(bench)
    sim.run()
    return got, reference(cfg, insns, uops, acc0, inp, wgt), cycles


def random_uops(rng: random.Random, n: int, *, dst: int, src: int, wgt: int) -> list[Uop]:
    return [Uop(rng.randrange(dst), rng.randrange(src), rng.randrange(wgt)) for _ in range(n)]


def test_gemm_random_loops(small_cfg: Config) -> None:
    """Random micro-ops and loop nests (factors may be 0: repeated dst), reset and accumulate."""
    rng = random.Random(1)
    uops = random_uops(rng, 24, dst=16, src=64, wgt=16)
    insns: list[Insn] = []
    for _ in range(6):
        bgn = rng.randrange(20)
        insns.append(GemmInsn(
            reset_reg=int(rng.random() < 0.2), uop_bgn=bgn, uop_end=bgn + rng.randint(1, 4),
            iter_out=rng.randint(1, 3), iter_in=rng.randint(1, 3),
            dst_factor_out=rng.randint(0, 16), dst_factor_in=rng.randint(0, 8),
            src_factor_out=rng.randint(0, 32), src_factor_in=rng.randint(0, 16),
            wgt_factor_out=rng.randint(0, 8), wgt_factor_in=rng.randint(0, 8)))
    got, expected, _ = run_compute(small_cfg, insns, uops)
    np.testing.assert_array_equal(got, expected)


def test_gemm_back_to_back_same_accumulator(small_cfg: Config) -> None:
    """The HLS hazard: consecutive micro-ops (and loop iterations) accumulating into one entry,
    at distance 1, 2 and 3 in the pipeline."""
    uops = [Uop(5, 1, 2), Uop(5, 2, 3), Uop(6, 3, 4), Uop(5, 4, 5), Uop(6, 5, 6), Uop(7, 0, 0),
            Uop(5, 6, 7)]
    insns = [
        GemmInsn(uop_bgn=0, uop_end=7, iter_out=1, iter_in=1),
        GemmInsn(uop_bgn=0, uop_end=1, iter_out=3, iter_in=4, src_factor_in=1, wgt_factor_out=1),
        GemmInsn(uop_bgn=0, uop_end=2, iter_out=2, iter_in=2, src_factor_out=3, wgt_factor_in=2),
    ]
    got, expected, _ = run_compute(small_cfg, insns, uops, seed=4)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("options", [
    CoreOptions(pack_multipliers=True),
    pytest.param(CoreOptions(pack_multipliers=True, replicate_control=True,
                             replicate_operands=True), marks=pytest.mark.slow)],
    ids=["packed", "packed+control+operands"])
def test_gemm_packed_multipliers_same_results_and_cycles(small_cfg: Config,
                                                         options: CoreOptions) -> None:
    """Two products per multiplier: random loops (with resets) and back-to-back micro-ops on
    one entry give the reference's results, in the cycles of the same core without packing
    (the packed product register is the plain product register)."""
    rng = random.Random(39)
    uops = random_uops(rng, 24, dst=16, src=64, wgt=16)
    insns: list[Insn] = [GemmInsn(reset_reg=int(k == 2), uop_bgn=k, uop_end=k + 6,
                                  iter_out=2, iter_in=3, dst_factor_out=rng.randint(0, 4),
                                  dst_factor_in=rng.randint(0, 2), src_factor_out=7,
                                  src_factor_in=3, wgt_factor_out=1, wgt_factor_in=2)
                         for k in range(4)]
    insns.append(GemmInsn(uop_bgn=0, uop_end=1, iter_out=3, iter_in=4, src_factor_in=1))
    plain = dataclasses.replace(options, pack_multipliers=False)
    got, expected, cycles = run_compute(small_cfg, insns, uops, seed=39, options=options)
    np.testing.assert_array_equal(got, expected)
    _, _, plain_cycles = run_compute(small_cfg, insns, uops, seed=39, options=plain)
    assert cycles == plain_cycles


def test_gemm_empty_loops_are_noops(small_cfg: Config) -> None:
    uops = [Uop(1, 1, 1), Uop(2, 2, 2)]
    insns = [GemmInsn(uop_bgn=0, uop_end=2, iter_out=0, iter_in=3),
             GemmInsn(uop_bgn=0, uop_end=2, iter_out=2, iter_in=0),
             GemmInsn(uop_bgn=1, uop_end=1, iter_out=2, iter_in=2),
             GemmInsn(reset_reg=1, uop_bgn=1, uop_end=2, iter_out=1, iter_in=1)]
    got, expected, _ = run_compute(small_cfg, insns, uops)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("op", list(AluOp), ids=[o.name for o in AluOp])
def test_alu_immediates(small_cfg: Config, op: AluOp) -> None:
    """Every ALU op with positive, negative and extreme immediates (SHR < 0 shifts left)."""
    imms = {AluOp.SHR: [0, 1, 7, 31, -1, -5, -31, 3]}.get(op, [0, 1, -1, 32767, -32768, 77])
    uops = [Uop(k, 0, 0) for k in range(8)]
    insns = [AluInsn(alu_opcode=op, use_imm=1, imm=imm, uop_bgn=k % 4, uop_end=k % 4 + 4,
                     iter_out=1, iter_in=2, dst_factor_in=8 + k)
             for k, imm in enumerate(imms)]
    got, expected, _ = run_compute(small_cfg, insns, uops, seed=int(op))
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("op", list(AluOp), ids=[o.name for o in AluOp])
def test_alu_acc_source_and_hazards(small_cfg: Config, op: AluOp) -> None:
    """acc[dst] = op(acc[dst], acc[src]) where src is the dst of the previous 1, 2 or 3
    micro-ops (forwarding / interlock), plus src == dst."""
    uops = [Uop(1, 0, 0), Uop(2, 1, 0), Uop(3, 2, 0), Uop(4, 2, 0), Uop(5, 2, 0), Uop(5, 5, 0),
            Uop(6, 5, 0), Uop(1, 6, 0)]
    insns = [AluInsn(alu_opcode=op, uop_bgn=0, uop_end=8, iter_out=2, iter_in=2,
                     dst_factor_out=16, src_factor_out=16, dst_factor_in=0, src_factor_in=0)]
    acc_range = (-40, 40) if op == AluOp.SHR else (-2**31, 2**31)
    got, expected, _ = run_compute(small_cfg, insns, uops, seed=10 + int(op), acc_range=acc_range)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("use_imm", [0, 1])
def test_alu_reset_reg_is_ignored(small_cfg: Config, use_imm: int) -> None:
    """An ALU instruction with reset_reg=1 performs its operation, op(acc[dst], src), as in
    TVM's simulator and HLS core: the same accumulators (and cycles) as with reset_reg=0."""
    uops = [Uop(k, k + 1, 0) for k in range(4)]

    def program(reset: int) -> list[Insn]:
        return [AluInsn(alu_opcode=AluOp.ADD, reset_reg=reset, use_imm=use_imm, imm=-7,
                        uop_bgn=0, uop_end=3, iter_out=1, iter_in=1),
                AluInsn(alu_opcode=AluOp.MAX, reset_reg=reset, uop_bgn=2, uop_end=4,
                        iter_out=1, iter_in=1)]

    got, expected, cycles = run_compute(small_cfg, program(1), uops, seed=8,
                                        acc_range=(-1000, 1000))
    np.testing.assert_array_equal(got, expected)
    plain, _, plain_cycles = run_compute(small_cfg, program(0), uops, seed=8,
                                         acc_range=(-1000, 1000))
    np.testing.assert_array_equal(got, plain)
    assert cycles == plain_cycles
    assert got[:2].any()  # not zeroed


def test_alu_large_shift_amounts(small_cfg: Config) -> None:
    """Shift amounts of 32 or more: right shifts fill with the sign, left shifts give 0."""
    uops = [Uop(k, 0, 0) for k in range(4)]
    insns = [AluInsn(alu_opcode=AluOp.SHR, use_imm=1, imm=imm, uop_bgn=0, uop_end=4,
                     iter_out=1, iter_in=1, dst_factor_out=0)
             for imm in (0,)] + [
        AluInsn(alu_opcode=AluOp.SHR, use_imm=1, imm=40, uop_bgn=0, uop_end=2, iter_out=1,
                iter_in=1),
        AluInsn(alu_opcode=AluOp.SHR, use_imm=1, imm=-33, uop_bgn=2, uop_end=4, iter_out=1,
                iter_in=1)]
    got, expected, _ = run_compute(small_cfg, insns, uops, seed=3)
    np.testing.assert_array_equal(got, expected)


#: Shift amounts around the clamping boundaries (|amount| = 32, the 6-bit limit 63/64, the
#: 16-bit immediate's extremes): the amount is clamped with bit tests, not a comparator.
SHIFT_EDGES = [31, 32, 33, 34, 47, 48, 63, 64, 65, 100, 1000, 32767,
               -1, -31, -32, -33, -34, -48, -63, -64, -65, -100, -1000, -32768]


def test_alu_shift_amount_boundaries(small_cfg: Config) -> None:
    """Every amount of :data:`SHIFT_EDGES` as an immediate (each on its own entry), then as a
    two-operand source (the amounts loaded into the accumulator by a MIN with themselves)."""
    n = len(SHIFT_EDGES)
    uops = [Uop(k, 0, 0) for k in range(n)]
    insns = [AluInsn(alu_opcode=AluOp.SHR, use_imm=1, imm=imm, uop_bgn=k, uop_end=k + 1,
                     iter_out=1, iter_in=1) for k, imm in enumerate(SHIFT_EDGES)]
    got, expected, _ = run_compute(small_cfg, insns, uops, seed=11)
    np.testing.assert_array_equal(got, expected)
    # two-operand: entry n + k holds amount k (ADD of the immediate to an entry zeroed by a
    # GEMM reset), then SHR entry k by entry n + k
    amounts = [Uop(n + k, 0, 0) for k in range(n)]
    pairs = [Uop(k, n + k, 0) for k in range(n)]
    setup = [GemmInsn(reset_reg=1, uop_bgn=n, uop_end=2 * n, iter_out=1, iter_in=1)]
    setup += [AluInsn(alu_opcode=AluOp.ADD, use_imm=1, imm=imm, uop_bgn=n + k,
                      uop_end=n + k + 1, iter_out=1, iter_in=1)
              for k, imm in enumerate(SHIFT_EDGES)]
    shift = AluInsn(alu_opcode=AluOp.SHR, uop_bgn=2 * n, uop_end=3 * n, iter_out=1, iter_in=1)
    got, expected, _ = run_compute(small_cfg, [*setup, shift], uops + amounts + pairs, seed=12)
    np.testing.assert_array_equal(got, expected)


def test_gemm_throughput_one_uop_per_cycle(small_cfg: Config) -> None:
    """A GEMM of N micro-op iterations occupies compute for N + a small constant cycles."""
    uops = [Uop(k, k, k % 8) for k in range(16)]
    small = GemmInsn(uop_bgn=0, uop_end=16, iter_out=1, iter_in=1)
    big = GemmInsn(uop_bgn=0, uop_end=16, iter_out=4, iter_in=4, dst_factor_in=0)
    got, expected, cycles = run_compute(small_cfg, [small, big], uops)
    np.testing.assert_array_equal(got, expected)
    n_small, n_big = 16, 256
    assert cycles[2] - cycles[1] == n_big - n_small
    assert cycles[1] - n_small <= 8


def test_alu_rates_one_port(small_cfg: Config) -> None:
    """With one accumulator read port: ALU micro-ops with an immediate run at one per cycle,
    two-operand ones at one per two cycles (dst and src read in turn), on distinct entries."""
    uops = [Uop(k, k + 16, 0) for k in range(16)]
    imm = AluInsn(alu_opcode=AluOp.ADD, use_imm=1, imm=3, uop_bgn=0, uop_end=16, iter_out=1,
                  iter_in=4, dst_factor_in=32, src_factor_in=32)
    two = AluInsn(alu_opcode=AluOp.ADD, uop_bgn=0, uop_end=16, iter_out=1, iter_in=4,
                  dst_factor_in=32, src_factor_in=32)
    got, expected, cycles = run_compute(small_cfg, [imm, imm, two, two], uops)
    np.testing.assert_array_equal(got, expected)
    n = 64
    assert cycles[2] - n <= 8  # one per cycle plus a fixed cost
    assert cycles[4] - 2 * n <= 8
    assert cycles[2] >= n and cycles[4] >= 2 * n


def requant_chain(**loops) -> list[AluInsn]:
    """A requantization epilogue as the compiler writes it: shift, multiply, round, shift,
    clip; six ALU instructions with an immediate over the same loops and micro-op."""
    steps = [(AluOp.SHR, 3), (AluOp.MUL, 1526), (AluOp.ADD, 1 << 9), (AluOp.SHR, 10),
             (AluOp.MIN, 127), (AluOp.MAX, -20)]
    return [AluInsn(alu_opcode=op, use_imm=1, imm=imm, **loops) for op, imm in steps]


def test_alu_chain_runs_in_one_pass(small_cfg: Config) -> None:
    """The compiler's requantization epilogue (shift, multiply, round, shift, min, max; six
    immediate ALU instructions over the same distinct entries) runs as one chain
    (vta.isa.fusion: the shift in PRE, the multiply in the ALU, the rest in the tail): one
    pass of their loops instead of six, with the same accumulators as in program order, every
    instruction counted and every micro-op iteration of each counted; an instruction that
    pops a token breaks the chain there."""
    uops = [Uop(0, 0, 0)]
    loops = dict(uop_bgn=0, uop_end=1, iter_out=8, iter_in=16, dst_factor_out=16,
                 dst_factor_in=1)
    chain = requant_chain(**loops)
    assert alu_chains(chain) == {0: 6, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0}
    got, expected, fused = run_compute(small_cfg, chain, uops, seed=5, streamed=True)
    np.testing.assert_array_equal(got, expected)
    n = 8 * 16
    assert fused["done"] == len(chain) + 2  # LOAD UOP, the six, FINISH
    assert fused["alu_uops"] == 6 * n
    split = [*chain[:3], dataclasses.replace(chain[3], pop_prev_dep=1), *chain[4:]]
    assert alu_chains(split) == {0: 3, 1: 0, 2: 0, 3: 3, 4: 0, 5: 0}
    got2, expected2, two = run_compute(small_cfg, split, uops, seed=5, streamed=True)
    np.testing.assert_array_equal(got2, expected2)
    assert two["alu_uops"] == 6 * n
    # one pass and a fixed cost; split: two passes
    assert n <= fused["total"] <= n + 60
    assert 2 * n <= two["total"] <= 2 * n + 90


def test_alu_chain_follows_the_stages(small_cfg: Config) -> None:
    """A chain's head takes PRE if it shifts right, else the ALU; each next member the first
    stage after the previous member's that runs its operation (PRE: SHR right; the ALU:
    anything; the tail: ADD, SHR right, MIN/MAX, MIN/MAX); one with none left starts a new
    chain there: the accumulators equal the in-order reference, in one pass per chain, and
    the chains are vta.isa.fusion's."""
    uops = [Uop(1, 0, 0)]
    loops = dict(uop_bgn=0, uop_end=1, iter_out=4, iter_in=8, dst_factor_out=8,
                 dst_factor_in=1)
    steps = [(AluOp.SHR, 3), (AluOp.MUL, -3), (AluOp.ADD, 9), (AluOp.SHR, 2),
             (AluOp.MIN, 9000), (AluOp.MAX, -9000),  # SHR(PRE) MUL ADD SHR MIN MAX
             (AluOp.MAX, -100), (AluOp.ADD, 5), (AluOp.MIN, 4000),  # | MAX ADD MIN
             (AluOp.ADD, 1),  # | ADD (the ADD stage comes before MIN/MAX)
             (AluOp.SHR, -2),  # | SHR(left, in the ALU: the tail shifts right only)
             (AluOp.SHR, 1), (AluOp.MAX, -4000), (AluOp.MIN, 4000),  # ... SHR MAX MIN
             (AluOp.MIN, 3000), (AluOp.SHR, 1),  # | MIN SHR (both MIN/MAX stages taken)
             (AluOp.SHR, 2), (AluOp.SHR, 1),  # | SHR(PRE) SHR(ALU) (the tail's SHR taken)
             (AluOp.ADD, 3), (AluOp.MUL, 2)]  # ... ADD | MUL (the ALU taken)
    run = [AluInsn(alu_opcode=op, use_imm=1, imm=imm, **loops) for op, imm in steps]
    heads = {k: v for k, v in alu_chains(run).items() if v}
    assert heads == {0: 6, 6: 3, 9: 1, 10: 4, 14: 2, 16: 3, 19: 1}
    got, expected, stats = run_compute(small_cfg, run, uops, seed=6, streamed=True,
                                       acc_range=(-4000, 4000))
    np.testing.assert_array_equal(got, expected)
    n = 32
    assert len(heads) * n <= stats["total"] <= len(heads) * n + 200
    assert stats["alu_uops"] == len(run) * n
    assert stats["done"] == len(run) + 2


def test_alu_chain_shifts_right_within_the_stage_limit(small_cfg: Config) -> None:
    """The SHR stages outside the ALU (PRE, the tail's) shift right by 0 to MAX_STAGE_SHIFT:
    every such amount, in PRE ahead of a MAX and in the tail after it, each chain over its own
    four full-range accumulators, equals the reference; larger amounts (and left shifts) run
    in the ALU, in chains of their own, with the same results."""
    small = list(range(MAX_STAGE_SHIFT + 1))
    big = [MAX_STAGE_SHIFT + 1, 31, 32, 1000, -3]
    uops = [Uop(4 * k, 0, 0) for k in range(len(small) + len(big))]
    run = []
    for k, (pre, post) in enumerate([*zip(small, reversed(small)), *zip(big, big)]):
        loops = dict(uop_bgn=k, uop_end=k + 1, iter_out=1, iter_in=4, dst_factor_in=1)
        run += [AluInsn(alu_opcode=AluOp.SHR, use_imm=1, imm=pre, **loops),
                AluInsn(alu_opcode=AluOp.MAX, use_imm=1, imm=-32768, **loops),
                AluInsn(alu_opcode=AluOp.SHR, use_imm=1, imm=post, **loops)]
    chains = alu_chains(run)
    assert [chains[3 * k] for k in range(len(small))] == [3] * len(small)
    # a big first shift heads in the ALU, the MAX joins the tail, a big second shift does not
    assert [chains.get(3 * k + m) for k in range(len(small), len(uops)) for m in range(3)] == \
        [2, 0, 1] * len(big)
    got, expected, _ = run_compute(small_cfg, run, uops, seed=21, streamed=True)
    np.testing.assert_array_equal(got, expected)


def test_alu_chains_only_fuse_what_computes_the_same(small_cfg: Config) -> None:
    """Random runs of immediate ALU instructions, some over loops that visit an entry more than
    once (dst factors 0 or overlapping: fusing those would change the result), some with more
    than one micro-op, any operation in any order (the tail's stages run one kind each),
    shifts both ways, token flags, two-operand ALU and GEMM instructions in between, all
    streamed back to back: the accumulators equal the in-order reference."""
    rng = random.Random(7)
    uops = [Uop(k % 5, (3 * k) % 7, k % 4) for k in range(6)] + [Uop(2, 9, 1)]
    insns: list[Insn] = []
    for _ in range(40):
        kind = rng.random()
        if kind < 0.15:
            insns.append(GemmInsn(reset_reg=int(rng.random() < 0.3), uop_bgn=0, uop_end=3,
                                  iter_out=2, iter_in=2, dst_factor_out=5, src_factor_in=3,
                                  wgt_factor_in=1))
            continue
        if kind < 0.3:
            insns.append(AluInsn(alu_opcode=rng.choice(list(AluOp)), uop_bgn=6, uop_end=7,
                                 iter_out=3, iter_in=2, dst_factor_out=rng.randint(0, 4),
                                 dst_factor_in=1, src_factor_out=1))
            continue
        bgn = rng.choice([6, 6, 6, 0])
        loops = dict(uop_bgn=bgn, uop_end=bgn + (1 if bgn == 6 else 2),
                     iter_out=rng.randint(1, 4), iter_in=rng.randint(1, 5),
                     dst_factor_out=rng.choice([0, 2, 5, 6, 8]),
                     dst_factor_in=rng.choice([1, 1, 1, 0, 2]))
        for _ in range(rng.randint(2, 8)):
            op = rng.choice(list(AluOp))
            imm = {AluOp.SHR: rng.randint(-3, 40), AluOp.MUL: rng.randint(-300, 300)}.get(
                op, rng.randint(-2000, 2000))
            insns.append(AluInsn(alu_opcode=op, use_imm=1, imm=imm,
                                 pop_prev_dep=int(rng.random() < 0.1),
                                 push_next_dep=int(rng.random() < 0.1), **loops))
    assert sum(v > 1 for v in alu_chains(insns).values()) >= 6  # chains do form
    got, expected, stats = run_compute(small_cfg, insns, uops, seed=9, streamed=True,
                                       acc_range=(-5000, 5000))
    np.testing.assert_array_equal(got, expected)
    assert stats["done"] == len(insns) + 2
    assert stats["alu_uops"] == sum(i.iter_out * i.iter_in * (i.uop_end - i.uop_bgn)
                                    for i in insns if isinstance(i, AluInsn))


def test_alu_repeated_src_runs_at_one_per_cycle(small_cfg: Config) -> None:
    """A two-operand ALU instruction whose src repeats (a bias added to a tile) reads it once
    and runs at one micro-op per cycle; a src that changes every outer iteration costs one
    more cycle per change; the accumulators equal the in-order reference."""
    uops = [Uop(0, 70, 0)]
    n = 4 * 16
    const = AluInsn(alu_opcode=AluOp.ADD, uop_bgn=0, uop_end=1, iter_out=4, iter_in=16,
                    dst_factor_out=16, dst_factor_in=1)
    per_row = dataclasses.replace(const, src_factor_out=1)
    got, expected, cycles = run_compute(small_cfg, [const, per_row], uops, seed=13)
    np.testing.assert_array_equal(got, expected)
    assert n <= cycles[1] <= n + 8
    assert n + 4 <= cycles[2] <= n + 4 + 8


def test_alu_repeated_src_is_reread_after_a_write(small_cfg: Config) -> None:
    """Random two-operand ALU micro-ops over a few entries, their src repeating and their dst
    often the src just read (or about to be read again), back to back and across
    instructions, GEMM resets in between: the accumulators equal the in-order reference (a
    kept src that a write made stale would differ)."""
    rng = random.Random(17)
    uops = [Uop(rng.randrange(6), rng.randrange(6), 0) for _ in range(12)]
    uops += [Uop(k, 3, 0) for k in range(6)]  # src 3, dst 3 among them
    insns: list[Insn] = []
    for _ in range(30):
        if rng.random() < 0.1:
            insns.append(GemmInsn(reset_reg=1, uop_bgn=rng.randrange(12), uop_end=12,
                                  iter_out=1, iter_in=1))
            continue
        bgn = rng.randrange(18)
        insns.append(AluInsn(alu_opcode=rng.choice([AluOp.ADD, AluOp.MIN, AluOp.MAX]),
                             uop_bgn=bgn, uop_end=min(18, bgn + rng.randint(1, 4)),
                             iter_out=rng.randint(1, 3), iter_in=rng.randint(1, 3),
                             dst_factor_out=rng.choice([0, 1, 6]),
                             dst_factor_in=rng.choice([0, 1]),
                             src_factor_out=rng.choice([0, 0, 1]), src_factor_in=0))
    # directed: the kept entry 3 written by a micro-op that reuses it, by an immediate ALU
    # instruction, and by a GEMM reset, each followed by a micro-op that reads it again
    ad = dict(alu_opcode=AluOp.ADD, iter_out=1, iter_in=1)
    insns += [AluInsn(uop_bgn=12, uop_end=18, **ad),
              AluInsn(uop_bgn=12, uop_end=13, **ad),
              AluInsn(use_imm=1, imm=1000, uop_bgn=15, uop_end=16, **ad),
              AluInsn(uop_bgn=13, uop_end=14, **ad),
              GemmInsn(reset_reg=1, uop_bgn=15, uop_end=16, iter_out=1, iter_in=1),
              AluInsn(uop_bgn=14, uop_end=15, **ad)]
    for streamed in (False, True):
        got, expected, _ = run_compute(small_cfg, insns, uops, seed=18, streamed=streamed,
                                       acc_range=(-10**6, 10**6))
        np.testing.assert_array_equal(got, expected)
