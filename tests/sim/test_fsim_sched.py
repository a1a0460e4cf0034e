"""fsim's module/queue model: scheduling orders, deadlock, token errors, races, bounds, stats."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from vta.isa import (
    AluInsn,
    AluOp,
    Config,
    FinishInsn,
    GemmInsn,
    MemInsn,
    MemType,
    Opcode,
    Uop,
    encode_uops,
)
from vta.isa.errors import DeadlockError, ProgramError, RaceError
from vta.sim import fsim
from vta.sim.fsim import ORDERS, FunctionalSim
from vta.sim.progen import random_program
from vta.sim.programs import matmul_program


def load(mt: MemType, **kw) -> MemInsn:
    kw.setdefault("y_size", 1)
    kw.setdefault("x_size", 1)
    kw.setdefault("x_stride", kw["x_size"])
    return MemInsn(opcode=Opcode.LOAD, memory_type=mt, **kw)


def store(**kw) -> MemInsn:
    kw.setdefault("y_size", 1)
    kw.setdefault("x_size", 1)
    kw.setdefault("x_stride", kw["x_size"])
    return MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, **kw)


# ------------------------------------------------------------------ orders and races
@pytest.mark.sim
@pytest.mark.parametrize("preset", ["default", "small"])
def test_fsim_every_order_gives_the_same_result(preset: str) -> None:
    cfg = Config.preset(preset)
    for seed in range(6):
        program, dram = random_program(cfg, 1000 + seed, n_insns=40)
        results = [fsim.run(program, dram, cfg, order=o, seed=k).dram
                   for k, o in enumerate(ORDERS * 2)]
        for r in results[1:]:
            assert np.array_equal(r, results[0])
        fsim.check_races(program, dram, cfg)  # and the race checker agrees


@pytest.mark.sim
def test_fsim_orders_really_interleave_differently(small_cfg: Config) -> None:
    """The orders are not all the same schedule (else the race check would be vacuous)."""
    program, dram = random_program(small_cfg, 5, n_insns=60)
    sequences = set()
    for order in ORDERS:
        r = fsim.run(program, dram, small_cfg, order=order, seed=3, trace=True)
        sequences.add(tuple(e["args"]["index"] for e in r.trace if e["ph"] == "X"))
    assert len(sequences) >= 3


def _drop_token_pair(program: list, src_module: str, push_flag: str, pop_flag: str,
                     dst_module: str, which: int) -> list:
    """Remove the which-th push of a queue and the pop that consumes it."""
    pushes = [n for n, i in enumerate(program) if i.module == src_module and getattr(i, push_flag)]
    pops = [n for n, i in enumerate(program) if i.module == dst_module and getattr(i, pop_flag)]
    out = list(program)
    out[pushes[which]] = dataclasses.replace(out[pushes[which]], **{push_flag: 0})
    out[pops[which]] = dataclasses.replace(out[pops[which]], **{pop_flag: 0})
    return out


@pytest.mark.sim
@pytest.mark.parametrize("queue", ["load->compute", "compute->store", "store->compute",
                                   "compute->load"])
def test_fsim_check_races_finds_a_missing_dependency(small_cfg: Config, queue: str) -> None:
    from vta.isa import decode_program

    mm = matmul_program(small_cfg, 24, 24, 32, seed=1, double_buffer=True,
                        tiling=None)
    good = decode_program(mm.program, small_cfg)
    fsim.check_races(good, mm.dram, small_cfg)  # the real program is race-free
    src, dst = queue.split("->")
    push_flag = "push_next_dep" if (src, dst) in (("load", "compute"), ("compute", "store")) \
        else "push_prev_dep"
    pop_flag = "pop_prev_dep" if push_flag == "push_next_dep" else "pop_next_dep"
    found = 0
    n_pairs = sum(1 for i in good if i.module == src and getattr(i, push_flag))
    assert n_pairs > 0
    for which in range(n_pairs):
        bad = _drop_token_pair(good, src, push_flag, pop_flag, dst, which)
        try:
            fsim.check_races(bad, mm.dram, small_cfg)
        except RaceError as e:
            assert "differ" in str(e) or "fails under" in str(e)
            found += 1
        except ProgramError as e:  # FINISH overtaking a module is reported under every order
            assert "FINISH" in str(e)
            found += 1
    assert found >= 1, f"no missing {queue} token was detected"


@pytest.mark.sim
def test_fsim_race_message_names_orders_and_address(cfg: Config) -> None:
    # a LOAD INP and the GEMM using it, without the load->compute token
    uops = encode_uops([Uop(0, 0, 0)], cfg)
    dram = np.zeros(4096, np.uint8)
    dram[:4] = np.frombuffer(uops, np.uint8)
    dram[1024:1040] = 1  # input row of ones
    dram[2048:2048 + 256] = 1  # weights of ones
    prog = [load(MemType.UOP, dram_base=0),
            load(MemType.WGT, dram_base=8, push_next_dep=1),
            load(MemType.INP, dram_base=64),  # no push: the race
            GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1, pop_prev_dep=1,
                     push_next_dep=1),
            store(dram_base=200, pop_prev_dep=1, push_prev_dep=1),
            FinishInsn(pop_next_dep=1)]
    with pytest.raises(RaceError) as e:
        fsim.check_races(prog, dram, cfg)
    msg = str(e.value)
    assert "compute-first" in msg and "0xc80" in msg and "instruction 4 (STORE)" in msg
    fixed = list(prog)
    fixed[2] = dataclasses.replace(prog[2], push_next_dep=1)
    fixed[3] = dataclasses.replace(prog[3], pop_prev_dep=1)
    fixed[1] = dataclasses.replace(prog[1], push_next_dep=0)
    r = fsim.check_races(fixed, dram, cfg)
    assert (r.dram[3200:3216] == 16).all()  # 16 ones times ones


# ------------------------------------------------------------------ token errors
@pytest.mark.sim
def test_fsim_deadlock_names_module_instruction_and_queue(cfg: Config) -> None:
    prog = [load(MemType.INP), GemmInsn(pop_prev_dep=1), FinishInsn()]
    with pytest.raises(DeadlockError) as e:
        fsim.run(prog, np.zeros(64, np.uint8), cfg)
    msg = str(e.value)
    assert "compute blocked at instruction 1 (GEMM)" in msg
    assert "load->compute" in msg and "load idle" in msg


@pytest.mark.sim
def test_fsim_circular_wait_is_a_deadlock(cfg: Config) -> None:
    prog = [load(MemType.INP, pop_next_dep=1, push_next_dep=1),
            GemmInsn(pop_prev_dep=1, push_prev_dep=1), FinishInsn()]
    with pytest.raises(DeadlockError) as e:
        fsim.run(prog, np.zeros(64, np.uint8), cfg)
    assert "load blocked at instruction 0" in str(e.value)
    assert "compute blocked at instruction 1" in str(e.value)


@pytest.mark.sim
def test_fsim_full_instruction_queue_stalls_fetch(cfg: Config) -> None:
    """Compute waits for the store's token, but fetch cannot reach the STORE past a full queue."""
    prog = [GemmInsn(pop_next_dep=1), GemmInsn(), GemmInsn(),
            store(push_prev_dep=1), FinishInsn()]
    dram = np.zeros(64, np.uint8)
    fsim.run(prog, dram, cfg)  # fine with the default 256-entry queues
    sim = FunctionalSim(cfg, insn_queue_depth=2)
    with pytest.raises(DeadlockError) as e:
        sim.run(prog, dram.copy())
    assert "fetch stalled at instruction 2 (GEMM): the compute queue is full" in str(e.value)


@pytest.mark.sim
def test_fsim_token_queue_overflow(cfg: Config) -> None:
    prog = [load(MemType.INP, push_next_dep=1) for _ in range(3)]
    prog += [GemmInsn(pop_prev_dep=1) for _ in range(3)] + [FinishInsn()]
    dram = np.zeros(64, np.uint8)
    FunctionalSim(cfg, token_queue_depth=3, order="load-first").run(prog, dram)
    with pytest.raises(ProgramError) as e:
        FunctionalSim(cfg, token_queue_depth=2, order="load-first").run(prog, dram)
    assert "instruction 2 (LOAD INP)" in str(e.value) and "full load->compute" in str(e.value)


@pytest.mark.sim
def test_fsim_leftover_tokens_at_finish(cfg: Config) -> None:
    prog = [GemmInsn(push_prev_dep=1), FinishInsn()]
    with pytest.raises(ProgramError) as e:
        fsim.run(prog, np.zeros(64, np.uint8), cfg)
    assert "left over" in str(e.value) and "compute->load" in str(e.value)
    assert "instruction 0" in str(e.value)


@pytest.mark.sim
def test_fsim_finish_before_pending_store(cfg: Config) -> None:
    prog = [GemmInsn(push_next_dep=1), store(pop_prev_dep=1), FinishInsn()]
    with pytest.raises(ProgramError) as e:
        fsim.run(prog, np.zeros(64, np.uint8), cfg, order="compute-first")
    assert "store module still had 1 instruction(s) pending" in str(e.value)
    fsim.run(prog, np.zeros(64, np.uint8), cfg, order="store-first")  # hides the bug
    with pytest.raises(RaceError, match="works under the store-first order but fails under "
                                        "compute-first"):
        fsim.check_races(prog, np.zeros(64, np.uint8), cfg)
    ok = [GemmInsn(push_next_dep=1), store(pop_prev_dep=1, push_prev_dep=1),
          FinishInsn(pop_next_dep=1)]
    fsim.check_races(ok, np.zeros(64, np.uint8), cfg)


@pytest.mark.sim
@pytest.mark.parametrize("insn, text", [
    (load(MemType.INP, pop_prev_dep=1), "pop_prev_dep but the load module has no previous"),
    (store(push_next_dep=1), "push_next_dep but the store module has no next"),
])
def test_fsim_invalid_dependency_flags(cfg: Config, insn: MemInsn, text: str) -> None:
    with pytest.raises(ProgramError, match=text):
        fsim.run([insn, FinishInsn()], np.zeros(1 << 12, np.uint8), cfg)


# ------------------------------------------------------------------ bounds
@pytest.mark.sim
@pytest.mark.parametrize("insn, text", [
    (load(MemType.INP, sram_base=2047, x_size=2), "inp index 2048, beyond the inp buffer"),
    (load(MemType.WGT, sram_base=1020, y_size=1, x_size=1, y_pad_0=2, x_pad_1=1),
     "reaches wgt index 1025, beyond the wgt buffer (depth 1024)"),
    (load(MemType.ACC, dram_base=64, x_size=1), "beyond the 4096-byte DRAM image"),
    (load(MemType.INP, dram_base=100, y_size=3, x_size=4, x_stride=100),
     "DRAM bytes 0x640..0x12ff"),
    (store(sram_base=2040, y_size=3, x_size=3), "acc index 2048"),
    (store(dram_base=256), "beyond the 4096-byte DRAM image"),
    (MemInsn(opcode=Opcode.STORE, memory_type=MemType.INP, x_size=1, y_size=1),
     "STORE needs memory_type OUT"),
    (MemInsn(opcode=Opcode.LOAD, memory_type=MemType.OUT, x_size=1, y_size=1),
     "LOAD needs memory_type UOP, WGT, INP or ACC"),
    (MemInsn(opcode=Opcode.LOAD, memory_type=6, x_size=1, y_size=1), "not 6"),
    (GemmInsn(uop_bgn=5, uop_end=4, iter_out=1, iter_in=1), "uop_end=4 is below uop_bgn=5"),
    (AluInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1, alu_opcode=6), "invalid alu_opcode 6"),
])
def test_fsim_static_bounds_errors(cfg: Config, insn, text: str) -> None:
    with pytest.raises(ProgramError, match=text.replace("(", r"\(").replace(")", r"\)")):
        fsim.run([insn, FinishInsn()], np.zeros(4096, np.uint8), cfg)


@pytest.mark.sim
@pytest.mark.parametrize("field, text", [
    ("dst", "micro-op 3 (dst_idx=2000) with dst_factor_out=20, dst_factor_in=1 reaches acc "
            "index 2061 at o=2, i=21, beyond the acc buffer (depth 2048)"),
    ("src", "(src_idx=2047) with src_factor_out=0, src_factor_in=1 reaches inp index 2068"),
    ("wgt", "reaches wgt index 1044 at o=2, i=21, beyond the wgt buffer (depth 1024)"),
])
def test_fsim_micro_op_index_out_of_bounds(cfg: Config, field: str, text: str) -> None:
    uops = [Uop(0, 0, 0)] * 3 + [{"dst": Uop(2000, 0, 0), "src": Uop(0, 2047, 0),
                                   "wgt": Uop(0, 0, 1023)}[field]]
    dram = np.zeros(4096, np.uint8)
    dram[:16] = np.frombuffer(encode_uops(uops, cfg), np.uint8)
    gemm = GemmInsn(uop_bgn=0, uop_end=4, iter_out=3, iter_in=22,
                    **{f"{field}_factor_out": 20 if field == "dst" else 0,
                       f"{field}_factor_in": 1})
    with pytest.raises(ProgramError, match=text.replace("(", r"\(").replace(")", r"\)")) as e:
        fsim.run([load(MemType.UOP, x_size=4), gemm, FinishInsn()], dram, cfg)
    assert "instruction 1 (GEMM)" in str(e.value)


@pytest.mark.sim
def test_fsim_finish_must_be_last(cfg: Config) -> None:
    with pytest.raises(ProgramError, match="must be the last instruction"):
        fsim.run([FinishInsn(), FinishInsn()], np.zeros(16, np.uint8), cfg)
    with pytest.raises(ProgramError, match="does not end with FINISH"):
        fsim.run([GemmInsn()], np.zeros(16, np.uint8), cfg)


# ------------------------------------------------------------------ state, stats, trace
@pytest.mark.sim
def test_fsim_sram_persists_across_runs(cfg: Config) -> None:
    dram = np.zeros(4096, np.uint8)
    dram[:4] = np.frombuffer(encode_uops([Uop(3, 3, 0)], cfg), np.uint8)
    dram[64 * 2:64 * 3] = np.arange(64, dtype=np.uint8)  # acc element 2 = 16 int32s
    sim = FunctionalSim(cfg)
    sim.run([load(MemType.UOP), load(MemType.ACC, sram_base=3, dram_base=2), FinishInsn()], dram)
    # second program: no LOAD UOP, uses the micro-op and accumulator from the first run
    alu = AluInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1, alu_opcode=AluOp.ADD,
                  use_imm=1, imm=-1, push_next_dep=1)
    stats = sim.run([alu, store(sram_base=3, dram_base=100, pop_prev_dep=1, push_prev_dep=1),
                     FinishInsn(pop_next_dep=1)], dram)
    want = np.arange(64, dtype=np.uint8).view("<i4") - 1
    assert np.array_equal(dram[1600:1616].view(np.int8), want.astype(np.int8))
    assert stats.insns_per_opcode == {"LOAD": 0, "STORE": 1, "GEMM": 0, "FINISH": 1,
                                         "ALU": 1}


@pytest.mark.sim
def test_fsim_stats_and_trace(cfg: Config) -> None:
    mm = matmul_program(cfg, 16, 32, 48, shift=2)
    r = fsim.run(mm.program, mm.dram, cfg, trace=True)
    s = r.stats
    json.dumps(s.to_json())
    assert s.backend == "fsim"
    # 16 rows x 2 column blocks x 3 K blocks of 16: reset 16*2, accumulate 16*2*3, shift 16*2
    assert s.gemm_uops == 16 * 2 + 16 * 2 * 3
    assert s.alu_uops == 16 * 2
    assert s.bytes_loaded["INP"] == 16 * 48 and s.bytes_loaded["WGT"] == 32 * 48
    assert s.bytes_stored == 16 * 32
    assert sum(s.insns_per_opcode.values()) == s.insn_count == len(mm.program) // 16
    assert sum(s.insns_per_module.values()) == s.insn_count
    events = [e for e in r.trace if e["ph"] == "X"]
    assert len(events) == s.insn_count
    assert sorted(e["ts"] for e in events) == list(range(len(events)))
    names = {e["tid"]: e["cat"] for e in events}
    assert names == {0: "load", 1: "compute", 2: "store"}
    threads = {e["tid"]: e["args"]["name"] for e in r.trace if e["name"] == "thread_name"}
    assert threads == {0: "load", 1: "compute", 2: "store"}
    json.dumps({"traceEvents": r.trace})


@pytest.mark.sim
def test_fsim_run_leaves_the_input_alone_and_keeps_its_length(cfg: Config) -> None:
    mm = matmul_program(cfg, 8, 16, 16)
    dram = mm.dram.copy()
    r = fsim.run(mm.program, dram, cfg)
    assert np.array_equal(dram, mm.dram) and len(r.dram) == len(dram)
    r2 = fsim.run(mm.program, dram.tobytes(), cfg)
    assert np.array_equal(r.dram, r2.dram)


@pytest.mark.sim
@pytest.mark.parametrize("order", ["compute-first", "load-first"])
def test_fsim_program_run_again_equals_a_fresh_simulator(small_cfg: Config, order: str) -> None:
    """A simulator that ran a program before replays the order it ran in: the same DRAM image,
    statistics and trace as a fresh simulator (with the same SRAM contents), also on new data
    (a matrix product's program on other matrices)."""
    rng = np.random.default_rng(3)
    random_prog, random_dram = random_program(small_cfg, 21, n_insns=60)
    data = [(rng.integers(-128, 128, (8, 16)), rng.integers(-128, 128, (12, 16)))
            for _ in range(3)]
    mms = [matmul_program(small_cfg, 8, 12, 16, a=a, b=b) for a, b in data]
    assert len({mm.program for mm in mms}) == 1  # one program, three data sets
    runs = [(random_prog, random_dram)] * 2 + [(mm.program, mm.dram) for mm in mms]
    warm = FunctionalSim(small_cfg, order=order, trace=True)
    for program, dram in runs:
        fresh = FunctionalSim(small_cfg, order=order, trace=True)
        for buf in ("uop", "inp", "wgt", "acc"):  # SRAM contents carry over between runs
            getattr(fresh, buf)[...] = getattr(warm, buf)
        want_dram, got_dram = dram.copy(), dram.copy()
        want = fresh.run(program, want_dram)
        got = warm.run(program, got_dram)
        assert np.array_equal(got_dram, want_dram)
        assert got == want
        assert warm.trace_events == fresh.trace_events
    assert np.array_equal(mms[-1].plan.read_c(got_dram), mms[-1].plan.reference(*data[-1]))
