"""vta.sim.progen: the dependency-token builder and the random program generator."""

from __future__ import annotations

import numpy as np
import pytest
from vta.isa import (
    COMPUTE_MODULE,
    Config,
    FinishInsn,
    GemmInsn,
    MemInsn,
    MemType,
    Opcode,
    Uop,
    decode_program,
)
from vta.sim import fsim
from vta.sim.fsim import FunctionalSim
from vta.sim.progen import Access, ProgramBuilder, random_program


def _load(mt: MemType, sram_base: int = 0, dram_base: int = 0, n: int = 1) -> MemInsn:
    return MemInsn(opcode=Opcode.LOAD, memory_type=mt, sram_base=sram_base,
                   dram_base=dram_base, y_size=1, x_size=n, x_stride=n)


def _store(sram_base: int = 0, dram_base: int = 0, n: int = 1) -> MemInsn:
    return MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, sram_base=sram_base,
                   dram_base=dram_base, y_size=1, x_size=n, x_stride=n)


@pytest.mark.sim
@pytest.mark.parametrize("preset", ["default", "small"])
def test_fsim_random_programs_do_not_read_uninitialised_sram(preset: str) -> None:
    """Same DRAM result whatever the SRAM held before: every entry read was written first."""
    cfg = Config.preset(preset)
    for seed in range(6):
        program, dram = random_program(cfg, seed, n_insns=40)
        zero = fsim.run(program, dram, cfg).dram
        sim = FunctionalSim(cfg)
        rng = np.random.default_rng(seed)
        for buf in (sim.uop, sim.inp, sim.wgt, sim.acc):
            buf[...] = rng.integers(0, 1 << 8, buf.shape).astype(buf.dtype)
        out = dram.copy()
        sim.run(program, out)
        assert np.array_equal(out, zero)
        assert not np.array_equal(zero, dram), "the program stored nothing"


@pytest.mark.unit
def test_fsim_random_program_is_deterministic_and_sized(small_cfg: Config) -> None:
    p1, d1 = random_program(small_cfg, 42, n_insns=24)
    p2, d2 = random_program(small_cfg, np.random.default_rng(42), n_insns=24)
    assert p1 == p2 and np.array_equal(d1, d2)
    assert 16 <= len(p1) // 16 <= 24 + 8
    insns = decode_program(p1, small_cfg)
    assert isinstance(insns[-1], FinishInsn)
    assert all(not isinstance(i, FinishInsn) for i in insns[:-1])
    _, big = random_program(small_cfg, 1, n_insns=24, dram_bytes=1 << 16)
    assert big.size == 1 << 16


@pytest.mark.sim
def test_fsim_builder_adds_tokens_only_for_real_dependencies(cfg: Config) -> None:
    b = ProgramBuilder(cfg)
    b.emit(_load(MemType.INP, sram_base=0, dram_base=64))            # 0
    b.emit(_load(MemType.WGT, sram_base=0, dram_base=16))             # 1
    b.emit(_store(sram_base=100, dram_base=300))                      # 2: independent
    b.emit(GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1), uops=[Uop(5, 0, 0)])  # 3
    b.emit(_store(sram_base=5, dram_base=301))                        # 4: needs the GEMM
    prog = b.finish()
    assert prog[0].deps == (0, 0, 0, 0)          # nothing waits on the first load alone
    assert prog[1].push_next_dep == 1            # the GEMM needs both loads: push on the last
    assert prog[2].deps == (0, 0, 0, 0)          # the unrelated store runs freely
    assert prog[3].pop_prev_dep == 1 and prog[3].push_next_dep == 1
    assert prog[4].pop_prev_dep == 1 and prog[4].push_prev_dep == 1
    assert prog[5].pop_next_dep == 1             # FINISH waits for the last store
    fsim.check_races(prog, np.zeros(8192, np.uint8), cfg)


@pytest.mark.sim
def test_fsim_builder_orders_store_before_load_through_compute(cfg: Config) -> None:
    """A LOAD reading what a STORE wrote: load and store share no queue, so compute relays."""
    b = ProgramBuilder(cfg)
    b.emit(_store(sram_base=0, dram_base=10))                     # writes DRAM bytes 160..175
    b.emit(_load(MemType.INP, sram_base=0, dram_base=10))         # reads them back
    prog = b.finish()
    kinds = [(type(i).__name__, i.module) for i in prog]
    assert kinds[1] == ("MemInsn", COMPUTE_MODULE)                # the relay no-op
    assert prog[1].x_size == 0 and prog[1].pop_next_dep and prog[1].push_prev_dep
    dram = np.zeros(4096, np.uint8)
    fsim.check_races(prog, dram, cfg)


@pytest.mark.sim
def test_fsim_builder_places_push_on_the_earliest_instruction(cfg: Config) -> None:
    """The push goes on the instruction that produced the data, so later loads overlap."""
    b = ProgramBuilder(cfg)
    b.emit(_load(MemType.INP, sram_base=0, dram_base=0))     # 0: for the GEMM
    b.emit(_load(MemType.INP, sram_base=10, dram_base=1))    # 1: for something later
    b.emit(GemmInsn(uop_bgn=0, uop_end=1, iter_out=1, iter_in=1), uops=[Uop(0, 0, 0)],
           reads=[Access("inp", 0, 1)], writes=[Access("acc", 0, 1)])
    prog = b.finish()
    assert prog[0].push_next_dep == 1 and prog[2].pop_prev_dep == 1  # GEMM waits for 0 only
    assert prog[1].push_next_dep == 1 and prog[3].pop_prev_dep == 1  # FINISH waits for 1
    fsim.check_races(prog, np.zeros(4096, np.uint8), cfg)


@pytest.mark.unit
def test_fsim_builder_rejects_misuse(cfg: Config) -> None:
    b = ProgramBuilder(cfg)
    with pytest.raises(ValueError, match="finish"):
        b.emit(FinishInsn())
    b.finish()
    with pytest.raises(ValueError, match="already ends"):
        b.emit(_load(MemType.INP))
    with pytest.raises(ValueError, match="unknown buffer"):
        Access("sram", 0, 1)
