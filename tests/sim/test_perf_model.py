"""The performance model against cycle counts computed by hand from its documented constants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from vta.isa import (
    AluInsn,
    Config,
    DeadlockError,
    FinishInsn,
    GemmInsn,
    MemInsn,
    MemType,
    Opcode,
    encode_program,
)
from vta.sim.perf import PerfParams, calibrate, estimate, run_program

P = PerfParams(mem_latency=10, max_burst=16, insn_overhead=2, gemm_latency=4,
               alu_ii=2, alu_latency=3, token_latency=1, fetch_per_insn=0)


def fetch_done(n: int) -> float:
    """When fetch delivers the n-th instruction (1-based): 2 beats each, bursts of 8
    instructions pipelined (4 in flight, so one burst per 16 cycles after the latency)."""
    return P.mem_latency + 16 * ((n - 1) // 8) + 2 * ((n - 1) % 8 + 1)


def read_train(bursts: int, beats_per_burst: int) -> float:
    """Latency, then one burst per max(beats, (latency + beats) / 4) cycles."""
    period = max(beats_per_burst, (P.mem_latency + beats_per_burst) / 4)
    return P.mem_latency + beats_per_burst + (bursts - 1) * period


@pytest.mark.unit
def test_single_gemm_costs_n_plus_constant(cfg: Config) -> None:
    prog = [GemmInsn(uop_bgn=0, uop_end=4, iter_out=3, iter_in=5), FinishInsn()]
    s = estimate(prog, cfg, params=P)
    n = 4 * 3 * 5
    gemm_end = fetch_done(1) + 2 + n + 4
    assert s.cycles == math.ceil(max(gemm_end, fetch_done(2)) + 2)
    assert s.gemm_uops == n
    assert s.modules["compute"].busy == 2 + n + 4 + 2


@pytest.mark.unit
def test_load_moves_one_bus_word_per_cycle_plus_burst_latency(cfg: Config) -> None:
    # 3 rows of 5 inp elements (16 B each at the default config) = 80 B = 10 beats per row
    ld = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, dram_base=0, y_size=3, x_size=5,
                 x_stride=5)
    s = estimate([ld, FinishInsn()], cfg, params=P)
    port = read_train(3, 10)  # one 10-beat burst per row
    # the LOAD's transfer waits for fetch to free the port (2 instructions fetched in one burst)
    start = fetch_done(1)
    begin = max(start + 2, fetch_done(2))
    assert s.modules["load"].busy == round(begin + port - start)
    assert s.bytes_loaded["INP"] == 3 * 5 * 16


@pytest.mark.unit
def test_the_bus_is_the_configurations(cfg: Config) -> None:
    """A 128-bit configuration's core moves 16-byte beats: one instruction per fetch beat, 5
    beats per 80-byte row; with the memory keeping up (16 B/cycle) the same LOAD takes half the
    data cycles, with the default memory (8 B/cycle) each beat takes 2 cycles."""
    wide = cfg.with_bus_width(128)
    ld = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, dram_base=0, y_size=3, x_size=5,
                 x_stride=5)
    fast = PerfParams(**{**P.__dict__, "bandwidth": 16.0})
    s = estimate([ld, FinishInsn()], wide, params=fast)
    assert s.bus_width == 128 and estimate([ld, FinishInsn()], cfg, params=P).bus_width == 64
    fetch = [fast.mem_latency + 1, fast.mem_latency + 2]  # one beat per instruction
    start = fetch[0]
    begin = max(start + 2, fetch[1])
    period = max(5, (fast.mem_latency + 5) / 4)
    port = fast.mem_latency + 5 + 2 * period  # one 5-beat burst per row
    assert s.modules["load"].busy == round(begin + port - start)
    slow = estimate([ld, FinishInsn()], wide, params=P)  # 8 B/cycle: 2 cycles per 16-B beat
    period = max(10, (P.mem_latency + 10) / 4)
    fetch = [P.mem_latency + 2, P.mem_latency + 4]
    begin = max(fetch[0] + 2, fetch[1])
    assert slow.modules["load"].busy == round(begin + P.mem_latency + 10 + 2 * period - fetch[0])


@pytest.mark.unit
def test_tokens_serialise_modules(cfg: Config) -> None:
    ld = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, y_size=1, x_size=2, x_stride=2,
                 push_next_dep=1)
    g = GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=100, pop_prev_dep=1)
    s = estimate([ld, g, FinishInsn()], cfg, params=P)
    # the GEMM cannot start before the load has finished and the token arrived
    # the load's request latency hides fetch's burst: its data follows its own latency
    load_end = fetch_done(1) + 2 + read_train(1, 4)
    assert s.cycles == math.ceil(load_end + 1 + 2 + 100 + 4 + 2)
    assert s.modules["compute"].token_wait > 0


@pytest.mark.unit
def test_alu_rate_and_independent_modules_overlap(cfg: Config) -> None:
    alu = AluInsn(uop_bgn=0, uop_end=2, iter_out=10, iter_in=1)
    s = estimate([alu, FinishInsn()], cfg, params=P)
    assert s.modules["compute"].busy == 2 + 2 * 20 + 3 + 2
    assert s.alu_uops == 20
    # a load with no tokens overlaps a long GEMM: total < the sum of both
    ld = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.WGT, y_size=1, x_size=8, x_stride=8)
    g = GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=2000)
    both = estimate([ld, g, FinishInsn()], cfg, params=P).cycles
    only_g = estimate([g, FinishInsn()], cfg, params=P).cycles
    only_l = estimate([ld, FinishInsn()], cfg, params=P).cycles
    assert both < only_g + only_l and both >= only_g


@pytest.mark.unit
def test_deadlock_is_reported(cfg: Config) -> None:
    g = GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1, pop_prev_dep=1)
    with pytest.raises(DeadlockError, match="compute at instruction 0 waits on token queue "
                                            "load->compute"):
        estimate([g, FinishInsn()], cfg)


@pytest.mark.unit
def test_backend_contract_and_calibration(cfg: Config) -> None:
    prog = encode_program([GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=50),
                           FinishInsn()], cfg)
    dram = np.arange(64, dtype=np.uint8)
    r = run_program(prog, dram, cfg, trace=True)
    assert np.array_equal(r.dram, dram) and r.dram is not dram
    assert {e["tid"] for e in r.trace if e["ph"] == "X"} == {2}
    # calibration recovers a known GEMM latency from samples made with it
    truth = PerfParams(gemm_latency=9.0)
    samples = []
    for n in (10, 40, 90):
        insns = [GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=n), FinishInsn()]
        samples.append((insns, estimate(insns, cfg, params=truth).cycles))
    fitted, err = calibrate(samples, cfg, PerfParams(gemm_latency=4.0))
    assert err < 0.01
    assert estimate(samples[0][0], cfg, params=fitted).cycles == samples[0][1]


@pytest.mark.unit
def test_default_params_match_the_rtl_pipeline() -> None:
    """The structural timing constants of the model are the RTL's (vta.hw.compute), not copies
    that could drift: micro-op rates and the pipeline drains before a token push."""
    from vta.hw.compute import PIPELINE_TIMING

    for name, cycles in PIPELINE_TIMING.items():
        assert getattr(PerfParams(), name) == cycles, name


@pytest.mark.unit
def test_core_variant_params_follow_the_rtl_drain(small_cfg) -> None:
    """A core variant with a longer GEMM pipeline (the ULX3S's DSP registers) drains as many
    cycles later in the model as in the RTL's compute module."""
    from vta.hw.compute import Compute
    from vta.hw.decode import insn_layouts
    from vta.hw.options import CoreOptions

    for options in (CoreOptions(), CoreOptions(dsp_registers=True),
                    CoreOptions(replicate_operands=True)):
        compute = Compute(small_cfg, insn_layout=insn_layouts(small_cfg).insn, bus_bytes=8,
                          options=options)
        compute._MustUse__silence = True  # only its timing is read
        params = PerfParams().for_core(options.extra_gemm_latency)
        assert params.gemm_drain == compute.gemm_drain, options


@pytest.mark.unit
def test_alu_chains_follow_the_tail_stages() -> None:
    """vta.isa.fusion's chains (the RTL's rule: tests/hw/test_rtl_compute.py runs such programs
    on the RTL), checked by hand: immediate ALU instructions over the same loops and one
    micro-op that visits distinct entries join a chain, the head in PRE if it shifts right,
    else in the ALU, each next member in the first stage after the previous member's that
    runs it (PRE: SHR right, the ALU: anything, the tail: ADD, SHR right, MIN/MAX,
    MIN/MAX); a pop starts a new chain, a push ends it, other modules' instructions do not
    break it."""
    from vta.isa.fusion import ALU_CHAIN, STAGES, alu_chains
    from vta.isa.layout import AluOp

    loops = dict(uop_bgn=0, uop_end=1, iter_out=4, iter_in=8, dst_factor_out=8,
                 dst_factor_in=1)

    def imm(op: AluOp, value: int = 3, **kw) -> AluInsn:
        return AluInsn(alu_opcode=op, use_imm=1, imm=value, **{**loops, **kw})

    ld = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, x_size=1, y_size=1, x_stride=1)
    prog = [imm(AluOp.SHR), imm(AluOp.MUL), ld, imm(AluOp.ADD), imm(AluOp.MIN, push_next_dep=1),
            imm(AluOp.MAX),  # after a push: heads its own
            imm(AluOp.ADD), imm(AluOp.MUL, pop_prev_dep=1),  # a pop: new chain
            imm(AluOp.SHR), imm(AluOp.ADD),  # ADD after the tail's SHR: new chain
            imm(AluOp.MUL),  # the ALU taken: new chain
            imm(AluOp.SHR, -1),  # a left shift: in the ALU, which is taken: new chain
            imm(AluOp.SHR, dst_factor_out=7),  # revisits entries: no chain
            imm(AluOp.SHR, uop_end=2)]  # two micro-ops: no chain
    assert alu_chains(prog) == {0: 4, 1: 0, 3: 0, 4: 0, 5: 2, 6: 0, 7: 2, 8: 0, 9: 1, 10: 1,
                                11: 1}
    # a requantization is one chain; the third clip bound has no stage left
    epilogue = [imm(op) for op in (AluOp.SHR, AluOp.MUL, AluOp.ADD, AluOp.SHR, AluOp.MIN,
                                   AluOp.MAX, AluOp.MIN)]
    assert len(STAGES) == ALU_CHAIN == 6
    assert alu_chains(epilogue) == {0: 6, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 1}


@pytest.mark.unit
def test_alu_chain_costs_one_pass_and_a_repeated_src_one_cycle(cfg: Config) -> None:
    """A chain costs one pass of its loops (one cycle per member to gather, the chain's
    drain); instructions that do not chain one pass each; a two-operand ALU whose src repeats
    reads it once per change."""
    from vta.isa.layout import AluOp
    from vta.sim.perf import src_reads

    loops = dict(uop_bgn=0, uop_end=1, iter_out=4, iter_in=8, dst_factor_out=8,
                 dst_factor_in=1)
    chain = [AluInsn(alu_opcode=op, use_imm=1, imm=1, **loops)
             for op in (AluOp.MUL, AluOp.ADD, AluOp.SHR)]
    alone = estimate([chain[0], FinishInsn()], cfg, params=P).modules["compute"].busy
    fused = estimate([*chain, FinishInsn()], cfg, params=P).modules["compute"].busy
    n = 32
    # alone: overhead + n + latency + a look at the queue (+ FINISH's overhead); fused: + a
    # look per gathered member and the chain's drain, still one pass
    look = P.chain_gather
    assert look == 3
    assert alone == 2 + n * P.alu_ii + 3 + look + 2
    assert fused == alone + 2 * look + P.chain_drain
    # ADD after the tail's SHR has no stage: two chains of one pass each
    apart = [chain[0], chain[2], chain[1]]
    assert estimate([*apart, FinishInsn()], cfg, params=P).modules["compute"].busy == \
        alone + look + P.chain_drain + (2 + n * P.alu_ii + 3 + look)
    bias = AluInsn(alu_opcode=AluOp.ADD, **loops)
    assert src_reads(bias) == 1
    assert src_reads(AluInsn(alu_opcode=AluOp.ADD, **{**loops, "src_factor_out": 1})) == 4
    assert src_reads(AluInsn(alu_opcode=AluOp.ADD, **{**loops, "src_factor_in": 1})) == 32
    assert src_reads(AluInsn(alu_opcode=AluOp.ADD, **{**loops, "uop_end": 3})) == 96
