"""The PYNQ board device: contiguous memory, cache maintenance and the host-register sequence.

:class:`PynqDriver` issues the exact register sequence of one run through any MMIO-like object
(``read(offset) -> int``, ``write(offset, value)``)::

    write insn_addr (0x0C) <- physical byte address of the instruction stream
    write insn_count (0x08) <- number of instructions
    write control (0x00)   <- 1 (launch)
    read  control (0x00)   until bit 1 (finished) or bit 2 (AXI error) is set   [timeout]
    read  cycles (0x04)     (finished), or
    read  axi_error (0x80), axi_error_addr (0x84) and raise BusError   (AXI error)

Offsets come from :data:`vta.hw.regs.REGISTER_MAP`. :class:`PynqPlatform` wraps the ``pynq``
package (imported only when a board device is opened): ``pynq.Overlay``, ``pynq.MMIO`` and
``pynq.allocate`` buffers, flushed before and invalidated after each run. Without a board, pass
``platform=`` a register-level model (:class:`vta.runtime.regmodel.SimulatedBoard`).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np
from vta.hw.regs import (
    AXI_RESPONSES,
    CELL_NAME,
    CONTROL_ERROR,
    CONTROL_FINISHED,
    CONTROL_LAUNCH,
    CORE_ID,
    REGISTER_MAP,
)
from vta.isa import Config
from vta.isa.stats import RunStats

from .device import Device
from .errors import BusError, DeviceError, DeviceUnavailableError


class MMIO(Protocol):
    def read(self, offset: int) -> int: ...
    def write(self, offset: int, value: int) -> None: ...


class ContiguousBuffer(Protocol):
    """Physically contiguous memory as the host sees it (possibly through a cache).

    The core reaches it at ``device_address`` when the buffer has one (the DE10-Nano's ACP
    alias: physical + 0x80000000), else at ``physical_address``.
    """

    array: np.ndarray  # uint8 host view
    physical_address: int

    def flush(self) -> None: ...       # host caches -> memory (before the device reads)
    def invalidate(self) -> None: ...  # memory -> host view (after the device wrote)
    def free(self) -> None: ...


#: The bits of the hw_config register that describe the core (hw/README.md).
HW_CONFIG_MASK = 0xFFF_FFFF


def hw_config_word(cfg: Config) -> int:
    """The hw_config register of ``cfg``'s core: widths, batch, block and, in bits [27:20],
    the memory bus width in bytes."""
    return (cfg.LOG_INP_WIDTH | cfg.LOG_WGT_WIDTH << 4 | cfg.LOG_ACC_WIDTH << 8
            | cfg.LOG_BATCH << 12 | cfg.LOG_BLOCK << 16 | cfg.bus_bytes << 20)


class PynqDriver:
    """Drives the VTA host registers of one core through an MMIO object."""

    def __init__(self, mmio: MMIO, *, timeout: float = 10.0, poll_sleep: float = 0.0) -> None:
        self.mmio = mmio
        self.timeout = timeout
        self.poll_sleep = poll_sleep
        self.regs = REGISTER_MAP

    def probe(self, cfg: Config) -> None:
        """Check the core ID and that the bitstream was built for ``cfg``."""
        ident = self.mmio.read(self.regs["id"])
        if ident != CORE_ID:
            raise DeviceError(f"no VTA core at this address: id register reads 0x{ident:08X}, "
                              f"expected 0x{CORE_ID:08X}; check the overlay and ip_name")
        hw = self.mmio.read(self.regs["hw_config"]) & HW_CONFIG_MASK
        want = hw_config_word(cfg)
        if hw != want:
            raise DeviceError(f"the bitstream was built for another configuration (hw_config "
                              f"0x{hw:07X}, this config 0x{want:07X}; bits [27:20] are the bus "
                              f"width in bytes); open the device with the bitstream's config")

    def run(self, insn_addr: int, insn_count: int, timeout: float | None = None) -> int:
        """Launch ``insn_count`` instructions at physical ``insn_addr``; wait; return cycles."""
        if insn_addr % 16 or not 0 <= insn_addr < 1 << 32:
            raise DeviceError(f"instruction address 0x{insn_addr:x} must be 16-byte aligned "
                              f"and below 4 GiB")
        if not 0 < insn_count < 1 << 32:
            raise DeviceError(f"instruction count {insn_count} out of range")
        r = self.regs
        self.mmio.write(r["insn_addr"], insn_addr)
        self.mmio.write(r["insn_count"], insn_count)
        self.mmio.write(r["control"], CONTROL_LAUNCH)
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while not (control := self.mmio.read(r["control"])) & (CONTROL_FINISHED | CONTROL_ERROR):
            if time.monotonic() > deadline:
                raise DeviceError(
                    f"VTA did not finish within {limit:g} s ({insn_count} instructions at "
                    f"0x{insn_addr:x}); the program may deadlock on a token")
            if self.poll_sleep:
                time.sleep(self.poll_sleep)
        if control & CONTROL_ERROR:
            self._raise_bus_error()
        return self.mmio.read(r["cycles"])

    def _raise_bus_error(self) -> None:
        """Raise :class:`BusError` naming the response, the direction and the burst address."""
        info = self.mmio.read(self.regs["axi_error"])
        addr = self.mmio.read(self.regs["axi_error_addr"])
        kind = "write" if info & 2 else "read"
        resp = AXI_RESPONSES[info >> 2 & 3]
        raise BusError(f"VTA stopped on an AXI {resp} response to a {kind} burst at physical "
                       f"address 0x{addr:08X}: the address is not mapped to memory for the "
                       f"core; reset it (reload the bitstream) before the next run")


class PynqPlatform:
    """The real board through the ``pynq`` package (imported here, on first use)."""

    keeps_sram = True

    def __init__(self, bitstream: str | None = None, ip_name: str = CELL_NAME) -> None:
        try:
            import pynq  # type: ignore[import-not-found]  # deferred: only on the board
        except ImportError:
            raise DeviceUnavailableError(
                "the pynq device needs the pynq package (pip install pynq, on the board)") \
                from None
        self._pynq = pynq
        try:
            overlay = pynq.Overlay(bitstream) if bitstream else None
            if overlay is not None:
                if ip_name not in overlay.ip_dict:
                    raise DeviceUnavailableError(
                        f"the overlay has no IP named {ip_name!r}; it has "
                        f"{', '.join(overlay.ip_dict)}")
                base = overlay.ip_dict[ip_name]["phys_addr"]
            else:
                raise DeviceUnavailableError("the pynq device needs bitstream=PATH.bit")
            self.mmio = pynq.MMIO(base, 0x1000)
        except DeviceUnavailableError:
            raise
        except Exception as e:  # noqa: BLE001 - pynq raises many kinds of errors
            raise DeviceUnavailableError(f"cannot open the VTA overlay: {e}") from None

    def allocate(self, nbytes: int) -> ContiguousBuffer:
        buf = self._pynq.allocate(shape=(nbytes,), dtype=np.uint8)
        return _PynqBuffer(buf)


class _PynqBuffer:
    def __init__(self, buf: Any) -> None:
        self._buf = buf
        self.array = np.asarray(buf).view(np.uint8).reshape(-1)
        self.physical_address = int(getattr(buf, "device_address",
                                            getattr(buf, "physical_address", 0)))

    def flush(self) -> None:
        self._buf.flush()

    def invalidate(self) -> None:
        self._buf.invalidate()

    def free(self) -> None:
        self._buf.freebuffer()


def device_address(buf: ContiguousBuffer) -> int:
    """The address at which the core reaches ``buf``."""
    return int(getattr(buf, "device_address", buf.physical_address))


class PynqDevice(Device):
    """A VTA core on a PYNQ board (or on a register-level model given as ``platform=``)."""

    target = "pynq"
    keeps_sram = True

    def __init__(self, cfg: Config, *, arena_size: int, platform: Any = None,
                 bitstream: str | None = None, ip_name: str = CELL_NAME, timeout: float = 10.0,
                 insn_capacity: int = 16384, probe: bool = True) -> None:
        self.platform = platform if platform is not None else PynqPlatform(bitstream, ip_name)
        self.keeps_sram = bool(getattr(self.platform, "keeps_sram", True))
        self.driver = PynqDriver(self.platform.mmio, timeout=timeout)
        if probe:
            self.driver.probe(cfg)
        self._mem = self.platform.allocate(arena_size)
        super().__init__(cfg, arena_size=arena_size, arena_base=device_address(self._mem),
                         memory=self._mem.array)
        self._insn = self.platform.allocate(insn_capacity * 16)

    def _execute(self, program: bytes, timeout: float | None) -> RunStats:
        n = len(program)
        if n > self._insn.array.size:
            self._insn.free()
            self._insn = self.platform.allocate(n)
        self._insn.array[:n] = np.frombuffer(program, dtype=np.uint8)
        self._insn.flush()
        self._mem.flush()
        cycles = self.driver.run(device_address(self._insn), n // 16, timeout)
        self._mem.invalidate()
        return self._board_stats(program, cycles)

    def close(self) -> None:
        if not self._closed:
            self._insn.free()
            self._mem.free()
        super().close()


__all__ = ["PynqDriver", "PynqDevice", "PynqPlatform", "device_address", "hw_config_word"]
