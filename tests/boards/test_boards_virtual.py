"""Virtual boards: the exact generated board top (vta_top.v + vta_core.v, as written into the
Vivado project) under Verilator, driven by the runtime's own PYNQ driver, runs layers the kit
compiles bit-exact against the functional simulator; a DDR access outside the board's memory
window gets a DECERR, which stops the core and reaches the user as a one-line BusError.

The first build of a board's model takes about a minute (then it is cached): slow.
"""

from __future__ import annotations

import numpy as np
import pytest
import vta.runtime as rt
from vta.boards import get_board
from vta.compiler import topi
from vta.hw.regs import REGISTER_MAP
from vta.isa import Config, FinishInsn, GemmInsn, MemInsn, encode_program
from vta.isa.layout import MemType, Opcode

from ..conftest import require_tool

pytestmark = [pytest.mark.tsim, pytest.mark.slow]


def require_verilator() -> None:
    require_tool("verilator", "g++")


@pytest.fixture(scope="module")
def pynq_z1(small_cfg: Config):
    require_verilator()
    dev = rt.open("virtual:pynq-z1", small_cfg, arena_size=4 << 20)
    yield dev
    dev.close()
    dev.platform.close()


def _conv_case(cfg: Config, channels: int, size: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (1, channels, size, size), dtype=np.int8)
    w = rng.integers(-128, 128, (channels, channels, 3, 3), dtype=np.int8)
    b = rng.integers(-5000, 5000, channels).astype(np.int32)
    return topi.pack_nchw(x, cfg), topi.pack_oihw(w, cfg), topi.pack_bias(b, cfg)


def test_conv_layer_on_the_pynq_z1_top_matches_fsim(pynq_z1, small_cfg: Config) -> None:
    """A 3x3 conv + bias + shift + relu + clip compiled by the kit: the runtime's PYNQ driver
    runs it on the simulated board top; the result equals fsim's and numpy's."""
    xp, wp, bp = _conv_case(small_cfg, 8, 6, seed=3)
    kw = {"padding": (1, 1), "bias": True, "shift": 8, "relu": True, "clip": (0, 127),
          "config": small_cfg}
    knobs = topi.conv2d_knobs(xp.shape, wp.shape, (1, 1), (1, 1), small_cfg)
    on_board = topi.conv2d_packed(xp.shape, wp.shape, knobs=knobs, target=None, **kw)
    module = on_board.build("pynq", device=pynq_z1)
    out = np.zeros(on_board.out_shape, np.int8)
    cycles_before = pynq_z1.platform.cycle
    stats = module(xp, wp, bp, out)

    golden = topi.conv2d_packed(xp.shape, wp.shape, knobs=knobs, target="fsim", **kw)
    ref = np.zeros(golden.out_shape, np.int8)
    golden.module(xp, wp, bp, ref)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(out, topi.conv2d_reference(
        xp, wp, (1, 1), (1, 1), on_board.info["epilogue"], bias=bp))
    assert out.any()
    # the core counted its own cycles; the board ran at least that long
    assert 0 < stats.cycles < pynq_z1.platform.cycle - cycles_before
    assert pynq_z1.platform.error_bursts == 0


def _dense_matches_fsim(dev, small_cfg: Config) -> None:
    rng = np.random.default_rng(5)
    bb, bi, bo = small_cfg.batch, small_cfg.block_in, small_cfg.block_out
    d = rng.integers(-128, 128, (2, 6, bb, bi), dtype=np.int8)
    w = rng.integers(-128, 128, (5, 6, bo, bi), dtype=np.int8)
    op = topi.dense_packed(d.shape, w.shape, shift=5, relu=True, config=small_cfg, target=None)
    out = np.zeros(op.out_shape, np.int8)
    op.build("pynq", device=dev)(d, w, out)
    golden = topi.dense_packed(d.shape, w.shape, shift=5, relu=True, config=small_cfg)
    ref = np.zeros(golden.out_shape, np.int8)
    golden.module(d, w, ref)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(out, topi.dense_reference(d, w, op.info["epilogue"]))


def test_dense_layer_on_the_pynq_z1_top_matches_fsim(pynq_z1, small_cfg: Config) -> None:
    _dense_matches_fsim(pynq_z1, small_cfg)


def test_dense_layer_on_the_ultra96_top_matches_fsim(small_cfg: Config) -> None:
    """The Zynq UltraScale+ top: the 128-bit AXI master (ZCU104 has the same top)."""
    require_verilator()
    cfg = small_cfg.with_bus_width(128)  # the board's memory port
    dev = rt.open("virtual:ultra96-v2", cfg, arena_size=1 << 20)
    try:
        _dense_matches_fsim(dev, cfg)
        assert dev.platform.lib.vb_bus_bytes() == 16
    finally:
        dev.close()
        dev.platform.close()


def _load_program(cfg: Config, elem: int) -> bytes:
    load = MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, dram_base=elem, x_size=1,
                   y_size=1, x_stride=1, push_next_dep=1)
    gemm = GemmInsn(pop_prev_dep=1, uop_bgn=0, uop_end=1, iter_out=0, iter_in=0,
                    push_next_dep=1)
    store = MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, x_size=0, pop_prev_dep=1,
                    push_prev_dep=1)
    return encode_program([load, gemm, store, FinishInsn(pop_next_dep=1)], cfg)


def test_access_outside_the_ddr_window_is_a_bus_error(pynq_z1, small_cfg: Config) -> None:
    """The PYNQ-Z1's HP0 port maps 512 MiB of DDR at 0; a LOAD from 0x20000000 gets DECERR:
    the core stops and the driver names the address, every later run too, until reset."""
    board = pynq_z1.platform
    end = sum(get_board("pynq-z1").extra["ddr_window"])
    insn = board.allocate(4096)
    bad = _load_program(small_cfg, end // small_cfg.inp_elem_bytes)
    insn.array[:len(bad)] = np.frombuffer(bad, np.uint8)
    with pytest.raises(rt.BusError, match=f"DECERR response to a read burst at physical "
                                          f"address 0x{end:08X}"):
        pynq_z1.driver.run(insn.physical_address, len(bad) // 16)
    assert board.interrupt and board.error_bursts >= 1
    good = _load_program(small_cfg, insn.physical_address // small_cfg.inp_elem_bytes)
    insn.array[:len(good)] = np.frombuffer(good, np.uint8)
    with pytest.raises(rt.BusError, match=f"0x{end:08X}"):  # stopped until reset
        pynq_z1.driver.run(insn.physical_address, len(good) // 16)
    board.reset()
    assert pynq_z1.driver.run(insn.physical_address, len(good) // 16) > 0
    mmio = pynq_z1.driver.mmio
    assert (mmio.read(REGISTER_MAP["control"]), mmio.read(REGISTER_MAP["axi_error"])) == (2, 0)


def test_program_outside_the_arena_never_reaches_the_virtual_board(pynq_z1,
                                                                    small_cfg: Config) -> None:
    """Through the device (not the bare driver), a LOAD past the arena is the ProgramError
    fsim gives, before a launch: the board's clock does not move."""
    from vta.isa.errors import ProgramError

    end = pynq_z1.arena.base + pynq_z1.arena.size
    cycle = pynq_z1.platform.cycle
    with pytest.raises(ProgramError, match="outside the device's DRAM arena"):
        pynq_z1.run(_load_program(small_cfg, end // small_cfg.inp_elem_bytes))
    assert pynq_z1.platform.cycle == cycle


def test_de10_nano_top_runs_through_the_acp_window(small_cfg: Config) -> None:
    """The DE10-Nano device hands the core ACP-window addresses (physical + 0x80000000); the
    virtual board maps SDRAM only there, so a dense layer is right only if every address the
    runtime gives the core is translated; a physical address without the alias is DECERR."""
    require_verilator()
    from vta.runtime.de10nano import ACP_ALIAS, De10NanoDevice

    dev = rt.open("virtual:de10-nano", small_cfg, arena_size=1 << 20)
    try:
        assert isinstance(dev, De10NanoDevice) and dev.arena.base >= ACP_ALIAS
        rng = np.random.default_rng(6)
        bb, bi, bo = small_cfg.batch, small_cfg.block_in, small_cfg.block_out
        d = rng.integers(-128, 128, (2, 4, bb, bi), dtype=np.int8)
        w = rng.integers(-128, 128, (3, 4, bo, bi), dtype=np.int8)
        op = topi.dense_packed(d.shape, w.shape, shift=4, config=small_cfg, target=None)
        out = np.zeros(op.out_shape, np.int8)
        op.build("pynq", device=dev)(d, w, out)
        golden = topi.dense_packed(d.shape, w.shape, shift=4, config=small_cfg)
        ref = np.zeros(golden.out_shape, np.int8)
        golden.module(d, w, ref)
        np.testing.assert_array_equal(out, ref)
        board = dev.platform
        insn = board.allocate(4096)
        prog = _load_program(small_cfg, insn.physical_address // small_cfg.inp_elem_bytes)
        insn.array[:len(prog)] = np.frombuffer(prog, np.uint8)
        with pytest.raises(rt.BusError, match=f"0x{insn.physical_address:08X}"):
            dev.driver.run(insn.device_address, len(prog) // 16)
    finally:
        dev.close()
        dev.platform.close()


def test_ulx3s_top_runs_a_layer_over_the_serial_bridge(small_cfg: Config) -> None:
    """The ULX3S top (serial bridge, on-chip device memory, the core) with its USB serial port
    simulated bit by bit at 115200 baud: the runtime's ULX3S device writes the changed words,
    launches through the bridge, reads back what the STOREs wrote; equal to fsim."""
    require_verilator()
    from vta.runtime.ulx3s import Ulx3sDevice

    dev = rt.open("virtual:ulx3s-85f", small_cfg)
    try:
        assert isinstance(dev, Ulx3sDevice)
        rng = np.random.default_rng(7)
        bb, bi, bo = small_cfg.batch, small_cfg.block_in, small_cfg.block_out
        d = rng.integers(-128, 128, (2, 4, bb, bi), dtype=np.int8)
        w = rng.integers(-128, 128, (3, 4, bo, bi), dtype=np.int8)
        op = topi.dense_packed(d.shape, w.shape, shift=5, relu=True, config=small_cfg,
                               target=None)
        out = np.zeros(op.out_shape, np.int8)
        stats = op.build("pynq", device=dev)(d, w, out)
        golden = topi.dense_packed(d.shape, w.shape, shift=5, relu=True, config=small_cfg)
        ref = np.zeros(golden.out_shape, np.int8)
        golden.module(d, w, ref)
        np.testing.assert_array_equal(out, ref)
        assert out.any() and stats.cycles > 0
    finally:
        dev.close()
        dev.platform.close()
