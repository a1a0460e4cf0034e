"""The ULX3S device: VTA and its on-chip device memory, reached over the board's serial bridge.

The ULX3S top (``vta verilog --board ulx3s-85f``) has no processor: a serial protocol on the
USB port (115200 baud, 8N1) reads and writes 32-bit words. ``0x01`` + address + data (little
endian) writes and is answered ``0x01``; ``0x02`` + address reads 4 bytes. Addresses below
0x80000000 are the device memory (what VTA sees as DRAM at 0), 0x80000000 + offset the VTA
registers, which :class:`~vta.runtime.pynq.PynqDriver` drives as on the other boards.

:class:`Ulx3sDevice` keeps a host copy of the device memory: before a run it writes the words
that differ from what the device holds, after it reads back exactly the bytes the program's
STOREs wrote (the link moves about 1.3 KB/s per direction of payload, so whole-memory copies
are avoided). ``platform=`` takes any object with a ``transport`` (``write(bytes)``,
``read(n) -> bytes``) and ``ram_bytes``: the board through pyserial (:class:`SerialPlatform`)
or a virtual board (:mod:`vta.boards.virtual`).
"""

from __future__ import annotations

import struct
from typing import Any, Protocol

import numpy as np
from vta.isa import Config, MemInsn, Opcode, decode_program
from vta.isa.stats import RunStats

from .device import Device
from .errors import DeviceError, DeviceUnavailableError
from .pynq import PynqDriver

#: Bridge address of the VTA registers (the board's reg_base; below it, the device memory).
REG_WINDOW = 0x8000_0000
CMD_WRITE = 0x01
CMD_READ = 0x02
#: Bytes of device memory the ULX3S project has by default (vta.boards.project.ULX3S_RAM_KIB).
DEFAULT_RAM_BYTES = 64 << 10
PAGE = 256


class Transport(Protocol):
    def write(self, data: bytes) -> None: ...
    def read(self, n: int) -> bytes: ...


class SerialBridge:
    """Word reads and writes over the ULX3S serial protocol."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def write_word(self, addr: int, value: int) -> None:
        self.transport.write(struct.pack("<BII", CMD_WRITE, addr, value & 0xFFFF_FFFF))
        ack = self.transport.read(1)
        if ack != bytes([CMD_WRITE]):
            raise DeviceError(f"serial bridge: write of 0x{addr:08X} answered {ack!r}, "
                              f"expected b'\\x01' (is the ULX3S bitstream loaded?)")

    def read_word(self, addr: int) -> int:
        self.transport.write(struct.pack("<BI", CMD_READ, addr))
        data = self.transport.read(4)
        if len(data) != 4:
            raise DeviceError(f"serial bridge: read of 0x{addr:08X} returned {len(data)} of 4 "
                              f"bytes (is the ULX3S bitstream loaded?)")
        return int.from_bytes(data, "little")


class BridgeRegisters:
    """The VTA registers through the bridge (the MMIO interface of :class:`PynqDriver`)."""

    def __init__(self, bridge: SerialBridge) -> None:
        self.bridge = bridge

    def read(self, offset: int) -> int:
        return self.bridge.read_word(REG_WINDOW + offset)

    def write(self, offset: int, value: int) -> None:
        self.bridge.write_word(REG_WINDOW + offset, value)


class SerialPlatform:
    """The ULX3S on a serial port (pyserial)."""

    def __init__(self, port: str, *, baud: int = 115200, ram_bytes: int = DEFAULT_RAM_BYTES,
                 timeout: float = 2.0) -> None:
        try:
            import serial  # type: ignore[import-not-found]  # deferred: optional pyserial
        except ImportError:
            raise DeviceUnavailableError("the ulx3s device needs pyserial (pip install "
                                         "pyserial)") from None
        try:
            self.transport = serial.Serial(port, baud, timeout=timeout)
        except (OSError, ValueError, serial.SerialException) as e:
            raise DeviceUnavailableError(f"cannot open the ULX3S on {port}: {e}") from None
        self.ram_bytes = ram_bytes


def stored_ranges(program: bytes, cfg: Config) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of device memory the program's STOREs write."""
    out = []
    eb = cfg.out_elem_bytes
    for i in decode_program(program, cfg):
        if isinstance(i, MemInsn) and i.opcode == Opcode.STORE and i.x_size and i.y_size:
            start = i.dram_base * eb
            end = (i.dram_base + (i.y_size - 1) * i.x_stride + i.x_size) * eb
            out.append((start, end))
    return out


class Ulx3sDevice(Device):
    """VTA on a ULX3S (or on a platform with its interface given as ``platform=``)."""

    target = "ulx3s"
    keeps_sram = True

    def __init__(self, cfg: Config, *, arena_size: int | None = None, platform: Any = None,
                 port: str | None = None, timeout: float = 60.0, insn_capacity: int = 256,
                 probe: bool = True) -> None:
        if platform is None:
            if port is None:
                raise DeviceUnavailableError("the ulx3s device needs port= (the board's serial "
                                             "port, e.g. /dev/ttyUSB0)")
            platform = SerialPlatform(port)
        self.platform = platform
        self.bridge = SerialBridge(platform.transport)
        self.driver = PynqDriver(BridgeRegisters(self.bridge), timeout=timeout)
        if probe:
            self.driver.probe(cfg)
        ram = int(platform.ram_bytes)
        self._insn_base = ram - insn_capacity * 16
        size = self._insn_base - PAGE if arena_size is None else arena_size
        if not 0 < size <= self._insn_base - PAGE:
            raise DeviceError(f"arena_size {size} does not fit the ULX3S's {ram}-byte device "
                              f"memory with {insn_capacity} instructions")
        self._image = np.zeros(ram, np.uint8)   # the host copy of the device memory
        self._device = np.zeros(ram, np.uint8)  # what the device holds (zero at power-up)
        super().__init__(cfg, arena_size=size, arena_base=PAGE,
                         memory=self._image[PAGE:PAGE + size])

    def _sync_to_device(self) -> int:
        """Write the words of the host copy that differ from the device; returns the count."""
        words = self._image.view("<u4")
        changed = np.flatnonzero(words != self._device.view("<u4"))
        for w in changed:
            self.bridge.write_word(int(w) * 4, int(words[w]))
        self._device[:] = self._image
        return len(changed)

    def _read_back(self, start: int, end: int) -> None:
        for addr in range(start & ~3, end, 4):
            value = self.bridge.read_word(addr)
            self._image[addr:addr + 4] = np.frombuffer(value.to_bytes(4, "little"), np.uint8)
        self._device[start & ~3:(end + 3) & ~3] = self._image[start & ~3:(end + 3) & ~3]

    def _execute(self, program: bytes, timeout: float | None) -> RunStats:
        n = len(program)
        if self._insn_base + n > self._image.size:
            raise DeviceError(f"the program ({n // 16} instructions) does not fit the ULX3S's "
                              f"instruction area; open the device with a larger insn_capacity")
        self._image[self._insn_base:self._insn_base + n] = np.frombuffer(program, np.uint8)
        self._sync_to_device()
        cycles = self.driver.run(self._insn_base, n // 16, timeout)
        for start, end in stored_ranges(program, self.cfg):  # inside the arena (run_queued)
            self._read_back(start, end)
        return self._board_stats(program, cycles)


__all__ = ["Ulx3sDevice", "SerialBridge", "BridgeRegisters", "SerialPlatform",
           "stored_ranges", "REG_WINDOW"]
