"""The lazy dependency rules of the command queue, checked on the generated instruction words."""

from __future__ import annotations

import pytest
import vta.runtime as rt
from vta.isa import Config, FinishInsn, GemmInsn, MemInsn, MemType, Opcode, decode_program

pytestmark = pytest.mark.unit


@pytest.fixture
def rq(small_cfg: Config) -> rt.CommandQueue:
    return rt.CommandQueue.recorder(small_cfg, rt.Arena(small_cfg, 1 << 16))


def _insns(cq: rt.CommandQueue) -> list:
    return decode_program(cq.program_bytes(), cq.cfg)


def _flags(insn) -> str:
    return "".join(c if v else "." for c, v in zip("PpUu", insn.deps))  # pop prev/next, push


def _noop_stage(insn) -> str | None:
    if isinstance(insn, MemInsn) and insn.x_size == 0:
        return insn.module
    return None


def test_pop_is_absorbed_by_next_insn_of_that_stage(rq: rt.CommandQueue) -> None:
    buf = rq.arena.alloc(4096, mem_type="inp")
    rq.dep_push("load", "compute")
    rq.dep_pop("load", "compute")          # pending on compute
    rq.load_buffer_2d(buf, 0, 1, 1, 1, dst_sram_index=0, dst_memory_type="inp")  # load: no pop
    k = rq.kernel()
    k.push("gemm", True, 0, 0, 0)
    rq.push_gemm(k)                        # LOAD UOP (compute) absorbs the pop
    ins = _insns(rq)
    # noop load carries the push (no load instruction existed yet), the real load has no flags
    assert _noop_stage(ins[0]) == "load" and ins[0].push_next_dep == 1
    assert ins[1].opcode == Opcode.LOAD and ins[1].deps == (0, 0, 0, 0)
    assert ins[2].memory_type == MemType.UOP and ins[2].pop_prev_dep == 1
    assert isinstance(ins[3], GemmInsn) and ins[3].deps == (0, 0, 0, 0)
    assert len(ins) == 4


def test_push_goes_on_last_insn_of_the_stage(rq: rt.CommandQueue) -> None:
    buf = rq.arena.alloc(4096, mem_type="inp")
    rq.load_buffer_2d(buf, 0, 1, 1, 1, dst_sram_index=0, dst_memory_type="inp")
    k = rq.kernel()
    k.push("gemm", True, 0, 0, 0)
    rq.push_gemm(k)                        # compute instructions after the load
    rq.dep_push("load", "compute")         # still set on the LOAD (last load-stage insn)
    ins = _insns(rq)
    assert len(ins) == 3 and ins[0].push_next_dep == 1
    rq.dep_push("load", "compute")         # flag already set: a no-op load is emitted
    ins = _insns(rq)
    assert len(ins) == 4 and _noop_stage(ins[3]) == "load" and ins[3].push_next_dep == 1
    rq.dep_push("compute", "load")         # compute -> load is push_prev on the GEMM
    rq.dep_push("compute", "store")        # compute -> store is push_next on the GEMM
    ins = _insns(rq)
    assert len(ins) == 4 and (ins[2].push_prev_dep, ins[2].push_next_dep) == (1, 1)


def test_second_pending_pop_of_same_queue_becomes_a_noop(rq: rt.CommandQueue) -> None:
    for _ in range(2):
        rq.dep_push("compute", "load")
    rq.dep_pop("compute", "load")
    rq.dep_pop("compute", "load")          # first pending pop committed as a load no-op
    ins = _insns(rq)
    # two pushes from an empty stage: two compute no-ops (one push_prev flag each)
    assert [_noop_stage(i) for i in ins] == ["compute", "compute", "load"]
    assert [i.push_prev_dep for i in ins[:2]] == [1, 1]
    assert ins[2].pop_next_dep == 1 and ins[2].push_next_dep == 0
    # a pending pop is committed before a push from the same stage (TVM's CommitPendingPop)
    rq.dep_push("load", "compute")
    ins = _insns(rq)
    assert len(ins) == 4
    assert _noop_stage(ins[3]) == "load" and ins[3].pop_next_dep and ins[3].push_next_dep


def test_pops_of_both_queues_merge_on_one_compute_insn(rq: rt.CommandQueue) -> None:
    rq.dep_push("load", "compute")
    rq.dep_push("store", "compute")
    rq.dep_pop("load", "compute")
    rq.dep_pop("store", "compute")
    k = rq.kernel()
    k.push("gemm", True, 0, 0, 0)
    rq.push_gemm(k)
    ins = _insns(rq)
    assert [_noop_stage(i) for i in ins[:2]] == ["load", "store"]
    assert ins[2].memory_type == MemType.UOP
    assert (ins[2].pop_prev_dep, ins[2].pop_next_dep) == (1, 1)


def test_record_drains_tokens_and_ends_with_finish(rq: rt.CommandQueue) -> None:
    buf = rq.arena.alloc(4096, mem_type="inp")
    rq.dep_push("compute", "load")
    rq.dep_push("compute", "load")
    rq.load_buffer_2d(buf, 0, 1, 1, 1, dst_sram_index=0, dst_memory_type="inp")
    assert rq.tokens["compute->load"] == 2
    ins = decode_program(rq.record().program, rq.cfg)
    assert isinstance(ins[-1], FinishInsn) and ins[-1].deps == (0, 0, 0, 0)
    # token balance per queue is zero over the program (each push popped)
    bal = {"l2c": 0, "c2l": 0, "c2s": 0, "s2c": 0}
    for i in ins:
        p_prev, p_next, u_prev, u_next = i.deps
        if i.module == "load":
            bal["c2l"] -= p_next
            bal["l2c"] += u_next
        elif i.module == "compute":
            bal["l2c"] -= p_prev
            bal["s2c"] -= p_next
            bal["c2l"] += u_prev
            bal["c2s"] += u_next
        else:
            bal["c2s"] -= p_prev
            bal["s2c"] += u_prev
    assert bal == {"l2c": 0, "c2l": 0, "c2s": 0, "s2c": 0}
    # FINISH is preceded by a compute instruction popping the final load and store tokens
    assert ins[-2].module == "compute" and ins[-2].pop_prev_dep and ins[-2].pop_next_dep


def test_force_serial_chains_every_instruction(small_cfg: Config) -> None:
    arena = rt.Arena(small_cfg, 1 << 16)
    rq = rt.CommandQueue.recorder(small_cfg, arena, force_serial=True)
    a = arena.alloc(4096, mem_type="inp")
    o = arena.alloc(4096, mem_type="out")
    rq.load_buffer_2d(a, 0, 1, 1, 1, dst_sram_index=0, dst_memory_type="inp")
    rq.dep_push("load", "compute")  # ignored in force-serial mode
    rq.store_buffer_2d(0, "out", o, 0, 1, 1, 1)  # load then store: a compute no-op in between
    rq.load_buffer_2d(a, 0, 1, 1, 1, dst_sram_index=1, dst_memory_type="inp")
    ins = decode_program(rq.record().program, small_cfg)
    mods = [i.module for i in ins]
    assert mods == ["load", "compute", "store", "compute", "load", "compute", "compute"]
    order = {"load": 1, "compute": 2, "store": 3}
    for a_, b_ in zip(ins[:-2], ins[1:-1]):
        sa, sb = order[a_.module], order[b_.module]
        if sa < sb:
            assert a_.push_next_dep and b_.pop_prev_dep
        elif sa > sb:
            assert a_.push_prev_dep and b_.pop_next_dep
    assert ins[-1].deps == (0, 0, 0, 0)


def test_bad_token_use_is_rejected(rq: rt.CommandQueue) -> None:
    with pytest.raises(rt.QueueError, match="without a matching dep_push"):
        rq.dep_pop("load", "compute")
    with pytest.raises(rt.QueueError, match="no token queue from 'load' to 'store'"):
        rq.dep_push("load", "store")
    with pytest.raises(rt.QueueError, match="unknown stage"):
        rq.dep_push("fetch", "compute")
    for _ in range(256):
        rq.dep_push(1, 2)                  # TVM's stage numbers work too
    with pytest.raises(rt.QueueError, match="257 tokens outstanding"):
        rq.dep_push(1, 2)


@pytest.mark.sim
def test_synchronize_resets_tokens_carried_by_an_auto_flush(small_cfg: Config) -> None:
    dev = rt.open("fsim", small_cfg, arena_size=1 << 16)
    cq = dev.command_queue(max_insns=16)
    a = dev.alloc(64, mem_type="inp")
    cq.dep_push("compute", "load")
    while cq.stats.auto_flushes == 0:
        cq.load_buffer_2d(a, 0, 1, 1, 1, dst_sram_index=0, dst_memory_type="inp")
    assert cq.tokens["compute->load"] == 1          # carried into the new program
    first = decode_program(cq.program_bytes(), small_cfg)[0]
    assert first.module == "compute" and first.push_prev_dep  # re-pushed at its start
    cq.synchronize()                                # drains it: the next program starts empty
    assert cq.tokens["compute->load"] == 0 and cq.pending == 0
