"""The burst splitter (vta.hw.axi.BurstSplitter) under random back-pressure, against the bursts
computed in Python from the transfer's definition, and its steady rate (one burst per cycle
within a row)."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator
from vta.hw.axi import MAX_BURST, BurstSplitter
from vta.hw.testbench import split_bursts, stream_put

pytestmark = pytest.mark.sim


def expected_bursts(cmds, elem: int, bus: int) -> list[tuple[int, int]]:
    """(byte address, beats) of every burst: each row's bus words, cut at 16-beat blocks."""
    out = []
    for base, ys, xs, stride in cmds:
        if not (ys and xs):
            continue
        for y in range(ys):
            start = (base + y * stride) * elem // bus
            end = -(-((base + y * stride + xs) * elem) // bus)  # one past the last beat
            a = start
            while a < end:
                nxt = min((a // MAX_BURST + 1) * MAX_BURST, end)
                out.append((a * bus, nxt - a))
                a = nxt
    return out


@pytest.mark.parametrize("elem,bus", [(4, 8), (8, 8), (64, 8), (32, 16), (256, 16), (512, 8),
                                      (4, 16)])
def test_bursts_under_backpressure(elem: int, bus: int) -> None:
    dut = BurstSplitter(elem_bytes=elem, bus_bytes=bus)
    rng = random.Random(elem * 31 + bus)
    cmds = [(rng.randrange(0, 1 << 20), rng.randint(0, 4), rng.randint(0, 70),
             rng.randint(0, 200)) for _ in range(14)]
    cmds.append((0xFFFF_FFF0 // elem, 2, 9, 3))  # high addresses
    got: list[tuple[int, int]] = []

    async def bench(ctx) -> None:
        for cmd in cmds:
            got.extend(await split_bursts(ctx, dut, cmd, lambda: int(rng.random() < 0.5)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    want = [((a % (1 << 32)), n) for a, n in expected_bursts(cmds, elem, bus)]
    assert got == want


def test_one_burst_per_cycle_within_a_row() -> None:
    """A row of 200 16-byte elements on a 64-bit bus is 400 beats = 25 bursts, handed out in 25
    consecutive cycles when the consumer is always ready."""
    dut = BurstSplitter(elem_bytes=16, bus_bytes=8)
    valid_cycles: list[int] = []

    async def bench(ctx) -> None:
        ctx.set(dut.req.ready, 1)
        await stream_put(ctx, dut.cmd, {"dram_base": 64, "y_size": 1, "x_size": 200,
                                        "x_stride": 0})
        for cycle in range(60):
            _, _, valid = await ctx.tick().sample(dut.req.valid)
            if valid:
                valid_cycles.append(cycle)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(valid_cycles) == 25
    assert valid_cycles == list(range(valid_cycles[0], valid_cycles[0] + 25))
