"""Micro-kernels (loop folding, checks, reordering) and the micro-op cache (hit, miss, LRU)."""

from __future__ import annotations

import pytest
import vta.runtime as rt
from vta.isa import AluOp, Config, GemmInsn, MemType, decode_program, uop_fields

pytestmark = pytest.mark.unit


def _gemm_kernel(cfg: Config, base: int, n: int = 2) -> rt.UopKernel:
    k = rt.UopKernel(cfg)
    for j in range(n):
        k.push("gemm", False, base + j, j, j)
    return k


def test_loops_fold_into_the_instruction_fields(small_cfg: Config) -> None:
    arena = rt.Arena(small_cfg, 1 << 12)
    rq = rt.CommandQueue.recorder(small_cfg, arena)
    k = rq.kernel()
    k.loop_begin(3, dst_factor=4, src_factor=2, wgt_factor=0)
    k.loop_begin(2, 1, 0, 5)
    k.push("gemm", True, 1, 2, 3)
    k.push(0, True, 2, 3, 4)                     # TVM's mode number works too
    k.loop_end()
    k.loop_end()
    rq.push_gemm(k)
    load, gemm = decode_program(rq.program_bytes(), small_cfg)
    assert load.memory_type == MemType.UOP and load.x_size == 2 and load.sram_base == 0
    assert isinstance(gemm, GemmInsn)
    assert (gemm.reset_reg, gemm.uop_bgn, gemm.uop_end) == (1, 0, 2)
    assert (gemm.iter_out, gemm.iter_in) == (3, 2)
    assert (gemm.dst_factor_out, gemm.src_factor_out, gemm.wgt_factor_out) == (4, 2, 0)
    assert (gemm.dst_factor_in, gemm.src_factor_in, gemm.wgt_factor_in) == (1, 0, 5)
    d, s, w = uop_fields(k.words, small_cfg)
    assert d.tolist() == [1, 2] and s.tolist() == [2, 3] and w.tolist() == [3, 4]
    assert k.uop_count == 12


def test_alu_fields_and_negative_immediate(small_cfg: Config) -> None:
    rq = rt.CommandQueue.recorder(small_cfg, rt.Arena(small_cfg, 1 << 12))
    k = rq.kernel()
    with k.loop(5, dst_factor=1, src_factor=1):
        k.push("alu", False, 0, 0, alu_opcode="shr", use_imm=True, imm=-3)
    rq.push_alu(k)
    alu = decode_program(rq.program_bytes(), small_cfg)[1]
    assert (alu.alu_opcode, alu.use_imm, alu.imm, alu.iter_out) == (AluOp.SHR, 1, -3, 5)


def test_kernel_description_errors(small_cfg: Config) -> None:
    cfg = small_cfg
    k = rt.UopKernel(cfg)
    for _ in range(2):
        k.loop_begin(2)
    with pytest.raises(rt.KernelError, match="at most 2 loops"):
        k.loop_begin(2)
    k.push("gemm", False, 0, 0, 0)
    with pytest.raises(rt.KernelError, match="loop_begin after push"):
        k.loop_begin(2)
    with pytest.raises(rt.KernelError, match="extent 0 must be an integer in 1..16383"):
        rt.UopKernel(cfg).loop_begin(0)
    with pytest.raises(rt.KernelError, match="kernel has gemm reset=0"):
        k.push("gemm", True, 0, 0, 0)
    with pytest.raises(rt.KernelError, match="2 loop\\(s\\) not closed"):
        k.finalize()
    with pytest.raises(rt.KernelError, match="empty micro-kernel"):
        rt.UopKernel(cfg).finalize()
    with pytest.raises(rt.KernelError, match="mode 'conv'"):
        rt.UopKernel(cfg).push("conv", False, 0, 0, 0)
    with pytest.raises(rt.KernelError, match="unknown ALU opcode 'div'"):
        rt.UopKernel(cfg).push("alu", False, 0, 0, alu_opcode="div")
    k2 = rt.UopKernel(cfg)
    with k2.loop(cfg.acc_depth, dst_factor=1):  # reaches one past the accumulator
        k2.push("gemm", False, 1, 0, 0)
    with pytest.raises(rt.KernelError, match=f"dst index {cfg.acc_depth}, beyond the "
                                             f"accumulator buffer"):
        k2.finalize()
    k3 = rt.UopKernel(cfg)
    k3.push("gemm", False, 0, 0, cfg.wgt_depth)
    with pytest.raises(rt.KernelError, match="wgt index|does not fit"):
        k3.finalize()
    k4 = rt.UopKernel(cfg)
    k4.push("alu", False, 0, 0, alu_opcode="add", use_imm=True, imm=40000)
    with pytest.raises(rt.KernelError, match="16 signed bits"):
        k4.finalize()
    k5 = rt.UopKernel(cfg)
    k5.push("gemm", False, 0, 0, 0)
    k5.finalize()
    with pytest.raises(rt.KernelError, match="finalized"):
        k5.push("gemm", False, 0, 0, 0)
    with pytest.raises(rt.KernelError, match="loop_end without"):
        rt.UopKernel(cfg).loop_end()


def test_reorder_rules(cfg: Config) -> None:
    g = rt.UopKernel(cfg)
    for d, s in ((0, 0), (0, 1), (1, 0), (1, 1)):
        g.push("gemm", False, d, s, s)
    g.finalize()
    assert [u[0] for u in g.uops] == [0, 1, 0, 1] and g.reordered and not g.notes
    # ALU reading another micro-op's destination must keep its place: noted, not reordered
    a = rt.UopKernel(cfg)
    a.push("alu", False, 0, 5, alu_opcode="add")
    a.push("alu", False, 0, 6, alu_opcode="add")
    a.push("alu", False, 1, 0, alu_opcode="add")  # reads entry 0: cannot move before them
    a.finalize()
    assert [u[:2] for u in a.uops] == [(0, 5), (0, 6), (1, 0)] and not a.reordered
    assert a.notes and "accumulator entry 0" in a.notes[0]
    # independent ALU micro-ops may be interleaved
    b = rt.UopKernel(cfg)
    for d, s in ((0, 5), (0, 6), (1, 7)):
        b.push("alu", False, d, s, alu_opcode="max")
    b.finalize()
    assert [u[0] for u in b.uops] == [0, 1, 0] and not b.notes
    # a single micro-op looping on the same entry is reported
    c = rt.UopKernel(cfg)
    with c.loop(4, dst_factor=0, src_factor=1, wgt_factor=1):
        c.push("gemm", False, 0, 0, 0)
    c.finalize()
    assert any("next both write" in n for n in c.notes)


def test_hazard_policy(cfg: Config) -> None:
    arena = rt.Arena(cfg, 1 << 12)

    def kernel() -> rt.UopKernel:
        k = rt.UopKernel(cfg)
        k.push("alu", False, 3, 3, alu_opcode="add")
        k.push("alu", False, 3, 3, alu_opcode="add")
        return k

    note = rt.CommandQueue.recorder(cfg, arena)
    note.push_alu(kernel())
    assert len(note.stats.hazards) == 1 and "entry 3" in note.stats.hazards[0]
    warn = rt.CommandQueue.recorder(cfg, arena, hazards="warn")
    with pytest.warns(rt.HazardWarning, match="entry 3"):
        warn.push_alu(kernel())
    err = rt.CommandQueue.recorder(cfg, arena, hazards="error")
    with pytest.raises(rt.QueueError, match="entry 3"):
        err.push_alu(kernel())


def test_uop_cache_hit_miss_and_lru_eviction() -> None:
    c = rt.UopCache(10)
    assert c.lookup(b"a") is None and c.misses == 1
    assert c.insert(b"a", 4) == 0
    assert c.insert(b"b", 4) == 4
    assert c.lookup(b"a") == 0 and c.hits == 1   # a is now most recently used
    assert c.insert(b"c", 4) == 4                # evicts b (least recently used), reuses its gap
    assert c.evictions == 1 and b"b" not in c and b"a" in c
    assert c.insert(b"d", 2) == 8                # fits in the tail gap, no eviction
    assert c.evictions == 1
    assert c.insert(b"e", 9) == 0 and len(c) == 1 and c.evictions == 4
    with pytest.raises(rt.KernelError, match="exceeds the micro-op buffer"):
        c.insert(b"f", 11)
    c.invalidate()
    assert c.lookup(b"e") is None


def test_jit_builds_once_per_signature(small_cfg: Config) -> None:
    rq = rt.CommandQueue.recorder(small_cfg, rt.Arena(small_cfg, 1 << 12))
    calls = []

    def build(k: rt.UopKernel) -> None:
        calls.append(1)
        k.push("gemm", True, 0, 0, 0)

    k1 = rq.kernel(("zero", 0), build)
    k2 = rq.kernel(("zero", 0), build)
    assert k1 is k2 and len(calls) == 1 and k1.final
    rq.push_gemm(k1)
    rq.push_gemm(k2)
    ins = decode_program(rq.program_bytes(), small_cfg)
    assert [i.opcode for i in ins] == [0, 2, 2]  # one LOAD UOP, then two GEMMs (a cache hit)
    assert rq.stats.uop_hits == 1 and rq.stats.uop_misses == 1
    with pytest.raises(rt.QueueError, match="no kernel recorded"):
        rq.kernel(("other",))
