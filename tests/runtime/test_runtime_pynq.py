"""The PYNQ device on a register-level board model: exact register sequence, cache maintenance,
configuration probe, timeout."""

from __future__ import annotations

import numpy as np
import pytest
import vta.runtime as rt
from vta.hw.regs import CORE_ID, REGISTER_MAP
from vta.isa import Config, FinishInsn, MemInsn, decode_program
from vta.runtime.pynq import PynqDriver, hw_config_word
from vta.runtime.regmodel import SimulatedBoard

pytestmark = pytest.mark.sim

CTRL, CYCLES, COUNT, ADDR, ID, HWCFG = (REGISTER_MAP[n] for n in (
    "control", "cycles", "insn_count", "insn_addr", "id", "hw_config"))


def _open(cfg: Config, **board_opts) -> tuple[rt.Device, SimulatedBoard]:
    board = SimulatedBoard(cfg, mem_size=8 << 20, **board_opts)
    return rt.open("pynq", cfg, platform=board, arena_size=1 << 20), board


def test_exact_register_sequence(small_cfg: Config, matmul_case) -> None:
    dev, board = _open(small_cfg, busy_polls=3)
    log = board.mmio.log
    assert log == [("r", ID, CORE_ID), ("r", HWCFG, hw_config_word(small_cfg))]  # the probe
    case = matmul_case(small_cfg, 3, 2, 2, shift=3, seed=11)
    A, W, C = case.buffers(dev)
    cq = dev.command_queue()
    case.emit(cq, A, W, C)
    stats = cq.synchronize()
    np.testing.assert_array_equal(case.result(C), case.reference())
    run = log[2:]
    insn_addr = dev._insn.physical_address
    count = run[1][2]
    assert run == [("w", ADDR, insn_addr), ("w", COUNT, count), ("w", CTRL, 1),
                   ("r", CTRL, 1), ("r", CTRL, 1), ("r", CTRL, 2), ("r", CYCLES, 0)]
    # the instruction count written is the program's, which ends with FINISH at that address
    program = board.memory[insn_addr:insn_addr + 16 * count].tobytes()
    assert isinstance(decode_program(program, small_cfg)[-1], FinishInsn)
    assert count == stats.insn_count
    assert insn_addr % 16 == 0 and board.mmio.launches == 1


def test_a_core_of_another_bus_width_is_refused(small_cfg: Config) -> None:
    """hw_config bits [27:20] hold the core's bus width in bytes (as hw.core sets them): a
    128-bit bitstream opened with the 64-bit configuration is a one-line DeviceError."""
    from vta.isa.errors import VTAError

    wide = small_cfg.with_bus_width(128)
    assert hw_config_word(wide) - hw_config_word(small_cfg) == (16 - 8) << 20
    board = SimulatedBoard(wide, mem_size=8 << 20)
    with pytest.raises(VTAError, match="built for another configuration") as e:
        rt.open("pynq", small_cfg, platform=board, arena_size=1 << 20)
    assert "\n" not in str(e.value)
    dev = rt.open("pynq", wide, platform=board, arena_size=1 << 20)
    dev.close()


def test_arena_is_flushed_before_and_invalidated_after(small_cfg: Config, matmul_case) -> None:
    dev, board = _open(small_cfg)
    case = matmul_case(small_cfg, 2, 2, 2, seed=12)
    A, W, C = case.buffers(dev)
    mem = dev._mem
    before = (mem.flushes, mem.invalidates)
    cq = dev.command_queue()
    case.emit(cq, A, W, C)
    cq.synchronize()
    assert (mem.flushes, mem.invalidates) == (before[0] + 1, before[1] + 1)
    np.testing.assert_array_equal(case.result(C), case.reference())
    # the model is not coherent: a driver that skipped the flush would compute on stale inputs
    dev2, _ = _open(small_cfg)
    A2, W2, C2 = case.buffers(dev2)
    dev2._mem.flush = lambda: None
    cq2 = dev2.command_queue()
    case.emit(cq2, A2, W2, C2)
    cq2.synchronize()
    assert not np.array_equal(case.result(C2), case.reference())


def test_micro_kernels_stay_resident_across_launches(small_cfg: Config, matmul_case) -> None:
    dev, board = _open(small_cfg)
    assert dev.keeps_sram
    case = matmul_case(small_cfg, 2, 2, 2, seed=13)
    A, W, C = case.buffers(dev)
    cq = dev.command_queue()
    for _ in range(2):
        C.copyfrom(np.zeros(C.nbytes, np.uint8))
        case.emit(cq, A, W, C)
        cq.synchronize()
        np.testing.assert_array_equal(case.result(C), case.reference())
    assert cq.stats.uop_hits > 0 and board.mmio.launches == 2


def test_probe_rejects_other_cores_and_configs(small_cfg: Config, cfg: Config) -> None:
    board = SimulatedBoard(cfg, mem_size=4 << 20)
    with pytest.raises(rt.DeviceError, match="built for another configuration"):
        rt.open("pynq", small_cfg, platform=board, arena_size=1 << 16)
    board.mmio.values[ID] = 0x12345678
    with pytest.raises(rt.DeviceError, match="id register reads 0x12345678"):
        rt.open("pynq", cfg, platform=board, arena_size=1 << 16)


def test_driver_times_out_with_a_clear_error(small_cfg: Config) -> None:
    board = SimulatedBoard(small_cfg, mem_size=1 << 20, busy_polls=10 ** 9)
    prog = board.allocate(16)
    prog.array[:] = np.frombuffer((3).to_bytes(16, "little"), np.uint8)  # FINISH
    prog.flush()
    drv = PynqDriver(board.mmio, timeout=0.05)
    with pytest.raises(rt.DeviceError, match="did not finish within 0.05 s"):
        drv.run(prog.physical_address, 1)
    with pytest.raises(rt.DeviceError, match="16-byte aligned"):
        drv.run(prog.physical_address + 4, 1)


def test_register_model_enforces_the_protocol(small_cfg: Config) -> None:
    board = SimulatedBoard(small_cfg, mem_size=1 << 20)
    mmio = board.mmio
    with pytest.raises(rt.DeviceError, match="read-only"):
        mmio.write(CYCLES, 1)
    with pytest.raises(rt.DeviceError, match="insn_count = 0"):
        mmio.write(CTRL, 1)
    with pytest.raises(rt.DeviceError, match="unmapped"):
        mmio.read(0x200)


@pytest.mark.slow
def test_register_sequence_on_the_rtl_core(small_cfg: Config, matmul_case) -> None:
    board = SimulatedBoard(small_cfg, mem_size=1 << 16, backend="rtl", busy_polls=1)
    dev = rt.open("pynq", small_cfg, platform=board, arena_size=1 << 14, insn_capacity=256)
    assert not dev.keeps_sram
    case = matmul_case(small_cfg, 2, 2, 2, shift=2, seed=14)
    A, W, C = case.buffers(dev)
    cq = dev.command_queue()
    case.emit(cq, A, W, C)
    stats = cq.synchronize()
    np.testing.assert_array_equal(case.result(C), case.reference())
    assert board.mmio.log[-1][:2] == ("r", CYCLES) and stats.cycles == board.mmio.log[-1][2]
    assert stats.cycles > 0


def test_de10_nano_constants_match_the_board_registry() -> None:
    from vta.boards import get_board
    from vta.runtime.de10nano import ACP_ALIAS, REG_BASE

    b = get_board("de10-nano")
    assert (b.reg_base, b.extra["acp_alias"]) == (REG_BASE, ACP_ALIAS)


def test_de10_nano_without_its_board_is_a_one_line_error(small_cfg: Config) -> None:
    with pytest.raises(rt.DeviceUnavailableError, match="DE10-Nano") as e:
        rt.open("de10-nano", small_cfg, udmabuf="no-such-udmabuf")
    assert "\n" not in str(e.value)


def test_bus_error_names_the_address(small_cfg: Config) -> None:
    """The driver turns control bit 2 into a BusError naming the response, the direction and
    the address latched by the core."""

    class ErrorRegs:
        def __init__(self) -> None:
            self.values = {REGISTER_MAP["control"]: 4,
                           REGISTER_MAP["axi_error"]: 1 | 1 << 1 | 2 << 2,
                           REGISTER_MAP["axi_error_addr"]: 0x1234_5000}

        def read(self, offset: int) -> int:
            return self.values.get(offset, 0)

        def write(self, offset: int, value: int) -> None:
            pass

    with pytest.raises(rt.BusError, match="SLVERR response to a write burst at physical "
                                          "address 0x12345000") as e:
        PynqDriver(ErrorRegs()).run(0x1000, 4)
    assert "\n" not in str(e.value)


def test_unknown_virtual_board_is_a_one_line_error(small_cfg: Config) -> None:
    with pytest.raises(rt.DeviceUnavailableError, match="virtual:nope.*unknown board") as e:
        rt.open("virtual:nope", small_cfg)
    assert "\n" not in str(e.value)
    with pytest.raises(rt.DeviceUnavailableError, match="no platform 'warp'"):
        rt.open("warp:pynq-z1", small_cfg)


def test_ulx3s_protocol_constants_match_the_gateware() -> None:
    from vta.boards import get_board
    from vta.boards import ulx3s as gateware
    from vta.runtime import ulx3s

    assert (gateware.REG_WINDOW, gateware.CMD_WRITE, gateware.CMD_READ) == (
        ulx3s.REG_WINDOW, ulx3s.CMD_WRITE, ulx3s.CMD_READ)
    assert get_board("ulx3s-85f").reg_base == ulx3s.REG_WINDOW


def test_ulx3s_bridge_frames_and_stored_ranges(small_cfg: Config) -> None:
    """The serial frames of a word write/read, and the bytes a program's STOREs write."""
    from vta.isa import encode_program
    from vta.isa.layout import MemType, Opcode
    from vta.runtime.ulx3s import SerialBridge, stored_ranges

    class Line:
        def __init__(self) -> None:
            self.sent, self.replies = b"", [b"\x01", b"\x78\x56\x34\x12"]

        def write(self, data: bytes) -> None:
            self.sent += data

        def read(self, n: int) -> bytes:
            return self.replies.pop(0)[:n]

    line = Line()
    bridge = SerialBridge(line)
    bridge.write_word(0x8000_000C, 0xAABBCCDD)
    assert bridge.read_word(0x100) == 0x12345678
    assert line.sent == bytes([1, 0x0C, 0, 0, 0x80, 0xDD, 0xCC, 0xBB, 0xAA, 2, 0, 1, 0, 0])
    silent = Line()
    silent.replies = [b""]
    with pytest.raises(rt.DeviceError, match="is the ULX3S bitstream loaded"):
        SerialBridge(silent).write_word(0, 0)
    eb = small_cfg.out_elem_bytes
    store = MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, dram_base=100, y_size=3,
                    x_size=2, x_stride=5)
    program = encode_program([store, FinishInsn()], small_cfg)
    assert stored_ranges(program, small_cfg) == [(100 * eb, (100 + 2 * 5 + 2) * eb)]
