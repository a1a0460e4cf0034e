"""The compute pipeline's sub-components (loop issuer, ALU and GEMM lanes, accumulator read,
write-back) on their own, against hand-computed sequences."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator
from vta.hw.acc_read import AccReader
from vta.hw.alu import AluLane
from vta.hw.decode import insn_layouts
from vta.hw.gemm import GemmLane
from vta.hw.loop_issuer import LoopIssuer
from vta.hw.write_back import WriteBack
from vta.isa import AluInsn, Config, GemmInsn, encode_word
from vta.isa.layout import AluOp

pytestmark = pytest.mark.sim


def _issue(cfg: Config, insns, *, adv_pattern=(1,), busy_cycles: int = 0):
    """Start each instruction on the issuer as soon as it is idle; returns the issued
    (instruction number, uop_addr, dst, src, wgt, alu, reset) per cycle with running & adv,
    and the cycles each start waited while pending."""
    dut = LoopIssuer(cfg, insn_layout=insn_layouts(cfg).insn)
    issued, waited = [], []

    async def bench(ctx) -> None:
        cycle = 0
        busy_left = 0
        for n, insn in enumerate(insns):
            ctx.set(dut.insn.as_value(), encode_word(insn, cfg))
            ctx.set(dut.start, 1)
            ctx.set(dut.pipe_busy, int(busy_left > 0))
            await ctx.tick()
            ctx.set(dut.start, 0)
            wait = 0
            while True:
                running, pending = ctx.get(dut.running), ctx.get(dut.pending)
                if not running and not pending:
                    break
                adv = adv_pattern[cycle % len(adv_pattern)]
                ctx.set(dut.adv, adv)
                ctx.set(dut.pipe_busy, int(busy_left > 0))
                if pending:
                    wait += 1
                    busy_left -= 1
                elif adv:
                    issued.append((n, ctx.get(dut.uop_addr), ctx.get(dut.dst_base),
                                   ctx.get(dut.src_base), ctx.get(dut.wgt_base),
                                   ctx.get(dut.ctrl.alu), ctx.get(dut.ctrl.reset)))
                await ctx.tick()
                cycle += 1
            waited.append(wait)
            busy_left = busy_cycles

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return issued, waited


def _expected(n: int, insn) -> list[tuple]:
    wgt = isinstance(insn, GemmInsn)
    return [(n, u,
             o * insn.dst_factor_out + i * insn.dst_factor_in,
             o * insn.src_factor_out + i * insn.src_factor_in,
             (o * insn.wgt_factor_out + i * insn.wgt_factor_in) if wgt else 0,
             int(isinstance(insn, AluInsn)), int(wgt and insn.reset_reg))
            for o in range(insn.iter_out) for i in range(insn.iter_in)
            for u in range(insn.uop_bgn, insn.uop_end)]


@pytest.mark.parametrize("adv_pattern", [(1,), (1, 0, 0, 1, 0)], ids=["every", "stalled"])
def test_loop_issuer_order_and_offsets(small_cfg: Config, adv_pattern) -> None:
    """Every (o, i, u) in order with o*factor_out + i*factor_in, whatever the stalls; an ALU's
    reset_reg does not reach the pipeline (it is a GEMM flag only)."""
    insns = [GemmInsn(reset_reg=1, uop_bgn=3, uop_end=6, iter_out=2, iter_in=3,
                      dst_factor_out=7, dst_factor_in=2, src_factor_out=5, src_factor_in=1,
                      wgt_factor_out=3, wgt_factor_in=4),
             GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1),
             AluInsn(reset_reg=1, uop_bgn=2, uop_end=4, iter_out=3, iter_in=2,
                     dst_factor_out=9, dst_factor_in=1, src_factor_out=4, src_factor_in=2)]
    issued, _ = _issue(small_cfg, insns, adv_pattern=adv_pattern)
    want = [t for n, insn in enumerate(insns) for t in _expected(n, insn)]
    assert issued == want


def test_loop_issuer_empty_loops_issue_nothing(small_cfg: Config) -> None:
    insns = [GemmInsn(uop_bgn=2, uop_end=2, iter_out=3, iter_in=3),
             GemmInsn(uop_bgn=0, uop_end=2, iter_out=0, iter_in=3),
             GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=2)]
    issued, _ = _issue(small_cfg, insns)
    assert issued == _expected(2, insns[2])


def test_loop_issuer_waits_for_the_other_kind_to_drain(small_cfg: Config) -> None:
    """An ALU after a GEMM waits while the pipeline is busy; a GEMM after a GEMM does not."""
    gemm = GemmInsn(uop_bgn=0, uop_end=2, iter_out=1, iter_in=1)
    alu = AluInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1)
    _, waited = _issue(small_cfg, [gemm, gemm, alu], busy_cycles=4)
    assert waited[1] == 0 and waited[2] >= 4


def _alu_reference(op: AluOp, a: int, b: int, width: int) -> int:
    """VTA's ALU on Python integers (hand-written from the ISA: signed MIN/MAX, wrapping ADD
    and MUL, SHR arithmetic with a negative amount shifting left), as a signed value."""
    if op == AluOp.MIN:
        r = min(a, b)
    elif op == AluOp.MAX:
        r = max(a, b)
    elif op == AluOp.ADD:
        r = a + b
    elif op == AluOp.MUL:
        r = a * b
    else:
        r = a >> min(b, width - 1) if b >= 0 else a << min(-b, width)
    r &= (1 << width) - 1
    return r - (1 << width) if r >> (width - 1) else r


@pytest.mark.parametrize("width", [8, 32])
def test_alu_lane_against_reference(width: int) -> None:
    """Every operation on random and corner operands (shift amounts past the width, the most
    negative value); operands load only with ``en``."""
    rng = np.random.default_rng(width)
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    corners = [lo, hi, 0, 1, -1, width - 1, width, width + 1, -width, -width - 1, 2 * width]
    pairs = [(a, b) for a in corners for b in corners]
    pairs += [tuple(int(v) for v in rng.integers(lo, hi + 1, 2)) for _ in range(60)]
    pairs += [(int(rng.integers(lo, hi + 1)), int(rng.integers(-2 * width, 2 * width)))
              for _ in range(60)]
    dut = AluLane(width)
    got, want = [], []

    async def bench(ctx) -> None:
        for a, b in pairs:
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            ctx.set(dut.en, 1)
            await ctx.tick()
            # new operands without en: E3 keeps the loaded ones
            ctx.set(dut.en, 0)
            ctx.set(dut.a, ~a)
            ctx.set(dut.b, b ^ 5)
            await ctx.tick()
            for op in AluOp:
                ctx.set(dut.op, op)
                ctx.set(dut.is_mul, int(op == AluOp.MUL))
                r = ctx.get(dut.result)
                got.append((op.name, a, b, r - (1 << width) if r >> (width - 1) else r))
                want.append((op.name, a, b, _alu_reference(op, a, b, width)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == want


def test_alu_lane_rejects_a_width_that_is_not_a_power_of_two() -> None:
    with pytest.raises(TypeError, match="power of two"):
        AluLane(24)


@pytest.mark.parametrize("operand_stage", [False, True], ids=["plain", "operand-stage"])
def test_gemm_lane_streams_dot_products(operand_stage: bool) -> None:
    """One operand pair set per cycle, every enable high: each dot product (numpy) comes out
    of ``sum`` 3 cycles later (4 with the operand stage); ``zero`` loads 0; with every enable
    low the lane holds its result whatever the operands do."""
    bi, iw, ww = 5, 8, 8  # (an odd block: the tree passes a term on)
    rng = np.random.default_rng(7)
    xs = rng.integers(-(1 << (iw - 1)), 1 << (iw - 1), (12, bi))
    ws = rng.integers(-(1 << (ww - 1)), 1 << (ww - 1), (12, bi))
    xs[0], ws[0] = -(1 << (iw - 1)), -(1 << (ww - 1))  # the largest total
    want = [int(v) for v in (xs * ws).sum(axis=1)]
    latency = 4 if operand_stage else 3
    dut = GemmLane(block_in=bi, inp_width=iw, wgt_width=ww, operand_stage=operand_stage)
    got: list[int] = []
    held: list[int] = []

    async def bench(ctx) -> None:
        for en in (dut.en_c, dut.en_m, dut.en_t1, dut.en_t2):
            ctx.set(en, 1)
        for t in range(len(xs) + latency):
            if t < len(xs):
                for k in range(bi):
                    ctx.set(dut.x[k], int(xs[t, k]))
                    ctx.set(dut.w[k], int(ws[t, k]))
            await ctx.tick()
            if t + 1 >= latency:
                got.append(ctx.get(dut.sum))
        for en in (dut.en_c, dut.en_m, dut.en_t1, dut.en_t2):
            ctx.set(en, 0)
        for k in range(bi):
            ctx.set(dut.x[k], 1)
            ctx.set(dut.w[k], 1)
        for _ in range(latency + 1):
            await ctx.tick()
            held.append(ctx.get(dut.sum))
        ctx.set(dut.zero, 1)
        await ctx.tick()
        held.append(ctx.get(dut.sum))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got[:len(want)] == want
    assert held == [want[-1]] * (latency + 1) + [0]


def _write_back_reference(inputs: list[dict], lanes: int, aw: int, ow: int) -> list[dict]:
    """Stage W by hand: the write of cycle t is the GEMM or ALU result presented in t - 1 (each
    lane from GEMM where its ``gemm_lane`` copy is set); the ports carry LOAD ACC's write while
    it is busy, else W's; OUT lanes are the low ``ow`` bits of the accumulator lanes."""
    mask = (1 << aw) - 1
    history = [{"valid": 0, "dst": 0, "result": 0}] * 3
    want = []
    for x in inputs:
        w, w1 = history[0], history[1]
        port = ({"addr": x["load_addr"], "data": x["load_data"], "en": x["load_en"]}
                if x["load_busy"] else
                {"addr": w["dst"], "data": w["result"], "en": -1 if w["valid"] else 0})
        data = port["data"]
        out = sum(((data >> (k * aw)) & ((1 << ow) - 1)) << (k * ow) for k in range(lanes))
        want.append({"w": w, "w1": w1, "w2_result": history[2]["result"], "acc": port,
                     "out": {"addr": port["addr"], "data": out, "en": port["en"]}})
        result = sum(((x["gemm"][k] if x["gemm_lane"][k] else x["alu"][k]) & mask) << (k * aw)
                     for k in range(lanes))
        gemm = x["gemm_valid"]
        new = {"valid": int(gemm or x["alu_valid"]),
               "dst": x["gemm_dst"] if gemm else x["alu_dst"], "result": result}
        history = [new, history[0], history[1]]
    return want


@pytest.mark.parametrize("granularity", [None, 32], ids=["whole", "per-word"])
def test_write_back_history_and_ports(granularity) -> None:
    """Random GEMM/ALU results and LOAD ACC writes: W, w1 and w2 hold the writes of the last
    three cycles (the forwarding sources), the accumulator port takes LOAD ACC's write while it
    is busy and W's otherwise, and the OUT port mirrors it with every lane narrowed."""
    lanes, aw, ow, addr_w = 4, 16, 8, 5
    en_w = 1 if granularity is None else lanes * aw // granularity
    out_gran = None if granularity is None else granularity // aw * ow
    rng = np.random.default_rng(3)
    inputs = []
    for t in range(60):
        gemm_valid = int(rng.integers(2))
        inputs.append({
            "gemm_valid": gemm_valid, "alu_valid": int(not gemm_valid and rng.integers(2)),
            "gemm_dst": int(rng.integers(1 << addr_w)), "alu_dst": int(rng.integers(1 << addr_w)),
            # per-lane copies of gemm_valid (equal, as Compute drives them)
            "gemm_lane": [gemm_valid] * lanes,
            "gemm": [int(v) for v in rng.integers(0, 1 << aw, lanes)],
            "alu": [int(v) for v in rng.integers(0, 1 << aw, lanes)],
            "load_busy": int(40 <= t < 48),
            "load_addr": int(rng.integers(1 << addr_w)),
            "load_data": int(rng.integers(0, 1 << 62)) | int(rng.integers(0, 4)) << 62,
            "load_en": int(rng.integers(1 << en_w)),
        })
    dut = WriteBack(lanes=lanes, acc_width=aw, out_width=ow, addr_width=addr_w,
                    acc_granularity=granularity, out_granularity=out_gran)
    got = []

    def entry(ctx, port) -> dict:
        return {"valid": ctx.get(port.valid), "dst": ctx.get(port.dst),
                "result": ctx.get(port.result)}

    async def bench(ctx) -> None:
        for x in inputs:
            for name in ("gemm_valid", "alu_valid", "gemm_dst", "alu_dst", "load_busy"):
                ctx.set(getattr(dut, name), x[name])
            for k in range(lanes):
                ctx.set(dut.gemm_lane[k], x["gemm_lane"][k])
                ctx.set(dut.gemm_result[k], x["gemm"][k])
                ctx.set(dut.alu_result[k], x["alu"][k])
            ctx.set(dut.load.addr, x["load_addr"])
            ctx.set(dut.load.data, x["load_data"])
            ctx.set(dut.load.en, x["load_en"])
            got.append({
                "w": entry(ctx, dut.history.w), "w1": entry(ctx, dut.history.w1),
                "w2_result": ctx.get(dut.history.w2_result),
                **{name: {"addr": ctx.get(p.addr), "data": ctx.get(p.data),
                          "en": ctx.get(p.en)}
                   for name, p in (("acc", dut.acc_wr), ("out", dut.out_wr))}})
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    want = _write_back_reference(inputs, lanes, aw, ow)
    for w in want:  # enables as the port's unsigned bits
        for port in ("acc", "out"):
            w[port]["en"] &= (1 << en_w) - 1
    assert got == want


def test_write_back_mixes_lanes_by_their_own_select() -> None:
    """Each lane takes the GEMM or the ALU result by its own ``gemm_lane`` copy."""
    dut = WriteBack(lanes=3, acc_width=8, out_width=8, addr_width=2)
    got = []

    async def bench(ctx) -> None:
        ctx.set(dut.gemm_valid, 1)
        for k, (sel, g, a) in enumerate(((1, 0x11, 0xA1), (0, 0x22, 0xA2), (1, 0x33, 0xA3))):
            ctx.set(dut.gemm_lane[k], sel)
            ctx.set(dut.gemm_result[k], g)
            ctx.set(dut.alu_result[k], a)
        await ctx.tick()
        got.append(ctx.get(dut.history.w.result))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == [0x33 << 16 | 0xA2 << 8 | 0x11]


def test_write_back_rejects_an_out_width_wider_than_the_accumulator() -> None:
    with pytest.raises(TypeError, match="out_width"):
        WriteBack(lanes=2, acc_width=8, out_width=16, addr_width=3)


def test_acc_reader_shares_the_port_and_clears_reset_lanes() -> None:
    """GEMM's T1 address wins over the ALU's; the data arrives registered a cycle later, with
    the lanes ``zero`` selects cleared."""
    dut = AccReader(lanes=3, acc_width=8, addr_width=4)
    got = []

    async def bench(ctx) -> None:
        for gemm_valid, zero, word in ((1, (0, 1, 0), 0x332211), (0, (0, 0, 0), 0x665544),
                                       (1, (1, 1, 1), 0x998877)):
            ctx.set(dut.gemm.valid, gemm_valid)
            ctx.set(dut.gemm.addr, 5)
            ctx.set(dut.alu_addr, 9)
            ctx.set(dut.acc_rd.data, word)
            for k, z in enumerate(zero):
                ctx.set(dut.zero[k], z)
            addr = ctx.get(dut.acc_rd.addr)
            await ctx.tick()
            got.append((addr, ctx.get(dut.data)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == [(5, 0x330011), (9, 0x665544), (5, 0)]
