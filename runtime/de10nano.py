"""The DE10-Nano board device: the VTA registers on the lightweight HPS-to-FPGA bridge, DRAM
through the FPGA-to-HPS bridge's ACP window, the PYNQ driver's register sequence.

The project ``vta verilog --board de10-nano`` emits places the registers at 0xFF220000
(lightweight bridge 0xFF200000 + 0x20000) and connects the VTA master to the FPGA-to-HPS bridge,
whose window 0x80000000-0xBFFFFFFF is the ACP alias of SDRAM 0x00000000-0x3FFFFFFF: the core
reaches physical address A at A + 0x80000000, coherently with the ARM caches (as TVM's
DE10-Nano driver did), so buffers need no cache maintenance.

:class:`De10NanoPlatform` runs on the board's Linux (root, the FPGA configured with the
project's ``.rbf``): the registers through ``/dev/mem``, physically contiguous memory from a
``u-dma-buf`` device (``/dev/udmabuf0``, its physical address and size from sysfs).
:class:`De10NanoDevice` is :class:`~vta.runtime.pynq.PynqDevice` on it; ``platform=`` takes
any object with the same ``mmio``/``allocate`` interface (a virtual board, a register model).
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa import Config

from .errors import DeviceUnavailableError
from .pynq import PynqDevice

#: Physical address of the VTA registers (the board registry's reg_base of de10-nano).
REG_BASE = 0xFF22_0000
REG_SPAN = 0x1000
#: The FPGA-to-HPS bridge address of SDRAM physical address 0 (ACP window).
ACP_ALIAS = 0x8000_0000
ACP_SPAN = 0x4000_0000
PAGE = 4096


class _DevMemRegisters:
    """32-bit registers of a physical window mapped through /dev/mem."""

    def __init__(self, base: int, span: int) -> None:
        fd = os.open("/dev/mem", os.O_RDWR | os.O_SYNC)
        try:
            self._map = mmap.mmap(fd, span, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE,
                                  offset=base)
        finally:
            os.close(fd)

    def read(self, offset: int) -> int:
        return struct.unpack_from("<I", self._map, offset)[0]

    def write(self, offset: int, value: int) -> None:
        struct.pack_into("<I", self._map, offset, value & 0xFFFF_FFFF)


class _UdmabufBuffer:
    def __init__(self, array: np.ndarray, physical: int) -> None:
        self.array = array
        self.physical_address = physical
        self.device_address = physical + ACP_ALIAS

    def flush(self) -> None:  # (the ACP port is coherent with the ARM caches)
        pass

    def invalidate(self) -> None:
        pass

    def free(self) -> None:
        pass  # bump allocation: the u-dma-buf region is returned when the platform closes


class De10NanoPlatform:
    """The DE10-Nano's HPS: /dev/mem registers, a u-dma-buf region for device memory."""

    keeps_sram = True

    def __init__(self, *, udmabuf: str = "udmabuf0") -> None:
        try:
            self.mmio = _DevMemRegisters(REG_BASE, REG_SPAN)
            sysfs = Path("/sys/class/u-dma-buf") / udmabuf
            phys = int((sysfs / "phys_addr").read_text(), 0)
            size = int((sysfs / "size").read_text(), 0)
            fd = os.open(f"/dev/{udmabuf}", os.O_RDWR | os.O_SYNC)
            try:
                self._map = mmap.mmap(fd, size, mmap.MAP_SHARED,
                                      mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(fd)
        except (OSError, ValueError) as e:
            raise DeviceUnavailableError(
                f"cannot open the DE10-Nano VTA (root, the FPGA configured with "
                f"vta_de10_nano.rbf, and a u-dma-buf device /dev/{udmabuf} are needed): "
                f"{getattr(e, 'strerror', None) or e}") from None
        if phys + size > ACP_SPAN:
            raise DeviceUnavailableError(
                f"/dev/{udmabuf} at 0x{phys:08X} (+{size}) is beyond the 1 GiB the ACP "
                f"window reaches")
        self._phys, self._memory = phys, np.frombuffer(self._map, np.uint8)
        self._next = 0

    def allocate(self, nbytes: int) -> _UdmabufBuffer:
        off = self._next
        end = off + -(-nbytes // PAGE) * PAGE
        if end > self._memory.size:
            raise DeviceUnavailableError(
                f"the u-dma-buf region ({self._memory.size} bytes) has no room for {nbytes} "
                f"more bytes; load u-dma-buf with a larger size")
        self._next = end
        return _UdmabufBuffer(self._memory[off:off + nbytes], self._phys + off)


class De10NanoDevice(PynqDevice):
    """A VTA core on a DE10-Nano (or on a platform with its interface given as ``platform=``)."""

    target = "de10-nano"

    def __init__(self, cfg: Config, *, arena_size: int, platform: Any = None,
                 timeout: float = 10.0, insn_capacity: int = 16384, probe: bool = True,
                 udmabuf: str = "udmabuf0") -> None:
        platform = platform if platform is not None else De10NanoPlatform(udmabuf=udmabuf)
        super().__init__(cfg, arena_size=arena_size, platform=platform, timeout=timeout,
                         insn_capacity=insn_capacity, probe=probe)


__all__ = ["De10NanoDevice", "De10NanoPlatform", "REG_BASE", "ACP_ALIAS"]
