"""Virtual boards: a board's generated top Verilog under Verilator, behind the PYNQ driver.

:class:`VirtualBoard` builds the exact ``vta_top.v`` + ``vta_core.v`` that
:func:`vta.boards.project.project_files` writes for a board (the files that go into the
bitstream) with a C++ harness (``virtual_board.cpp``) that plays the processor side: the
register window over the top's AXI4-Lite slave, DDR at the board's documented window of the
VTA master's address space (addresses outside it answer DECERR, as the interconnect does), the
processor's active-low reset. It has the interface of :class:`vta.runtime.pynq.PynqPlatform`
(``mmio`` with ``read``/``write``, ``allocate`` of physically contiguous buffers), so the
runtime's own board driver runs programs on it::

    dev = vta.runtime.open("virtual:pynq-z1", "small")      # PynqDevice on the virtual board

Each read of the control register first lets the board run ``poll_cycles`` clock cycles (the
time a CPU's polling loop takes); every other register access takes the cycles of its AXI4-Lite
transaction. Buffers are carved from the DDR model bump-pointer style; the model is coherent,
so ``flush``/``invalidate`` only count calls.

Boards: PYNQ-Z1, Ultra96-V2, ZCU104 (the PYNQ device; DDR at the PS slave port's low DDR
segment) and DE10-Nano (the DE10-Nano device; the core reaches SDRAM through the ACP window:
physical address A at A + 0x80000000, anything else is DECERR). :class:`VirtualULX3S` is the
ULX3S-85F's top (``vta_ulx3s_top.v``: serial bridge, on-chip device memory, the core) with the
USB serial port modelled bit by bit at the top's baud rate, behind the runtime's ULX3S device.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from vta.hw.regs import REGISTER_MAP
from vta.hw.tsim import build_library, harness_headers
from vta.isa import Config

from .project import ULX3S_RAM_KIB, project_files
from .registry import Board, BoardError, all_boards, get_board

PAGE = 4096
#: DDR modelled by default (the board's window is larger; a model this size is enough for a
#: layer and keeps memory use low).
DEFAULT_MEM_BYTES = 64 << 20
#: Clock cycles the board runs before each read of the control register.
DEFAULT_POLL_CYCLES = 512
_RESPONSES = {"slverr": 2, "decerr": 3}

_LOCK = threading.Lock()
_LOADED: dict[Path, ctypes.CDLL] = {}


def _load(path: Path) -> ctypes.CDLL:
    with _LOCK:
        if path not in _LOADED:
            lib = ctypes.CDLL(str(path))
            vp, u32, u64, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
            for name, res, args in (
                    ("vb_create", vp, []), ("vb_free", None, [vp]), ("vb_bus_bytes", i32, []),
                    ("vb_mem", None, [vp, u64, vp, u64]),
                    ("vb_config", None, [vp, u32, u32]), ("vb_reset", None, [vp, i32]),
                    ("vb_run", None, [vp, u64]), ("vb_cycle", u64, [vp]),
                    ("vb_interrupt", i32, [vp]), ("vb_error_bursts", u64, [vp]),
                    ("vb_error", ctypes.c_char_p, [vp]),
                    ("vb_reg_write", i32, [vp, u32, u32]),
                    ("vb_reg_read", ctypes.c_int64, [vp, u32])):
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, args
            _LOADED[path] = lib
        return _LOADED[path]


def build(board: Board, cfg: Config, *, verbose: bool = False) -> Path:
    """Compile (or find in the cache) the virtual board of ``board`` for ``cfg``."""
    files = project_files(board, cfg)
    harness = resources.files("vta.boards").joinpath("virtual_board.cpp").read_text()
    return build_library({"vta_core.v": files["vta_core.v"], "vta_top.v": files["vta_top.v"],
                          "virtual_board.cpp": harness, **harness_headers()},
                         top="vta_top", cflags=[f"-DBUS_BYTES={board.bus_width // 8}"],
                         verbose=verbose)


class VirtualBoardError(BoardError):
    """The virtual board's bus model saw something a real bus would not accept."""


class _Mmio:
    """The register window of the virtual board (``read``/``write`` of byte offsets)."""

    def __init__(self, vb: VirtualBoard) -> None:
        self._vb = vb

    def read(self, offset: int) -> int:
        vb = self._vb
        if offset == REGISTER_MAP["control"]:
            vb.lib.vb_run(vb.handle, vb.poll_cycles)
        value = vb.lib.vb_reg_read(vb.handle, offset)
        vb.check_bus()
        if value < 0:
            raise VirtualBoardError(f"register read at 0x{offset:02X} failed ({value})")
        return int(value)

    def write(self, offset: int, value: int) -> None:
        vb = self._vb
        failed = vb.lib.vb_reg_write(vb.handle, offset, value & 0xFFFF_FFFF)
        vb.check_bus()
        if failed:
            raise VirtualBoardError(f"register write at 0x{offset:02X} failed")


class _Buffer:
    """A physically contiguous buffer in the virtual board's DDR."""

    def __init__(self, vb: VirtualBoard, addr: int, nbytes: int) -> None:
        self._vb = vb
        self.physical_address = addr
        self.device_address = addr + vb.device_offset
        off = addr - vb.ddr_base
        self.array = vb.memory[off:off + nbytes]
        self.flushes = self.invalidates = 0

    def flush(self) -> None:
        self.flushes += 1

    def invalidate(self) -> None:
        self.invalidates += 1

    def free(self) -> None:
        pass  # bump allocation: memory is returned when the board is closed


class VirtualBoard:
    """The generated top of ``board`` for ``cfg`` under Verilator, as a PYNQ-style platform."""

    keeps_sram = True

    def __init__(self, board: str | Board, cfg: Config | None = None, *,
                 mem_bytes: int = DEFAULT_MEM_BYTES, latency: int = 8,
                 error_response: str = "decerr", poll_cycles: int = DEFAULT_POLL_CYCLES,
                 verbose: bool = False) -> None:
        self.board = get_board(board)
        if self.board.flow == "open":
            raise BoardError(f"{self.board.name} has no DDR: use VirtualULX3S")
        if error_response not in _RESPONSES:
            raise BoardError(f"error_response must be slverr or decerr, not {error_response!r}")
        self.cfg = cfg or self.board.default_config
        base, size = self.board.extra["ddr_window"]
        #: what the core adds to a physical address (the DE10-Nano's ACP window)
        self.device_offset = self.board.extra.get("acp_alias", 0)
        #: the runtime device that drives this board (vta.runtime.open picks it)
        self.runtime_device = "de10-nano" if self.board.flow == "quartus" else "pynq"
        if not PAGE <= mem_bytes <= size:
            raise BoardError(f"mem_bytes {mem_bytes} must be between {PAGE} and the board's "
                             f"DDR window ({size} bytes)")
        self.ddr_base = base
        self.poll_cycles = poll_cycles
        self.lib = _load(build(self.board, self.cfg, verbose=verbose))
        self.memory = np.zeros(mem_bytes, np.uint8)  # the DDR (the C++ model keeps a pointer)
        self.handle = self.lib.vb_create()
        self.lib.vb_mem(self.handle, base + self.device_offset, self.memory.ctypes.data,
                        mem_bytes)
        self.lib.vb_config(self.handle, latency, _RESPONSES[error_response])
        self.lib.vb_reset(self.handle, 8)
        self.mmio = _Mmio(self)
        self._next = base + PAGE  # (physical page 0 left unused, as on a real board)

    @property
    def cycle(self) -> int:
        return int(self.lib.vb_cycle(self.handle))

    @property
    def interrupt(self) -> bool:
        return bool(self.lib.vb_interrupt(self.handle))

    @property
    def error_bursts(self) -> int:
        """Bursts the DDR model answered with an error response."""
        return int(self.lib.vb_error_bursts(self.handle))

    def check_bus(self) -> None:
        """Raise :class:`VirtualBoardError` if the DDR model saw a protocol error (it then
        stands still)."""
        error = self.lib.vb_error(self.handle)
        if error:
            raise VirtualBoardError(f"virtual {self.board.name}: {error.decode()}")

    def allocate(self, nbytes: int) -> _Buffer:
        addr = self._next
        end = addr + -(-nbytes // PAGE) * PAGE
        if end > self.ddr_base + self.memory.size:
            raise BoardError(f"the virtual board's {self.memory.size}-byte DDR has no room for "
                             f"{nbytes} more bytes; pass a larger mem_bytes")
        self._next = end
        return _Buffer(self, addr, nbytes)

    def reset(self) -> None:
        """Pulse the processor's reset (what reloading the bitstream does to the core)."""
        self.lib.vb_reset(self.handle, 8)

    def close(self) -> None:
        if self.handle:
            self.lib.vb_free(self.handle)
            self.handle = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # (interpreter shutdown)
            self.close()


class _SerialLine:
    """The host end of the virtual ULX3S's serial port (``write``/``read`` of bytes)."""

    def __init__(self, vu: VirtualULX3S) -> None:
        self._vu = vu

    def write(self, data: bytes) -> None:
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        self._vu.lib.vu_send(self._vu.handle, buf, len(data))

    def read(self, n: int) -> bytes:
        vu = self._vu
        buf = (ctypes.c_uint8 * n)()
        got = vu.lib.vu_recv(vu.handle, buf, n, vu.byte_cycles * (n + 64))
        error = vu.lib.vu_error(vu.handle).decode()
        if error:
            raise VirtualBoardError(error)
        return bytes(buf[:got])


def _load_ulx3s(path: Path) -> ctypes.CDLL:
    with _LOCK:
        if path not in _LOADED:
            lib = ctypes.CDLL(str(path))
            vp, u32, u64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64
            bytes_p = ctypes.POINTER(ctypes.c_uint8)
            for name, res, args in (
                    ("vu_create", vp, [u32]), ("vu_free", None, [vp]), ("vu_run", None, [vp, u64]),
                    ("vu_cycle", u64, [vp]), ("vu_leds", u32, [vp]),
                    ("vu_error", ctypes.c_char_p, [vp]), ("vu_send", None, [vp, bytes_p, u32]),
                    ("vu_recv", u32, [vp, bytes_p, u32, u64])):
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, args
            _LOADED[path] = lib
        return _LOADED[path]


class VirtualULX3S:
    """The ULX3S-85F's generated top under Verilator, as the ULX3S device's platform."""

    runtime_device = "ulx3s"
    default_arena = None  # the device memory, as on the board

    def __init__(self, cfg: Config | None = None, *, verbose: bool = False) -> None:
        from .ulx3s import ECP5_SIM_MODELS, uart_clocks_per_bit  # deferred: amaranth (ULX3S top)

        self.board = get_board("ulx3s-85f")
        self.cfg = cfg or self.board.default_config
        files = project_files(self.board, self.cfg)
        harness = resources.files("vta.boards").joinpath("virtual_ulx3s.cpp").read_text()
        lib = build_library({"vta_core.v": files["vta_core.v"],
                             "vta_ulx3s_top.v": files["vta_ulx3s_top.v"],
                             "ecp5_models.v": ECP5_SIM_MODELS,
                             "virtual_ulx3s.cpp": harness},
                            top="vta_ulx3s_top", cflags=[], verbose=verbose)
        self.lib = _load_ulx3s(lib)
        self.divisor = uart_clocks_per_bit(self.board.clock_mhz)
        self.byte_cycles = 10 * self.divisor
        self.ram_bytes = ULX3S_RAM_KIB << 10
        self.handle = self.lib.vu_create(self.divisor)
        self.lib.vu_run(self.handle, 1000)  # the power-on reset
        self.transport = _SerialLine(self)

    @property
    def cycle(self) -> int:
        return int(self.lib.vu_cycle(self.handle))

    def close(self) -> None:
        if self.handle:
            self.lib.vu_free(self.handle)
            self.handle = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # (interpreter shutdown)
            self.close()


def virtual_board_names() -> list[str]:
    """The boards that have a virtual board."""
    return [b.name for b in all_boards()]


def open_platform(name: str, cfg: Config, **opts: Any) -> VirtualBoard | VirtualULX3S:
    """The ``vta_kit.platforms`` entry point behind ``vta.runtime.open("virtual:NAME")``."""
    if get_board(name).flow == "open":
        return VirtualULX3S(cfg, **opts)
    return VirtualBoard(name, cfg, **opts)


__all__ = ["VirtualBoard", "VirtualULX3S", "VirtualBoardError", "build", "open_platform",
           "virtual_board_names"]
