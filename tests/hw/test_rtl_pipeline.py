"""The pipelined compute datapath and the OUT buffer on the whole core, against vta.sim.fsim.

STORE reads the OUT buffer, which compute writes with every accumulator write (GEMM and ALU
results and LOAD ACC data, the latter one bus word at a time), each lane narrowed to the output
width. The accumulator has one read port: two-operand ALU micro-ops read dst then src through it,
ALU micro-ops stall on in-flight writes, GEMM micro-ops accumulate into the entry the previous
one writes without stalling, and consecutive GEMM instructions do not drain the pipeline. Each
program ends by storing every accumulator entry it touched, so any wrong value shows up in DRAM.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from vta.isa import Config
from vta.isa.insn import AluInsn, FinishInsn, GemmInsn, Insn, MemInsn, Uop, encode_uops
from vta.isa.layout import AluOp, MemType, Opcode

pytestmark = pytest.mark.sim

N_ACC = 24  # accumulator entries loaded, computed on and stored
N_INP = 16
N_WGT = 8
UOP_BASE = 0  # DRAM layout in elements of each type: micro-ops at byte 0, then the data


def _fsim(program, dram, cfg):
    from vta.sim import fsim

    return fsim.run(program, dram, cfg)


def build(cfg: Config, uops: list[Uop], body: list[Insn], *, seed: int = 0,
          acc_load: MemInsn | None = None, acc_range: tuple[int, int] = (-2**31, 2**31)
          ) -> tuple[list[Insn], np.ndarray]:
    """LOAD INP/WGT (load), LOAD UOP + LOAD ACC + ``body`` (compute), STORE of the first
    ``N_ACC`` accumulator entries, FINISH; tokens load -> compute -> store -> compute."""
    rng = np.random.default_rng(seed)
    eb = {t: cfg.elem_bytes(t) for t in MemType}
    # byte offsets of each region, aligned to 256
    regions = {}
    off = 1024
    for name, t, n in (("inp", MemType.INP, N_INP), ("wgt", MemType.WGT, N_WGT),
                       ("acc", MemType.ACC, N_ACC), ("out", MemType.OUT, N_ACC)):
        regions[name] = off
        off += (n * eb[t] + 255) // 256 * 256
    dram = np.zeros(off, np.uint8)
    ub = np.frombuffer(encode_uops(uops, cfg), np.uint8)
    dram[:len(ub)] = ub
    dram[regions["inp"]:regions["inp"] + N_INP * eb[MemType.INP]] = \
        rng.integers(0, 256, N_INP * eb[MemType.INP])
    dram[regions["wgt"]:regions["wgt"] + N_WGT * eb[MemType.WGT]] = \
        rng.integers(0, 256, N_WGT * eb[MemType.WGT])
    acc = rng.integers(*acc_range, N_ACC * cfg.batch * cfg.block_out, dtype=np.int64)
    dram[regions["acc"]:regions["acc"] + N_ACC * eb[MemType.ACC]] = \
        acc.astype("<i4").view(np.uint8)

    def mem(op, t, sram, dram_byte, n, **kw) -> MemInsn:
        return MemInsn(opcode=op, memory_type=t, sram_base=sram,
                       dram_base=dram_byte // eb[t], y_size=1, x_size=n, x_stride=n, **kw)

    if acc_load is None:
        acc_load = mem(Opcode.LOAD, MemType.ACC, 0, regions["acc"], N_ACC)
    else:
        acc_load = replace(acc_load, dram_base=regions["acc"] // eb[MemType.ACC])
    prog: list[Insn] = [
        mem(Opcode.LOAD, MemType.INP, 0, regions["inp"], N_INP),
        mem(Opcode.LOAD, MemType.WGT, 0, regions["wgt"], N_WGT, push_next_dep=1),
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, sram_base=0, dram_base=0,
                y_size=1, x_size=len(uops), x_stride=len(uops), pop_prev_dep=1),
        acc_load,
        *body,
    ]
    prog[-1] = replace(prog[-1], push_next_dep=1)
    prog += [mem(Opcode.STORE, MemType.OUT, 0, regions["out"], N_ACC, pop_prev_dep=1,
                 push_prev_dep=1),
             FinishInsn(pop_next_dep=1)]
    return prog, dram


def check(cfg: Config, prog: list[Insn], dram: np.ndarray, *,
          mem_stall: float = 0.0, options: dict | None = None) -> dict:
    from vta.hw.simulate import run_program

    got = run_program(prog, dram, cfg, mem_stall=mem_stall, options=options)
    want = _fsim(prog, dram, cfg)
    np.testing.assert_array_equal(got.dram, want.dram)
    return got.stats


# --------------------------------------------------------------------------- OUT buffer
@pytest.mark.parametrize("bus_width", [64, 128])
def test_load_acc_then_store_narrows(small_cfg: Config, bus_width: int) -> None:
    """LOAD ACC (16-byte elements: two granular writes per entry on a 64-bit bus, one on a
    128-bit bus; padding rows and columns written as zeros) then STORE: the stored bytes are
    the loaded int32 lanes' low bytes."""
    load = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.ACC, sram_base=0, dram_base=0,
                   y_size=3, x_size=5, x_stride=7, y_pad_0=1, y_pad_1=1, x_pad_0=1, x_pad_1=0)
    prog, dram = build(small_cfg, [Uop(0, 0, 0)], [], acc_load=load, seed=bus_width)
    check(small_cfg.with_bus_width(bus_width), prog, dram, mem_stall=0.2)


def test_gemm_then_store(small_cfg: Config) -> None:
    uops = [Uop(d, d % N_INP, d % N_WGT) for d in range(8)]
    body = [GemmInsn(reset_reg=1, uop_bgn=0, uop_end=4, iter_out=1, iter_in=1),
            GemmInsn(uop_bgn=0, uop_end=8, iter_out=2, iter_in=2, dst_factor_out=8,
                     src_factor_in=1, wgt_factor_out=1)]
    prog, dram = build(small_cfg, uops, body, seed=3)
    check(small_cfg, prog, dram)


@pytest.mark.parametrize("op", list(AluOp), ids=[o.name for o in AluOp])
def test_alu_then_store_narrowing(small_cfg: Config, op: AluOp) -> None:
    """ALU results far outside int8 (and immediates of both signs) stored as their low bytes."""
    uops = [Uop(d, d + 8, 0) for d in range(8)]
    imm = {AluOp.SHR: -3, AluOp.MUL: -77}.get(op, 1000)
    body = [AluInsn(alu_opcode=op, use_imm=1, imm=imm, uop_bgn=0, uop_end=8, iter_out=1,
                    iter_in=2, dst_factor_in=8),
            AluInsn(alu_opcode=op, uop_bgn=0, uop_end=8, iter_out=1, iter_in=1)]
    rng = (-200, 200) if op == AluOp.SHR else (-2**31, 2**31)
    prog, dram = build(small_cfg, uops, body, seed=int(op), acc_range=rng)
    check(small_cfg, prog, dram)


# --------------------------------------------------------------------------- hazards
@pytest.mark.parametrize("op", [AluOp.ADD, AluOp.MUL, AluOp.MAX, AluOp.SHR],
                         ids=lambda o: o.name)
def test_two_operand_alu_hazards(small_cfg: Config, op: AluOp) -> None:
    """dst == src; src written by the micro-op 1, 2 and 3 ahead; the same dst back to back
    (within and across instructions, no drain between them); imm and two-operand ALU
    instructions alternating on the same entries."""
    uops = [Uop(1, 1, 0), Uop(2, 1, 0), Uop(3, 2, 0), Uop(4, 2, 0), Uop(4, 4, 0), Uop(5, 4, 0),
            Uop(1, 5, 0), Uop(1, 1, 0)]
    imm = 1 if op == AluOp.SHR else 3
    body = [
        AluInsn(alu_opcode=op, uop_bgn=0, uop_end=8, iter_out=2, iter_in=1),
        AluInsn(alu_opcode=op, use_imm=1, imm=imm, uop_bgn=4, uop_end=8, iter_out=1,
                iter_in=3),  # dst 4, 5, 1, 1 repeated: distance-1 and -2 hazards
        AluInsn(alu_opcode=op, uop_bgn=6, uop_end=8, iter_out=1, iter_in=2),
        AluInsn(alu_opcode=op, use_imm=1, imm=-imm, uop_bgn=0, uop_end=3, iter_out=2,
                iter_in=2, dst_factor_out=8, src_factor_out=8, dst_factor_in=0),
        AluInsn(alu_opcode=op, uop_bgn=0, uop_end=8, iter_out=1, iter_in=2, dst_factor_in=8,
                src_factor_in=8),
    ]
    rng = (-50, 50) if op == AluOp.SHR else (-2**31, 2**31)
    prog, dram = build(small_cfg, uops, body, seed=10 + int(op), acc_range=rng)
    check(small_cfg, prog, dram)


#: The plain core and the variant with every option on: per-lane control copies and a private
#: operand copy per multiplier (one more stage before the multipliers; forwarding must not
#: change).
VARIANTS = pytest.mark.parametrize(
    "options", [{}, {"replicate_control": True, "replicate_operands": True}],
    ids=["plain", "replicated"])


@VARIANTS
def test_alu_right_after_gemm_and_back(small_cfg: Config, options: dict) -> None:
    """GEMM accumulating into entries that the next ALU instruction reads (as dst and as src)
    at once, then a GEMM on what the ALU just wrote."""
    uops = [Uop(2, 3, 1), Uop(2, 4, 2), Uop(3, 5, 3), Uop(5, 2, 0)]
    body = [GemmInsn(uop_bgn=0, uop_end=3, iter_out=1, iter_in=2, src_factor_in=1),
            # reads entry 3 that the GEMM's last micro-op writes
            AluInsn(alu_opcode=AluOp.MAX, use_imm=1, imm=-5, uop_bgn=2, uop_end=3, iter_out=1,
                    iter_in=1),
            GemmInsn(uop_bgn=0, uop_end=3, iter_out=1, iter_in=1),
            AluInsn(alu_opcode=AluOp.ADD, uop_bgn=3, uop_end=4, iter_out=1, iter_in=1),
            AluInsn(alu_opcode=AluOp.SHR, use_imm=1, imm=4, uop_bgn=0, uop_end=3,
                    iter_out=1, iter_in=1),
            GemmInsn(uop_bgn=0, uop_end=4, iter_out=2, iter_in=1, wgt_factor_out=2)]
    prog, dram = build(small_cfg, uops, body, seed=21)
    check(small_cfg, prog, dram, options=options)


@VARIANTS
def test_gemm_back_to_back_same_entry_across_instructions(small_cfg: Config,
                                                          options: dict) -> None:
    """Every micro-op of several consecutive GEMM instructions accumulates into entry 7 (no
    drain between the instructions), then a reset instruction and more accumulation."""
    uops = [Uop(7, k, k % N_WGT) for k in range(6)]
    body = [GemmInsn(uop_bgn=0, uop_end=6, iter_out=2, iter_in=2, src_factor_in=1),
            GemmInsn(uop_bgn=1, uop_end=3, iter_out=1, iter_in=3, wgt_factor_in=1),
            GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1),
            GemmInsn(reset_reg=1, uop_bgn=2, uop_end=3, iter_out=1, iter_in=1),
            GemmInsn(uop_bgn=0, uop_end=6, iter_out=1, iter_in=1)]
    prog, dram = build(small_cfg, uops, body, seed=5, acc_range=(-1000, 1000))
    check(small_cfg, prog, dram, options=options)


@VARIANTS
def test_consecutive_gemms_do_not_drain(small_cfg: Config, options: dict) -> None:
    """Four GEMM instructions of 64 micro-op iterations each keep compute busy for less than
    4 x (64 + the per-instruction sequencing + the pipeline depth): the next instruction starts
    while the previous one's micro-ops are still in the pipeline."""
    from vta.hw.compute import GEMM_DRAIN
    from vta.hw.options import CoreOptions

    drain = GEMM_DRAIN + CoreOptions.from_dict(options).extra_gemm_latency

    uops = [Uop(k % N_ACC, k % N_INP, k % N_WGT) for k in range(16)]
    g = GemmInsn(uop_bgn=0, uop_end=16, iter_out=2, iter_in=2, dst_factor_in=0)
    busy = {}
    for n in (1, 4):
        prog, dram = build(small_cfg, uops, [g] * n, seed=n)
        stats = check(small_cfg, prog, dram, options=options)
        busy[n] = stats.hw_counters["compute_busy"]
        assert stats.hw_counters["gemm_uops"] == 64 * n
    per_insn = (busy[4] - busy[1]) / 3
    assert 64 <= per_insn < 64 + drain
