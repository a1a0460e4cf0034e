"""The host register block (vta.hw.host.HostRegisters) on its own: every register reads back
the value fed to it (or written to it), addresses outside the map read 0, reads survive a
master that is slow to take them, and a launch write gives exactly one ``launch`` pulse (none
while running)."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator
from vta.hw.core import READONLY_REGS
from vta.hw.host import HostRegisters
from vta.hw.regs import REGISTER_MAP

pytestmark = pytest.mark.sim


async def _read(ctx, bus, addr: int, rng: random.Random) -> tuple[int, int]:
    """One AXI4-Lite read with a random ``rready`` delay; returns (data, cycles to rvalid)."""
    ctx.set(bus.araddr, addr)
    ctx.set(bus.arvalid, 1)
    await ctx.tick().until(bus.arready)
    ctx.set(bus.arvalid, 0)
    waited = 0
    while not ctx.get(bus.rvalid):
        await ctx.tick()
        waited += 1
    for _ in range(rng.choice((0, 0, 1, 3))):  # rvalid must hold while rready is low
        await ctx.tick()
        assert ctx.get(bus.rvalid)
    data = ctx.get(bus.rdata)
    ctx.set(bus.rready, 1)
    await ctx.tick()
    ctx.set(bus.rready, 0)
    return data, waited


async def _write(ctx, bus, addr: int, value: int, strb: int = 0xF) -> None:
    ctx.set(bus.awaddr, addr)
    ctx.set(bus.wdata, value)
    ctx.set(bus.wstrb, strb)
    ctx.set(bus.awvalid, 1)
    ctx.set(bus.wvalid, 1)
    await ctx.tick().until(bus.awready)
    ctx.set(bus.awvalid, 0)
    ctx.set(bus.wvalid, 0)
    ctx.set(bus.bready, 1)
    await ctx.tick().until(bus.bvalid)
    ctx.set(bus.bready, 0)


def test_every_register_reads_its_source_and_unknown_addresses_read_zero() -> None:
    dut = HostRegisters(READONLY_REGS)
    rng = random.Random(3)
    values = {name: rng.getrandbits(32) for name in READONLY_REGS}
    bus = dut.bus

    async def bench(ctx) -> None:
        for name, v in values.items():
            ctx.set(getattr(dut, f"ro_{name}"), v)
        ctx.set(dut.running, 1)
        ctx.set(dut.finished, 0)
        await _write(ctx, bus, REGISTER_MAP["insn_addr"], 0x1234_5670)
        await _write(ctx, bus, REGISTER_MAP["insn_count"], 0xFFFF_FFFF)
        await _write(ctx, bus, REGISTER_MAP["insn_count"], 0x0000_AB00, strb=0b0010)
        expect = dict(values, control=1, insn_addr=0x1234_5670, insn_count=0xFFFF_ABFF)
        order = list(REGISTER_MAP.items())
        rng.shuffle(order)
        for name, off in order:
            got, _ = await _read(ctx, bus, off, rng)
            assert got == expect[name], name
        for off in (0x88, 0x100, 0xFFFC, 0x4000):
            got, _ = await _read(ctx, bus, off, rng)
            assert got == 0, hex(off)
        # reads see the value of the source when they are issued, not an older one
        ctx.set(dut.ro_cycles, 77)
        got, _ = await _read(ctx, bus, REGISTER_MAP["cycles"], rng)
        assert got == 77

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_launch_pulses_once_and_not_while_running() -> None:
    dut = HostRegisters(READONLY_REGS)
    bus = dut.bus
    pulses: list[int] = []

    async def monitor(ctx) -> None:
        cycle = 0
        async for _, _, launch in ctx.tick().sample(dut.launch):
            cycle += 1
            if launch:
                pulses.append(cycle)

    async def bench(ctx) -> None:
        ctx.set(dut.running, 0)
        await _write(ctx, bus, REGISTER_MAP["control"], 1)
        await ctx.tick().repeat(4)
        assert len(pulses) == 1
        ctx.set(dut.running, 1)  # the core runs: a second launch is ignored
        await _write(ctx, bus, REGISTER_MAP["control"], 1)
        await ctx.tick().repeat(4)
        assert len(pulses) == 1
        ctx.set(dut.running, 0)
        await _write(ctx, bus, REGISTER_MAP["control"], 2)  # bit 0 clear: no launch
        await _write(ctx, bus, REGISTER_MAP["control"], 1, strb=0b1110)  # byte 0 not written
        await ctx.tick().repeat(4)
        assert len(pulses) == 1
        await _write(ctx, bus, REGISTER_MAP["control"], 1)
        await ctx.tick().repeat(4)
        assert len(pulses) == 2
        ctx.set(dut.error, 1)  # an AXI error stopped the core: launch is ignored until reset
        await _write(ctx, bus, REGISTER_MAP["control"], 1)
        await ctx.tick().repeat(4)
        assert len(pulses) == 2

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(monitor, background=True)
    sim.add_testbench(bench)
    sim.run()
