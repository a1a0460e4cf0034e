"""The AXI4 memory model and the AXI4-Lite host driver, against small AXI components.

The model is checked cycle by cycle from Python (latency, bursts, strobes, bandwidth, protocol
and bounds errors, never dropping a valid) and in the Amaranth simulator behind a tiny burst-copy
DMA master under random backpressure; the host driver against a tiny AXI4-Lite register file.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator
from vta.hw.axi_model import (
    AXI_MASTER_OUTPUTS,
    AxiAccessError,
    AxiMemory,
    AxiProtocolError,
)
from vta.hw.axi_sim import AxiLiteHost, axi_memory_testbench
from vta.isa.errors import ProgramError


def idle() -> dict[str, int]:
    return dict.fromkeys(AXI_MASTER_OUTPUTS, 0)


def ar(addr: int, beats: int, size_log: int = 3) -> dict[str, int]:
    s = idle()
    s.update(araddr=addr, arlen=beats - 1, arsize=size_log, arburst=1, arvalid=1)
    return s


def read_burst(m: AxiMemory, addr: int, beats: int, *, rready=lambda: True) -> list[tuple]:
    """Issue one read burst from Python; return (cycle, data, rlast) of each beat."""
    while not m.out["arready"]:
        m.step(idle())
    m.step(ar(addr, beats))
    got = []
    for _ in range(1000):
        s = idle()
        s["rready"] = int(rready())
        was = dict(m.out)
        m.step(s)
        if was["rvalid"] and s["rready"]:
            got.append((m.cycle - 1, was["rdata"], was["rlast"]))
            if was["rlast"]:
                break
    return got


@pytest.mark.unit
def test_read_latency_data_and_rlast():
    mem = np.arange(256, dtype=np.uint8)
    m = AxiMemory(mem, bus_bytes=8, latency=5)
    m.step(idle())  # arready rises
    issue = m.cycle
    beats = read_burst(m, 16, 4)
    assert [b[1] for b in beats] == [int.from_bytes(bytes(range(16 + 8 * k, 24 + 8 * k)), "little")
                                     for k in range(4)]
    assert [b[2] for b in beats] == [0, 0, 0, 1]
    # AR accepted at the edge ending cycle `issue`; first beat valid `latency` cycles later
    assert beats[0][0] == issue + 5
    assert [b[0] for b in beats] == list(range(beats[0][0], beats[0][0] + 4))


@pytest.mark.unit
def test_rvalid_held_until_rready_under_random_stalls():
    rng = random.Random(1)
    mem = np.frombuffer(bytes(rng.randrange(256) for _ in range(1024)), dtype=np.uint8).copy()
    m = AxiMemory(mem, bus_bytes=8, latency=2, stall=0.5, seed=3)
    while not m.out["arready"]:
        m.step(idle())
    m.step(ar(64, 16))
    got = []
    prev = None
    for _ in range(500):
        s = idle()
        s["rready"] = int(rng.random() < 0.5)
        out = dict(m.out)
        if prev is not None and prev[0]["rvalid"] and not prev[1]:
            # a valid not taken must stay, with the same data
            assert out["rvalid"] and out["rdata"] == prev[0]["rdata"]
        m.step(s)
        if out["rvalid"] and s["rready"]:
            got.append(out["rdata"])
        prev = (out, s["rready"])
        if len(got) == 16:
            break
    expect = [int.from_bytes(mem[64 + 8 * k:72 + 8 * k].tobytes(), "little") for k in range(16)]
    assert got == expect


@pytest.mark.unit
def test_write_burst_with_strobes_and_response():
    mem = np.zeros(128, dtype=np.uint8)
    m = AxiMemory(mem, bus_bytes=8, latency=1, write_latency=3)
    s = idle()
    s.update(awaddr=32, awlen=1, awsize=3, awburst=1, awvalid=1)
    while not m.out["awready"]:
        m.step(idle())
    m.step(s)
    words = [(0x1122334455667788, 0xFF), (0xAABBCCDDEEFF0011, 0b00100101)]
    k = 0
    while k < 2:
        s = idle()
        s.update(wdata=words[k][0], wstrb=words[k][1], wvalid=1, wlast=int(k == 1))
        took = m.out["wready"]
        m.step(s)
        k += took
    last_beat_cycle = m.cycle - 1
    while not m.out["bvalid"]:
        m.step(idle())
    assert m.cycle == last_beat_cycle + 3  # response `write_latency` cycles after the last beat
    s = idle()
    s["bready"] = 1
    m.step(s)
    assert not m.out["bvalid"]
    expect = np.zeros(128, dtype=np.uint8)
    expect[32:40] = np.frombuffer((0x1122334455667788).to_bytes(8, "little"), dtype=np.uint8)
    second = (0xAABBCCDDEEFF0011).to_bytes(8, "little")
    for i in (0, 2, 5):
        expect[40 + i] = second[i]
    assert (mem == expect).all()
    assert m.stats.bytes_written == 8 + 3


@pytest.mark.unit
def test_bandwidth_limits_beat_rate():
    mem = np.zeros(4096, dtype=np.uint8)
    m = AxiMemory(mem, bus_bytes=16, latency=1, bandwidth=4.0)  # one 16-byte beat per 4 cycles
    beats = read_burst(m, 0, 8)
    cycles = [b[0] for b in beats]
    assert len(beats) == 8
    assert all(b - a == 4 for a, b in zip(cycles, cycles[1:]))


@pytest.mark.unit
@pytest.mark.parametrize(("update", "error", "text"), [
    ({"arburst": 0}, AxiProtocolError, "burst type"),
    ({"arsize": 4}, AxiProtocolError, "exceeds"),
    ({"araddr": 4096 - 16, "arlen": 3}, AxiProtocolError, "4 KiB"),
    ({"araddr": 8192, "arlen": 0}, AxiAccessError, "beyond"),
])
def test_read_protocol_and_bounds_errors(update, error, text):
    m = AxiMemory(np.zeros(8192, dtype=np.uint8), bus_bytes=8)
    m.step(idle())
    s = ar(0, 1)
    s.update(update)
    with pytest.raises(error, match=text):
        m.step(s)


@pytest.mark.unit
def test_write_errors_wlast_and_write_limit():
    m = AxiMemory(np.zeros(256, dtype=np.uint8), bus_bytes=8, write_limit=100)
    m.step(idle())
    s = idle()
    s.update(awaddr=96, awlen=1, awsize=3, awburst=1, awvalid=1)
    m.step(s)
    m.step(idle())
    s = idle()
    s.update(wdata=1, wstrb=0x0F, wvalid=1, wlast=1)  # wlast on beat 1 of 2
    with pytest.raises(AxiProtocolError, match="wlast"):
        m.step(s)
    m.reset()
    m.step(idle())
    s = idle()
    s.update(awaddr=96, awlen=0, awsize=3, awburst=1, awvalid=1)
    m.step(s)
    m.step(idle())
    ok = idle()
    ok.update(wdata=0xFFFFFFFF, wstrb=0x0F, wvalid=1, wlast=1)  # bytes 96..99: inside
    m.step(ok)
    assert m.mem[96:100].tolist() == [255] * 4
    s = idle()
    s.update(awaddr=96, awlen=0, awsize=3, awburst=1, awvalid=1)
    m.step(s)
    m.step(idle())
    bad = idle()
    bad.update(wdata=0, wstrb=0x10, wvalid=1, wlast=1)  # byte 100: beyond the user image
    with pytest.raises(AxiAccessError, match="beyond") as e:
        m.step(bad)
    assert isinstance(e.value, ProgramError)


# ---------------------------------------------------------------------- amaranth components
class BurstCopy(wiring.Component):
    """A tiny DMA master: read ``beats`` words from ``src`` in one burst, write them to ``dst``
    with strobe ``strb`` on every beat. ``done`` rises when the write response arrived."""

    def __init__(self, bus_bytes: int) -> None:
        w = bus_bytes * 8
        self.bus_bytes = bus_bytes
        super().__init__({
            "start": In(1), "src": In(32), "dst": In(32), "beats": In(5),
            "strb": In(bus_bytes), "done": Out(1),
            "m_axi_araddr": Out(32), "m_axi_arlen": Out(8), "m_axi_arsize": Out(3),
            "m_axi_arburst": Out(2), "m_axi_arvalid": Out(1), "m_axi_arready": In(1),
            "m_axi_rdata": In(w), "m_axi_rresp": In(2), "m_axi_rlast": In(1),
            "m_axi_rvalid": In(1), "m_axi_rready": Out(1),
            "m_axi_awaddr": Out(32), "m_axi_awlen": Out(8), "m_axi_awsize": Out(3),
            "m_axi_awburst": Out(2), "m_axi_awvalid": Out(1), "m_axi_awready": In(1),
            "m_axi_wdata": Out(w), "m_axi_wstrb": Out(bus_bytes), "m_axi_wlast": Out(1),
            "m_axi_wvalid": Out(1), "m_axi_wready": In(1),
            "m_axi_bresp": In(2), "m_axi_bvalid": In(1), "m_axi_bready": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        buf = Array(Signal(self.bus_bytes * 8) for _ in range(16))
        cnt = Signal(5)
        size = self.bus_bytes.bit_length() - 1
        m.d.comb += [
            self.m_axi_araddr.eq(self.src), self.m_axi_arlen.eq(self.beats - 1),
            self.m_axi_arsize.eq(size), self.m_axi_arburst.eq(1),
            self.m_axi_awaddr.eq(self.dst), self.m_axi_awlen.eq(self.beats - 1),
            self.m_axi_awsize.eq(size), self.m_axi_awburst.eq(1),
            self.m_axi_wdata.eq(buf[cnt[:4]]), self.m_axi_wstrb.eq(self.strb),
            self.m_axi_wlast.eq(cnt == self.beats - 1),
        ]
        with m.FSM():
            with m.State("IDLE"), m.If(self.start):
                m.d.sync += [self.done.eq(0), cnt.eq(0)]
                m.next = "AR"
            with m.State("AR"):
                m.d.comb += self.m_axi_arvalid.eq(1)
                with m.If(self.m_axi_arready):
                    m.next = "R"
            with m.State("R"):
                m.d.comb += self.m_axi_rready.eq(1)
                with m.If(self.m_axi_rvalid):
                    m.d.sync += [buf[cnt[:4]].eq(self.m_axi_rdata), cnt.eq(cnt + 1)]
                    with m.If(self.m_axi_rlast):
                        m.d.sync += cnt.eq(0)
                        m.next = "AW"
            with m.State("AW"):
                m.d.comb += self.m_axi_awvalid.eq(1)
                with m.If(self.m_axi_awready):
                    m.next = "W"
            with m.State("W"):
                m.d.comb += self.m_axi_wvalid.eq(1)
                with m.If(self.m_axi_wready):
                    m.d.sync += cnt.eq(cnt + 1)
                    with m.If(self.m_axi_wlast):
                        m.next = "B"
            with m.State("B"):
                m.d.comb += self.m_axi_bready.eq(1)
                with m.If(self.m_axi_bvalid):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
        return m


@pytest.mark.sim
@pytest.mark.parametrize("bus_bytes", [8, 16])
def test_burst_copy_through_memory_model_with_backpressure(bus_bytes):
    rng = np.random.default_rng(bus_bytes)
    size = 4096
    init = rng.integers(0, 256, size, dtype=np.uint8)
    mem = init.copy()
    model = AxiMemory(mem, bus_bytes=bus_bytes, latency=3, stall=0.3, seed=5)
    dut = BurstCopy(bus_bytes)
    jobs = []
    for _ in range(6):
        beats = int(rng.integers(1, 17))
        src = int(rng.integers(0, 1024 // bus_bytes - 16)) * bus_bytes
        dst = 2048 + int(rng.integers(0, 1024 // bus_bytes - 16)) * bus_bytes
        strb = int(rng.integers(1, 1 << bus_bytes))
        jobs.append((src, dst, beats, strb))

    async def host(ctx):
        for src, dst, beats, strb in jobs:
            ctx.set(dut.src, src)
            ctx.set(dut.dst, dst)
            ctx.set(dut.beats, beats)
            ctx.set(dut.strb, strb)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            await ctx.tick().until(dut.done)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(axi_memory_testbench(dut, model), background=True)
    sim.add_testbench(host)
    sim.run()
    expect = init.copy()
    for src, dst, beats, strb in jobs:
        n = beats * bus_bytes
        lanes = np.array([(strb >> (i % bus_bytes)) & 1 for i in range(n)], dtype=bool)
        chunk = expect[src:src + n].copy()
        expect[dst:dst + n][lanes] = chunk[lanes]
    assert (mem == expect).all()
    assert model.stats.read_bursts == model.stats.write_bursts == len(jobs)
    assert not model.busy


class RegFile(wiring.Component):
    """A tiny AXI4-Lite slave with four 32-bit registers (byte strobes honoured)."""

    def __init__(self) -> None:
        super().__init__({
            "s_axil_awaddr": In(16), "s_axil_awvalid": In(1), "s_axil_awready": Out(1),
            "s_axil_wdata": In(32), "s_axil_wstrb": In(4), "s_axil_wvalid": In(1),
            "s_axil_wready": Out(1), "s_axil_bresp": Out(2), "s_axil_bvalid": Out(1),
            "s_axil_bready": In(1), "s_axil_araddr": In(16), "s_axil_arvalid": In(1),
            "s_axil_arready": Out(1), "s_axil_rdata": Out(32), "s_axil_rresp": Out(2),
            "s_axil_rvalid": Out(1), "s_axil_rready": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        regs = Array(Signal(32, name=f"r{i}") for i in range(4))
        take = Signal()
        m.d.comb += take.eq(self.s_axil_awvalid & self.s_axil_wvalid & ~self.s_axil_bvalid)
        m.d.comb += [self.s_axil_awready.eq(take), self.s_axil_wready.eq(take)]
        with m.If(take):
            sel = regs[self.s_axil_awaddr[2:4]]
            for b in range(4):
                with m.If(self.s_axil_wstrb[b]):
                    m.d.sync += sel.word_select(b, 8).eq(self.s_axil_wdata.word_select(b, 8))
            m.d.sync += self.s_axil_bvalid.eq(1)
        with m.Elif(self.s_axil_bvalid & self.s_axil_bready):
            m.d.sync += self.s_axil_bvalid.eq(0)
        m.d.comb += self.s_axil_arready.eq(~self.s_axil_rvalid)
        with m.If(self.s_axil_arvalid & ~self.s_axil_rvalid):
            m.d.sync += [self.s_axil_rvalid.eq(1),
                         self.s_axil_rdata.eq(regs[self.s_axil_araddr[2:4]])]
        with m.Elif(self.s_axil_rvalid & self.s_axil_rready):
            m.d.sync += self.s_axil_rvalid.eq(0)
        return m


@pytest.mark.sim
def test_axil_host_driver_against_register_file():
    dut = RegFile()
    host = AxiLiteHost(dut)
    values = [0xDEADBEEF, 0x01234567, 0x0, 0xFFFFFFFF]
    got = {}

    async def tb(ctx):
        for i, v in enumerate(values):
            await host.write(ctx, 4 * i, v)
        await host.write(ctx, 4, 0xAB00_00CD, strb=0b1001)
        for i in range(4):
            got[i] = await host.read(ctx, 4 * i)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert got == {0: 0xDEADBEEF, 1: 0xAB2345CD, 2: 0, 3: 0xFFFFFFFF}


@pytest.mark.sim
def test_axil_host_driver_times_out_on_a_dead_slave():
    dut = RegFile()
    host = AxiLiteHost(dut, prefix="s_axil_", timeout=20)

    async def tb(ctx):
        ctx.set(dut.s_axil_bready, 0)
        # a slave that never answers reads: hold rvalid's source off by never taking arvalid
        host.arready = dut.s_axil_awready  # stays 0 without a write: no address handshake
        host.rvalid = dut.s_axil_bvalid
        await host.read(ctx, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    with pytest.raises(AxiProtocolError, match="no response"):
        sim.run()


def aw(addr: int, beats: int, size_log: int = 3) -> dict[str, int]:
    s = idle()
    s.update(awaddr=addr, awlen=beats - 1, awsize=size_log, awburst=1, awvalid=1)
    return s


@pytest.mark.unit
@pytest.mark.parametrize("mode,code", [("slverr", 2), ("decerr", 3)])
def test_out_of_range_read_answers_an_error_response(mode: str, code: int):
    mem = np.arange(256, dtype=np.uint8)
    m = AxiMemory(mem, bus_bytes=8, latency=2, out_of_range=mode)
    m.step(idle())
    beats = []
    for _ in range(100):  # a burst crossing the end: every beat answers the error, no data
        was = dict(m.out)
        s = ar(248, 2) if not beats and was["arready"] and m.stats.read_bursts == 0 else idle()
        s["rready"] = 1
        m.step(s)
        if was["rvalid"]:
            beats.append((was["rdata"], was["rresp"], was["rlast"]))
            if was["rlast"]:
                break
    assert beats == [(0, code, 0), (0, code, 1)]
    assert read_burst(m, 240, 1)[0][1] == int.from_bytes(bytes(range(240, 248)), "little")


@pytest.mark.unit
@pytest.mark.parametrize("mode,code", [("slverr", 2), ("decerr", 3)])
def test_out_of_range_write_answers_an_error_response_and_writes_nothing(mode: str, code: int):
    mem = np.zeros(256, dtype=np.uint8)
    m = AxiMemory(mem, bus_bytes=8, out_of_range=mode, write_limit=128)
    resps = []
    for addr in (120, 128):
        while not m.out["awready"]:
            m.step(idle())
        m.step(aw(addr, 1))
        while not m.out["wready"]:
            m.step(idle())
        s = idle()
        s.update(wdata=0x0102030405060708, wstrb=0xFF, wlast=1, wvalid=1)
        m.step(s)
        for _ in range(20):
            was = dict(m.out)
            s = idle()
            s["bready"] = 1
            m.step(s)
            if was["bvalid"]:
                resps.append(was["bresp"])
                break
    assert resps == [0, code]
    assert bytes(mem[120:128]) == (0x0102030405060708).to_bytes(8, "little")
    assert not mem[128:].any()


@pytest.mark.unit
def test_out_of_range_mode_is_validated():
    with pytest.raises(ValueError, match="out_of_range"):
        AxiMemory(np.zeros(16, np.uint8), bus_bytes=8, out_of_range="okay")
