"""Amaranth-simulator bindings of the AXI models: a memory testbench and an AXI4-Lite host driver.

Both work on any :class:`amaranth.lib.wiring.Component` whose AXI ports are flat attributes with a
common prefix (``m_axi_araddr``, ``s_axil_awvalid``, ...), as on :class:`vta.hw.core.VTACore`::

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    memory = AxiMemory(mem, bus_bytes=8, latency=4)
    sim.add_testbench(axi_memory_testbench(dut, memory), background=True)
    host = AxiLiteHost(dut)

    async def main(ctx):
        await host.write(ctx, 0x0C, 0x1000)
        value = await host.read(ctx, 0x04)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .axi_model import AXI_MASTER_OUTPUTS, AXI_SLAVE_OUTPUTS, AxiMemory, AxiProtocolError


def axi_memory_testbench(dut: Any, memory: AxiMemory | Callable[[], AxiMemory], *,
                         prefix: str = "m_axi_",
                         on_edge: Callable[[Any], None] | None = None
                         ) -> Callable[[Any], Awaitable[None]]:
    """An async testbench that steps ``memory`` at every edge of ``sync``.

    ``memory`` may also be a function giving the memory to step at each edge (a harness that
    gives every job a fresh one). Add it with ``sim.add_testbench(..., background=True)``.
    ``on_edge(ctx)`` (optional) is called after each step, e.g. to sample other signals once per
    cycle.
    """
    current = memory if callable(memory) else lambda: memory
    ins = [getattr(dut, prefix + n) for n in AXI_MASTER_OUTPUTS]
    outs = [(n, getattr(dut, prefix + n)) for n in AXI_SLAVE_OUTPUTS]
    names = AXI_MASTER_OUTPUTS

    async def testbench(ctx: Any) -> None:
        driven = dict(current().out)
        for n, sig in outs:
            ctx.set(sig, driven[n])
        async for _clk, rst, *values in ctx.tick().sample(*ins):
            new = current().step(dict(zip(names, values)), rst=rst)
            for n, sig in outs:
                v = new[n]
                if driven[n] != v:
                    ctx.set(sig, v)
                    driven[n] = v
            if on_edge is not None:
                on_edge(ctx)

    return testbench


class AxiLiteHost:
    """Register reads and writes through an AXI4-Lite slave port, like a host CPU driver."""

    def __init__(self, dut: Any, *, prefix: str = "s_axil_", timeout: int = 1000) -> None:
        def sig(name: str) -> Any:
            return getattr(dut, prefix + name)

        self.awaddr, self.awvalid, self.awready = sig("awaddr"), sig("awvalid"), sig("awready")
        self.wdata, self.wstrb, self.wvalid, self.wready = (
            sig("wdata"), sig("wstrb"), sig("wvalid"), sig("wready"))
        self.bvalid, self.bready, self.bresp = sig("bvalid"), sig("bready"), sig("bresp")
        self.araddr, self.arvalid, self.arready = sig("araddr"), sig("arvalid"), sig("arready")
        self.rdata, self.rvalid, self.rready, self.rresp = (
            sig("rdata"), sig("rvalid"), sig("rready"), sig("rresp"))
        self.timeout = timeout

    async def write(self, ctx: Any, addr: int, data: int, strb: int = 0xF) -> None:
        """Write one 32-bit register; returns after the write response."""
        ctx.set(self.awaddr, addr)
        ctx.set(self.awvalid, 1)
        ctx.set(self.wdata, data & 0xFFFF_FFFF)
        ctx.set(self.wstrb, strb)
        ctx.set(self.wvalid, 1)
        ctx.set(self.bready, 1)
        aw_done = w_done = False
        for _ in range(self.timeout):
            _clk, _rst, awready, wready, bvalid, bresp = await ctx.tick().sample(
                self.awready, self.wready, self.bvalid, self.bresp)
            if bvalid and not (aw_done and w_done):
                raise AxiProtocolError(f"AXI-Lite write {addr:#x}: bvalid before the address "
                                       f"and data handshakes")
            if awready and not aw_done:
                aw_done = True
                ctx.set(self.awvalid, 0)
            if wready and not w_done:
                w_done = True
                ctx.set(self.wvalid, 0)
            if bvalid:
                ctx.set(self.bready, 0)
                if bresp:
                    raise AxiProtocolError(f"AXI-Lite write {addr:#x}: response {bresp}")
                return
        raise AxiProtocolError(f"AXI-Lite write {addr:#x}: no response in {self.timeout} cycles")

    async def read(self, ctx: Any, addr: int) -> int:
        """Read one 32-bit register."""
        ctx.set(self.araddr, addr)
        ctx.set(self.arvalid, 1)
        ctx.set(self.rready, 1)
        ar_done = False
        for _ in range(self.timeout):
            _clk, _rst, arready, rvalid, rdata, rresp = await ctx.tick().sample(
                self.arready, self.rvalid, self.rdata, self.rresp)
            if rvalid and not ar_done:
                raise AxiProtocolError(f"AXI-Lite read {addr:#x}: rvalid before the address "
                                       f"handshake")
            if arready and not ar_done:
                ar_done = True
                ctx.set(self.arvalid, 0)
            if rvalid:
                ctx.set(self.rready, 0)
                if rresp:
                    raise AxiProtocolError(f"AXI-Lite read {addr:#x}: response {rresp}")
                return int(rdata)
        raise AxiProtocolError(f"AXI-Lite read {addr:#x}: no response in {self.timeout} cycles")


__all__ = ["axi_memory_testbench", "AxiLiteHost"]
