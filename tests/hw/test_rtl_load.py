"""The LOAD DMA engine (vta.hw.dma.DMARead) against a numpy model of the LOAD semantics.

Every padding case (each of y_pad_0, y_pad_1, x_pad_0, x_pad_1 zero or not), elements narrower
than, as wide as and wider than the bus, unaligned rows, strides, x_size == 0 (no-op) and
y_size == 0 with padding, under memory latency and random backpressure.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator
from vta.hw.decode import insn_layouts
from vta.hw.dma import DMARead
from vta.hw.testbench import ReadResponder, stream_put
from vta.isa import Config
from vta.isa.layout import MemType, Opcode

pytestmark = pytest.mark.sim

DRAM_BYTES = 8192


def load_model(sram: np.ndarray, dram: np.ndarray, elem: int, f: dict[str, int]) -> None:
    """ARCHITECTURE.md LOAD semantics on ``sram`` (depth x elem bytes), in place."""
    if f["x_size"] == 0:
        return
    rows = f["y_pad_0"] + f["y_size"] + f["y_pad_1"]
    cols = f["x_pad_0"] + f["x_size"] + f["x_pad_1"]
    idx = f["sram_base"]
    for r in range(rows):
        for c in range(cols):
            y, x = r - f["y_pad_0"], c - f["x_pad_0"]
            if 0 <= y < f["y_size"] and 0 <= x < f["x_size"]:
                a = (f["dram_base"] + y * f["x_stride"] + x) * elem
                sram[idx] = dram[a:a + elem]
            else:
                sram[idx] = 0
            idx += 1


def run_loads(elem: int, bus: int, cmds: list[dict[str, int]], *, depth: int = 128,
              stall: float = 0.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Run ``cmds`` through one DMARead; return (sram from the RTL, sram from the model)."""
    cfg = Config.preset("small")
    mem_layout = insn_layouts(cfg).mem
    rng = np.random.default_rng(seed)
    dram = rng.integers(0, 256, DRAM_BYTES, dtype=np.uint8)
    init = rng.integers(0, 256, (depth, elem), dtype=np.uint8)  # garbage that must be overwritten

    addr_width = (depth - 1).bit_length()
    dut = DMARead(mem_layout=mem_layout, elem_bytes=elem, bus_bytes=bus, addr_width=addr_width)
    m = Module()
    m.submodules.dut = dut
    m.submodules.sram = sram = Memory(
        shape=elem * 8, depth=depth,
        init=[int.from_bytes(row.tobytes(), "little") for row in init])
    gran = bus * 8 if elem > bus else None
    wiring.connect(m, dut.sram, sram.write_port(granularity=gran))

    responder = ReadResponder(dram, dut.req, dut.rdata, bus_bytes=bus, latency=3, stall=stall,
                              seed=seed)
    got = np.zeros((depth, elem), np.uint8)

    async def bench(ctx) -> None:
        for f in cmds:
            fields = {"opcode": Opcode.LOAD, "memory_type": MemType.INP, "pop_prev_dep": 0,
                      "pop_next_dep": 0, "push_prev_dep": 0, "push_next_dep": 0, **f}
            await stream_put(ctx, dut.cmd, mem_layout.const(fields))
            await ctx.tick()
            for _ in range(20000):
                if not ctx.get(dut.busy):
                    break
                await ctx.tick()
            else:
                raise AssertionError(f"DMA did not finish: {f}")
        for i in range(depth):
            got[i] = np.frombuffer(ctx.get(sram.data[i]).to_bytes(elem, "little"), np.uint8)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(responder.run, background=True)
    sim.add_testbench(bench)
    sim.run()

    expected = init.copy()
    for f in cmds:
        load_model(expected, dram, elem, f)
    return got, expected


def _cmd(rng: random.Random, elem: int, depth: int, pads: tuple[int, int, int, int],
         sram_base: int) -> dict[str, int]:
    y0, y1, x0, x1 = pads
    y_size, x_size = rng.randint(1, 3), rng.randint(1, 5)
    x_stride = x_size + rng.randint(0, 3)
    max_base = DRAM_BYTES // elem - (y_size * x_stride + x_size)
    return {"sram_base": sram_base, "dram_base": rng.randint(0, max_base), "y_size": y_size,
            "x_size": x_size, "x_stride": x_stride, "y_pad_0": y0, "y_pad_1": y1,
            "x_pad_0": x0, "x_pad_1": x1}


@pytest.mark.parametrize("elem,bus", [(4, 8), (16, 8), (64, 8), (4, 16), (16, 16)])
def test_every_padding_case(elem: int, bus: int) -> None:
    """All 16 combinations of zero/non-zero pads, one after another into disjoint SRAM."""
    rng = random.Random(elem * 100 + bus)
    cmds, base = [], 0
    depth = 512 if elem <= 16 else 256
    for pads in itertools.product((0, 2), (0, 1), (0, 1), (0, 2)):
        c = _cmd(rng, elem, depth, pads, base)
        rows = c["y_pad_0"] + c["y_size"] + c["y_pad_1"]
        cols = c["x_pad_0"] + c["x_size"] + c["x_pad_1"]
        base += rows * cols
        assert base <= depth
        cmds.append(c)
    got, expected = run_loads(elem, bus, cmds, depth=depth, seed=elem + bus)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("elem,bus", [(4, 8), (16, 8)])
def test_backpressure_and_unaligned_rows(elem: int, bus: int) -> None:
    """Random transfers with a stalling memory; rows start at any element address."""
    rng = random.Random(7)
    cmds = []
    for _ in range(6):
        pads = tuple(rng.randint(0, 2) for _ in range(4))
        cmds.append(_cmd(rng, elem, 128, pads, rng.randint(0, 60)))
    got, expected = run_loads(elem, bus, cmds, stall=0.3, seed=3)
    np.testing.assert_array_equal(got, expected)


def test_long_row_splits_into_bursts() -> None:
    """A row of 70 eight-byte beats starting mid-burst: bursts of <= 16 beats, no 4 KiB cross."""
    cmd = {"sram_base": 0, "dram_base": 1000, "y_size": 2, "x_size": 100, "x_stride": 150,
           "y_pad_0": 0, "y_pad_1": 0, "x_pad_0": 0, "x_pad_1": 0}
    got, expected = run_loads(4, 8, [cmd], depth=256)
    np.testing.assert_array_equal(got, expected)


def test_x_size_zero_is_a_noop_and_y_size_zero_pads() -> None:
    noop = {"sram_base": 3, "dram_base": 5, "y_size": 4, "x_size": 0, "x_stride": 4,
            "y_pad_0": 2, "y_pad_1": 2, "x_pad_0": 1, "x_pad_1": 1}
    pad_only = {"sram_base": 40, "dram_base": 5, "y_size": 0, "x_size": 2, "x_stride": 2,
                "y_pad_0": 1, "y_pad_1": 2, "x_pad_0": 1, "x_pad_1": 0}
    got, expected = run_loads(16, 8, [noop, pad_only])
    np.testing.assert_array_equal(got, expected)
    assert not expected[40:49].any()  # the pad-only load wrote 3 rows of 3 zeros
