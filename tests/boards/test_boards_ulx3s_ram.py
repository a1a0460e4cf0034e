"""The ULX3S device memory's (vta.boards.ulx3s.AxiRam) pipelined read path: one beat per cycle
in steady state, data equal to the initial image, and side-port accesses between bursts; the
register slices between it and the core."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator
from vta.boards.ulx3s import AxiRam, RegisterSlice

pytestmark = pytest.mark.sim


def test_read_bursts_stream_one_beat_per_cycle() -> None:
    rng = np.random.default_rng(2)
    image = rng.integers(0, 256, 2048, dtype=np.uint8).tobytes()
    ram = AxiRam(bus_width=64, ram_kib=2, init=image)
    beats: list[tuple[int, int, int]] = []  # (cycle, data, last)

    async def bench(ctx) -> None:
        ctx.set(ram.rready, 1)
        cycle = 0
        for start, n in ((0, 16), (128, 16), (512, 7)):
            before = len(beats)
            ctx.set(ram.araddr, start)
            ctx.set(ram.arlen, n - 1)
            ctx.set(ram.arvalid, 1)
            while True:
                _, _, ready, valid, data, last = await ctx.tick().sample(
                    ram.arready, ram.rvalid, ram.rdata, ram.rlast)
                cycle += 1
                if valid:
                    beats.append((cycle, data, last))
                if ready:
                    break
            ctx.set(ram.arvalid, 0)
            while not (len(beats) > before and beats[-1][2]):  # until this burst's last beat
                _, _, valid, data, last = await ctx.tick().sample(
                    ram.rvalid, ram.rdata, ram.rlast)
                cycle += 1
                if valid:
                    beats.append((cycle, data, last))

    sim = Simulator(ram)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    words = np.frombuffer(image, "<u8")
    want = [int(w) for s, n in ((0, 16), (128, 16), (512, 7)) for w in words[s // 8:s // 8 + n]]
    assert [d for _, d, _ in beats] == want
    assert [last for _, _, last in beats] == ([0] * 15 + [1]) * 2 + [0] * 6 + [1]
    # within a burst, one beat per cycle
    for lo, hi in ((0, 16), (16, 32), (32, 39)):
        cycles = [c for c, _, _ in beats[lo:hi]]
        assert cycles == list(range(cycles[0], cycles[0] + hi - lo))


def test_side_port_between_bursts_sees_burst_writes() -> None:
    ram = AxiRam(bus_width=64, ram_kib=1)

    async def side(ctx, addr: int, value: int | None) -> int:
        ctx.set(ram.side_addr, addr)
        ctx.set(ram.side_wdata, value or 0)
        ctx.set(ram.side_we, value is not None)
        ctx.set(ram.side_re, value is None)
        await ctx.tick().until(ram.side_done)
        data = ctx.get(ram.side_rdata)
        ctx.set(ram.side_we, 0)
        ctx.set(ram.side_re, 0)
        await ctx.tick()
        return data

    async def bench(ctx) -> None:
        await side(ctx, 0x44, 0xCAFEF00D)
        # a two-beat write burst, then its response
        ctx.set(ram.awaddr, 0x40)
        ctx.set(ram.awlen, 1)
        ctx.set(ram.awvalid, 1)
        await ctx.tick().until(ram.awready)
        ctx.set(ram.awvalid, 0)
        for k, (word, strb) in enumerate(((0x1111_2222_3333_4444, 0x0F),
                                          (0x5555_6666_7777_8888, 0xFF))):
            ctx.set(ram.wdata, word)
            ctx.set(ram.wstrb, strb)
            ctx.set(ram.wlast, k == 1)
            ctx.set(ram.wvalid, 1)
            await ctx.tick().until(ram.wready)
        ctx.set(ram.wvalid, 0)
        ctx.set(ram.bready, 1)
        await ctx.tick().until(ram.bvalid)
        ctx.set(ram.bready, 0)
        # the response comes only after the data is in the RAM: the side port reads it
        assert await side(ctx, 0x40, None) == 0x3333_4444
        assert await side(ctx, 0x44, None) == 0xCAFEF00D  # upper lane not strobed
        assert await side(ctx, 0x48, None) == 0x7777_8888
        assert await side(ctx, 0x4C, None) == 0x5555_6666

    sim = Simulator(ram)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_side_request_racing_a_read_burst() -> None:
    """A side read raised in the cycle a read burst is offered: the burst (accepted first)
    streams the right data, the side access waits for it and reads the right word; a burst
    offered while a side access is pending waits for it."""
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, 1024, dtype=np.uint8).tobytes()
    words = np.frombuffer(image, "<u8")
    ram = AxiRam(bus_width=64, ram_kib=1, init=image)
    got: dict[str, list[int]] = {"beats": [], "side": []}

    async def bench(ctx) -> None:
        ctx.set(ram.rready, 1)
        for first in ("burst", "side"):
            ctx.set(ram.side_addr, 0x84)
            ctx.set(ram.side_re, 1)
            if first == "side":  # the side request is one cycle ahead of the burst
                await ctx.tick()
            ctx.set(ram.araddr, 0x100)
            ctx.set(ram.arlen, 3)
            ctx.set(ram.arvalid, 1)
            accepted = side_done = False
            beats = 0
            while not (side_done and beats == 4):
                _, _, arready, rvalid, rdata, done, sdata = await ctx.tick().sample(
                    ram.arready, ram.rvalid, ram.rdata, ram.side_done, ram.side_rdata)
                if arready and not accepted:
                    accepted = True
                    ctx.set(ram.arvalid, 0)
                    # the burst goes first only when it was offered first
                    assert (first == "burst") == (not side_done)
                if rvalid:
                    got["beats"].append(rdata)
                    beats += 1
                if done and not side_done:
                    side_done = True
                    got["side"].append(sdata)
                    ctx.set(ram.side_re, 0)
            await ctx.tick()

    sim = Simulator(ram)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    want = [int(w) for w in words[0x100 // 8:0x100 // 8 + 4]]
    assert got["beats"] == want * 2
    assert got["side"] == [int(words[0x80 // 8]) >> 32] * 2


@pytest.mark.unit
def test_zero_memory_init_blocks_are_dropped_and_others_kept() -> None:
    """The board top's Verilog leaves out initial blocks that only zero a memory (the block
    RAMs' power-up state) and keeps any block that sets a nonzero word."""
    from vta.boards.openflow import _drop_zero_memory_init

    zero = "  initial begin\n    mem0[0] = 2'h0;\n    mem0[1] = 2'h0;\n  end\n"
    data = "  initial begin\n    mem1[0] = 8'h00;\n    mem1[1] = 8'h1f;\n  end\n"
    text = "module m;\n  reg [1:0] mem0 [1:0];\n" + zero + "  reg [7:0] mem1 [1:0];\n" + data
    out = _drop_zero_memory_init(text)
    assert "mem0[0] =" not in out and "mem1[1] = 8'h1f;" in out and "mem1[0] = 8'h00;" in out


@pytest.mark.parametrize("seed", [0, 1])
def test_register_slice_passes_every_transfer_in_order(seed: int) -> None:
    """Random valid on the input and random ready on the output: the output carries exactly
    the accepted inputs, in order; with ready held high it moves one per cycle."""
    rng = np.random.default_rng(seed)
    rs = RegisterSlice(16)
    sent: list[int] = []
    got: list[int] = []
    steady: list[int] = []  # cycles of the output transfers while ready stays high

    async def bench(ctx) -> None:
        value = int(rng.integers(1 << 16))
        for cycle in range(600):
            free = cycle >= 500  # the last 100 cycles: input always valid, output always ready
            valid = free or bool(rng.random() < 0.7)
            ready = free or bool(rng.random() < 0.6)
            ctx.set(rs.i_valid, valid)
            ctx.set(rs.i_data, value)
            ctx.set(rs.o_ready, ready)
            i_ready, o_valid, o_data = ctx.get(rs.i_ready), ctx.get(rs.o_valid), ctx.get(rs.o_data)
            if valid and i_ready:
                sent.append(value)
                value = int(rng.integers(1 << 16))
            if o_valid and ready:
                got.append(o_data)
                if free:
                    steady.append(cycle)
            await ctx.tick()

    sim = Simulator(rs)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == sent[:len(got)] and len(sent) - len(got) <= 2
    assert len(got) > 300
    assert steady[5:] == list(range(steady[5], steady[5] + len(steady) - 5))
