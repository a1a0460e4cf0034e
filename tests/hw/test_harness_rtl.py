"""``vta sim --backend rtl``: the whole core in the Amaranth simulator (vta.hw.simulate).

References: numpy for a tiled matmul (vta.sim.programs' plan.reference), the functional
simulator byte for byte for random token-correct programs (vta.sim.progen), static program
statistics for the counters, and hand-made broken programs for the watchdog and bounds errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from vta.hw.simulate import run_program, run_programs
from vta.isa import FinishInsn, GemmInsn, MemInsn, MemType, Opcode, Uop, encode_program
from vta.isa.errors import DeadlockError, ProgramError
from vta.isa.insn import decode_program, encode_uops
from vta.isa.stats import program_stats

pytestmark = pytest.mark.sim

#: Random programs per CI run in the Amaranth simulator (the Icarus share is in
#: test_cocotb_core.py; together they exceed 200).
N_RANDOM_AMARANTH = 48


def fsim_dram(program: bytes, dram: np.ndarray, cfg) -> np.ndarray:
    from vta.sim import fsim

    return np.asarray(fsim.run(program, dram, cfg).dram, dtype=np.uint8)


def tiny_gemm(cfg, seed: int = 0, *, deadlock: bool = False, store_at: int = 256):
    """LOAD UOP/INP/WGT, GEMM reset + accumulate, STORE, FINISH, with numpy's expected image."""
    rng = np.random.default_rng(seed)
    b = cfg.block
    dram = np.zeros(512, dtype=np.uint8)
    dram[0:4] = np.frombuffer(encode_uops([Uop(0, 0, 0)], cfg), np.uint8)
    inp = rng.integers(-128, 128, (cfg.batch, b), dtype=np.int8)
    wgt = rng.integers(-128, 128, (b, b), dtype=np.int8)
    dram[64:64 + inp.nbytes] = inp.view(np.uint8).ravel()
    dram[128:128 + wgt.nbytes] = wgt.view(np.uint8).ravel()
    ie, we, oe = cfg.inp_elem_bytes, cfg.wgt_elem_bytes, cfg.out_elem_bytes
    one = {"y_size": 1, "x_size": 1, "x_stride": 1}
    prog = [
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, **one),
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, dram_base=64 // ie, **one),
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.WGT, dram_base=128 // we,
                push_next_dep=1, **one),
        GemmInsn(reset_reg=1, uop_end=1, iter_out=1, iter_in=1),
        # a deadlocking program pops a second load->compute token that is never pushed
        GemmInsn(uop_end=1, iter_out=1, iter_in=1, pop_prev_dep=1, push_next_dep=1),
        *([GemmInsn(uop_end=1, iter_out=1, iter_in=1, pop_prev_dep=1)] if deadlock else []),
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, dram_base=store_at // oe,
                pop_prev_dep=1, push_prev_dep=1, **one),
        FinishInsn(pop_next_dep=1),
    ]
    expect = dram.copy()
    acc = (inp.astype(np.int32) @ wgt.astype(np.int32).T).astype(np.int8)
    if store_at + acc.nbytes <= len(expect):
        expect[store_at:store_at + acc.nbytes] = acc.view(np.uint8).ravel()
    return encode_program(prog, cfg), dram, expect


def test_tiny_gemm_matches_numpy_and_counters_match_program(small_cfg):
    program, dram, expect = tiny_gemm(small_cfg, 1)
    r = run_program(program, dram, small_cfg, trace=True)
    assert r.dram.dtype == np.uint8 and len(r.dram) == len(dram)
    assert (r.dram == expect).all()
    s = r.stats
    static = program_stats(decode_program(program, small_cfg), small_cfg, backend="rtl")
    assert s.insns_per_opcode == static.insns_per_opcode == {
        "LOAD": 3, "STORE": 1, "GEMM": 2, "FINISH": 1, "ALU": 0}
    hw = s.hw_counters
    assert hw["fetched"] == 7
    assert (hw["load_done"], hw["compute_done"], hw["store_done"]) == (2, 4, 1)
    assert hw["gemm_uops"] == 2 and hw["alu_uops"] == 0
    assert hw["bytes_written"] == small_cfg.out_elem_bytes  # one strobed output element
    assert s.cycles > 0
    assert 0 < s.gemm_utilization == pytest.approx(1 / s.cycles)
    # the trace: one span per instruction, on its module's track, inside the run
    spans = [e for e in r.trace if e["ph"] == "X" and e["cat"] != "wait"]
    assert sorted(e["args"]["index"] for e in spans) == list(range(7))
    tracks = {e["args"]["index"]: e["tid"] for e in spans}
    assert tracks == {0: 1, 1: 0, 2: 0, 3: 1, 4: 1, 5: 2, 6: 1}
    for e in spans:
        assert 0 <= e["args"]["start_cycle"] < e["args"]["end_cycle"] <= s.cycles + 1


@pytest.mark.parametrize("bus_width", [64, 128])
def test_tiled_matmul_matches_numpy(small_cfg, bus_width):
    from vta.sim.programs import matmul_program

    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (8, 12))
    b = rng.integers(-128, 128, (8, 12))
    mm = matmul_program(small_cfg, 8, 8, 12, a=a, b=b)
    r = run_program(mm.program, mm.dram, small_cfg.with_bus_width(bus_width), mem_latency=3)
    assert (mm.read_c(r.dram) == mm.plan.reference(a, b)).all()


def test_deadlock_names_module_and_queue(small_cfg):
    program, dram, _ = tiny_gemm(small_cfg, deadlock=True)
    with pytest.raises(DeadlockError, match=r"compute stuck at instruction 5 \(GEMM\) waiting "
                                            r"for a token on load->compute") as e:
        run_program(program, dram, small_cfg, idle_limit=400)
    assert "deadlock" in str(e.value) and "\n" not in str(e.value)


def test_store_beyond_dram_image_is_a_program_error(small_cfg):
    program, dram, _ = tiny_gemm(small_cfg, store_at=512)  # one element past the image
    with pytest.raises(ProgramError, match="beyond the 512-byte DRAM image") as e:
        run_program(program, dram, small_cfg)
    with pytest.raises(ProgramError) as ref:  # the static check: fsim's error, word for word
        fsim_dram(program, dram, small_cfg)
    assert str(e.value) == str(ref.value)


def test_cycle_limit(small_cfg):
    from vta.hw.harness import CycleLimitError

    program, dram, _ = tiny_gemm(small_cfg)
    with pytest.raises(CycleLimitError, match="within 10 cycles"):
        run_program(program, dram, small_cfg, max_cycles=10)


@pytest.mark.slow
def test_random_programs_match_fsim(small_cfg):
    """Random token-correct programs in one simulation (reset between them), with random
    memory latency and backpressure; each DRAM image equals fsim's byte for byte."""
    from vta.sim.progen import random_program

    jobs = [random_program(small_cfg, 20_000 + k) for k in range(N_RANDOM_AMARANTH)]
    half = N_RANDOM_AMARANTH // 2
    results = run_programs(jobs[:half], small_cfg, mem_latency=2, mem_stall=0.3, seed=7)
    results += run_programs(jobs[half:], small_cfg.with_bus_width(128), mem_latency=11, seed=8)
    assert len(results) == len(jobs)
    for k, ((program, dram), r) in enumerate(zip(jobs, results)):
        expect = fsim_dram(program, dram, small_cfg)
        diff = np.flatnonzero(r.dram != expect)
        assert diff.size == 0, (f"random program seed {20_000 + k}: {diff.size} bytes differ "
                                f"from fsim, first at {int(diff[0]):#x}")


def test_vcd_dump(small_cfg, tmp_path):
    program, dram, expect = tiny_gemm(small_cfg, 2)
    vcd = tmp_path / "wave.vcd"
    r = run_program(program, dram, small_cfg, vcd=str(vcd))
    assert (r.dram == expect).all()
    text = vcd.read_text()
    assert "$enddefinitions" in text and "m_axi_arvalid" in text


def test_stall_guard_turns_a_combinational_loop_into_an_error():
    """A design that never settles (a comb loop) makes Amaranth's simulator spin inside one
    cycle; the guard raises instead of hanging."""
    from amaranth import Module, Signal
    from amaranth.sim import Simulator
    from vta.hw.simulate import SimulationStallError, _stall_guard

    m = Module()
    a, en = Signal(), Signal()
    m.d.comb += a.eq(~a & en)  # oscillates once en is set
    m.d.sync += Signal(name="tick").eq(1)
    cycles = {"n": 0}

    async def tb(ctx):
        for _ in range(5):
            await ctx.tick()
            cycles["n"] += 1
        ctx.set(en, 1)
        await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    with pytest.raises(SimulationStallError, match="stuck in clock cycle 5"), \
            _stall_guard(lambda: cycles["n"], seconds=2.0):
        sim.run()
