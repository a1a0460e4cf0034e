"""The parts of the command queue on their own: the token tracker, the program builder (rows,
tokens, drain, serialisation, relocations) and the kernel cache. The reference for programs is
the ISA decoder and the functional simulator (a wrong token makes it deadlock)."""

from __future__ import annotations

import numpy as np
import pytest
from vta.isa import Config, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, decode_program
from vta.isa.layout import TOKEN_QUEUE_DEPTH
from vta.runtime.counters import QueueStats
from vta.runtime.errors import QueueError
from vta.runtime.kernel import UopCache, UopKernel
from vta.runtime.kernel_cache import KernelCache
from vta.runtime.program import ProgramBuilder, mem_row
from vta.runtime.tokens import (
    COMPUTE_STAGE,
    LOAD_STAGE,
    STORE_STAGE,
    TokenTracker,
    pop_flag,
    push_flag,
    stage_pair,
)
from vta.sim.fsim import FunctionalSim

pytestmark = pytest.mark.unit


def test_token_tracker_counts_and_limits() -> None:
    t = TokenTracker()
    t.pushed(LOAD_STAGE, COMPUTE_STAGE)
    assert t.by_name()["load->compute"] == 1
    t.check_pop(LOAD_STAGE, COMPUTE_STAGE)
    with pytest.raises(QueueError, match="store->compute queue would be empty"):
        t.check_pop(STORE_STAGE, COMPUTE_STAGE)
    t.add_pop(LOAD_STAGE, COMPUTE_STAGE)
    assert t.pop_pending(LOAD_STAGE, COMPUTE_STAGE) and t.counts == [0, 0, 0, 0]
    assert t.take_pops(COMPUTE_STAGE) == {"pop_prev_dep": 1}
    assert not t.has_pending(COMPUTE_STAGE)
    for _ in range(TOKEN_QUEUE_DEPTH):
        t.pushed(COMPUTE_STAGE, STORE_STAGE)
    with pytest.raises(QueueError, match=f"depth {TOKEN_QUEUE_DEPTH}"):
        t.pushed(COMPUTE_STAGE, STORE_STAGE)


def test_stage_pairs_and_flags_follow_the_isa_tables() -> None:
    assert stage_pair("load", "compute") == (1, 2) == stage_pair(1, 2)
    with pytest.raises(QueueError, match="no token queue from 'load' to 'store'"):
        stage_pair("load", "store")
    assert (push_flag(1, 2), pop_flag(1, 2)) == ("push_next_dep", "pop_prev_dep")
    assert (push_flag(3, 2), pop_flag(3, 2)) == ("push_prev_dep", "pop_next_dep")


def _load(stage_type: MemType = MemType.INP) -> tuple[str, dict[str, int]]:
    return mem_row(Opcode.LOAD, stage_type, sram_base=0, dram_base=0, y_size=1, x_size=1,
                   x_stride=1)


def test_builder_puts_push_on_last_insn_and_pop_on_next(small_cfg: Config) -> None:
    b = ProgramBuilder(small_cfg)
    b.emit(_load(), LOAD_STAGE)
    b.push(LOAD_STAGE, COMPUTE_STAGE)  # on the LOAD just emitted
    b.pop(LOAD_STAGE, COMPUTE_STAGE)  # lazy: on the next compute instruction
    b.emit(("gemm", {"opcode": int(Opcode.GEMM)}), COMPUTE_STAGE)
    insns = decode_program(b.encode(), small_cfg)
    assert isinstance(insns[0], MemInsn) and insns[0].push_next_dep == 1
    assert isinstance(insns[1], GemmInsn) and insns[1].pop_prev_dep == 1
    assert b.stats.noops == 0
    b.push(LOAD_STAGE, COMPUTE_STAGE)  # the LOAD already pushes: a no-op carries this one
    assert b.stats.noops == 1 and len(b) == 3


def test_builder_drain_and_serialisation_run_on_fsim(small_cfg: Config) -> None:
    """A program left with tokens outstanding in every queue: drained, or serialised, it runs
    to FINISH on fsim under every scheduling order (a wrong token would deadlock)."""
    for serial in (False, True):
        b = ProgramBuilder(small_cfg)
        b.emit(_load(), LOAD_STAGE)
        b.push(LOAD_STAGE, COMPUTE_STAGE)
        b.push(COMPUTE_STAGE, LOAD_STAGE)
        b.push(COMPUTE_STAGE, STORE_STAGE)
        b.emit(mem_row(Opcode.STORE, MemType.OUT, y_size=1, x_size=1, x_stride=1), STORE_STAGE)
        b.push(STORE_STAGE, COMPUTE_STAGE)
        if serial:
            rows, _ = b.serialized()
        else:
            b.drain()
            assert b.tokens.counts == [0, 0, 0, 0]
            rows, _ = b.finished()
        program = b.encode(rows)
        insns = decode_program(program, small_cfg)
        assert isinstance(insns[-1], FinishInsn)
        for order in ("load-first", "compute-first", "store-first"):
            FunctionalSim(small_cfg, order=order).run(program, np.zeros(256, np.uint8))


def test_builder_records_relocations_and_the_uop_segment(small_cfg: Config) -> None:
    b = ProgramBuilder(small_cfg)
    idx = b.emit(_load(), LOAD_STAGE)
    b.relocate_arena(idx, 16, 7)
    assert b.uop_offset(b"\x01\x00\x00\x00" * 2) == 0
    assert b.uop_offset(b"\x02\x00\x00\x00") == 2
    assert b.uop_offset(b"\x01\x00\x00\x00" * 2) == 0  # the same kernel is stored once
    assert len(b.uop_segment) == 12
    rows, relocs = b.serialized()
    assert [(r.index, r.kind, r.offset) for r in relocs.values()] == [(0, "arena", 7)]


def test_kernel_cache_memoizes_and_counts_residency(small_cfg: Config) -> None:
    stats = QueueStats()
    kc = KernelCache(small_cfg, UopCache(4), {}, stats)
    builds = []

    def build(k: UopKernel) -> None:
        builds.append(1)
        for j in range(3):
            k.push("alu", reset=False, dst=j, src=j + 1, alu_opcode="max", use_imm=True,
                   imm=-5)

    k = kc.kernel("relu", build)
    assert kc.kernel("relu", build) is k and len(builds) == 1
    assert kc.lookup(k) is None
    assert kc.place(k) == 0 and stats.uop_misses == 1
    assert kc.lookup(k) == 0 and stats.uop_hits == 1
    def build_other(q: UopKernel) -> None:
        for j in range(2):
            q.push("gemm", reset=True, dst=j, src=0)

    other = kc.kernel("other", build_other)
    assert (k.size, other.size) == (3, 2)
    kc.place(other)  # 3 + 2 > 4 entries: the least recently used kernel is evicted
    assert stats.uop_evictions == 1 and not kc.resident(k)
    f = kc.insn_fields(k)
    assert (f["opcode"], f["alu_opcode"], f["use_imm"], f["imm"]) == (Opcode.ALU, 1, 1, -5)
    assert kc.insn_fields(other)["reset_reg"] == 1
