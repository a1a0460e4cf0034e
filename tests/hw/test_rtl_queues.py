"""Token queues, the burst splitter and the read arbiter of the memory port."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator
from vta.hw.axi import BurstSplitter, ReadArbiter
from vta.hw.queues import TokenQueue
from vta.hw.testbench import ReadResponder, split_bursts, stream_put

pytestmark = pytest.mark.sim


def test_token_queue_against_counter_model() -> None:
    """Random push/pop/clear against a Python counter; full and empty are honoured."""
    dut = TokenQueue(depth=5)
    rng = random.Random(0)
    log = []

    async def bench(ctx) -> None:
        model = 0
        for _ in range(400):
            push, pop, clear = rng.random() < 0.5, rng.random() < 0.45, rng.random() < 0.02
            ctx.set(dut.producer.push, push)
            ctx.set(dut.consumer.pop, pop)
            ctx.set(dut.clear, clear)
            assert ctx.get(dut.count) == model
            assert ctx.get(dut.producer.ready) == (model < 5)
            assert ctx.get(dut.consumer.avail) == (model > 0)
            if clear:
                model = 0
            else:
                model += int(push and model < 5) - int(pop and model > 0)
            log.append(model)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert max(log) == 5 and min(log) == 0  # both limits were exercised


def test_token_queue_parameters() -> None:
    with pytest.raises(TypeError):
        TokenQueue("4")
    with pytest.raises(ValueError):
        TokenQueue(0)


@pytest.mark.parametrize("elem,bus", [(4, 8), (16, 8), (256, 16), (16, 16)])
def test_burst_splitter_covers_rows_exactly(elem: int, bus: int) -> None:
    """Bursts cover each row's bytes (rounded to the bus), in order, <= 16 beats, aligned,
    never across a 16-beat (hence 4 KiB) boundary."""
    dut = BurstSplitter(elem_bytes=elem, bus_bytes=bus)
    rng = random.Random(elem + bus)
    cmds = [(rng.randrange(0, 5000), rng.randint(0, 3), rng.randint(0, 40), rng.randint(0, 90))
            for _ in range(12)]
    bursts: list[tuple[int, int]] = []

    async def bench(ctx) -> None:
        for cmd in cmds:
            bursts.extend(await split_bursts(ctx, dut, cmd))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    expected = []
    for base, ys, xs, stride in cmds:
        if not (ys and xs):
            continue
        for y in range(ys):
            start = (base + y * stride) * elem
            end = start + xs * elem
            a = start // bus * bus
            while a < end:
                expected.append(a)
                a += bus
    beats = [a + k * bus for a, n in bursts for k in range(n)]
    assert beats == expected
    for a, n in bursts:
        assert a % bus == 0 and 1 <= n <= 16
        assert a // (16 * bus) == (a + n * bus - 1) // (16 * bus)


@pytest.mark.parametrize("gap,max_len,latency", [(0, 16, 3), (30, 3, 1), (20, 2, 0)])
def test_read_arbiter_routes_data_to_owners(gap: int, max_len: int, latency: int) -> None:
    """Three clients request bursts at random; each gets exactly its own beats, in order, even
    with a stalling memory and clients that are slow to take data. With ``gap`` (random idle
    cycles between a client's requests) and short bursts (at most ``max_len`` beats) the owner
    queue runs nearly empty, so a new request often arrives in the cycle the last outstanding
    burst retires."""
    bus = 8
    mem = np.random.default_rng(0).integers(0, 256, 1 << 14, dtype=np.uint8)
    arb = ReadArbiter(clients=3, bus_bytes=bus)
    m = Module()
    m.submodules.arb = arb
    responder = ReadResponder(mem, arb.ar, arb.r, bus_bytes=bus, latency=latency, stall=0.3,
                              seed=1)
    bursts = 6 if gap == 0 else 40
    plans = {k: [(random.Random(k * 7 + j).randrange(0, 1 << 10) * bus,
                  random.Random(k * 7 + j + 100).randint(1, max_len)) for j in range(bursts)]
             for k in range(3)}
    plans = {k: [(a - a % (16 * bus), n) for a, n in v] for k, v in plans.items()}
    received: dict[int, list[int]] = {k: [] for k in range(3)}

    def requester(k: int):
        rng = random.Random(200 + k)

        async def bench(ctx) -> None:
            for addr, n in plans[k]:
                for _ in range(rng.randint(0, gap)):
                    await ctx.tick()
                await stream_put(ctx, arb.req[k], {"addr": addr, "len": n - 1})
        return bench

    def taker(k: int):
        rng = random.Random(50 + k)

        async def bench(ctx) -> None:
            ready = 0
            async for _c, _r, valid, payload in ctx.tick().sample(arb.rdata[k].valid,
                                                                  arb.rdata[k].payload):
                if valid and ready:
                    received[k].append(int(payload.data))
                ready = int(rng.random() < 0.6)
                ctx.set(arb.rdata[k].ready, ready)
        return bench

    async def done(ctx) -> None:
        total = sum(n for v in plans.values() for _, n in v)
        for _ in range(5000):
            await ctx.tick()
            if sum(len(v) for v in received.values()) == total:
                return
        raise AssertionError("not all beats arrived")

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(responder.run, background=True)
    for k in range(3):
        sim.add_testbench(requester(k), background=True)
        sim.add_testbench(taker(k), background=True)
    sim.add_testbench(done)
    sim.run()
    for k in range(3):
        want = [int.from_bytes(mem[a + j * bus:a + (j + 1) * bus].tobytes(), "little")
                for a, n in plans[k] for j in range(n)]
        assert received[k] == want
