"""cocotb testbench of the whole VTA core (generated Verilog, Icarus): many programs per launch.

Driver: an AXI4-Lite host (register writes/reads with independent address/data handshakes).
Model: an AXI4 memory behind the master port (bursts, byte strobes, latency, random backpressure;
the cycle logic of :class:`vta.hw.axi_model.AxiMemory`). Checker: every program's DRAM image
after FINISH against the functional simulator's, byte for byte.

The pytest wrapper (``tests/hw/test_cocotb_core.py``) writes the jobs to ``$VTA_TB_JOBS`` (a
pickle: list of dicts with ``name``, ``program``, ``dram``, ``expect``, ``latency``, ``stall``,
``seed``) and reads per-job outcomes from ``$VTA_TB_RESULTS`` (JSON). The simulator is built and
launched once; the core is reset between programs.
"""

from __future__ import annotations

import json
import os
import pickle

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from vta.hw.axi_model import AXI_SLAVE_OUTPUTS, AxiMemory
from vta.hw.harness import place_program
from vta.hw.regs import CONTROL_FINISHED, CONTROL_LAUNCH, REGISTER_MAP


class LazySample:
    """The master's signals, read on demand inside one RisingEdge callback (pre-edge values)."""

    def __init__(self, dut, prefix: str = "m_axi_") -> None:
        self.dut, self.prefix = dut, prefix
        self.handles: dict[str, object] = {}

    def __getitem__(self, name: str) -> int:
        h = self.handles.get(name)
        if h is None:
            h = self.handles[name] = getattr(self.dut, self.prefix + name)
        v = h.value
        return v.to_unsigned() if hasattr(v, "to_unsigned") else int(v)


class AxiMemoryAgent:
    """Drives the slave side of the core's AXI4 master port from an :class:`AxiMemory`."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.memory: AxiMemory | None = None
        self.sample = LazySample(dut)
        self.outs = {n: getattr(dut, "m_axi_" + n) for n in AXI_SLAVE_OUTPUTS}
        self.driven = dict.fromkeys(AXI_SLAVE_OUTPUTS, 0)
        self.in_reset = True  # set by reset(): the testbench drives rst, no need to read it
        for h in self.outs.values():
            h.value = 0

    def attach(self, memory: AxiMemory) -> None:
        self.memory = memory

    async def run(self) -> None:
        edge = RisingEdge(self.dut.clk)
        while True:
            await edge
            memory = self.memory
            if memory is None:
                continue
            new = memory.step(self.sample, rst=self.in_reset)
            for n, v in new.items():
                if self.driven[n] != v:
                    self.outs[n].value = v
                    self.driven[n] = v


class AxiLiteDriver:
    """The host CPU: 32-bit register writes and reads through the AXI4-Lite slave port."""

    def __init__(self, dut, timeout: int = 200) -> None:
        self.dut, self.timeout = dut, timeout
        for name in ("awvalid", "wvalid", "bready", "arvalid", "rready"):
            getattr(dut, "s_axil_" + name).value = 0

    def _s(self, name: str):
        return getattr(self.dut, "s_axil_" + name)

    async def write(self, addr: int, data: int) -> None:
        s = self._s
        s("awaddr").value = addr
        s("awvalid").value = 1
        s("wdata").value = data & 0xFFFF_FFFF
        s("wstrb").value = 0xF
        s("wvalid").value = 1
        s("bready").value = 1
        aw = w = False
        for _ in range(self.timeout):
            await RisingEdge(self.dut.clk)
            bvalid = int(s("bvalid").value)
            assert not (bvalid and not (aw and w)), f"bvalid before the handshakes ({addr:#x})"
            if not aw and int(s("awready").value):
                aw = True
                s("awvalid").value = 0
            if not w and int(s("wready").value):
                w = True
                s("wvalid").value = 0
            if bvalid:
                s("bready").value = 0
                assert int(s("bresp").value) == 0
                return
        raise AssertionError(f"AXI-Lite write {addr:#x}: no response in {self.timeout} cycles")

    async def read(self, addr: int) -> int:
        s = self._s
        s("araddr").value = addr
        s("arvalid").value = 1
        s("rready").value = 1
        ar = False
        for _ in range(self.timeout):
            await RisingEdge(self.dut.clk)
            rvalid = int(s("rvalid").value)
            assert not (rvalid and not ar), f"rvalid before the read address handshake ({addr:#x})"
            if not ar and int(s("arready").value):
                ar = True
                s("arvalid").value = 0
            if rvalid:
                data = s("rdata").value.to_unsigned()
                s("rready").value = 0
                assert int(s("rresp").value) == 0
                return data
        raise AssertionError(f"AXI-Lite read {addr:#x}: no response in {self.timeout} cycles")


async def reset(dut, agent: AxiMemoryAgent, cycles: int = 2) -> None:
    dut.rst.value = 1
    agent.in_reset = True
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)  # the write above takes effect after this edge
    agent.in_reset = False


async def run_job(dut, agent: AxiMemoryAgent, host: AxiLiteDriver, job: dict) -> dict:
    """One program: fresh memory, reset, registers, launch, poll finished, compare."""
    bus_bytes = len(dut.m_axi_wstrb)
    dram = np.frombuffer(job["dram"], dtype=np.uint8).copy()
    image = place_program(dram, job["program"])
    memory = AxiMemory(image.mem, bus_bytes=bus_bytes, latency=job["latency"],
                       stall=job["stall"], seed=job["seed"], write_limit=image.user_bytes)
    agent.attach(memory)
    await reset(dut, agent)
    await host.write(REGISTER_MAP["insn_addr"], image.insn_addr)
    await host.write(REGISTER_MAP["insn_count"], image.insn_count)
    await host.write(REGISTER_MAP["control"], CONTROL_LAUNCH)
    budget = job["max_cycles"]
    waited = 0
    while True:
        await ClockCycles(dut.clk, 16)
        waited += 16
        if await host.read(REGISTER_MAP["control"]) & CONTROL_FINISHED:
            break
        if waited > budget:
            states = await host.read(REGISTER_MAP["states"])
            return {"name": job["name"], "ok": False,
                    "error": f"not finished after {budget} cycles (states {states:#06x})"}
    cycles = await host.read(REGISTER_MAP["cycles"])
    out = image.user_dram()
    expect = np.frombuffer(job["expect"], dtype=np.uint8)
    diff = np.flatnonzero(out != expect)
    result = {"name": job["name"], "ok": diff.size == 0, "cycles": cycles,
              "read_bursts": memory.stats.read_bursts, "write_bursts": memory.stats.write_bursts}
    if diff.size:
        result["error"] = (f"{diff.size} bytes differ from fsim, first at {int(diff[0]):#x} "
                           f"(got {int(out[diff[0]])}, fsim {int(expect[diff[0]])})")
    return result


@cocotb.test()
async def programs_match_fsim(dut):
    """Every job's DRAM image equals the functional simulator's."""
    with open(os.environ["VTA_TB_JOBS"], "rb") as f:
        jobs = pickle.load(f)
    dut.rst.value = 1  # before the first edge: no X anywhere
    agent = AxiMemoryAgent(dut)
    host = AxiLiteDriver(dut)
    Clock(dut.clk, 10, unit="ns", impl="gpi").start()
    await ClockCycles(dut.clk, 2)
    cocotb.start_soon(agent.run())
    results = []
    for job in jobs:
        try:
            results.append(await run_job(dut, agent, host, job))
        except Exception as e:  # noqa: BLE001 - recorded per job, reported by the wrapper
            results.append({"name": job["name"], "ok": False, "error": f"{type(e).__name__}: {e}"})
            break
    with open(os.environ["VTA_TB_RESULTS"], "w") as f:
        json.dump(results, f, indent=1)
    bad = [r for r in results if not r["ok"]]
    assert len(results) == len(jobs), f"stopped after {len(results)} of {len(jobs)} jobs"
    assert not bad, f"{len(bad)} of {len(jobs)} programs differ from fsim: {bad[:3]}"
