"""The STORE DMA engine (vta.hw.dma.DMAWrite) against a numpy model of the STORE semantics.

The engine reads the OUT buffer, which holds the accumulator lanes truncated to the output width
(low bits, no saturation; compute narrows them as it writes, see test_rtl_outbuf.py); here the
buffer is filled with numpy's truncation of random accumulators. Rows go to
``dram_base + y * x_stride``; elements narrower than the bus are written with byte strobes at any
slot; bursts respect the 16-beat / 4 KiB rules; write data never precedes its address.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator
from vta.hw.decode import insn_layouts
from vta.hw.dma import DMAWrite
from vta.hw.testbench import WriteResponder, stream_put
from vta.isa import Config
from vta.isa.layout import MemType, Opcode

pytestmark = pytest.mark.sim

DRAM_BYTES = 8192


def store_model(dram: np.ndarray, acc: np.ndarray, out_dtype, f: dict[str, int]) -> None:
    """ARCHITECTURE.md STORE semantics: ``acc`` is (depth, lanes) int32, in place on ``dram``."""
    lanes = acc.shape[1]
    elem = lanes * np.dtype(out_dtype).itemsize
    for y in range(f["y_size"]):
        for x in range(f["x_size"]):
            entry = acc[f["sram_base"] + y * f["x_size"] + x].astype(out_dtype)  # low bits
            a = (f["dram_base"] + y * f["x_stride"] + x) * elem
            dram[a:a + elem] = entry.view(np.uint8)


def run_stores(cfg: Config, bus: int, cmds: list[dict[str, int]], *, stall: float = 0.0,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray, WriteResponder]:
    lanes = cfg.batch * cfg.block_out
    depth = cfg.acc_depth
    rng = np.random.default_rng(seed)
    acc = rng.integers(-2**31, 2**31, (depth, lanes), dtype=np.int64).astype(np.int32)
    dram = rng.integers(0, 256, DRAM_BYTES, dtype=np.uint8)
    dut = DMAWrite(mem_layout=insn_layouts(cfg).mem, elem_bytes=cfg.out_elem_bytes,
                   bus_bytes=bus, addr_width=cfg.log_acc_depth)
    m = Module()
    m.submodules.dut = dut
    out = acc.astype(np.int8)  # the OUT buffer: each lane's low 8 bits
    m.submodules.out = mem = Memory(
        shape=lanes * cfg.out_width, depth=depth,
        init=[int.from_bytes(row.tobytes(), "little") for row in out])
    wiring.connect(m, dut.sram, mem.read_port())
    got = dram.copy()
    responder = WriteResponder(got, dut.aw, dut.w, dut.b, bus_bytes=bus, stall=stall, seed=seed)

    async def bench(ctx) -> None:
        for f in cmds:
            fields = {"opcode": Opcode.STORE, "memory_type": MemType.OUT, "pop_prev_dep": 0,
                      "pop_next_dep": 0, "push_prev_dep": 0, "push_next_dep": 0,
                      "y_pad_0": 0, "y_pad_1": 0, "x_pad_0": 0, "x_pad_1": 0, **f}
            await stream_put(ctx, dut.cmd, insn_layouts(cfg).mem.const(fields))
            await ctx.tick()
            for _ in range(20000):
                if not ctx.get(dut.busy):
                    break
                await ctx.tick()
            else:
                raise AssertionError(f"store did not finish: {f}")

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(responder.run, background=True)
    sim.add_testbench(bench)
    sim.run()
    expected = dram.copy()
    for f in cmds:
        store_model(expected, acc, np.int8, f)
    return got, expected, responder


def _cmds(rng: random.Random, cfg: Config, n: int) -> list[dict[str, int]]:
    elem = cfg.out_elem_bytes
    cmds = []
    for _ in range(n):
        y_size, x_size = rng.randint(1, 3), rng.randint(1, 6)
        x_stride = x_size + rng.randint(0, 4)
        sram_base = rng.randint(0, cfg.acc_depth - y_size * x_size)
        max_base = DRAM_BYTES // elem - y_size * x_stride - x_size
        cmds.append({"sram_base": sram_base, "dram_base": rng.randint(0, max_base),
                     "y_size": y_size, "x_size": x_size, "x_stride": x_stride})
    return cmds


@pytest.mark.parametrize("bus", [8, 16])
def test_truncation_and_strides_small(small_cfg: Config, bus: int) -> None:
    """4-byte output elements on an 8/16-byte bus: strobed partial beats at every slot."""
    cmds = _cmds(random.Random(bus), small_cfg, 8)
    got, expected, _ = run_stores(small_cfg, bus, cmds, seed=bus)
    np.testing.assert_array_equal(got, expected)


def test_backpressure_small(small_cfg: Config) -> None:
    cmds = _cmds(random.Random(11), small_cfg, 6)
    got, expected, _ = run_stores(small_cfg, 8, cmds, stall=0.35, seed=5)
    np.testing.assert_array_equal(got, expected)


def test_wide_elements_batch2() -> None:
    """Output elements wider than the bus (2x8 int8 = 16 bytes on 8 bytes) with stalls."""
    cfg = Config(LOG_BATCH=1, LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=10, LOG_INP_BUFF_SIZE=10,
                 LOG_WGT_BUFF_SIZE=12, LOG_ACC_BUFF_SIZE=12)
    assert cfg.out_elem_bytes == 16
    cmds = _cmds(random.Random(2), cfg, 5)
    got, expected, _ = run_stores(cfg, 8, cmds, stall=0.2, seed=9)
    np.testing.assert_array_equal(got, expected)


def test_long_row_and_noop(small_cfg: Config) -> None:
    """A 90-element row crossing 16-beat boundaries, then x_size == 0 (nothing written)."""
    cmds = [{"sram_base": 5, "dram_base": 1001, "y_size": 1, "x_size": 90, "x_stride": 90},
            {"sram_base": 0, "dram_base": 0, "y_size": 3, "x_size": 0, "x_stride": 0}]
    got, expected, responder = run_stores(small_cfg, 8, cmds)
    np.testing.assert_array_equal(got, expected)
    assert max(length for _, length in responder.bursts) == 16
    assert sum(length for _, length in responder.bursts) == responder.beats == 46
