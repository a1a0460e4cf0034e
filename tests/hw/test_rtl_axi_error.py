"""AXI error responses: a memory that answers SLVERR/DECERR outside its range stops the core,
which latches the response, the direction and the burst's address for the host."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator
from vta.hw.axi_model import RESP_DECERR, RESP_SLVERR, AxiMemory
from vta.hw.axi_sim import AxiLiteHost, axi_memory_testbench
from vta.hw.core import VTACore
from vta.hw.regs import CONTROL_ERROR, REGISTER_MAP
from vta.isa import Config
from vta.isa.insn import FinishInsn, GemmInsn, MemInsn, encode_program
from vta.isa.layout import MemType, Opcode

INSN_ADDR = 0x1000
MEM_BYTES = 0x2000


def _program(cfg: Config, *, load_base: int | None = None, store_base: int | None = None) -> bytes:
    """LOAD INP -> GEMM (no micro-op) -> STORE -> FINISH, with the given element addresses (the
    LOAD or STORE is a no-op when its base is None)."""
    load = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, push_next_dep=1,
                   **({} if load_base is None else
                      {"dram_base": load_base, "x_size": 1, "y_size": 1, "x_stride": 1}))
    gemm = GemmInsn(pop_prev_dep=1, uop_bgn=0, uop_end=1, iter_out=0, iter_in=0,
                    push_next_dep=1)
    store = MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, pop_prev_dep=1,
                    push_prev_dep=1,
                    **({} if store_base is None else
                       {"dram_base": store_base, "x_size": 1, "y_size": 1, "x_stride": 1}))
    return encode_program([load, gemm, store, FinishInsn(pop_next_dep=1)], cfg)


def _run(cfg: Config, program: bytes, mode: str, *, insn_addr: int = INSN_ADDR,
         relaunch: bool = True) -> dict[str, int]:
    mem = np.zeros(MEM_BYTES, np.uint8)
    mem[INSN_ADDR:INSN_ADDR + len(program)] = np.frombuffer(program, np.uint8)
    core = VTACore(cfg)
    top = Module()
    top.domains.sync = ClockDomain("sync")
    top.submodules.core = core
    memory = AxiMemory(mem, bus_bytes=8, latency=3, stall=0.2, out_of_range=mode)
    host = AxiLiteHost(core)
    r = REGISTER_MAP
    seen: dict[str, int] = {}

    async def bench(ctx) -> None:
        await host.write(ctx, r["insn_addr"], insn_addr)
        await host.write(ctx, r["insn_count"], len(program) // 16)
        await host.write(ctx, r["control"], 1)
        for _ in range(300):
            control = await host.read(ctx, r["control"])
            if control & 0b110:
                break
        seen["control"] = control
        seen["interrupt"] = ctx.get(core.interrupt)
        for name in ("axi_error", "axi_error_addr", "status", "fetched"):
            seen[name] = await host.read(ctx, r[name])
        if relaunch:  # ignored until reset
            await host.write(ctx, r["control"], 1)
            await ctx.tick().repeat(20)
            seen["control_after"] = await host.read(ctx, r["control"])
            seen["fetched_after"] = await host.read(ctx, r["fetched"])

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(axi_memory_testbench(core, memory), background=True)
    sim.add_testbench(bench)
    sim.run()
    return seen


def _expect_error(seen: dict[str, int], *, write: bool, resp: int, addr: int) -> None:
    assert seen["control"] == CONTROL_ERROR  # stopped: not running, not finished
    assert seen["interrupt"] == 1
    assert seen["axi_error"] == 1 | int(write) << 1 | resp << 2
    assert seen["axi_error_addr"] == addr
    assert seen["status"] >> 7 & 1 and not seen["status"] >> 4 & 1
    assert seen["control_after"] == CONTROL_ERROR
    assert seen["fetched_after"] == seen["fetched"]


@pytest.mark.sim
def test_read_error_response_stops_the_core(small_cfg: Config) -> None:
    base = 0x10000  # INP elements of 4 bytes: byte 0x40000, beyond the 8 KiB memory
    seen = _run(small_cfg, _program(small_cfg, load_base=base), "decerr")
    _expect_error(seen, write=False, resp=RESP_DECERR, addr=base * small_cfg.inp_elem_bytes)


@pytest.mark.sim
def test_write_error_response_stops_the_core(small_cfg: Config) -> None:
    base = 0x1000  # OUT elements of 4 bytes: byte 0x4000, beyond the 8 KiB memory
    seen = _run(small_cfg, _program(small_cfg, store_base=base), "slverr")
    _expect_error(seen, write=True, resp=RESP_SLVERR, addr=base * small_cfg.out_elem_bytes)


@pytest.mark.sim
def test_instruction_fetch_error_names_the_instruction_address(small_cfg: Config) -> None:
    seen = _run(small_cfg, _program(small_cfg), "decerr", insn_addr=0x8000, relaunch=False)
    assert seen["control"] == CONTROL_ERROR
    assert seen["axi_error"] == 1 | RESP_DECERR << 2 and seen["axi_error_addr"] == 0x8000


@pytest.mark.sim
def test_in_range_program_finishes_without_error(small_cfg: Config) -> None:
    """The same LOAD and STORE inside the memory: no error, the program finishes."""
    seen = _run(small_cfg, _program(small_cfg, load_base=0x10, store_base=0x20), "decerr",
                relaunch=False)
    assert seen["control"] == 2 and seen["axi_error"] == 0 and not seen["status"] >> 7 & 1
